//===- Pipelines.h - named sl-opt pipelines from ONNX to a schedule ----------------------------===//
#ifndef SL_PIPELINES_PIPELINES_H
#define SL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace sl {

struct InferPipelineOptions : public mlir::PassPipelineOptions<InferPipelineOptions> {
  Option<int64_t> batch{*this, "batch", llvm::cl::desc("Batch size (sequences per run)"),
                        llvm::cl::init(0)};
  Option<int64_t> seq{*this, "seq", llvm::cl::desc("Sequence length, for models with one"),
                      llvm::cl::init(0)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse transformer blocks into fused ops (sl-fuse-transformer)"),
                    llvm::cl::init(true)};
};

/// `--sl-train`: an imported language model to a training step (loss and every parameter's
/// gradient) ready to be written as a training schedule.
void buildTrainPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options);

/// `--sl-infer`: an imported model to a static, simplified forward program ready to be written
/// as an inference schedule.
void buildInferPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options);

void registerPipelines();

} // namespace sl

#endif // SL_PIPELINES_PIPELINES_H
