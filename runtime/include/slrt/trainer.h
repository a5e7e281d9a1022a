// Training with a "train" schedule (sl-run --data ... --steps N): token batches in, one run for the
// loss and every gradient, a host AdamW step, the updated weights back into the parameter buffers.
//
// The contract a train schedule meets (Schedule.kind == "train"):
//   inputs   "input_ids" and "labels", both i64 [batch, seq], and no others;
//   outputs  "loss", f32 [], the mean cross-entropy over all batch * seq tokens, and for every
//            Schedule.parameters entry P an output "grad:" + P.name of P's dtype (or f32 for a
//            bf16 P) and shape: the gradient of the loss with respect to P (other outputs are
//            allowed and ignored);
//   parameters  at least one, f32 or bf16, names unique. AdamW's master weights are f32: a bf16
//            parameter whose file holds f32 (file_dtype F32) starts its master from the file's
//            exact f32 values, and after every update the master is rounded (to nearest even)
//            into its bf16 buffer; checkpoints and --export-onnx hold the f32 masters;
//   world > 1   the outputs "grad_shard:" + S.name per shard S instead of the "grad:" ones (below).
// One run computes the loss and the gradients from the weights in the parameters' host buffers,
// which the schedule's own copies read on every run, so writing them between runs is the update.
//
// Where the optimizer steps. When the schedule's OPTIMIZER_STEP kernels together name every
// parameter (each exactly once, as the verifier allows no more) and clipping is off
// (maxGradNorm == 0), the trainer steps each kernel's parameters when that kernel runs, on the
// executor's HOST_COMPUTE thread, overlapped with the rest of the backward: it checks the loss on
// the first OPTIMIZER_STEP of the step, checks the group's gradients, steps AdamW on them and
// writes their new weights into their host buffers. Otherwise (clipping needs the global norm of
// every gradient first; a schedule without OPTIMIZER_STEP) it steps every parameter after the run.
// Both give bit-identical weights: AdamW updates each parameter with the same arithmetic whatever
// the grouping. A step that fails after some groups were updated (a non-finite gradient of a later
// group, a failing kernel) leaves the weights half-updated: the trainer then refuses to step, save
// or make a checkpoint, so that no such state is ever written; the last saved checkpoint is intact.
//
// Several ranks (a schedule of world W > 1, slrt/comm.h). Every rank runs the same schedule with
// batch b on its own sequences: rank r reads sequences [r*b, (r+1)*b) of each step's W*b
// (TokenData::batchRows), so the data order is that of a run of one rank with batch W*b. The
// parameters are sharded: the outputs are "loss" and, for every Schedule.shards entry S,
// "grad_shard:" + S.name (f32 [S.elements / W], the rank's part of the gradient of the mean loss
// over all W*b sequences, summed over the ranks by the schedule's REDUCE_SCATTER kernels), and
// AdamW keeps master weights and moments of the rank's parts of the shards only (1/W of the
// model's). A step's loss is the mean of the ranks' losses, each the mean over its own tokens
// (all ranks have as many): the mean over every token of the W*b sequences; the gradient norm is
// summed over the ranks too. Every rank then holds the same loss, norm and step count; with
// clipping every rank scales by the same coefficient. The data position of a checkpoint is that
// of the whole W*b batch.
//
// Step numbers: a trainer that has completed `t` steps (AdamW::step()) runs step t + 1 next, which
// reads TokenData::batch(t, ...) and updates with learning rate AdamWConfig::lrAt(t). Messages and
// StepRecord::step use the 1-based number t + 1; a checkpoint's step is t, the steps completed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slrt/adamw.h"
#include "slrt/backend.h"
#include "slrt/checkpoint.h"
#include "slrt/executor.h"
#include "slrt/schedule_loader.h"
#include "slrt/token_data.h"

namespace slrt {

inline constexpr const char *kTrainKind = "train";
inline constexpr const char *kInputIdsName = "input_ids";
inline constexpr const char *kLabelsName = "labels";
inline constexpr const char *kLossName = "loss";
inline constexpr const char *kGradPrefix = "grad:";
inline constexpr const char *kGradShardPrefix = "grad_shard:";

// Throws Error, naming the first thing that is wrong, unless `schedule` meets the train contract
// above.
void checkTrainSchedule(const sl::schedule::Schedule &schedule);

// What a checkpoint's modelFingerprint is for this schedule: the parameter count, their element
// count and an FNV-1a hash of every parameter's name, dtype and shape, in order. It depends on the
// parameters only, so schedules of one model planned for another batch, sub-batch count or memory
// budget share it.
std::string modelFingerprint(const sl::schedule::Schedule &schedule);

struct TrainerOptions {
  AdamWConfig adamw;
  // Token ids at or past this are refused as each batch is read, with their position in the token
  // file. 0: the vocabulary of the schedule's loss (the logits' last dimension of its
  // CROSS_ENTROPY), since every token of the file is some step's label; larger than that is an
  // Error. A schedule without CROSS_ENTROPY and no vocabulary given: not checked here; an
  // out-of-range id is then refused by the kernel that reads it, whose error names the kernel.
  int64_t vocabSize = 0;
  // How the executor runs each step (tracing, kernel timing) and, for a schedule of world > 1, the
  // job's ranks (executor.comm), which the trainer's own collectives use too.
  ExecutorOptions executor;
};

// One completed step.
struct StepRecord {
  // 1-based: the number of steps completed with this one.
  uint64_t step = 0;
  // The loss the step computed, with the weights from before its update.
  float loss = 0;
  // The learning rate of its update.
  double lr = 0;
  // The global L2 norm of its gradients, before clipping.
  double gradNorm = 0;
  // Wall time of the whole step: batch, run, optimizer, weights written back.
  double seconds = 0;
  double tokensPerSecond = 0;
  // Bytes the step's run moved.
  uint64_t bytesHostToDevice = 0;
  uint64_t bytesDeviceToHost = 0;
  uint64_t bytesCollective = 0;
};

class Trainer {
public:
  // Checks the schedule (checkTrainSchedule), the options (AdamWConfig::validate, a negative
  // vocabulary or one larger than the model's) and that `data` holds one step's tokens
  // (TokenData::checkFits), all before the executor reads the parameters; then creates the
  // executor and starts AdamW's master weights from the parameters' initial values, refusing a
  // parameter that holds NaN (the executor) or an infinity. `schedule`, `backend` and `data` must
  // outlive the trainer.
  Trainer(const LoadedSchedule &schedule, Backend &backend, const TokenData &data,
          const TrainerOptions &options);
  // The executor calls back into the trainer (the optimizer-step hook), so it stays in place.
  Trainer(const Trainer &) = delete;
  Trainer &operator=(const Trainer &) = delete;

  // Continues from a checkpoint (slrt/checkpoint.h) written by save() for a schedule with the same
  // modelFingerprint: restores the step count, master weights and both moments, and writes the
  // weights into the parameter buffers. Only before the first step. Error (from loadCheckpoint)
  // when the file is not a checkpoint of this model; the trainer is then unchanged. Returns the
  // checkpoint's dataPosition: it differs from dataPosition() when the token file or the batch
  // shape changed since the save.
  uint64_t resume(const std::string &path);

  // Runs the next step. Throws Error starting "step N: " when reading the batch or a kernel fails,
  // or when the loss or a gradient is NaN or infinite; the weights, the optimizer and the step
  // count are then those from before the step, so save() still writes the last good state. The
  // exception: with the optimizer stepping inside the run (above), a failure after some
  // parameters were updated says that the step was partly applied, and the trainer is then
  // unusable (partlyApplied()): step, save, checkpoint and resume throw Error.
  StepRecord step();

  // The state a resume continues from bit-identically: with world > 1, this rank's part (one
  // ParameterState per shard, rank and world set).
  TrainingCheckpoint checkpoint() const;
  // Writes checkpoint() atomically; with world > 1 a sharded checkpoint whose index is `path`
  // (every rank must call it), which resume() reads back with as many ranks.
  void save(const std::string &path);

  // The schedule's world and this rank, and the layout of the shards (world > 1).
  uint32_t world() const { return world_; }
  int rank() const { return executor_->rank(); }
  ShardedLayout shardedLayout() const;
  // Bytes of AdamW's master weights and moments this rank holds.
  uint64_t optimizerStateBytes() const;

  // Whether the optimizer steps inside the run, at the schedule's OPTIMIZER_STEP kernels.
  bool overlapsOptimizer() const { return overlapped_; }
  // Whether a failed step left some parameters updated and others not.
  bool partlyApplied() const { return !partlyApplied_.empty(); }

  uint64_t completedSteps() const { return static_cast<uint64_t>(optimizer_.step()); }
  // The index in the token file of the first token the next step reads.
  uint64_t dataPosition() const;
  int64_t batchSize() const { return batchSize_; }
  int64_t seqLen() const { return seqLen_; }
  const std::string &fingerprint() const { return fingerprint_; }
  const AdamW &optimizer() const { return optimizer_; }
  const Executor &executor() const { return *executor_; }
  // AdamW's f32 master weights, one per parameter (world 1: in schedule order): what --save and
  // --export-onnx write. A bf16 parameter's buffer holds them rounded.
  std::vector<const float *> masterWeights() const;
  // The steps of this trainer's lifetime, in order.
  const std::vector<StepRecord> &history() const { return history_; }

  // The "train" section of sl-run's report: {"first_step", "steps", "batch_size" (per rank),
  // "seq_len", "tokens_per_step" (of all ranks), "world", "optimizer_state_bytes" (this rank's
  // master weights and moments), "losses": [...], "lrs": [...], "grad_norms": [...],
  // "step_seconds": [...],
  // "seconds", "tokens_per_second", "fingerprint", "data": {"path", "dtype", "tokens"},
  // "vocab_size" (the one token ids are checked against; null when unchecked), "resumed_from",
  // "saved_to" (null when none), "adamw": {"lr", "beta1", "beta2", "eps", "weight_decay",
  // "max_grad_norm", "warmup_steps", "decay_steps", "min_lr"}, "optimizer_overlapped",
  // "bytes_host_to_device": [...], "bytes_device_to_host": [...], "bytes_collective": [...]} (the
  // byte arrays per step, this rank's).
  nlohmann::json report() const;

private:
  void writeWeights();
  // Parameter `index`'s master weights into its host buffer: copied (f32) or rounded (bf16).
  void writeWeights(size_t index);
  // Parameter `index`'s step: its gradient output (f32 or bf16, read where it lies) and its host
  // buffer, which stepGroup writes the updated weights to (copied, or rounded to bf16).
  ParamGrad stepOf(size_t index) const;
  // "parameter 'w'" or "shard 'layers 0'": AdamW's parameter `index`, for messages.
  std::string describe(size_t index) const;
  // The OPTIMIZER_STEP hook: runs on the executor's HOST_COMPUTE thread.
  void optimizerStep(const sl::schedule::Kernel &kernel);
  // Throws the Error that says why this trainer can no longer be used, if it cannot.
  void refuseIfPartlyApplied(const char *action) const;

  const LoadedSchedule &schedule_;
  const TokenData &data_;
  TrainerOptions options_;
  int64_t batchSize_ = 0, seqLen_ = 0;
  // The vocabulary token ids are checked against (TrainerOptions::vocabSize); 0: unchecked.
  int64_t vocab_ = 0;
  std::string fingerprint_;
  std::unique_ptr<Executor> executor_;
  AdamW optimizer_;
  uint64_t firstStep_ = 0;
  std::string resumedFrom_, savedTo_;
  std::vector<StepRecord> history_;
  // Per AdamW parameter (a schedule parameter, or with world > 1 a shard): the host buffer its
  // weights are written to, and its gradient output buffer.
  std::vector<const TensorRef *> targets_;
  std::vector<const TensorRef *> grads_;
  uint32_t world_ = 1;
  bool overlapped_ = false;
  // Within a step whose optimizer runs inside the executor: whether the loss was checked, the
  // squared gradient norm of each parameter (summed in parameter order after the run, so the
  // reported norm does not depend on the order the groups come in), and how many parameters
  // were updated so far.
  bool lossChecked_ = false;
  std::vector<double> squares_;
  size_t parametersUpdated_ = 0;
  // Why the trainer is unusable after a partly applied step; empty while it is usable.
  std::string partlyApplied_;
};

} // namespace slrt
