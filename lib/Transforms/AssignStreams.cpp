//===- AssignStreams.cpp - sl-assign-streams: a stream for every kernel of an explicit step -----===//

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace sl {
#define GEN_PASS_DEF_ASSIGNSTREAMSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

struct AssignStreamsPass : public impl::AssignStreamsPassBase<AssignStreamsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isExplicitStep(func))
      return;
    Builder builder(func.getContext());
    for (Operation &op : func.getBody().front()) {
      if (auto stream = streamOf(&op))
        op.setAttr(kStreamAttr, StreamKindAttr::get(func.getContext(), *stream));
      else
        op.removeAttr(kStreamAttr);
    }
  }
};

} // namespace
} // namespace sl
