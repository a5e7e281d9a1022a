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
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/AnalysisManager.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <utility>

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

/// The base of a pass that runs pipelines on copies of its module: `Base` is the pass's generated
/// base class, and the pass lists its pipeline options (pipelineOptions: option name and text, in
/// order). The texts are checked where the command line gives them (initializeOptions), parsed
/// however the options were given (initialize: a pipeline builds the pass from its options
/// struct), and their passes' dialects are the pass's dependent dialects too.
template <typename Base>
class CopyPipelinePass : public Base {
public:
  using Base::Base;

  mlir::LogicalResult initializeOptions(
      llvm::StringRef options,
      llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> errorHandler) override {
    if (mlir::failed(Base::initializeOptions(options, errorHandler)))
      return mlir::failure();
    std::string error;
    for (auto [option, text] : pipelineOptions())
      if (mlir::failed(parseCopyPipeline(this->getArgument(), option, text, error)))
        return errorHandler(error);
    return mlir::success();
  }

  mlir::LogicalResult initialize(mlir::MLIRContext *context) override {
    pipelines.clear();
    std::string error;
    for (auto [option, text] : pipelineOptions()) {
      mlir::FailureOr<mlir::OpPassManager> pipeline =
          parseCopyPipeline(this->getArgument(), option, text, error);
      if (mlir::failed(pipeline))
        return mlir::emitError(mlir::UnknownLoc::get(context)) << error;
      pipelines.push_back(std::move(*pipeline));
    }
    return mlir::success();
  }

  void getDependentDialects(mlir::DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    for (auto [option, text] : pipelineOptions())
      addCopyPipelineDialects(text, registry);
  }

protected:
  /// The pass's pipeline options: each one's name and the pipeline it gives.
  virtual llvm::SmallVector<std::pair<llvm::StringRef, std::string>, 2>
  pipelineOptions() const = 0;

  /// Runs the pipeline of pipelineOptions()[index] on `copy`, nested in the module meanwhile.
  mlir::LogicalResult runOnCopy(unsigned index, mlir::ModuleOp copy) {
    return sl::runOnCopy(
        llvm::cast<mlir::ModuleOp>(this->getOperation()), copy, pipelines[index],
        [this](mlir::OpPassManager &pm, mlir::Operation *op) { return this->runPipeline(pm, op); },
        this->getAnalysisManager());
  }

private:
  llvm::SmallVector<mlir::OpPassManager, 2> pipelines;
};

} // namespace sl

#endif // SL_TRANSFORMS_COPYPIPELINE_H
