// libFuzzer target: bytes -> the schedule loader and verifier (parseSchedule: magic, protobuf,
// version, end marker, verifySchedule). Every input must be accepted or refused with an Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "slrt/error.h"
#include "slrt/schedule_loader.h"

// protobuf logs every string field that is not UTF-8 as it refuses it; the refusal is all that
// matters here.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    slrt::parseSchedule(std::string_view(reinterpret_cast<const char *>(data), size));
  } catch (const slrt::Error &) {
  }
  return 0;
}
