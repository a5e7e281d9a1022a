//===- Allocate.cpp - sl-allocate: static offsets in the device arena and the host pool ---------===//
//
// Values are placed in issue order by best fit over the free ranges of their memory space and
// freed after their last reader: the device arena and the host pool alike. Inputs, parameters and
// constants keep their host slots for the whole step (the runtime writes them before it starts).
// Every slot is one contiguous range, so a (stage, sub-batch) activation moves in one copy.
// Views share their source's bytes; a dying accumulator is overwritten in place. The layout is
// layoutStep
// (sl/Analysis/StepMemory.h), which sl-plan runs too to predict the arena and the pool.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/StepMemory.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace sl {
#define GEN_PASS_DEF_ALLOCATEPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

struct AllocatePass : public impl::AllocatePassBase<AllocatePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isExplicitStep(func))
      return;
    Block &body = func.getBody().front();
    StepLayout layout =
        layoutStep(body, [](Value v) { return storageBytes(v.getType()); });

    Builder builder(func.getContext());
    for (BlockArgument arg : func.getArguments())
      func.setArgAttr(arg.getArgNumber(), kOffsetAttr,
                      builder.getI64IntegerAttr(int64_t(layout.offsets.lookup(arg))));
    for (Operation &op : body) {
      // Parameters whose bytes are in their group's shard have no slot.
      if (op.getNumResults() == 0 || !layout.offsets.count(op.getResult(0)))
        continue;
      SmallVector<int64_t> resultOffsets;
      for (Value result : op.getResults())
        resultOffsets.push_back(int64_t(layout.offsets.lookup(result)));
      op.setAttr(kOffsetsAttr, builder.getDenseI64ArrayAttr(resultOffsets));
    }
    func->setAttr(kDeviceArenaBytesAttr,
                  builder.getI64IntegerAttr(int64_t(layout.deviceArenaBytes)));
    func->setAttr(kHostPoolBytesAttr, builder.getI64IntegerAttr(int64_t(layout.hostPoolBytes)));
  }
};

} // namespace
} // namespace sl
