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

void buildTrainPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options) {
  pm.addPass(createAppendLossPass());
  buildInferPipeline(pm, options);
  pm.addPass(createPartitionLayersPass());
  pm.addPass(createAutodiffPass());
  pm.addPass(createAssembleTrainStepPass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
}

void registerPipelines() {
  mlir::PassPipelineRegistration<InferPipelineOptions>(
      "sl-train",
      "Compile an imported language model for training: append the loss, bind batch/seq, fold, "
      "fuse (fuse=false to skip), partition into stages, differentiate each stage, and assemble "
      "the training step (loss and every parameter's gradient). With `-o FILE.slsched` sl-opt "
      "then writes the training schedule that `sl-run --data ... --steps N` runs.",
      buildTrainPipeline);
  mlir::PassPipelineRegistration<InferPipelineOptions>(
      "sl-infer",
      "Compile an imported model for inference: bind batch/seq sizes, fold shape arithmetic, "
      "fuse transformer blocks (fuse=false to skip), simplify. With "
      "`-o FILE.slsched` sl-opt then writes the inference schedule.",
      buildInferPipeline);
}

} // namespace sl
