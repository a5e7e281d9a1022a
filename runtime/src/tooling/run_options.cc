#include "slrt/tooling/run_options.h"

#include <set>

#include "slrt/atomic_file.h"
#include "slrt/error.h"
#include "slrt/paced_backend.h"
#include "slrt/random_weights.h"

namespace slrt::tooling {

void checkRunOptions(const RunOptions &o) {
  if (!o.calibratePath.empty()) {
    std::vector<std::string> given = o.trainFlagsGiven;
    given.insert(given.end(), o.inferFlagsGiven.begin(), o.inferFlagsGiven.end());
    given.insert(given.end(), o.generateFlagsGiven.begin(), o.generateFlagsGiven.end());
    if (!given.empty() || !o.reportPath.empty() || !o.tracePath.empty() ||
        !o.consolidatePath.empty() || o.randomWeightsSeed)
      throw makeError("--calibrate runs no schedule: it takes only --backend and "
                      "--calibrate-seconds");
    if (o.comm && o.comm->size() > 1)
      throw makeError("--calibrate runs as one process; run it without mpirun");
    return;
  }
  if (!o.consolidatePath.empty() && (!o.inferFlagsGiven.empty() || !o.generateFlagsGiven.empty()))
    throw makeError("--consolidate takes only --save and --export-onnx, not ",
                    flagList(o.inferFlagsGiven.empty() ? o.generateFlagsGiven : o.inferFlagsGiven));
  if (!o.consolidatePath.empty())
    for (const std::string &flag : o.trainFlagsGiven)
      if (flag != "--save" && flag != "--export-onnx")
        throw makeError("--consolidate takes only --save and --export-onnx (it does not train), "
                        "not ",
                        flag);
  checkLinkGbps(o.linkGbps);
}

ExecutorOptions executorOptions(const RunOptions &options) {
  ExecutorOptions executor;
  executor.trace = !options.tracePath.empty();
  // The report's op seconds and the trace's kernel spans are where the kernels ran: on the CUDA
  // backend, timed on the GPU.
  executor.timeKernels = !options.reportPath.empty() || !options.tracePath.empty();
  executor.comm = options.comm;
  executor.randomWeightsSeed = options.randomWeightsSeed;
  return executor;
}

BackendOptions backendOptions(const RunOptions &options) {
  BackendOptions backend;
  backend.tf32 = options.tf32;
  return backend;
}

void describeRun(nlohmann::json &report, const RunOptions &options) {
  report["link_gbps"] = options.linkGbps;
  // What the GEMMs of f32 tensors computed in: TF32 only when asked for on the CUDA backend.
  report["tf32"] = options.tf32 && options.backendName == "cuda";
  report["random_weights"] =
      options.randomWeightsSeed
          ? nlohmann::json{{"seed", *options.randomWeightsSeed}, {"std", kRandomWeightStd}}
          : nlohmann::json(nullptr);
}

bool isRankZero(const RunOptions &options) { return !options.comm || options.comm->rank() == 0; }

std::string tracePathOf(const RunOptions &options) {
  if (!options.comm)
    return options.tracePath;
  std::string path = options.tracePath;
  size_t slash = path.rfind('/'), dot = path.rfind('.');
  std::string rank = ".rank" + std::to_string(options.comm->rank());
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + rank;
  return path.substr(0, dot) + rank + path.substr(dot);
}

std::vector<NamedPath> runInputs(const RunOptions &options, const LoadedSchedule &loaded,
                                 const std::map<std::string, std::string> &inputFiles) {
  std::vector<NamedPath> inputs = {{"the schedule", options.schedulePath}};
  if (!options.randomWeightsSeed)
    for (const std::string &file :
         std::set<std::string>(loaded.parameterFiles.begin(), loaded.parameterFiles.end()))
      inputs.push_back({"the model file", file});
  for (const auto &[name, file] : inputFiles)
    inputs.push_back({"--input", file});
  inputs.push_back({"--data", options.dataPath});
  // --resume and --save may name one checkpoint: it is read whole before the first step and
  // replaced atomically after the last.
  inputs.push_back({"--resume", options.resumePath, "--save"});
  inputs.push_back({"--prompts", options.promptsPath});
  inputs.push_back({"--consolidate", options.consolidatePath});
  return inputs;
}

void checkOutputPaths(const std::vector<std::pair<const char *, std::string>> &outputs,
                      const std::vector<NamedPath> &inputs) {
  std::vector<NamedPath> named;
  for (const auto &[flag, path] : outputs)
    named.push_back({flag, path});
  checkOutputsAreDistinct(inputs, named);
  for (const auto &[flag, path] : outputs)
    if (!path.empty()) {
      try {
        checkWritable(path);
      } catch (const Error &e) {
        throw makeError(flag, " ", e.what());
      }
    }
}

void checkMemory(const LoadedSchedule &loaded, const Backend &backend,
                 const RunMemoryOptions &options) {
  MemoryNeed need = runMemoryNeed(loaded.schedule, options);
  need.deviceWorking = backend.deviceWorkingBytes(deviceStreamCount(loaded.schedule));
  checkMemoryFits(loaded.path, need, availableMemory(backend));
}

std::string flagList(const std::vector<std::string> &flags) {
  std::string list;
  for (const std::string &flag : flags)
    list += (list.empty() ? "" : ", ") + flag;
  return list;
}

void refuseInferenceOnlyFlags(const RunOptions &options, const LoadedSchedule &loaded) {
  for (const std::string &flag : options.inferFlagsGiven)
    if (flag == "--warmup-runs")
      throw makeError("--warmup-runs: only an inference schedule takes it (", loaded.path,
                      " is of kind '", loaded.schedule.kind(),
                      "', whose report times every step or batch)");
}

void refuseFlags(const std::vector<std::string> &given, const char *kind,
                 const LoadedSchedule &loaded) {
  if (!given.empty())
    throw makeError(flagList(given), ": only a ", kind, " schedule takes ",
                    given.size() == 1 ? "this option" : "these options", " (", loaded.path,
                    " is of kind '", loaded.schedule.kind(), "')");
}

} // namespace slrt::tooling
