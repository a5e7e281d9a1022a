//===- Pipelines.cpp - named sl-opt pipelines from ONNX to a schedule --------------------------===//

#include "sl/Pipelines/Pipelines.h"

#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace sl {

namespace {
/// The inputs training and generation feed themselves: the model is left with input_ids.
void addBindOwnedInputs(mlir::OpPassManager &pm) {
  static const std::string owned[] = {"attention_mask", "position_ids", "past_key_values"};
  BindInputsPassOptions bind;
  bind.inputs = owned;
  bind.onlyInputIds = true;
  pm.addPass(createBindInputsPass(bind));
}
} // namespace

namespace {
/// Binding at `batch` (0: sl.plan's sub-batch size, else input_ids' own), folding, fusion,
/// precision, and the transposes folded into GEMM flags and attention's layout.
void addForwardPasses(mlir::OpPassManager &pm, int64_t batch, int64_t seq, int64_t past,
                      bool fuse, llvm::StringRef precision) {
  pm.addPass(createBindShapesPass(BindShapesPassOptions{batch, seq, past}));
  pm.addPass(mlir::createCanonicalizerPass());
  if (fuse)
    pm.addNestedPass<mlir::func::FuncOp>(createFuseTransformerPass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  // After folding: rotary tables and masks are computed in f32, only stored in bf16.
  if (precision != "f32")
    pm.addPass(createConvertPrecisionPass(ConvertPrecisionPassOptions{precision.str()}));
  // After fusion (sl-fuse-transformer recognises q @ k^T by its transpose): weights and other
  // matrices read transposed become GEMM flags.
  pm.addNestedPass<mlir::func::FuncOp>(createFoldMatmulTransposesPass());
  // Attention reads the projections' [B, S, H, D] order: the head permutations go too.
  pm.addNestedPass<mlir::func::FuncOp>(createFoldHeadTransposesPass());
}

/// The sizes and budgets every pipeline gives its planning pass (sl-plan, sl-split-generation).
template <typename PassOptions, typename PipelineOptions>
void copyBatching(PassOptions &into, const BatchingOptions<PipelineOptions> &options) {
  into.batch = options.batch;
  into.subBatchSize = options.subBatchSize;
  into.numSubBatches = options.numSubBatches;
  into.deviceMemory = options.deviceMemory;
  into.hostMemory = options.hostMemory;
}

/// The sl-plan options that inference and training share, from either pipeline's options.
template <typename PipelineOptions>
PlanPassOptions planOptionsOf(const PlanningOptions<PipelineOptions> &options) {
  PlanPassOptions plan;
  copyBatching(plan, options);
  plan.liveBlocks = options.liveBlocks;
  plan.mode = options.mode.empty() ? std::string("speedloader") : std::string(options.mode);
  plan.target = options.target;
  plan.precision = options.precision;
  plan.linkGBps = options.linkGBps;
  plan.tflops = options.tflops;
  plan.report = options.planReport;
  return plan;
}

/// The textual form of the pipeline on builtin.module that `build` adds passes to: how a pipeline
/// gives sl-plan and sl-split-generation the passes they run on copies of the module.
std::string pipelineText(llvm::function_ref<void(mlir::OpPassManager &)> build) {
  mlir::OpPassManager pm(mlir::ModuleOp::getOperationName());
  build(pm);
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  return text;
}

/// The explicit step's streams, static memory plan and events.
void addStepLowering(mlir::OpPassManager &pm) {
  pm.addNestedPass<mlir::func::FuncOp>(createAssignStreamsPass());
  pm.addNestedPass<mlir::func::FuncOp>(createAllocatePass());
  pm.addNestedPass<mlir::func::FuncOp>(createInsertEventsPass());
}
} // namespace

void buildInferPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options) {
  // The options struct holds a reference: the names live here until the pass has copied them.
  std::vector<std::string> inputs(options.bindInputs.begin(), options.bindInputs.end());
  if (options.past == 0)
    inputs.push_back("past_key_values");
  BindInputsPassOptions bind;
  bind.inputs = inputs;
  pm.addPass(createBindInputsPass(bind));
  if (!options.planned()) {
    addForwardPasses(pm, options.batch, options.seq, options.past, options.fuse,
                     options.precision);
    return;
  }
  // Planned: sl-plan measures forward-only copies partitioned into stages, chooses the
  // sub-batch size, count and live blocks, and the module is bound at the chosen size.
  PlanPassOptions plan = planOptionsOf(options);
  plan.forwardOnly = true;
  plan.world = options.world;
  int64_t seq = options.seq, past = options.past;
  bool fuse = options.fuse;
  std::string precision = options.precision;
  // The copies are bound at the probes' sizes by their sl.bind_shapes (batch 0 here).
  plan.stagePipeline = pipelineText([&](mlir::OpPassManager &stages) {
    addForwardPasses(stages, /*batch=*/0, seq, past, fuse, precision);
    stages.addPass(createPartitionLayersPass());
  });
  pm.addPass(createPlanPass(plan));
  addForwardPasses(pm, /*batch=*/0, seq, past, fuse, precision);
  pm.addPass(createPartitionLayersPass());
  ScheduleSubBatchesPassOptions step;
  step.batch = options.batch;
  step.forwardOnly = true;
  pm.addPass(createScheduleSubBatchesPass(step));
  // With world > 1: each rank keeps 1/world of the weights and all-gathers a group's.
  pm.addPass(createShardParametersPass());
  pm.addPass(mlir::createCSEPass());
  addStepLowering(pm);
}

void buildInferStepPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options) {
  buildInferPipeline(pm, options);
  if (options.planned() || !options.step)
    return;
  // Without a budget: every parameter resident, one sub-batch, buffers reused by liveness.
  pm.addPass(createExplicitForwardPass());
  pm.addPass(mlir::createCSEPass());
  addStepLowering(pm);
}

void buildStagePipeline(mlir::OpPassManager &pm, int64_t batch, int64_t seq, bool fuse,
                        llvm::StringRef precision) {
  InferPipelineOptions infer;
  infer.batch = batch;
  infer.seq = seq;
  infer.fuse = fuse;
  infer.precision = precision.str();
  buildInferPipeline(pm, infer);
  pm.addPass(createPartitionLayersPass());
  pm.addPass(createAutodiffPass());
  // The gradient rules spell their transposes out (of weights, activations and output
  // gradients); they fold into the products before scheduling copies them per sub-batch.
  pm.addNestedPass<mlir::func::FuncOp>(createFoldMatmulTransposesPass());
  pm.addNestedPass<mlir::func::FuncOp>(createFoldHeadTransposesPass());
}

void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options) {
  addBindOwnedInputs(pm);
  pm.addPass(createCheckSharedParamsPass());
  pm.addPass(createAppendLossPass());
  // The plan comes first: the sub-batch size it chooses is the size the shapes are bound at.
  PlanPassOptions plan = planOptionsOf(options);
  plan.world = options.world;
  plan.optimizerGParams = options.optimizerGParams;
  int64_t seq = options.seq;
  bool fuse = options.fuse;
  std::string precision = options.precision;
  // The copies are bound at the probes' sizes by their sl.bind_shapes (batch 0 here).
  plan.stagePipeline = pipelineText([&](mlir::OpPassManager &stages) {
    buildStagePipeline(stages, /*batch=*/0, seq, fuse, precision);
  });
  pm.addPass(createPlanPass(plan));
  buildStagePipeline(pm, /*batch=*/0, seq, fuse, precision);
  // N, K and the mode come from sl.plan, which holds the given values or the chosen ones.
  pm.addPass(createScheduleSubBatchesPass());
  pm.addPass(createShardParametersPass());
  // CSE merges each stage's recomputation in backward with its own backward function's.
  pm.addPass(mlir::createCSEPass());
  addStepLowering(pm);
}

void buildGeneratePipeline(mlir::OpPassManager &pm, const GeneratePipelineOptions &options) {
  SplitGenerationPassOptions split;
  copyBatching(split, options);
  split.maxPromptLen = options.maxPromptLen;
  split.maxNewTokens = options.maxNewTokens;
  split.weightsOnDevice = options.weightsOnDevice;
  split.kvCacheOnDevice = options.kvCacheOnDevice;
  // The copies are bound at [1, C], [b, P] and [b, 1] by their sl.bind_shapes.
  split.stagePipeline = pipelineText([&](mlir::OpPassManager &copy) {
    InferPipelineOptions infer;
    infer.fuse = options.fuse;
    infer.precision = options.precision;
    buildInferPipeline(copy, infer);
    copy.addPass(createPartitionLayersPass());
  });
  addBindOwnedInputs(pm);
  pm.addPass(createSplitGenerationPass(split));
  pm.addPass(createScheduleGenerationPass());
  pm.addPass(mlir::createCSEPass());
  addStepLowering(pm);
}

void buildEntryStepPipeline(mlir::OpPassManager &pm, llvm::StringRef entry) {
  pm.addPass(createExplicitForwardPass(ExplicitForwardPassOptions{entry.str()}));
  addStepLowering(pm);
}

void registerPipelines() {
  mlir::PassPipelineRegistration<GeneratePipelineOptions>(
      "sl-generate",
      "Compile an imported language model for generation: bind attention_mask, position_ids "
      "and an empty past (sl-bind-inputs), then two copies bound at the prompt "
      "length and at one token, fused, with transposed matrices read through GEMM flags, and "
      "partitioned into stages (sl-split-generation), then "
      "the explicit step of a prefill and a decode program over num-sub-batches sub-batches, "
      "each stage's weights fetched once per program run for every sub-batch, each "
      "(sub-batch, layer) KV cache chunk prefetched from the host pool and only the new keys and "
      "values written back, or kept on the device when device-memory= leaves room "
      "(sl-schedule-generation), with its streams, events and static memory "
      "plan. Needs max-prompt-len= and max-new-tokens=; device-memory= and host-memory= choose "
      "the sub-batch size and count; weights-on-device= and kv-cache-on-device= (true or "
      "false) force where the weights and the KV caches live, and the plan honours them. "
      "With `-o FILE.slsched` sl-opt writes the schedule that "
      "`sl-run FILE.slsched --prompts P.jsonl --output OUT.jsonl` runs.",
      buildGeneratePipeline);

  mlir::PassPipelineRegistration<TrainPipelineOptions>(
      "sl-train",
      "Compile an imported language model for training: bind attention_mask, position_ids and "
      "an empty past (sl-bind-inputs), warn about parameters that look like "
      "the exporter's merging of equal initializers rather than tied weights "
      "(sl-check-shared-params), append the loss, plan sub-batch size, "
      "sub-batch count and live blocks (sl-plan: fixed by batch=, sub-batch-size=, "
      "num-sub-batches=, live-blocks=, or chosen for device-memory= and host-memory=), bind "
      "shapes at the sub-batch size, fold, fuse (fuse=false to skip), partition into stages, "
      "differentiate each stage, fold transposes into GEMM flags (sl-fold-matmul-transposes) "
      "and the attention heads' permutations into attention's layout "
      "(sl-fold-head-transposes), "
      "and write the explicit SpeedLoader step (mode=speedloader, or "
      "mode=canonical for the ZeRO-style baseline) with its streams, events and static memory "
      "plan. precision=bf16 stores the stages' tensors in bf16 (mixed precision: f32 loss, "
      "gradients accumulated in f32, f32 master weights in the runtime). With `-o FILE.slsched` sl-opt then writes the training schedule that "
      "`sl-run --data ... --steps N` runs.",
      buildTrainPipeline);
  mlir::PassPipelineRegistration<InferPipelineOptions>(
      "sl-infer",
      "Compile an imported model for inference: bind an empty past (past_key_values.*, unless "
      "past=N) and the inputs bind-inputs= names (attention_mask, position_ids), bind batch/seq "
      "sizes (found from input_ids' dimensions), fold shape arithmetic, "
      "fuse transformer blocks (fuse=false to skip), simplify, and read transposed matrices "
      "through GEMM transpose flags (sl-fold-matmul-transposes) and let attention read and "
      "write the projections' [batch, seq, heads, dim] order (sl-fold-head-transposes). With "
      "device-memory= (or host-memory=, sub-batch-size=, num-sub-batches=, live-blocks=, "
      "mode=, plan-report) the run is planned as training is: sl-plan chooses the sub-batch "
      "size (a divisor of batch=), count and live blocks for the budgets, and "
      "sl-schedule-subbatches writes @infer_step, each group's weights fetched from host "
      "memory once for all sub-batches (mode=speedloader) or once per sub-batch "
      "(mode=canonical), boundary activations offloaded between groups and the outputs "
      "joined on the host. Without them, sl-explicit-forward writes @infer_step with every "
      "parameter fetched to the device once and every input prefetched, whose device "
      "buffers sl-allocate reuses as values die. With "
      "`-o FILE.slsched` sl-opt then writes the inference schedule.",
      buildInferStepPipeline);
}

} // namespace sl
