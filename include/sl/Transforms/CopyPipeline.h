//===- CopyPipeline.h - the pipelines a pass runs on copies of its module -----------------------===//
//
// sl-plan and sl-split-generation measure a model by compiling copies of it. The pipelines they
// run on the copies are textual pass options parsed into OpPassManagers (IREE's
// FixedPointIterator idiom) and run with Pass::runPipeline, so that IR printing, timing and crash
// reproducers see every pass they run, and each of the two passes runs alone in sl-opt. What
// differs from copy to copy (the sizes it is bound at, the plan it is scheduled for) goes on the
// copy as attributes (sl.bind_shapes, sl.plan, sl.generation), not into the pipeline.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_TRANSFORMS_COPYPIPELINE_H
#define SL_TRANSFORMS_COPYPIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/AnalysisManager.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace sl {

/// The pipeline `text` (e.g. `builtin.module(canonicalize, cse)`), which must be anchored on
/// builtin.module; else `error` says why not, naming the pass and the option.
mlir::FailureOr<mlir::OpPassManager> parseCopyPipeline(llvm::StringRef pass,
                                                       llvm::StringRef option,
                                                       llvm::StringRef text, std::string &error);

/// Adds to `registry` the dialects the passes of pipeline `text` need (none if it does not
/// parse: the pass reports that when it initializes).
void addCopyPipelineDialects(llvm::StringRef text, mlir::DialectRegistry &registry);

/// Runs `pipeline` on `copy` with `runPipeline` (the calling pass's Pass::runPipeline, which
/// only runs on operations inside the pass's own): `copy` lies at the end of `module` while the
/// pipeline runs and is taken out again, and `analyses` (the pass's) forgets what the pipeline
/// cached about it, since the copy is destroyed while the pass still runs.
mlir::LogicalResult
runOnCopy(mlir::ModuleOp module, mlir::ModuleOp copy, mlir::OpPassManager &pipeline,
          llvm::function_ref<mlir::LogicalResult(mlir::OpPassManager &, mlir::Operation *)>
              runPipeline,
          mlir::AnalysisManager analyses);

} // namespace sl

#endif // SL_TRANSFORMS_COPYPIPELINE_H
