//===- CopyPipeline.cpp - the pipelines a pass runs on copies of its module ---------------------===//

#include "sl/Transforms/CopyPipeline.h"

#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace sl {

FailureOr<OpPassManager> parseCopyPipeline(llvm::StringRef pass, llvm::StringRef option,
                                           llvm::StringRef text, std::string &error) {
  std::string why;
  llvm::raw_string_ostream os(why);
  FailureOr<OpPassManager> pipeline = parsePassPipeline(text, os);
  if (succeeded(pipeline) && pipeline->getOpAnchorName() != ModuleOp::getOperationName())
    os << "it runs on " << pipeline->getOpAnchorName() << ", not on a copy of the module";
  if (succeeded(pipeline) && why.empty())
    return pipeline;
  error = (pass + ": " + option + "='" + text +
           "' is not a pipeline on builtin.module (e.g. 'builtin.module(canonicalize, cse)'): " +
           llvm::StringRef(why).trim())
              .str();
  return failure();
}

void addCopyPipelineDialects(llvm::StringRef text, DialectRegistry &registry) {
  FailureOr<OpPassManager> pipeline = parsePassPipeline(text, llvm::nulls());
  if (succeeded(pipeline))
    pipeline->getDependentDialects(registry);
}

LogicalResult
runOnCopy(ModuleOp module, ModuleOp copy, OpPassManager &pipeline,
          llvm::function_ref<LogicalResult(OpPassManager &, Operation *)> runPipeline,
          AnalysisManager analyses) {
  module.push_back(copy);
  LogicalResult result = runPipeline(pipeline, copy);
  copy->remove();
  // The analyses are keyed by operation: a later copy at the same address must not find these.
  analyses.clear();
  return result;
}

} // namespace sl
