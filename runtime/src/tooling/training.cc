#include "slrt/tooling/training.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "slrt/checkpoint.h"
#include "slrt/error.h"
#include "slrt/onnx_export.h"
#include "slrt/rank_agreement.h"
#include "slrt/report.h"
#include "slrt/token_data.h"
#include "slrt/trainer.h"

namespace slrt::tooling {
namespace {

// World > 1: every parameter's trained weights, gathered from the ranks' parts of the shards.
std::vector<std::vector<float>> gatherWeights(const Trainer &trainer, Communicator &comm) {
  ShardedLayout layout = trainer.shardedLayout();
  std::vector<std::vector<float>> shards;
  for (size_t i = 0; i < layout.shards.size(); ++i) {
    const std::vector<float> &mine = trainer.optimizer().weights(i);
    std::vector<float> whole(mine.size() * layout.world);
    comm.allGatherBytes(mine.data(), whole.data(), mine.size() * sizeof(float),
                        "--export-onnx: gathering shard '" + layout.shards[i].name + "'");
    shards.push_back(std::move(whole));
  }
  std::vector<std::vector<float>> weights;
  for (const ShardedParameter &p : layout.parameters) {
    const std::vector<float> &flat = shards[p.shard];
    auto begin = flat.begin() + static_cast<std::ptrdiff_t>(p.offset);
    weights.emplace_back(begin, begin + static_cast<std::ptrdiff_t>(*numel(p.shape)));
  }
  return weights;
}

// What every rank of a training job must have alike, compared before the parameters are read
// (slrt/rank_agreement.h). Inputs count by their contents, so they may lie at other paths on other
// nodes; outputs by the path given, since rank 0 writes the index, the report and the ONNX model
// for every rank and each rank writes its part beside the index. --trace is left out: each rank
// writes its own file, and no collective depends on it.
std::vector<AgreementField> agreementFields(const RunOptions &o, const LoadedSchedule &loaded) {
  auto path = [](const std::string &flag, const std::string &value) {
    AgreementField field = textField(flag, value);
    if (value.empty())
      field.value = "(none)";
    return field;
  };
  const AdamWConfig &a = o.adamw;
  return {scheduleField(loaded),
          textField("model parameters", modelFingerprint(loaded.schedule)),
          modelFilesField(loaded),
          fileField("--data", o.dataPath, "token file"),
          textField("--data-dtype", o.dataDType),
          o.resumePath.empty() ? path("--resume", "")
                               : fileField("--resume", o.resumePath, "checkpoint"),
          integerField("--steps", o.steps),
          integerField("--vocab", o.vocab),
          numberField("--lr", a.lr),
          numberField("--beta1", a.beta1),
          numberField("--beta2", a.beta2),
          numberField("--eps", a.eps),
          numberField("--weight-decay", a.weightDecay),
          numberField("--max-grad-norm", a.maxGradNorm),
          integerField("--warmup-steps", a.warmupSteps),
          integerField("--decay-steps", a.decaySteps),
          numberField("--min-lr", a.minLr),
          path("--save", o.savePath),
          path("--export-onnx", o.exportOnnxPath),
          path("--report", o.reportPath),
          textField("--backend", o.backendName),
          numberField("--collective-timeout", o.collectiveTimeout),
          numberField("--link-gbps", o.linkGbps),
          integerField("--tf32", o.tf32 ? 1 : 0)};
}

} // namespace

int runTraining(const RunOptions &options, Backend &backend, const LoadedSchedule &loaded) {
  // Random weights measure a step's speed (a 7B-shaped probe whose weights are not at hand); what
  // they train is noise from a non-model initialisation, so nothing of it may be kept.
  if (options.randomWeightsSeed &&
      (!options.savePath.empty() || !options.exportOnnxPath.empty() || !options.resumePath.empty()))
    throw makeError("--random-weights: ", loaded.path,
                    " trains from random weights only to "
                    "measure its speed, so --save, --export-onnx and --resume are refused with it; "
                    "export the model with the weights to start from");
  refuseFlags(options.generateFlagsGiven, "generate", loaded);
  refuseInferenceOnlyFlags(options, loaded);
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
    checkTrainSchedule(loaded.schedule);
  } catch (const Error &e) {
    throw makeError(loaded.path, ": ", e.what());
  }
  options.adamw.validate();
  TokenData data = TokenData::open(options.dataPath, parseTokenDType(options.dataDType));
  checkOutputPaths({{"--save", options.savePath},
                    {"--export-onnx", options.exportOnnxPath},
                    {"--report", options.reportPath},
                    {"--trace", options.tracePath.empty() ? "" : tracePathOf(options)}},
                   runInputs(options, loaded));
  RunMemoryOptions memory;
  memory.training = true;
  memory.resume = !options.resumePath.empty();
  memory.save = !options.savePath.empty();
  checkMemory(loaded, backend, memory);
  // Ranks that would train differently stop here, before any collective of the schedule.
  if (options.comm)
    checkRanksAgree(agreementFields(options, loaded), *options.comm);
  TrainerOptions trainerOptions;
  trainerOptions.adamw = options.adamw;
  trainerOptions.vocabSize = options.vocab;
  trainerOptions.executor = executorOptions(options);
  Trainer trainer(loaded, backend, data, trainerOptions);
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
      StepRecord r = trainer.step();
      if (!printing)
        continue;
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %llu/%llu  loss %.4f  lr %.2e  tokens/s %.0f  elapsed %.2fs\n",
                  static_cast<unsigned long long>(r.step), static_cast<unsigned long long>(last),
                  static_cast<double>(r.loss), r.lr, r.tokensPerSecond, elapsed);
      std::fflush(stdout);
    }
  } catch (const Error &e) {
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
          exportTrainedOnnx(loaded, pointers, options.exportOnnxPath);
      } else {
        // The f32 masters: a bf16 parameter's buffer holds them only rounded.
        exportMasterWeightsOnnx(loaded, trainer.masterWeights(), options.exportOnnxPath);
      }
    } catch (const Error &e) {
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
    const RunStats &stats = trainer.executor().stats();
    uint64_t mine[4] = {trainer.optimizerStateBytes(), stats.hostPoolBytes, stats.deviceArenaBytes,
                        stats.bytesCollective};
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
    nlohmann::json report = makeReport(loaded, backend.name(), trainer.executor().stats(), {});
    for (const sl::schedule::Binding &b : loaded.schedule.outputs()) {
      const sl::schedule::Buffer &buffer = loaded.schedule.buffers(static_cast<int>(b.buffer()));
      report["outputs"].push_back({{"name", b.name()},
                                   {"dtype", dtypeName(buffer.dtype())},
                                   {"shape", toShape(buffer.shape())}});
    }
    report["train"] = trainer.report();
    describeRun(report, options);
    report["world"] = trainer.world();
    report["ranks"] = ranks;
    writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    trainer.executor().writeTrace(tracePathOf(options));
  return 0;
}

} // namespace slrt::tooling
