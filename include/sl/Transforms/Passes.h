//===- Passes.h - passes of the sl dialect -----------------------------------------------------===//
#ifndef SL_TRANSFORMS_PASSES_H
#define SL_TRANSFORMS_PASSES_H

#include "sl/Transforms/Placement.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <functional>

namespace sl {

#define GEN_PASS_DECL
#include "sl/SLPasses.h.inc"

/// Adds to a pass manager the passes that take a module as sl-plan sees it inside --sl-train
/// (loss appended, shapes not bound) to stages with backward functions, binding the batch
/// dimensions to `subBatchSize`.
using StagePipelineBuilder = std::function<void(mlir::OpPassManager &, int64_t subBatchSize)>;

/// sl-plan that, on a module not yet partitioned into stages, compiles two copies of it with
/// `buildStages` and plans from them (see the pass description).
std::unique_ptr<mlir::Pass> createPlanPass(const PlanPassOptions &options,
                                           StagePipelineBuilder buildStages);

/// Builds the pipeline that compiles a copy of an imported model at [batch, seq]: bind, fold,
/// fuse and, with `partition`, partition into stages.
using GenerationStagesBuilder =
    std::function<void(mlir::OpPassManager &, int64_t batch, int64_t seq, bool partition)>;

std::unique_ptr<mlir::Pass> createSplitGenerationPass(const SplitGenerationPassOptions &options,
                                                      GenerationStagesBuilder buildStages);

#define GEN_PASS_REGISTRATION
#include "sl/SLPasses.h.inc"

} // namespace sl

#endif // SL_TRANSFORMS_PASSES_H
