#include "slrt/onnx_export.h"

#include <cstring>
#include <functional>
#include <set>

#include "slrt/atomic_file.h"
#include "slrt/bfloat16.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/read_file.h"

namespace slrt {

void exportTrainedOnnx(const LoadedSchedule &loaded, const Executor &executor,
                       const std::string &path) {
  std::vector<const void *> weights;
  for (int i = 0; i < loaded.schedule.parameters_size(); ++i)
    weights.push_back(executor.parameterBuffer(i).data);
  exportTrainedOnnx(loaded, weights, path);
}

namespace {

// Copies the model file with parameter i's bytes (p.bytes() of them, at p.file_offset()) written
// by write(i, destination), atomically.
void writeModelWith(const LoadedSchedule &loaded, size_t given,
                    const std::function<void(int, std::byte *)> &write, const std::string &path) {
  const sl::schedule::Schedule &s = loaded.schedule;
  if (given != static_cast<size_t>(s.parameters_size()))
    throw makeError("--export-onnx: ", given, " weights given for the ", s.parameters_size(),
                    " parameters of ", loaded.path);
  std::set<std::string> files(loaded.parameterFiles.begin(), loaded.parameterFiles.end());
  if (files.size() != 1 || files.begin()->size() < 5 ||
      files.begin()->compare(files.begin()->size() - 5, 5, ".onnx") != 0)
    throw makeError("--export-onnx: the parameters of ", loaded.path,
                    " are not all in one .onnx file (models with external data are not "
                    "supported yet)");
  const std::string &model = *files.begin();
  std::string bytes = readFile(model);
  for (int i = 0; i < s.parameters_size(); ++i) {
    const sl::schedule::Parameter &p = s.parameters(i);
    // loadSchedule checked that every parameter lies inside its file; the file may have changed
    // since, so check again before writing into the copy.
    if (p.file_offset() > bytes.size() || p.bytes() > bytes.size() - p.file_offset())
      throw makeError("--export-onnx: parameter '", p.name(), "' no longer fits ", model,
                      " (it changed after the schedule was loaded)");
    write(i, reinterpret_cast<std::byte *>(bytes.data() + p.file_offset()));
  }
  writeFileAtomically(path, bytes);
}

// The dtype parameter p's bytes have in the model file.
sl::schedule::DType fileDType(const sl::schedule::Parameter &p) {
  return p.file_dtype() != sl::schedule::DTYPE_UNSPECIFIED ? p.file_dtype() : p.dtype();
}

} // namespace

void exportTrainedOnnx(const LoadedSchedule &loaded, const std::vector<const void *> &weights,
                       const std::string &path) {
  const sl::schedule::Schedule &s = loaded.schedule;
  writeModelWith(
      loaded, weights.size(),
      [&](int i, std::byte *into) {
        const sl::schedule::Parameter &p = s.parameters(i);
        const void *weight = weights[static_cast<size_t>(i)];
        if (p.file_dtype() == sl::schedule::F32 && p.dtype() == sl::schedule::BF16) {
          // The verifier allows this one conversion; the file keeps its f32 layout.
          std::vector<float> widened(p.bytes() / sizeof(float));
          widenBfloat16(static_cast<const uint16_t *>(weight), widened.data(), widened.size());
          std::memcpy(into, widened.data(), p.bytes());
          return;
        }
        std::memcpy(into, weight, p.bytes());
      },
      path);
}

void exportMasterWeightsOnnx(const LoadedSchedule &loaded, const std::vector<const float *> &masters,
                             const std::string &path) {
  const sl::schedule::Schedule &s = loaded.schedule;
  writeModelWith(
      loaded, masters.size(),
      [&](int i, std::byte *into) {
        const sl::schedule::Parameter &p = s.parameters(i);
        const float *master = masters[static_cast<size_t>(i)];
        switch (fileDType(p)) {
        case sl::schedule::F32:
          std::memcpy(into, master, p.bytes());
          return;
        case sl::schedule::BF16: {
          std::vector<uint16_t> rounded(p.bytes() / sizeof(uint16_t));
          roundToBfloat16(master, rounded.data(), rounded.size());
          std::memcpy(into, rounded.data(), p.bytes());
          return;
        }
        default:
          throw makeError("--export-onnx: parameter '", p.name(), "' is ",
                          dtypeName(fileDType(p)), " in its file; f32 master weights are "
                          "written only as f32 or bf16");
        }
      },
      path);
}

} // namespace slrt
