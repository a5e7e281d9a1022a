// libFuzzer target: bytes -> the safetensors reader, and, for files it accepts, the training
// checkpoint reader on top of it (loadCheckpoint, asked for the parameters the file itself names so
// that its metadata and moment checks are reached). Every input must be accepted or refused with an
// Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_file.h"
#include "slrt/checkpoint.h"
#include "slrt/error.h"
#include "slrt/safetensors.h"

namespace {

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  slrt::SafetensorsFile file;
  try {
    file = slrt::decodeSafetensors(bytes, "fuzz.safetensors");
  } catch (const slrt::Error &) {
    return 0;
  }
  std::vector<slrt::ParameterSpec> specs;
  for (const slrt::TensorEntry &t : file.tensors)
    if (!endsWith(t.name, ".adam_m") && !endsWith(t.name, ".adam_v"))
      specs.push_back({t.name, t.shape});
  auto fingerprint = file.metadata.find("speedloader.model_fingerprint");
  try {
    slrt::loadCheckpoint(sl::fuzz::writeInput("checkpoint.safetensors", bytes),
                         fingerprint == file.metadata.end() ? "" : fingerprint->second, specs);
  } catch (const slrt::Error &) {
  }
  return 0;
}
