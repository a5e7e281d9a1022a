//===- Pipelines.cpp - named sl-opt pipelines from ONNX to a schedule --------------------------===//

#include "sl/Pipelines/Pipelines.h"

#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace sl {

void buildInferPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options) {
  pm.addPass(createBindShapesPass(BindShapesPassOptions{options.batch, options.seq}));
  pm.addPass(mlir::createCanonicalizerPass());
  if (options.fuse)
    pm.addNestedPass<mlir::func::FuncOp>(createFuseTransformerPass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}

void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options) {
  // The IR computes one sub-batch: shapes are bound at the sub-batch size.
  int64_t n = options.numSubBatches > 0 ? int64_t(options.numSubBatches) : 1;
  int64_t subBatch = options.subBatchSize;
  if (subBatch == 0 && options.batch > 0)
    subBatch = options.batch / n;
  InferPipelineOptions bind;
  bind.batch = subBatch;
  bind.seq = options.seq;
  bind.fuse = options.fuse;
  pm.addPass(createAppendLossPass());
  buildInferPipeline(pm, bind);
  pm.addPass(createPartitionLayersPass());
  pm.addPass(createAutodiffPass());
  pm.addPass(createScheduleSubBatchesPass(ScheduleSubBatchesPassOptions{
      options.mode, options.numSubBatches, options.liveBlocks, options.batch}));
  // CSE merges each stage's recomputation in backward with its own backward function's.
  pm.addPass(mlir::createCSEPass());
  pm.addNestedPass<mlir::func::FuncOp>(createAssignStreamsPass());
  pm.addNestedPass<mlir::func::FuncOp>(createAllocatePass());
  pm.addNestedPass<mlir::func::FuncOp>(createInsertEventsPass());
}



void registerPipelines() {
  mlir::PassPipelineRegistration<TrainPipelineOptions>(
      "sl-train",
      "Compile an imported language model for training: append the loss, bind seq and the "
      "sub-batch size, fold, fuse (fuse=false to skip), partition into stages, differentiate "
      "each stage, and write the explicit SpeedLoader step (num-sub-batches, live-blocks, "
      "mode=speedloader|canonical) with streams, events and a static memory plan. With `-o "
      "FILE.slsched` sl-opt then writes the training schedule that `sl-run --data ... --steps N` "
      "runs.",
      buildTrainPipeline);
  mlir::PassPipelineRegistration<InferPipelineOptions>(
      "sl-infer",
      "Compile an imported model for inference: bind batch/seq sizes, fold shape arithmetic, "
      "fuse transformer blocks (fuse=false to skip), simplify. With "
      "`-o FILE.slsched` sl-opt then writes the inference schedule.",
      buildInferPipeline);
}

} // namespace sl
