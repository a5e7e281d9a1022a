//===- MemorySpaces.cpp - where a value of an explicit step lives -------------------------------===//

#include "sl/Dialect/MemorySpaces.h"

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace sl {

MemorySpace memorySpaceOf(Value value) {
  if (auto view = viewOf(value))
    return memorySpaceOf(view->source);
  Operation *def = value.getDefiningOp();
  if (!def)
    return MemorySpace::Host; // function arguments: the step's inputs
  if (isPreloaded(def) || llvm::isa<OffloadOp>(def))
    return MemorySpace::Host;
  if (auto accumulate = llvm::dyn_cast<AccumulateOp>(def))
    return memorySpaceOf(accumulate.getAccumulator());
  // An inference step joins its sub-batches' offloaded outputs on the host. A concatenation of
  // constants alone (a rotary table too big to fold: HF LLaMA's cat(freqs, freqs) at a long
  // context) is a device kernel like any other that reads constants: they are prefetched for it.
  if (auto concat = llvm::dyn_cast<ConcatOp>(def))
    if (concat->getNumOperands() > 0 &&
        llvm::all_of(concat->getOperands(),
                     [](Value v) { return memorySpaceOf(v) == MemorySpace::Host; }) &&
        !llvm::all_of(concat->getOperands(),
                      [](Value v) { return v.getDefiningOp<ConstantOp>() != nullptr; }))
      return MemorySpace::Host;
  return MemorySpace::Device;
}

std::optional<View> viewOf(Value value) {
  Operation *def = value.getDefiningOp();
  if (auto reshape = llvm::dyn_cast_or_null<ReshapeOp>(def))
    return View{reshape.getInput(), 0};
  // A KV cache written in place: the kernel writes the cache's own bytes.
  if (auto write = llvm::dyn_cast_or_null<KvWriteOp>(def))
    return View{write.getCache(), 0};
  if (auto subBatch = llvm::dyn_cast_or_null<SubBatchOp>(def))
    return View{subBatch.getBatch(), static_cast<uint64_t>(subBatch.getIndex()) *
                                         storageBytes(subBatch.getResult().getType())};
  if (auto view = llvm::dyn_cast_or_null<ViewOp>(def)) {
    auto type = llvm::cast<RankedTensorType>(view.getResult().getType());
    uint64_t elementBytes = std::max<uint64_t>(1, type.getElementTypeBitWidth() / 8);
    return View{view.getSource(), static_cast<uint64_t>(view.getOffset()) * elementBytes};
  }
  return std::nullopt;
}

bool hasStorage(Value value) {
  auto param = value.getDefiningOp<ParamOp>();
  if (!param || value.use_empty())
    return true;
  return !llvm::all_of(value.getUsers(),
                       [](Operation *user) { return llvm::isa<ParamShardOp>(user); });
}

uint64_t storageBytes(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  uint64_t elementBytes = std::max<uint64_t>(1, tensor.getElementTypeBitWidth() / 8);
  return static_cast<uint64_t>(tensor.getNumElements()) * elementBytes;
}

std::optional<uint64_t> allocatedOffset(Value value) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    auto func = llvm::dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (!func)
      return std::nullopt;
    if (auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kOffsetAttr))
      return static_cast<uint64_t>(offset.getInt());
    return std::nullopt;
  }
  auto offsets = value.getDefiningOp()->getAttrOfType<DenseI64ArrayAttr>(kOffsetsAttr);
  unsigned index = llvm::cast<OpResult>(value).getResultNumber();
  if (!offsets || index >= offsets.size())
    return std::nullopt;
  return static_cast<uint64_t>(offsets[index]);
}

} // namespace sl
