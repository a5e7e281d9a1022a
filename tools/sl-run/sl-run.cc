// sl-run: executes a SpeedLoader schedule written by sl-opt.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "slrt/atomic_file.h"
#include "slrt/backend.h"
#include "slrt/bfloat16.h"
#include "slrt/calibrate.h"
#include "slrt/checked.h"
#include "slrt/checkpoint.h"
#include "slrt/comm.h"
#include "slrt/distinct_paths.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/generator.h"
#include "slrt/memory_check.h"
#include "slrt/npy.h"
#include "slrt/onnx_export.h"
#include "slrt/paced_backend.h"
#include "slrt/random_weights.h"
#include "slrt/rank_agreement.h"
#include "slrt/report.h"
#include "slrt/schedule_loader.h"
#include "slrt/schedule_verifier.h"
#include "slrt/token_data.h"
#include "slrt/trainer.h"

namespace {

using slrt::makeError;

// Maps each --input (or --output) argument to a binding name. An argument is NAME=FILE when the
// text before its first '=' is a binding name, or a bare FILE when there is no '=' and the schedule
// has exactly one binding; anything else is an error rather than a guess.
std::map<std::string, std::string>
assignFiles(const std::vector<std::string> &args,
            const google::protobuf::RepeatedPtrField<sl::schedule::Binding> &bindings,
            const std::string &kind) {
  std::string names;
  for (const sl::schedule::Binding &b : bindings)
    names += (names.empty() ? "" : ", ") + b.name();
  if (names.empty())
    names = "none";
  std::map<std::string, std::string> files;
  for (const std::string &arg : args) {
    std::string name, file;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      file = arg.substr(eq + 1);
      bool known = false;
      for (const sl::schedule::Binding &b : bindings)
        known = known || b.name() == name;
      if (!known)
        throw makeError("--", kind, " ", arg, ": unknown ", kind, " '", name, "' (the schedule's ",
                        kind, "s: ", names, ")");
    } else if (bindings.size() == 1) {
      name = bindings[0].name();
      file = arg;
    } else {
      throw makeError("--", kind, " ", arg, ": the schedule has ", bindings.size(), " ", kind,
                      "s (", names, "), so name it: --", kind, " NAME=FILE");
    }
    if (file.empty())
      throw makeError("--", kind, " ", arg, ": no file given");
    if (!files.emplace(name, file).second)
      throw makeError(kind, " '", name, "' is given twice");
  }
  return files;
}

void printOutput(const slrt::NamedTensor &out) {
  const slrt::HostTensor &t = out.tensor;
  std::cout << out.name << ": " << slrt::dtypeName(t.dtype) << " " << slrt::formatShape(t.shape);
  constexpr uint64_t kShown = 8;
  uint64_t n = std::min(t.numel(), kShown);
  std::cout << " =";
  for (uint64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
    case sl::schedule::F32:
      std::cout << ' ' << t.as<float>()[i];
      break;
    case sl::schedule::F64:
      std::cout << ' ' << t.as<double>()[i];
      break;
    case sl::schedule::BF16:
      std::cout << ' ' << slrt::bfloat16ToFloat(t.as<uint16_t>()[i]);
      break;
    case sl::schedule::I64:
      std::cout << ' ' << t.as<int64_t>()[i];
      break;
    case sl::schedule::I32:
      std::cout << ' ' << t.as<int32_t>()[i];
      break;
    case sl::schedule::BOOL:
      std::cout << (t.as<uint8_t>()[i] != 0 ? " true" : " false");
      break;
    default:
      std::cout << " (values of " << slrt::dtypeName(t.dtype) << " are not printed)\n";
      return;
    }
  }
  std::cout << (t.numel() > n ? " ...\n" : "\n");
}

struct Options {
  std::string schedulePath, reportPath, tracePath, backendName = "cpu";
  double linkGbps = 0;
  // --tf32: f32 GEMMs in TF32 on the CUDA backend.
  bool tf32 = false;
  // --random-weights: seeded random parameters instead of the model's files.
  std::optional<uint64_t> randomWeightsSeed;
  // --allow-external-paths: read parameter files the schedule names outside its directory.
  bool allowExternalPaths = false;
  // Several ranks: how long a collective may take, and the job's communicator (null for one rank).
  double collectiveTimeout = 300;
  slrt::Communicator *comm = nullptr;
  std::string consolidatePath;
  // --calibrate: measure the machine instead of running a schedule.
  std::string calibratePath;
  double calibrateSeconds = 0.3;
  std::vector<std::string> inputArgs, outputArgs;
  // Training.
  std::string dataPath, dataDType = "uint16", savePath, resumePath, exportOnnxPath;
  int64_t steps = 0, vocab = 0;
  slrt::AdamWConfig adamw;
  // Generation.
  std::string promptsPath, tokenizer = "none";
  slrt::SamplingOptions sampling;
  std::vector<int64_t> stopTokens;
  int64_t maxNewTokens = 0;
  // The flags given that only a train schedule takes ("--data", ...), those of inference
  // (--input, --output) and those only a generate schedule takes ("--prompts", ...).
  std::vector<std::string> trainFlagsGiven, inferFlagsGiven, generateFlagsGiven;
};

slrt::ExecutorOptions executorOptions(const Options &options) {
  slrt::ExecutorOptions executor;
  executor.trace = !options.tracePath.empty();
  // The report's op seconds and the trace's kernel spans are where the kernels ran: on the CUDA
  // backend, timed on the GPU.
  executor.timeKernels = !options.reportPath.empty() || !options.tracePath.empty();
  executor.comm = options.comm;
  executor.randomWeightsSeed = options.randomWeightsSeed;
  return executor;
}

// What every report says about how the run was made, besides the schedule.
void describeRun(nlohmann::json &report, const Options &options) {
  report["link_gbps"] = options.linkGbps;
  // What the GEMMs of f32 tensors computed in: TF32 only when asked for on the CUDA backend.
  report["tf32"] = options.tf32 && options.backendName == "cuda";
  report["random_weights"] =
      options.randomWeightsSeed
          ? nlohmann::json{{"seed", *options.randomWeightsSeed}, {"std", slrt::kRandomWeightStd}}
          : nlohmann::json(nullptr);
}

bool isRankZero(const Options &options) { return !options.comm || options.comm->rank() == 0; }

// With several ranks each writes its own trace: FILE with ".rank<R>" before its extension.
std::string tracePathOf(const Options &options) {
  if (!options.comm)
    return options.tracePath;
  std::string path = options.tracePath;
  size_t slash = path.rfind('/'), dot = path.rfind('.');
  std::string rank = ".rank" + std::to_string(options.comm->rank());
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return path + rank;
  return path.substr(0, dot) + rank + path.substr(dot);
}

// World > 1: every parameter's trained weights, gathered from the ranks' parts of the shards.
std::vector<std::vector<float>> gatherWeights(const slrt::Trainer &trainer,
                                              slrt::Communicator &comm) {
  slrt::ShardedLayout layout = trainer.shardedLayout();
  std::vector<std::vector<float>> shards;
  for (size_t i = 0; i < layout.shards.size(); ++i) {
    const std::vector<float> &mine = trainer.optimizer().weights(i);
    std::vector<float> whole(mine.size() * layout.world);
    comm.allGatherBytes(mine.data(), whole.data(), mine.size() * sizeof(float),
                        "--export-onnx: gathering shard '" + layout.shards[i].name + "'");
    shards.push_back(std::move(whole));
  }
  std::vector<std::vector<float>> weights;
  for (const slrt::ShardedParameter &p : layout.parameters) {
    const std::vector<float> &flat = shards[p.shard];
    auto begin = flat.begin() + static_cast<std::ptrdiff_t>(p.offset);
    weights.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(*slrt::numel(p.shape)));
  }
  return weights;
}

// What every rank of a training job must have alike, compared before the parameters are read
// (slrt/rank_agreement.h). Inputs count by their contents, so they may lie at other paths on other
// nodes; outputs by the path given, since rank 0 writes the index, the report and the ONNX model
// for every rank and each rank writes its part beside the index. --trace is left out: each rank
// writes its own file, and no collective depends on it.
std::vector<slrt::AgreementField> agreementFields(const Options &o,
                                                  const slrt::LoadedSchedule &loaded) {
  auto path = [](const std::string &flag, const std::string &value) {
    slrt::AgreementField field = slrt::textField(flag, value);
    if (value.empty())
      field.value = "(none)";
    return field;
  };
  const slrt::AdamWConfig &a = o.adamw;
  return {slrt::scheduleField(loaded),
          slrt::textField("model parameters", slrt::modelFingerprint(loaded.schedule)),
          slrt::modelFilesField(loaded),
          slrt::fileField("--data", o.dataPath, "token file"),
          slrt::textField("--data-dtype", o.dataDType),
          o.resumePath.empty() ? path("--resume", "")
                               : slrt::fileField("--resume", o.resumePath, "checkpoint"),
          slrt::integerField("--steps", o.steps),
          slrt::integerField("--vocab", o.vocab),
          slrt::numberField("--lr", a.lr),
          slrt::numberField("--beta1", a.beta1),
          slrt::numberField("--beta2", a.beta2),
          slrt::numberField("--eps", a.eps),
          slrt::numberField("--weight-decay", a.weightDecay),
          slrt::numberField("--max-grad-norm", a.maxGradNorm),
          slrt::integerField("--warmup-steps", a.warmupSteps),
          slrt::integerField("--decay-steps", a.decaySteps),
          slrt::numberField("--min-lr", a.minLr),
          path("--save", o.savePath),
          path("--export-onnx", o.exportOnnxPath),
          path("--report", o.reportPath),
          slrt::textField("--backend", o.backendName),
          slrt::numberField("--collective-timeout", o.collectiveTimeout),
          slrt::numberField("--link-gbps", o.linkGbps),
          slrt::integerField("--tf32", o.tf32 ? 1 : 0)};
}

// The files a run reads (--input files given separately), for refusing an output that would
// replace one of them.
std::vector<slrt::NamedPath> runInputs(const Options &options, const slrt::LoadedSchedule &loaded,
                                       const std::map<std::string, std::string> &inputFiles = {}) {
  std::vector<slrt::NamedPath> inputs = {{"the schedule", options.schedulePath}};
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

// Refuses, before the run, an output that would replace one of the run's inputs or another of
// its outputs, and an output file that could not be written after the run: the work of a run
// must not be lost to a typo in a path, nor destroy what it reads.
void checkOutputPaths(const std::vector<std::pair<const char *, std::string>> &outputs,
                      const std::vector<slrt::NamedPath> &inputs) {
  std::vector<slrt::NamedPath> named;
  for (const auto &[flag, path] : outputs)
    named.push_back({flag, path});
  slrt::checkOutputsAreDistinct(inputs, named);
  for (const auto &[flag, path] : outputs)
    if (!path.empty()) {
      try {
        slrt::checkWritable(path);
      } catch (const slrt::Error &e) {
        throw makeError(flag, " ", e.what());
      }
    }
}

// Refuses a run whose arena, pool and host-side state do not fit in the memory free now.
void checkMemory(const slrt::LoadedSchedule &loaded, const slrt::Backend &backend,
                 const slrt::RunMemoryOptions &options) {
  slrt::MemoryNeed need = slrt::runMemoryNeed(loaded.schedule, options);
  need.deviceWorking = backend.deviceWorkingBytes(slrt::deviceStreamCount(loaded.schedule));
  slrt::checkMemoryFits(loaded.path, need, slrt::availableMemory(backend));
}

std::string flagList(const std::vector<std::string> &flags) {
  std::string list;
  for (const std::string &flag : flags)
    list += (list.empty() ? "" : ", ") + flag;
  return list;
}

// Refuses the flags of `given` that only a schedule of kind `kind` takes.
void refuseFlags(const std::vector<std::string> &given, const char *kind,
                 const slrt::LoadedSchedule &loaded) {
  if (!given.empty())
    throw makeError(flagList(given), ": only a ", kind, " schedule takes ",
                    given.size() == 1 ? "this option" : "these options", " (", loaded.path,
                    " is of kind '", loaded.schedule.kind(), "')");
}

// NumPy has no bf16: an input the schedule takes as bf16 is given as a float32 .npy and rounded
// to nearest even, as torch's tensor.to(torch.bfloat16) does. Other inputs are returned as they
// are (checkInput checks them).
slrt::HostTensor bfloat16Input(const sl::schedule::Schedule &schedule, const std::string &name,
                               slrt::HostTensor tensor) {
  for (const sl::schedule::Binding &b : schedule.inputs()) {
    if (b.name() != name ||
        schedule.buffers(static_cast<int>(b.buffer())).dtype() != sl::schedule::BF16)
      continue;
    if (tensor.dtype != sl::schedule::F32)
      throw makeError("input '", name, "' is ", slrt::dtypeName(tensor.dtype),
                      ", but the schedule takes it as bf16: give it as float32 (rounded to bf16 "
                      "on reading; NumPy has no bf16)");
    return slrt::roundedToBfloat16(tensor);
  }
  return tensor;
}

int infer(const Options &options, slrt::Backend &backend, const slrt::LoadedSchedule &loaded) {
  const sl::schedule::Schedule &schedule = loaded.schedule;
  refuseFlags(options.trainFlagsGiven, "train", loaded);
  refuseFlags(options.generateFlagsGiven, "generate", loaded);
  if (schedule.programs_size() > 1)
    throw makeError(loaded.path, " has ", schedule.programs_size(),
                    " programs; sl-run runs a schedule of several programs only when it is a "
                    "generate schedule, and this one is of kind '",
                    schedule.kind(), "'");

  // Everything the user gave is checked before parameters are loaded or anything runs.
  std::map<std::string, std::string> inputFiles =
      assignFiles(options.inputArgs, schedule.inputs(), "input");
  std::map<std::string, std::string> outputFiles =
      assignFiles(options.outputArgs, schedule.outputs(), "output");
  for (const sl::schedule::Binding &b : schedule.inputs())
    if (!inputFiles.count(b.name()))
      throw makeError("missing input '", b.name(), "': give --input ",
                      schedule.inputs_size() == 1 ? "FILE.npy" : b.name() + "=FILE.npy");
  std::map<std::string, slrt::HostTensor> inputs;
  for (const auto &[name, file] : inputFiles) {
    // Twice the input's bytes (an f32 file for a bf16 input, or a wider integer type, which
    // checkInput then names) and room for the header: a file past it cannot be the input, and is
    // refused before it is read.
    uint64_t inputBytes = 0;
    for (const sl::schedule::Binding &b : schedule.inputs())
      if (b.name() == name)
        inputBytes = schedule.buffers(static_cast<int>(b.buffer())).bytes();
    slrt::HostTensor tensor =
        slrt::readNpy(file, slrt::saturatingMulAdd<uint64_t>(inputBytes, 2, uint64_t{1} << 20),
                      "twice the input's bytes, and 1 MiB for the header");
    try {
      tensor = bfloat16Input(schedule, name, std::move(tensor));
      slrt::checkInput(schedule, name, tensor);
    } catch (const slrt::Error &e) {
      throw makeError(file, ": ", e.what());
    }
    inputs.emplace(name, std::move(tensor));
  }
  std::vector<std::pair<const char *, std::string>> outputPaths = {{"--report", options.reportPath},
                                                                   {"--trace", options.tracePath}};
  for (const auto &[name, file] : outputFiles)
    outputPaths.emplace_back("--output", file);
  checkOutputPaths(outputPaths, runInputs(options, loaded, inputFiles));
  slrt::RunMemoryOptions memory;
  memory.writeOutputs = !outputFiles.empty();
  checkMemory(loaded, backend, memory);

  slrt::Executor executor(loaded, backend, executorOptions(options));
  std::vector<slrt::NamedTensor> outputs = executor.run(inputs);

  for (const slrt::NamedTensor &out : outputs) {
    auto file = outputFiles.find(out.name);
    if (file != outputFiles.end())
      // NumPy has no bf16: a bf16 output is written as float32, widened exactly.
      slrt::writeNpy(file->second, out.tensor.dtype == sl::schedule::BF16
                                       ? slrt::widenedToF32(out.tensor)
                                       : out.tensor);
    else if (outputFiles.empty())
      printOutput(out);
  }
  if (!options.reportPath.empty()) {
    nlohmann::json report = slrt::makeReport(loaded, backend.name(), executor.stats(), outputs);
    describeRun(report, options);
    slrt::writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    executor.writeTrace(options.tracePath);
  return 0;
}

int train(const Options &options, slrt::Backend &backend, const slrt::LoadedSchedule &loaded) {
  // Random weights measure a step's speed (a 7B-shaped probe whose weights are not at hand); what
  // they train is noise from a non-model initialisation, so nothing of it may be kept.
  if (options.randomWeightsSeed &&
      (!options.savePath.empty() || !options.exportOnnxPath.empty() || !options.resumePath.empty()))
    throw makeError("--random-weights: ", loaded.path, " trains from random weights only to "
                    "measure its speed, so --save, --export-onnx and --resume are refused with it; "
                    "export the model with the weights to start from");
  refuseFlags(options.generateFlagsGiven, "generate", loaded);
  if (!options.inferFlagsGiven.empty())
    throw makeError(flagList(options.inferFlagsGiven),
                    ": a train schedule reads its inputs from "
                    "--data and writes a checkpoint with --save, not .npy files");
  if (options.dataPath.empty())
    throw makeError(loaded.path, " is a train schedule: give --data FILE (token ids)");
  if (options.steps <= 0)
    throw makeError(loaded.path, " is a train schedule: give --steps N");

  // Everything that can be checked is, before the parameters are read: the schedule, the
  // optimizer settings, and that the token file holds one step's tokens.
  try {
    slrt::checkTrainSchedule(loaded.schedule);
  } catch (const slrt::Error &e) {
    throw makeError(loaded.path, ": ", e.what());
  }
  options.adamw.validate();
  slrt::TokenData data =
      slrt::TokenData::open(options.dataPath, slrt::parseTokenDType(options.dataDType));
  checkOutputPaths({{"--save", options.savePath},
                    {"--export-onnx", options.exportOnnxPath},
                    {"--report", options.reportPath},
                    {"--trace", options.tracePath.empty() ? "" : tracePathOf(options)}},
                   runInputs(options, loaded));
  slrt::RunMemoryOptions memory;
  memory.training = true;
  memory.resume = !options.resumePath.empty();
  memory.save = !options.savePath.empty();
  checkMemory(loaded, backend, memory);
  // Ranks that would train differently stop here, before any collective of the schedule.
  if (options.comm)
    slrt::checkRanksAgree(agreementFields(options, loaded), *options.comm);
  slrt::TrainerOptions trainerOptions;
  trainerOptions.adamw = options.adamw;
  trainerOptions.vocabSize = options.vocab;
  trainerOptions.executor = executorOptions(options);
  slrt::Trainer trainer(loaded, backend, data, trainerOptions);
  bool printing = isRankZero(options);

  if (!options.resumePath.empty()) {
    uint64_t saved = trainer.resume(options.resumePath);
    if (saved != trainer.dataPosition() && printing)
      std::cerr << "sl-run: warning: " << options.resumePath << " was saved where the next step "
                << "reads from token " << saved << " of its data, but step "
                << trainer.completedSteps() + 1 << " of this run reads from token "
                << trainer.dataPosition() << " of " << data.path()
                << ": the token file or the batch shape changed, so the data order does not "
                   "continue the checkpoint's\n";
  }

  uint64_t last = trainer.completedSteps() + static_cast<uint64_t>(options.steps);
  auto start = std::chrono::steady_clock::now();
  try {
    for (int64_t i = 0; i < options.steps; ++i) {
      slrt::StepRecord r = trainer.step();
      if (!printing)
        continue;
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %llu/%llu  loss %.4f  lr %.2e  tokens/s %.0f  elapsed %.2fs\n",
                  static_cast<unsigned long long>(r.step), static_cast<unsigned long long>(last),
                  static_cast<double>(r.loss), r.lr, r.tokensPerSecond, elapsed);
      std::fflush(stdout);
    }
  } catch (const slrt::Error &e) {
    if (options.savePath.empty() && options.reportPath.empty() && options.tracePath.empty())
      throw;
    throw makeError(e.what(), " (nothing was saved: --save, --report and --trace are written "
                              "only after the last step)");
  }

  if (!options.savePath.empty())
    trainer.save(options.savePath);
  if (!options.exportOnnxPath.empty()) {
    try {
      if (options.comm) {
        std::vector<std::vector<float>> weights = gatherWeights(trainer, *options.comm);
        std::vector<const void *> pointers;
        for (const std::vector<float> &w : weights)
          pointers.push_back(w.data());
        if (printing)
          slrt::exportTrainedOnnx(loaded, pointers, options.exportOnnxPath);
      } else {
        // The f32 masters: a bf16 parameter's buffer holds them only rounded.
        slrt::exportMasterWeightsOnnx(loaded, trainer.masterWeights(), options.exportOnnxPath);
      }
    } catch (const slrt::Error &e) {
      // The checkpoint is already replaced: say so, so that nobody trains the steps again.
      if (options.savePath.empty())
        throw;
      throw makeError(e.what(), " (training finished and the checkpoint ", options.savePath,
                      " was saved before the export failed: resume from it or --consolidate "
                      "it; --report and --trace were not written)");
    }
  }
  // Every rank's memory and traffic, for rank 0's report.
  nlohmann::json ranks = nlohmann::json::array();
  if (!options.reportPath.empty()) {
    const slrt::RunStats &stats = trainer.executor().stats();
    uint64_t mine[4] = {trainer.optimizerStateBytes(), stats.hostPoolBytes,
                        stats.deviceArenaBytes, stats.bytesCollective};
    std::vector<uint64_t> all(4 * static_cast<size_t>(options.comm ? options.comm->size() : 1));
    if (options.comm)
      options.comm->allGatherBytes(mine, all.data(), sizeof mine, "--report: every rank's figures");
    else
      std::copy(std::begin(mine), std::end(mine), all.begin());
    for (size_t r = 0; r < all.size() / 4; ++r)
      ranks.push_back({{"rank", r},
                       {"optimizer_state_bytes", all[4 * r]},
                       {"host_pool_bytes", all[4 * r + 1]},
                       {"device_arena_bytes", all[4 * r + 2]},
                       {"bytes_collective_last_step", all[4 * r + 3]}});
  }
  if (!options.reportPath.empty() && printing) {
    nlohmann::json report =
        slrt::makeReport(loaded, backend.name(), trainer.executor().stats(), {});
    for (const sl::schedule::Binding &b : loaded.schedule.outputs()) {
      const sl::schedule::Buffer &buffer = loaded.schedule.buffers(static_cast<int>(b.buffer()));
      report["outputs"].push_back({{"name", b.name()},
                                   {"dtype", slrt::dtypeName(buffer.dtype())},
                                   {"shape", slrt::toShape(buffer.shape())}});
    }
    report["train"] = trainer.report();
    describeRun(report, options);
    report["world"] = trainer.world();
    report["ranks"] = ranks;
    slrt::writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    trainer.executor().writeTrace(tracePathOf(options));
  return 0;
}

// --consolidate INDEX: a sharded checkpoint into one checkpoint file (--save) and an ONNX model
// with the trained weights (--export-onnx), for the schedule's model; one process, no MPI.
int consolidate(const Options &options, const slrt::LoadedSchedule &loaded) {
  if (options.comm)
    throw makeError("--consolidate runs as one process; run it without mpirun");
  if (options.randomWeightsSeed)
    throw makeError("--consolidate writes a checkpoint's weights: --random-weights does not go "
                    "with it");
  if (options.savePath.empty() && options.exportOnnxPath.empty())
    throw makeError("--consolidate ", options.consolidatePath,
                    ": give --save FILE and/or --export-onnx FILE to say what to write");
  checkOutputPaths({{"--save", options.savePath}, {"--export-onnx", options.exportOnnxPath}},
                   runInputs(options, loaded));
  std::vector<slrt::ParameterSpec> specs;
  for (const sl::schedule::Parameter &p : loaded.schedule.parameters())
    specs.push_back({p.name(), slrt::toShape(p.shape())});
  slrt::TrainingCheckpoint whole = slrt::consolidateShardedCheckpoint(
      options.consolidatePath, slrt::modelFingerprint(loaded.schedule), specs);
  if (!options.exportOnnxPath.empty()) {
    std::vector<const float *> masters;
    for (const slrt::ParameterState &state : whole.parameters)
      masters.push_back(state.master.data());
    slrt::exportMasterWeightsOnnx(loaded, masters, options.exportOnnxPath);
  }
  if (!options.savePath.empty()) {
    try {
      slrt::saveCheckpoint(options.savePath, whole);
    } catch (const slrt::Error &e) {
      if (options.exportOnnxPath.empty())
        throw;
      throw makeError(e.what(), " (--export-onnx ", options.exportOnnxPath,
                      " was written before the checkpoint failed)");
    }
  }
  std::printf("consolidated %s (step %llu, %d parameters)%s%s%s%s\n",
              options.consolidatePath.c_str(), static_cast<unsigned long long>(whole.step),
              static_cast<int>(whole.parameters.size()),
              options.savePath.empty() ? "" : " into ", options.savePath.c_str(),
              options.exportOnnxPath.empty() ? "" : " and ", options.exportOnnxPath.c_str());
  return 0;
}

int generate(const Options &options, slrt::Backend &backend, const slrt::LoadedSchedule &loaded) {
  refuseFlags(options.trainFlagsGiven, "train", loaded);
  for (const std::string &flag : options.inferFlagsGiven)
    if (flag == "--input")
      throw makeError("--input: a generate schedule reads its prompts from --prompts, not .npy "
                      "files");
  if (options.promptsPath.empty())
    throw makeError(loaded.path, " is a generate schedule: give --prompts FILE.jsonl");
  if (options.outputArgs.size() > 1)
    throw makeError("--output is given ", options.outputArgs.size(),
                    " times; a generate schedule writes one file (JSON Lines)");

  // The options and every prompt are checked before the parameters are read.
  slrt::GenerationOptions generation;
  generation.sampling = options.sampling;
  generation.stopTokens = options.stopTokens;
  generation.maxNewTokens = options.maxNewTokens;
  generation.tokenizer = slrt::parseTokenizer(options.tokenizer);
  generation.executor = executorOptions(options);
  generation.sampling.validate();
  generation.progress = [](const slrt::GenerationProgress &p) {
    std::fprintf(
        stderr,
        "batch %llu/%llu  sequences %llu/%llu  tokens %llu  tokens/s %.0f  "
        "elapsed %.2fs\n",
        static_cast<unsigned long long>(p.batch), static_cast<unsigned long long>(p.batches),
        static_cast<unsigned long long>(p.sequencesDone),
        static_cast<unsigned long long>(p.sequences),
        static_cast<unsigned long long>(p.generatedTokens),
        p.elapsedSeconds > 0 ? static_cast<double>(p.generatedTokens) / p.elapsedSeconds : 0.0,
        p.elapsedSeconds);
  };
  const sl::schedule::Generation &g = loaded.schedule.generation();
  slrt::PromptLimits limits{g.max_prompt_len(), g.vocab(), generation.tokenizer};
  std::vector<slrt::Prompt> prompts = slrt::readPrompts(options.promptsPath, limits);
  checkOutputPaths({{"--output", options.outputArgs.empty() ? "" : options.outputArgs[0]},
                    {"--report", options.reportPath},
                    {"--trace", options.tracePath}},
                   runInputs(options, loaded));
  checkMemory(loaded, backend, slrt::RunMemoryOptions{});
  slrt::Generator generator(loaded, backend, generation);
  std::vector<slrt::GeneratedSequence> sequences = generator.generate(prompts);

  std::string lines = slrt::generationJsonLines(sequences, generation.tokenizer);
  if (options.outputArgs.empty())
    std::cout << lines << std::flush;
  else
    slrt::writeFileAtomically(options.outputArgs[0], lines);
  if (!options.reportPath.empty()) {
    nlohmann::json report =
        slrt::makeReport(loaded, backend.name(), generator.executor().stats(), {});
    report["generation"] = generator.report();
    describeRun(report, options);
    slrt::writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    generator.executor().writeTrace(options.tracePath);
  return 0;
}

slrt::BackendOptions backendOptions(const Options &options) {
  slrt::BackendOptions backend;
  backend.tf32 = options.tf32;
  return backend;
}

int run(const Options &options) {
  std::unique_ptr<slrt::Backend> backend = slrt::withLinkPacing(
      slrt::createBackend(options.backendName, backendOptions(options)), options.linkGbps);
  // With --random-weights the model's files are never opened: they need not exist.
  slrt::LoadedSchedule loaded =
      slrt::loadSchedule(options.schedulePath, !options.randomWeightsSeed,
                         options.allowExternalPaths);
  if (!options.consolidatePath.empty())
    return consolidate(options, loaded);
  if (loaded.schedule.kind() == slrt::kTrainKind)
    return train(options, *backend, loaded);
  if (options.randomWeightsSeed && isRankZero(options))
    std::cerr << "sl-run: the weights are random (--random-weights " << *options.randomWeightsSeed
              << "), not the model's: outputs and tokens mean nothing, speeds are real\n";
  if (loaded.schedule.kind() == slrt::kGenerateKind)
    return generate(options, *backend, loaded);
  return infer(options, *backend, loaded);
}

// --calibrate FILE: the planner's rates measured on this machine and backend (slrt/calibrate.h),
// written as a machine profile for sl-opt's target=FILE.
int calibrate(const Options &options) {
  std::unique_ptr<slrt::Backend> backend =
      slrt::createBackend(options.backendName, backendOptions(options));
  slrt::CalibrationOptions calibration;
  calibration.minSeconds = options.calibrateSeconds;
  slrt::checkWritable(options.calibratePath);
  slrt::MachineCalibration measured = slrt::calibrate(*backend, calibration);
  std::string json = slrt::machineProfileJson(measured, "calibrated-" + options.backendName);
  slrt::writeFileAtomically(options.calibratePath, json);
  std::cout << json << "sl-run: wrote the machine profile " << options.calibratePath
            << ": plan with sl-opt --sl-train=\"... target=" << options.calibratePath << "\"\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "sl-run: execute a SpeedLoader schedule (written by sl-opt) on a backend.\n"
      "An inference schedule runs once: inputs and outputs are NumPy .npy files (float32, "
      "float64, int64, int32, bool; NumPy has no bf16, so a bf16 input is given as float32 and "
      "rounded to nearest even, and a bf16 output is written as float32, widened exactly); "
      "without --output, each output's name, dtype, shape and first values are printed.\n"
      "A train schedule (kind \"train\") runs --steps training steps on the token ids of --data: "
      "each step computes the loss and every gradient, then AdamW updates the weights; a progress "
      "line per step is printed.\n"
      "A generate schedule (kind \"generate\") continues each prompt of --prompts (JSON Lines) "
      "token by token and writes the new tokens to --output (JSON Lines; standard output without "
      "it); a progress line per batch goes to standard error."};
  app.get_formatter()->column_width(30);
  Options o;
  CLI::Option *scheduleOption =
      app.add_option("SCHEDULE", o.schedulePath, "The schedule file (.slsched) to run")
          ->type_name("");
  std::vector<CLI::Option *> inferOptions, trainOptions;
  inferOptions.push_back(
      app.add_option("--input,-i", o.inputArgs,
                     "An input as NAME=FILE.npy, or FILE.npy when the schedule has one input; "
                     "repeat for each input (inference)")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name("[NAME=]FILE"));
  inferOptions.push_back(
      app.add_option("--output,-o", o.outputArgs,
                     "Where to write an output, as NAME=FILE.npy, or FILE.npy when the schedule "
                     "has one output; repeatable. Files are written atomically. Outputs not "
                     "named are not written (inference). For a generate schedule: the JSON Lines "
                     "file of generated tokens, written atomically (without --output, the lines "
                     "go to standard output)")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name("[NAME=]FILE"));
  app.add_option("--report", o.reportPath,
                 "Write a JSON report (timings, seconds per op kind, kernels, bytes moved per "
                 "direction, arena and pool sizes and peak use, busy and wait seconds per stream, "
                 "the schedule's plan, outputs; for training also a \"train\" section: per-step "
                 "loss, lr and bytes moved, tokens/s, the AdamW settings; for generation a "
                 "\"generation\" section: prefill and decode tokens/s, bytes moved and peak "
                 "memory over all runs, the sampling settings, the schedule's generation shape) "
                 "to FILE, atomically, after the run. On the CUDA backend the GPU times each "
                 "kernel and copy it runs (two timing events each, no synchronisation added) and "
                 "their seconds are those times (\"op_seconds_clock\": \"device\"); what the "
                 "host runs (the optimizer, host accumulation, collectives), and everything on "
                 "the CPU backend, counts host time (\"host\" on the CPU backend)")
      ->type_name("FILE");
  app.add_option("--trace", o.tracePath,
                 "Write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the run to FILE, "
                 "atomically, after the run: a track per stream, a span per kernel and per wait "
                 "that blocked. On the CUDA backend a kernel's span is when the GPU ran it, and "
                 "the waits of its host thread go on a track of their own (\"<track> host "
                 "waits\"). Training and generation trace every run (step, prefill, "
                 "decode step) until the trace holds a million spans; later runs are left out "
                 "(otherData.runs_traced says how many are in)")
      ->type_name("FILE");
  app.add_option("--link-gbps", o.linkGbps,
                 "Pace host<->device copies to at most G GB/s per direction, to emulate a PCIe "
                 "link on the CPU backend; 0: unthrottled")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("G");
  app.add_flag("--tf32", o.tf32,
              "Compute the GEMMs of f32 tensors on tensor cores in TF32 (inputs rounded to a "
              "10-bit mantissa, f32 accumulation; PyTorch's allow_tf32): faster on a GPU, less "
              "exact. The CUDA backend only (the CPU backend computes f32); off by default; the "
              "report's \"tf32\" says whether it was used. bf16 schedules are not affected");
  app.add_option("--collective-timeout", o.collectiveTimeout,
                 "With several ranks (mpirun -np W): seconds a collective may take before the job "
                 "is ended with an error naming the rank and the collective")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->type_name("SECONDS");
  app.add_option("--random-weights", o.randomWeightsSeed,
                 "Instead of reading the model's parameter files (which need not exist), fill "
                 "every parameter with random values: normal, std 0.02, in the parameter's "
                 "dtype, the same for a seed on any machine and thread count. For measuring "
                 "generation, inference and training steps of models whose weights are not at "
                 "hand; the report says so (\"random_weights\"). A train schedule refuses --save, "
                 "--export-onnx and --resume with it")
      ->type_name("SEED");
  app.add_flag("--allow-external-paths", o.allowExternalPaths,
               "Read parameter files that the schedule names outside its own directory (an "
               "absolute path, a '..', or a symbolic link that leads out of it). Without it "
               "such a schedule is refused: a schedule from elsewhere must not make sl-run read "
               "(and copy into its outputs) any file it can reach. Give it only for schedules "
               "you compiled or trust");
  app.add_option("--backend", o.backendName,
                 "Where kernels run: cpu, or cuda (an NVIDIA GPU, in a build with the CUDA "
                 "backend; its kernels and copies run asynchronously, ordered by CUDA events, "
                 "and SLRT_CUDA_SYNC=1 in the environment makes each wait for its work, so that "
                 "a fault names its kernel)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();

  CLI::Option *calibrateOption =
      app.add_option("--calibrate", o.calibratePath,
                     "Instead of running a schedule: measure this machine with --backend (matrix "
                     "products in f32 and bf16, host->device copies, the host AdamW) and write "
                     "the rates as a machine profile (JSON) to FILE, for sl-opt's "
                     "--sl-train=\"... target=FILE\"")
          ->type_name("FILE")
          ->excludes(scheduleOption);
  app.add_option("--calibrate-seconds", o.calibrateSeconds,
                 "With --calibrate: the least time each rate is measured over")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str()
      ->needs(calibrateOption)
      ->type_name("SECONDS");

  const char *training = "Training (train schedules only)";
  auto trainOption = [&](CLI::Option *option) {
    option->group(training);
    trainOptions.push_back(option);
    return option;
  };
  trainOption(app.add_option("--data", o.dataPath,
                             "The token file: raw little-endian token ids, no header. Each step "
                             "reads batch*seq+1 tokens, starting where the previous step's inputs "
                             "end (the first at token 0) and wrapping at the end of the file; "
                             "the labels are the inputs shifted by one")
                  ->type_name("FILE"));
  trainOption(app.add_option("--data-dtype", o.dataDType, "The type of the token ids in --data")
                  ->check(CLI::IsMember({"uint16", "uint32"}))
                  ->capture_default_str());
  trainOption(app.add_option("--steps", o.steps,
                             "Training steps to run (after a --resume checkpoint's steps)")
                  ->check(CLI::PositiveNumber)
                  ->type_name("N"));
  trainOption(app.add_option("--vocab", o.vocab,
                             "The vocabulary size: a token id at or past it stops training, "
                             "naming its position in --data. Default: the model's (the last "
                             "dimension of the logits its loss reads); more than that is an "
                             "error")
                  ->check(CLI::PositiveNumber)
                  ->type_name("N"));
  trainOption(app.add_option("--lr", o.adamw.lr, "AdamW learning rate (peak, with a schedule)")
                  ->capture_default_str());
  trainOption(app.add_option("--weight-decay", o.adamw.weightDecay, "AdamW decoupled weight decay")
                  ->capture_default_str());
  trainOption(app.add_option("--beta1", o.adamw.beta1, "AdamW beta1")->capture_default_str());
  trainOption(app.add_option("--beta2", o.adamw.beta2, "AdamW beta2")->capture_default_str());
  trainOption(app.add_option("--eps", o.adamw.eps, "AdamW epsilon")->capture_default_str());
  trainOption(app.add_option("--max-grad-norm", o.adamw.maxGradNorm,
                             "Clip the global gradient L2 norm to this; 0 is off")
                  ->capture_default_str());
  trainOption(app.add_option("--warmup-steps", o.adamw.warmupSteps,
                             "Linear learning-rate warmup from 0 over this many steps")
                  ->capture_default_str());
  trainOption(app.add_option("--decay-steps", o.adamw.decaySteps,
                             "Cosine decay from --lr to --min-lr over this many steps after the "
                             "warmup; 0: constant after the warmup")
                  ->capture_default_str());
  trainOption(app.add_option("--min-lr", o.adamw.minLr, "The learning rate after the decay")
                  ->capture_default_str());
  trainOption(app.add_option("--save", o.savePath,
                             "Write a checkpoint (safetensors: master weights under their ONNX "
                             "names, AdamW moments, the step) atomically after the last step. "
                             "With several ranks, FILE is the index of a sharded checkpoint: "
                             "each rank's part is written beside it, the index last; a save that "
                             "fails leaves the previous checkpoint as it was")
                  ->type_name("FILE"));
  trainOption(app.add_option("--export-onnx", o.exportOnnxPath,
                             "After the last step, write the model with its trained weights as "
                             "ONNX (the exported graph, byte for byte, with new parameter values)")
                  ->type_name("FILE"));
  trainOption(app.add_option("--resume", o.resumePath,
                             "Continue from a checkpoint written by --save for the same model: "
                             "its weights, moments and step count; --steps more steps follow. "
                             "With several ranks, the index of a sharded checkpoint written with "
                             "as many ranks")
                  ->type_name("FILE"));
  app.add_option("--consolidate", o.consolidatePath,
                 "Instead of running: read the sharded checkpoint whose index is INDEX (written "
                 "by --save in a run of several ranks) and write it whole, for SCHEDULE's model, "
                 "as one checkpoint (--save FILE, which a run of one rank can --resume) and/or "
                 "as ONNX with the trained weights (--export-onnx FILE)")
      ->group(training)
      ->type_name("INDEX");

  const char *generation = "Generation (generate schedules only)";
  std::vector<CLI::Option *> generateOptions;
  auto generateOption = [&](CLI::Option *option) {
    option->group(generation);
    generateOptions.push_back(option);
    return option;
  };
  generateOption(
      app.add_option("--prompts", o.promptsPath,
                     "The prompts: JSON Lines, one object per line, {\"tokens\": [ids]} or "
                     "{\"text\": \"...\"} (with --tokenizer bytes), optionally with an \"id\" "
                     "that the output repeats. Prompts run in batches of the schedule's batch "
                     "size; each output line is {\"index\", \"id\", \"prompt_tokens\", "
                     "\"tokens\", \"text\" (with a tokenizer), \"finish_reason\": \"stop\" or "
                     "\"length\"}, in prompt order")
          ->type_name("FILE"));
  generateOption(app.add_option("--tokenizer", o.tokenizer,
                                "How \"text\" becomes token ids and tokens text: none (prompts "
                                "give \"tokens\"), or bytes (each UTF-8 byte is a token, ids "
                                "0..255, as speedloader.data writes training data)")
                     ->check(CLI::IsMember({"none", "bytes"}))
                     ->capture_default_str());
  generateOption(app.add_option("--max-new-tokens", o.maxNewTokens,
                                "The most tokens generated per prompt (default and most: the "
                                "schedule's max_new_tokens)")
                     ->check(CLI::PositiveNumber)
                     ->type_name("N"));
  generateOption(app.add_option("--stop-token", o.stopTokens,
                                "A token id that ends a sequence (kept in its output, finish "
                                "reason \"stop\"); repeatable")
                     ->expected(1)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                     ->type_name("ID"));
  generateOption(app.add_option("--temperature", o.sampling.temperature,
                                "Sampling temperature; 0 (the default) is greedy: the most "
                                "probable token, the lowest id on ties, deterministic")
                     ->check(CLI::NonNegativeNumber)
                     ->capture_default_str()
                     ->type_name("T"));
  generateOption(app.add_option("--top-k", o.sampling.topK,
                                "Sample among the K most probable tokens only; 0: all")
                     ->check(CLI::NonNegativeNumber)
                     ->capture_default_str()
                     ->type_name("K"));
  generateOption(app.add_option("--top-p", o.sampling.topP,
                                "Nucleus sampling: among the fewest most probable tokens whose "
                                "probability sums to at least P (after --top-k); 1: all")
                     ->check(CLI::Range(0.0, 1.0))
                     ->capture_default_str()
                     ->type_name("P"));
  generateOption(app.add_option("--seed", o.sampling.seed,
                                "Seed of the sampling: prompt i draws from a stream seeded by "
                                "(seed, i), so its tokens do not depend on its batch")
                     ->capture_default_str()
                     ->type_name("N"));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help is reported as a "parse error" with exit code 0; every real error exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (o.calibratePath.empty() && o.schedulePath.empty()) {
    std::cerr << "SCHEDULE is required\nRun with --help for more information.\n";
    return 1;
  }
  for (CLI::Option *option : trainOptions)
    if (option->count() > 0)
      o.trainFlagsGiven.push_back(option->get_name());
  for (CLI::Option *option : inferOptions)
    if (option->count() > 0)
      o.inferFlagsGiven.push_back(option->get_name());
  for (CLI::Option *option : generateOptions)
    if (option->count() > 0)
      o.generateFlagsGiven.push_back(option->get_name());
  std::unique_ptr<slrt::Communicator> comm;
  try {
    // First, so that every rank of a job is in MPI before any can fail and abort the job.
    slrt::CommOptions commOptions;
    commOptions.backend = o.backendName;
    commOptions.timeoutSeconds = o.collectiveTimeout;
    comm = slrt::openCommunicator(commOptions);
    o.comm = comm.get();
    if (!o.calibratePath.empty()) {
      std::vector<std::string> given = o.trainFlagsGiven;
      given.insert(given.end(), o.inferFlagsGiven.begin(), o.inferFlagsGiven.end());
      given.insert(given.end(), o.generateFlagsGiven.begin(), o.generateFlagsGiven.end());
      if (!given.empty() || !o.reportPath.empty() || !o.tracePath.empty() ||
          !o.consolidatePath.empty() || o.randomWeightsSeed)
        throw makeError("--calibrate runs no schedule: it takes only --backend and "
                        "--calibrate-seconds");
      if (comm && comm->size() > 1)
        throw makeError("--calibrate runs as one process; run it without mpirun");
      return calibrate(o);
    }
    if (!o.consolidatePath.empty() &&
        (!o.inferFlagsGiven.empty() || !o.generateFlagsGiven.empty()))
      throw makeError("--consolidate takes only --save and --export-onnx, not ",
                      flagList(o.inferFlagsGiven.empty() ? o.generateFlagsGiven
                                                         : o.inferFlagsGiven));
    if (!o.consolidatePath.empty())
      for (const std::string &flag : o.trainFlagsGiven)
        if (flag != "--save" && flag != "--export-onnx")
          throw makeError("--consolidate takes only --save and --export-onnx (it does not train), "
                          "not ", flag);
    return run(o);
  } catch (const std::exception &e) {
    if (!comm) {
      std::cerr << "sl-run: error: " << e.what() << "\n";
      return 1;
    }
    // One rank's error ends the job: the others would wait for it in their next collective. The
    // line goes out in one write, so that ranks failing at once (ranks that disagree) do not
    // interleave their messages.
    std::cerr << "sl-run: error: rank " + std::to_string(comm->rank()) + " of " +
                     std::to_string(comm->size()) + ": " + e.what() + "\n"
              << std::flush;
    comm->abort(1);
  }
}
