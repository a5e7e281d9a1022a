// What sl-run was asked to do, as its command line gives it, and the checks and helpers every
// mode of it shares (slrt/tooling/run.h dispatches to the modes). The command line itself (flags,
// --help) stays in tools/sl-run.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "slrt/adamw.h"
#include "slrt/backend.h"
#include "slrt/comm.h"
#include "slrt/distinct_paths.h"
#include "slrt/executor.h"
#include "slrt/generator.h"
#include "slrt/memory_check.h"
#include "slrt/schedule_loader.h"

namespace slrt::tooling {

struct RunOptions {
  std::string schedulePath, reportPath, tracePath, backendName = "cpu";
  // --link-gbps: host<->device copies paced to this many GB/s per direction (slrt/paced_backend.h);
  // 0: unthrottled.
  double linkGbps = 0;
  // --tf32: f32 GEMMs in TF32 on the CUDA backend.
  bool tf32 = false;
  // --random-weights: seeded random parameters instead of the model's files.
  std::optional<uint64_t> randomWeightsSeed;
  // --allow-external-paths: read parameter files the schedule names outside its directory.
  bool allowExternalPaths = false;
  // Several ranks: how long a collective may take, and the job's communicator (null for one rank).
  double collectiveTimeout = 300;
  Communicator *comm = nullptr;
  std::string consolidatePath;
  // --calibrate: measure the machine instead of running a schedule.
  std::string calibratePath;
  double calibrateSeconds = 0.3;
  std::vector<std::string> inputArgs, outputArgs;
  // --warmup-runs: inference runs before the one that is reported, timed and written.
  int64_t warmupRuns = 0;
  // Training.
  std::string dataPath, dataDType = "uint16", savePath, resumePath, exportOnnxPath;
  int64_t steps = 0, vocab = 0;
  AdamWConfig adamw;
  // Generation.
  std::string promptsPath, tokenizer = "none";
  SamplingOptions sampling;
  std::vector<int64_t> stopTokens;
  int64_t maxNewTokens = 0;
  // The flags given that only a train schedule takes ("--data", ...), those of inference
  // (--input, --output) and those only a generate schedule takes ("--prompts", ...).
  std::vector<std::string> trainFlagsGiven, inferFlagsGiven, generateFlagsGiven;
};

// Throws Error when a flag that only inference takes (--warmup-runs) is given for `loaded`, a train
// or generate schedule.
void refuseInferenceOnlyFlags(const RunOptions &options, const LoadedSchedule &loaded);

// Throws Error for a combination of options that no mode takes, before anything is read: the
// flags --calibrate and --consolidate refuse, a --calibrate or --consolidate under mpirun, and a
// --link-gbps that is not a finite number >= 0. What depends on the schedule's kind is checked by
// each mode once the schedule is loaded.
void checkRunOptions(const RunOptions &options);

// How the executor of every mode runs: tracing, kernel timing, the communicator, random weights.
ExecutorOptions executorOptions(const RunOptions &options);

// The backend's settings (--tf32).
BackendOptions backendOptions(const RunOptions &options);

// What every report says about how the run was made, besides the schedule: "link_gbps", "tf32"
// and "random_weights".
void describeRun(nlohmann::json &report, const RunOptions &options);

// Whether this process prints and writes what a job writes once: one rank, or rank 0.
bool isRankZero(const RunOptions &options);

// With several ranks each writes its own trace: --trace FILE with ".rank<R>" before its extension.
std::string tracePathOf(const RunOptions &options);

// The files a run reads (--input files given separately), for refusing an output that would
// replace one of them.
std::vector<NamedPath> runInputs(const RunOptions &options, const LoadedSchedule &loaded,
                                 const std::map<std::string, std::string> &inputFiles = {});

// Refuses, before the run, an output that would replace one of the run's inputs or another of
// its outputs, and an output file that could not be written after the run: the work of a run
// must not be lost to a typo in a path, nor destroy what it reads. `outputs` pairs each flag with
// its path ("" when not given).
void checkOutputPaths(const std::vector<std::pair<const char *, std::string>> &outputs,
                      const std::vector<NamedPath> &inputs);

// Refuses a run whose arena, pool and host-side state do not fit in the memory free now.
void checkMemory(const LoadedSchedule &loaded, const Backend &backend,
                 const RunMemoryOptions &options);

// "--a, --b".
std::string flagList(const std::vector<std::string> &flags);

// Refuses the flags of `given` (those only a schedule of kind `kind` takes) for `loaded`.
void refuseFlags(const std::vector<std::string> &given, const char *kind,
                 const LoadedSchedule &loaded);

} // namespace slrt::tooling
