//===- ExplicitStep.cpp - building blocks of the passes that write explicit steps --------------===//

#include "sl/Transforms/ExplicitStep.h"

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/MemorySpaces.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace sl {

void removeUnusedFetches(Block &body, OpBuilder &builder) {
  OpBuilder::InsertionGuard guard(builder);
  for (auto fetch : llvm::make_early_inc_range(body.getOps<FetchParamsOp>())) {
    SmallVector<Value> used;
    SmallVector<OpResult> live;
    for (auto [param, result] : llvm::zip(fetch.getParams(), fetch.getResults()))
      if (!result.use_empty()) {
        used.push_back(param);
        live.push_back(result);
      }
    if (used.size() == fetch.getNumResults())
      continue;
    if (!used.empty()) {
      builder.setInsertionPoint(fetch);
      auto pruned = builder.create<FetchParamsOp>(fetch.getLoc(), ValueRange(used).getTypes(),
                                                  used, fetch.getGroup());
      for (auto [from, to] : llvm::zip(live, pruned.getResults()))
        from.replaceAllUsesWith(to);
    }
    fetch.erase();
  }
}

SmallVector<Value> inlineStage(OpBuilder &builder, func::FuncOp callee, ValueRange operands,
                               llvm::function_ref<Value(ConstantOp)> constantFor) {
  IRMapping mapping;
  for (auto [arg, operand] : llvm::zip(callee.getArguments(), operands))
    mapping.map(arg, operand);
  for (Operation &op : callee.getBody().front().without_terminator()) {
    if (auto constant = llvm::dyn_cast<ConstantOp>(op)) {
      mapping.map(constant.getResult(), constantFor(constant));
      continue;
    }
    builder.clone(op, mapping);
  }
  SmallVector<Value> results;
  for (Value v : callee.getBody().front().getTerminator()->getOperands())
    results.push_back(mapping.lookup(v));
  return results;
}

RankedTensorType batched(Type type, int64_t n) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[0] *= n;
  return RankedTensorType::get(shape, tensor.getElementType());
}

void eraseUnusedOps(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op) ||
        (llvm::isa<PrefetchOp, OffloadOp, AllGatherOp>(op) && op.use_empty()))
      op.erase();
}

void prefetchConstants(Block &body, OpBuilder &builder, Location loc) {
  auto start = body.begin();
  while (start != body.end() && llvm::isa<ConstantOp>(*start))
    ++start;
  DenseMap<Value, Value> onDevice;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (llvm::isa<ProgramOp>(op)) {
      // Programs run separately: each copies the constants it reads.
      start = std::next(op.getIterator());
      onDevice.clear();
      continue;
    }
    // Only device kernels need device copies: copies, views and the kernels that run on host
    // buffers read constants where they are.
    std::optional<StreamKind> stream = streamOf(&op);
    if (!stream || (*stream != StreamKind::compute && *stream != StreamKind::collective))
      continue;
    for (unsigned index : dataOperandIndices(&op)) {
      Value v = op.getOperand(index);
      if (!v.getDefiningOp<ConstantOp>())
        continue;
      Value &copy = onDevice[v];
      if (!copy) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPoint(&body, start);
        copy = builder.create<PrefetchOp>(loc, v);
      }
      op.setOperand(index, copy);
    }
  }
}

} // namespace sl
