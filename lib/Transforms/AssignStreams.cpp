//===- AssignStreams.cpp - sl-assign-streams: a stream for every kernel of an explicit step -----===//

#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace sl {
#define GEN_PASS_DEF_ASSIGNSTREAMSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

/// The stream an op's kernel runs on, or none for ops that are no kernel.
std::optional<StreamKind> streamOf(Operation *op) {
  if (llvm::isa<ParamOp, ParamShardOp, ConstantOp, SubBatchOp, ReshapeOp, ViewOp, ProgramOp,
                EmptyOp, func::ReturnOp>(op))
    return std::nullopt;
  if (llvm::isa<FetchParamsOp, PrefetchOp>(op))
    return StreamKind::h2d;
  if (llvm::isa<OffloadOp>(op))
    return StreamKind::d2h;
  if (llvm::isa<AllGatherOp, ReduceScatterOp>(op))
    return StreamKind::collective;
  if (llvm::isa<OptimizerStepOp>(op) ||
      (llvm::isa<AccumulateOp, KvWriteOp, ConcatOp>(op) &&
       memorySpaceOf(op->getResult(0)) == MemorySpace::Host))
    return StreamKind::host;
  return StreamKind::compute;
}

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
