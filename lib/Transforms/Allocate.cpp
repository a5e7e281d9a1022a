//===- Allocate.cpp - sl-allocate: static offsets in the device arena and the host pool ---------===//
//
// Values are placed in issue order by best fit over the free ranges of their memory space and
// freed after their last reader: the device arena and the host pool alike. Inputs, parameters and
// constants hold their host slots for the whole step (the runtime writes them before it starts).
// Every slot is one contiguous range, so a (stage, sub-batch) activation moves in one copy.
// Views share their source's bytes; a dying accumulator is overwritten in place.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

namespace sl {
#define GEN_PASS_DEF_ALLOCATEPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

// Device buffers start on 256-byte boundaries (what cuBLAS and vector loads like); host slots on
// 64-byte ones (a cache line). The emitter and the runtime rely on neither beyond alignment.
constexpr uint64_t kDeviceAlignment = 256;
constexpr uint64_t kHostAlignment = 64;

uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Best-fit allocation over the free ranges below the high-water mark, which grows when nothing
/// fits. Freed neighbours are merged.
class ArenaAllocator {
public:
  explicit ArenaAllocator(uint64_t alignment) : alignment_(alignment) {}

  uint64_t allocate(uint64_t bytes) {
    bytes = alignUp(std::max<uint64_t>(bytes, 1), alignment_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= bytes && (best == free_.end() || it->second < best->second))
        best = it;
    if (best != free_.end()) {
      uint64_t offset = best->first, size = best->second;
      free_.erase(best);
      if (size > bytes)
        free_[offset + bytes] = size - bytes;
      return offset;
    }
    // Nothing fits: grow, starting inside a free range that ends at the top.
    uint64_t offset = top_;
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        offset = last->first;
        free_.erase(last);
      }
    }
    top_ = offset + bytes;
    return offset;
  }

  void release(uint64_t offset, uint64_t bytes) {
    bytes = alignUp(std::max<uint64_t>(bytes, 1), alignment_);
    auto [it, inserted] = free_.emplace(offset, bytes);
    (void)inserted;
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }

  uint64_t size() const { return top_; }

private:
  uint64_t alignment_;
  std::map<uint64_t, uint64_t> free_; // offset -> bytes
  uint64_t top_ = 0;
};

Value rootOf(Value value) {
  while (auto view = viewOf(value))
    value = view->source;
  return value;
}

/// A value whose buffer may be reused once it is dead: not an input, parameter or constant (the
/// runtime writes those before the step starts) and not a view of another value.
bool isTemporary(Value value) {
  if (llvm::isa<BlockArgument>(value) || viewOf(value))
    return false;
  return !llvm::isa<ParamOp, ConstantOp>(value.getDefiningOp());
}

struct AllocatePass : public impl::AllocatePassBase<AllocatePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isExplicitStep(func))
      return;
    Block &body = func.getBody().front();

    // The index of the last op that reads each buffer, directly or through a view.
    DenseMap<Operation *, unsigned> index;
    DenseMap<Value, unsigned> lastUse;
    for (auto [i, op] : llvm::enumerate(body)) {
      index[&op] = i;
      for (Value operand : op.getOperands())
        lastUse[rootOf(operand)] = i;
    }

    Builder builder(func.getContext());
    ArenaAllocator device(kDeviceAlignment), host(kHostAlignment);
    auto allocatorOf = [&](Value v) -> ArenaAllocator & {
      return memorySpaceOf(v) == MemorySpace::Host ? host : device;
    };
    DenseMap<Value, uint64_t> offsets;
    for (BlockArgument arg : func.getArguments()) {
      offsets[arg] = host.allocate(storageBytes(arg.getType()));
      func.setArgAttr(arg.getArgNumber(), kOffsetAttr,
                      builder.getI64IntegerAttr(int64_t(offsets[arg])));
    }

    // Buffers that die at each op index, released once that op's results are placed.
    std::map<unsigned, SmallVector<Value>> dying;
    auto dies = [&](Value v, unsigned at) {
      dying[v.use_empty() ? at : std::max(at, lastUse.lookup(v))].push_back(v);
    };
    for (auto [i, op] : llvm::enumerate(body)) {
      SmallVector<int64_t> resultOffsets;
      for (Value result : op.getResults()) {
        uint64_t offset;
        if (auto view = viewOf(result)) {
          offset = offsets.lookup(view->source) + view->byteOffset;
        } else if (auto acc = llvm::dyn_cast<AccumulateOp>(op);
                   acc && isTemporary(acc.getAccumulator()) &&
                   lastUse.lookup(acc.getAccumulator()) == i) {
          // In place: the result takes over the accumulator's buffer and its lifetime.
          offset = offsets.lookup(acc.getAccumulator());
          llvm::erase(dying[i], acc.getAccumulator());
          dies(result, i);
        } else {
          offset = allocatorOf(result).allocate(storageBytes(result.getType()));
          // Parameters and constants are written before the step starts: they keep their slot.
          if (isTemporary(result))
            dies(result, i);
        }
        offsets[result] = offset;
        resultOffsets.push_back(int64_t(offset));
      }
      if (!resultOffsets.empty())
        op.setAttr(kOffsetsAttr, builder.getDenseI64ArrayAttr(resultOffsets));
      if (auto it = dying.find(i); it != dying.end()) {
        for (Value v : it->second)
          allocatorOf(v).release(offsets.lookup(v), storageBytes(v.getType()));
        dying.erase(it);
      }
    }
    func->setAttr("sl.device_arena_bytes", builder.getI64IntegerAttr(int64_t(device.size())));
    func->setAttr("sl.host_pool_bytes",
                  builder.getI64IntegerAttr(int64_t(alignUp(host.size(), kHostAlignment))));
  }
};
} // namespace
} // namespace sl
