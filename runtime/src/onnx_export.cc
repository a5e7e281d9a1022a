#include "slrt/onnx_export.h"

#include <cstring>
#include <set>

#include "slrt/atomic_file.h"
#include "slrt/bfloat16.h"
#include "slrt/error.h"

namespace slrt {

void exportTrainedOnnx(const LoadedSchedule &loaded, const Executor &executor,
                       const std::string &path) {
  std::vector<const void *> weights;
  for (int i = 0; i < loaded.schedule.parameters_size(); ++i)
    weights.push_back(executor.parameterBuffer(i).data);
  exportTrainedOnnx(loaded, weights, path);
}

void exportTrainedOnnx(const LoadedSchedule &loaded, const std::vector<const void *> &weights,
                       const std::string &path) {
  const sl::schedule::Schedule &s = loaded.schedule;
  if (weights.size() != static_cast<size_t>(s.parameters_size()))
    throw makeError("--export-onnx: ", weights.size(), " weights given for the ",
                    s.parameters_size(), " parameters of ", loaded.path);
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
    const void *weight = weights[static_cast<size_t>(i)];
    if (p.file_dtype() == sl::schedule::F32 && p.dtype() == sl::schedule::BF16) {
      // The verifier allows this one conversion; the file keeps its f32 layout.
      std::vector<float> widened(p.bytes() / sizeof(float));
      widenBfloat16(static_cast<const uint16_t *>(weight), widened.data(), widened.size());
      std::memcpy(bytes.data() + p.file_offset(), widened.data(), p.bytes());
      continue;
    }
    std::memcpy(bytes.data() + p.file_offset(), weight, p.bytes());
  }
  writeFileAtomically(path, bytes);
}

} // namespace slrt
