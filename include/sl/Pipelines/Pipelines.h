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

struct TrainPipelineOptions : public mlir::PassPipelineOptions<TrainPipelineOptions> {
  Option<int64_t> batch{*this, "batch",
                        llvm::cl::desc("Sequences per step (sub-batch-size x num-sub-batches)"),
                        llvm::cl::init(0)};
  Option<int64_t> seq{*this, "seq", llvm::cl::desc("Sequence length"), llvm::cl::init(0)};
  Option<bool> fuse{*this, "fuse",
                    llvm::cl::desc("Fuse transformer blocks into fused ops (sl-fuse-transformer)"),
                    llvm::cl::init(true)};
  Option<int64_t> subBatchSize{*this, "sub-batch-size",
                               llvm::cl::desc("Sequences per sub-batch (default: batch / N)"),
                               llvm::cl::init(0)};
  Option<int64_t> numSubBatches{*this, "num-sub-batches",
                                llvm::cl::desc("Sub-batches per step, N (default 1)"),
                                llvm::cl::init(0)};
  Option<int64_t> liveBlocks{*this, "live-blocks",
                             llvm::cl::desc("Blocks whose parameters are on the device together, "
                                            "K (default 1)"),
                             llvm::cl::init(0)};
  Option<std::string> mode{*this, "mode",
                           llvm::cl::desc("speedloader (default) or canonical (the ZeRO-style "
                                          "baseline)"),
                           llvm::cl::init("")};
};

/// `--sl-train`: an imported language model to an explicit training step (sub-batch loops,
/// transfers, streams, events, a memory plan) that computes the loss and every parameter's
/// gradient, ready to be written as a training schedule.
void buildTrainPipeline(mlir::OpPassManager &pm, const TrainPipelineOptions &options);

/// `--sl-infer`: an imported model to a static, simplified forward program ready to be written
/// as an inference schedule.
void buildInferPipeline(mlir::OpPassManager &pm, const InferPipelineOptions &options);

void registerPipelines();

} // namespace sl

#endif // SL_PIPELINES_PIPELINES_H
