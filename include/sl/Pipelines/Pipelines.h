//===- Pipelines.h - named sl-opt pipelines from ONNX to a schedule ----------------------------===//
#ifndef SL_PIPELINES_PIPELINES_H
#define SL_PIPELINES_PIPELINES_H

#include "sl/Transforms/Placement.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace sl {

/// An option of a pipeline's options struct (for the shared bases below, whose base class is
/// dependent).
template <typename T> using PipelineOption = mlir::detail::PassOptions::Option<T>;

/// What every pipeline takes: the batch and how it splits into sub-batches, fusion, precision
/// and the memory budgets. Declared once here; each pipeline adds its own below.
template <typename Derived> struct BatchingOptions : public mlir::PassPipelineOptions<Derived> {
  PipelineOption<int64_t> batch{
      *this, "batch",
      llvm::cl::desc("Sequences per batch (an inference run, a training step, prompts generated "
                     "together): sub-batch-size x num-sub-batches (0: inference takes input_ids' "
                     "own; training leaves it to the plan)"),
      llvm::cl::init(0)};
  PipelineOption<int64_t> subBatchSize{
      *this, "sub-batch-size",
      llvm::cl::desc("Sequences per sub-batch (0: the plan chooses; generation: batch / "
                     "num-sub-batches)"),
      llvm::cl::init(0)};
  PipelineOption<int64_t> numSubBatches{
      *this, "num-sub-batches",
      llvm::cl::desc("Sub-batches per batch (0: the plan chooses; generation: batch / "
                     "sub-batch-size, or 1)"),
      llvm::cl::init(0)};
  PipelineOption<bool> fuse{*this, "fuse",
                            llvm::cl::desc("Fuse transformer blocks into fused ops "
                                           "(sl-fuse-transformer; generation needs fused "
                                           "attention)"),
                            llvm::cl::init(true)};
  PipelineOption<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Storage type of floating-point tensors: f32, or bf16 (weights, activations, "
                     "KV caches and gradients stored in bf16, computed in f32 by the kernels; the "
                     "f32 weights of the model file are rounded at load. Training keeps the loss "
                     "and the parameter gradients accumulated over sub-batches in f32, and the "
                     "runtime keeps f32 master weights (with world > 1, in the shards, cast to "
                     "bf16 after the all-gather))"),
      llvm::cl::init("f32")};
  PipelineOption<std::string> deviceMemory{
      *this, "device-memory",
      llvm::cl::desc("Device memory budget, e.g. 80GB or 24GiB (none: unlimited). Inference: "
                     "plans the run as sub-batches with each group's weights fetched from host "
                     "memory, the sub-batch size the largest divisor of batch= that fits; "
                     "training: chooses sub-batch size, count and live blocks; generation: "
                     "chooses the sub-batch size, and keeps the weights and KV caches on the "
                     "device when they fit (unless weights-on-device= / kv-cache-on-device= force "
                     "their placement)"),
      llvm::cl::init("")};
  PipelineOption<std::string> hostMemory{
      *this, "host-memory",
      llvm::cl::desc("Host memory budget per rank, e.g. 512GiB (none: unlimited), for the plan "
                     "(generation: chooses the number of sub-batches when batch= does not)"),
      llvm::cl::init("")};
};

/// What inference and training plan with (sl-plan): sequence length, live blocks, mode, and the
/// machine the predictions are for.
template <typename Derived> struct PlanningOptions : public BatchingOptions<Derived> {
  PipelineOption<int64_t> seq{*this, "seq",
                              llvm::cl::desc("Sequence length, for models with one"),
                              llvm::cl::init(0)};
  PipelineOption<int64_t> liveBlocks{
      *this, "live-blocks",
      llvm::cl::desc("Blocks whose weights are on the device together (0: the plan chooses)"),
      llvm::cl::init(0)};
  PipelineOption<std::string> mode{
      *this, "mode",
      llvm::cl::desc("speedloader (each group's weights fetched once for every sub-batch; the "
                     "default), or canonical (once per sub-batch: the ZeRO-3 offload baseline); "
                     "for inference, giving it plans the run"),
      llvm::cl::init("")};
  PipelineOption<std::string> target{
      *this, "target",
      llvm::cl::desc("The machine to plan for, whose rates are the defaults of link-gbps, tflops "
                     "and (training) optimizer-gparams: cpu (the default) or h200 (measured), "
                     "h100-sxm, h100-pcie or a100 (datasheet peaks scaled by the H200's measured "
                     "fractions), or FILE.json, a profile `sl-run --calibrate FILE.json` wrote"),
      llvm::cl::init("")};
  PipelineOption<double> linkGBps{*this, "link-gbps",
                                  llvm::cl::desc("Host<->device GB/s per direction, for the plan "
                                                 "(0: the target's; cpu's is 25)"),
                                  llvm::cl::init(0)};
  PipelineOption<double> tflops{*this, "tflops",
                                llvm::cl::desc("Sustained TFLOP/s, for the plan (0: the target's; "
                                               "cpu's is 0.2)"),
                                llvm::cl::init(0)};
  PipelineOption<bool> planReport{*this, "plan-report",
                                  llvm::cl::desc("Print sl-plan's report to standard output (for "
                                                 "inference, plans the run)"),
                                  llvm::cl::init(false)};
};

/// `--sl-infer`'s options.
struct InferPipelineOptions : public PlanningOptions<InferPipelineOptions> {
  Option<int64_t> past{*this, "past",
                       llvm::cl::desc("Past length of past_key_values inputs given at run time "
                                      "(0: the past is bound empty, sl-bind-inputs)"),
                       llvm::cl::init(0)};
  ListOption<std::string> bindInputs{
      *this, "bind-inputs",
      llvm::cl::desc("Inputs the model gets from the pipeline instead of the run: "
                     "attention_mask (all ones), position_ids (0..seq-1); without padding, "
                     "binding both lets attention fuse")};
  Option<int64_t> world{
      *this, "world",
      llvm::cl::desc("Ranks (sl-run under mpirun): each runs batch= sequences of its own, and "
                     "each layer's weights are sharded over them (ZeRO-Inference: every rank "
                     "keeps 1/world of them and all-gathers a group before its pass); plans the "
                     "run"),
      llvm::cl::init(1)};
  Option<bool> step{*this, "step",
                    llvm::cl::desc("Write the explicit @infer_step with its streams, events and "
                                   "memory (false: stop at the bound, simplified @forward, for "
                                   "other passes to take on; unplanned runs only)"),
                    llvm::cl::init(true)};

  /// Whether the options ask for a planned run (an explicit step of sub-batches, whose weights
  /// stay in host memory).
  bool planned() const {
    return !deviceMemory.empty() || !hostMemory.empty() || subBatchSize > 0 || numSubBatches > 0 ||
           liveBlocks > 0 || !mode.empty() || planReport || world != 1;
  }
};

/// `--sl-train`'s options.
struct TrainPipelineOptions : public PlanningOptions<TrainPipelineOptions> {
  Option<int64_t> world{*this, "world", llvm::cl::desc("Ranks (ZeRO-3 sharding)"),
                        llvm::cl::init(1)};
  Option<double> optimizerGParams{
      *this, "optimizer-gparams",
      llvm::cl::desc("The host's AdamW in 10^9 parameters/s, for the plan (0: the target's; "
                     "cpu does not model it)"),
      llvm::cl::init(0)};
};

/// `--sl-generate`'s options.
struct GeneratePipelineOptions : public BatchingOptions<GeneratePipelineOptions> {
  Option<int64_t> maxPromptLen{*this, "max-prompt-len",
                               llvm::cl::desc("Longest prompt, in tokens"), llvm::cl::init(0)};
  Option<int64_t> maxNewTokens{*this, "max-new-tokens",
                               llvm::cl::desc("Most tokens generated per prompt"),
                               llvm::cl::init(0)};
  Option<Placement> weightsOnDevice{
      *this, "weights-on-device",
      llvm::cl::desc("true: keep the weights on the device from prefill to the last decoding "
                     "step; false: fetch them every program run; auto: device-memory= chooses "
                     "(with it, a forced placement that does not fit is an error)"),
      llvm::cl::init(Placement::kAuto), placementValues()};
  Option<Placement> kvCacheOnDevice{
      *this, "kv-cache-on-device",
      llvm::cl::desc("true: keep every KV cache chunk on the device; false: move each chunk from "
                     "the host pool every program run; auto: device-memory= chooses (with it, a "
                     "forced placement that does not fit is an error)"),
      llvm::cl::init(Placement::kAuto), placementValues()};
};

/// `--sl-generate`: an imported language model to an explicit generation step of two programs
/// (prefill, decode) over N sub-batches with host KV caches.
void buildGeneratePipeline(mlir::OpPassManager &pm, const GeneratePipelineOptions &options);

/// `--sl-train`: an imported language model to an explicit training step (sub-batch loops,
/// transfers, streams, events, a static memory plan) that computes the loss and every
/// parameter's gradient, ready to be written as a training schedule; planned by sl-plan
/// (`sl.plan`) and bound at the planned sub-batch size.
void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options);

/// The part of `--sl-train` from a module with its loss appended to stages with backward
/// functions: bind shapes (batch dimensions to `batch`, or when 0 to the module's sl.bind_shapes
/// or sl.plan's sub-batch size), fold, fuse, convert to `precision` (f32: unchanged), partition,
/// differentiate (so a bf16 backward is derived from the bf16 forward). sl-plan measures copies
/// of the module through it: `--sl-train` gives it, as text, as sl-plan's stage-pipeline.
void buildStagePipeline(mlir::OpPassManager &pm, int64_t batch, int64_t seq, bool fuse,
                        llvm::StringRef precision);

/// An imported model to a static, simplified @forward (what training's and generation's copies
/// are compiled with); with a budget or any other planning option, to a planned explicit step of
/// sub-batches (@infer_step) whose weights stay in host memory.
void buildInferPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options);

/// `--sl-infer`: buildInferPipeline, and without planning options the @forward as one explicit
/// step (sl-explicit-forward: every parameter resident) with its streams, events and memory.
void buildInferStepPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options);

/// A function that is not a step as one explicit inference step (sl-explicit-forward with
/// entry=`entry`: its arguments the step's inputs, every parameter resident) with its streams,
/// events and memory: what `sl-opt -o FILE.slsched` does with a bound @forward or the function
/// --schedule-entry names, so that every schedule is emitted from an explicit step.
void buildEntryStepPipeline(mlir::OpPassManager &pm, llvm::StringRef entry);

void registerPipelines();

} // namespace sl

#endif // SL_PIPELINES_PIPELINES_H
