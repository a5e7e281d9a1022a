//===- StepMemory.cpp - the memory layout of an explicit step, and its size at any sub-batch ----===//

#include "sl/Analysis/StepMemory.h"

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;

namespace sl {
namespace {

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
  return !isPreloaded(value.getDefiningOp());
}

} // namespace

StepLayout layoutStep(Block &body, llvm::function_ref<uint64_t(Value)> bytes,
                      const LayoutCapture &capture) {
  StepLayout layout;
  std::optional<unsigned> captureAt = capture.deviceAt;
  // The index of the last op that reads each buffer, directly or through a view.
  DenseMap<Value, unsigned> lastUse;
  // Programs (sl.program) run separately, a later one possibly many times: a buffer that a later
  // program reads stays allocated to the end.
  DenseMap<Operation *, unsigned> programOf;
  unsigned program = 0;
  for (Operation &op : body) {
    program += llvm::isa<ProgramOp>(op) ? 1 : 0;
    programOf[&op] = program;
  }
  unsigned end = static_cast<unsigned>(body.getOperations().size());
  for (auto [i, op] : llvm::enumerate(body))
    for (Value operand : op.getOperands()) {
      Value root = rootOf(operand);
      Operation *def = root.getDefiningOp();
      bool laterProgram = def && programOf.lookup(def) != programOf.lookup(&op);
      lastUse[root] = laterProgram ? end : std::max<unsigned>(lastUse.lookup(root), i);
    }

  ArenaAllocator arena(kDeviceAlignment), pool(kHostAlignment);
  auto allocatorOf = [&](Value v) -> ArenaAllocator & {
    return memorySpaceOf(v) == MemorySpace::Host ? pool : arena;
  };
  DenseMap<Value, uint64_t> &offsets = layout.offsets;
  for (BlockArgument arg : body.getArguments())
    offsets[arg] = pool.allocate(bytes(arg));

  llvm::SetVector<Value> live; // device values; only kept with captureAt
  llvm::SetVector<Value> liveHost; // host values but the inputs; only kept with capture.host
  // Live host bytes but the inputs, aligned, and the part of them in `capture.held` values.
  uint64_t hostLive = 0, hostHeld = 0;
  auto hostAligned = [&](Value v) { return alignUp(std::max<uint64_t>(bytes(v), 1), kHostAlignment); };
  auto hostPlaced = [&](Value v) {
    if (!capture.host || memorySpaceOf(v) != MemorySpace::Host)
      return;
    liveHost.insert(v);
    hostLive += hostAligned(v);
    if (capture.held && capture.held(v))
      hostHeld += hostAligned(v);
  };
  auto hostReleased = [&](Value v) {
    if (!capture.host || !liveHost.remove(v))
      return;
    hostLive -= hostAligned(v);
    if (capture.held && capture.held(v))
      hostHeld -= hostAligned(v);
  };
  // Buffers that die at each op index, released once that op's results are placed.
  std::map<unsigned, SmallVector<Value>> dying;
  auto dies = [&](Value v, unsigned at) {
    dying[v.use_empty() ? at : std::max(at, lastUse.lookup(v))].push_back(v);
  };
  for (auto [i, op] : llvm::enumerate(body)) {
    uint64_t topBefore = arena.size(), poolBefore = pool.size();
    for (Value result : op.getResults()) {
      if (!hasStorage(result))
        continue; // a parameter whose bytes are in its group's shard
      bool onDevice = memorySpaceOf(result) == MemorySpace::Device;
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
        if (captureAt && onDevice) {
          live.remove(acc.getAccumulator());
          live.insert(result);
        }
        if (!onDevice && capture.host && liveHost.remove(acc.getAccumulator())) {
          liveHost.insert(result);
          if (capture.held && capture.held(acc.getAccumulator()) != capture.held(result)) {
            hostHeld -= capture.held(acc.getAccumulator()) ? hostAligned(result) : 0;
            hostHeld += capture.held(result) ? hostAligned(result) : 0;
          }
        }
      } else {
        offset = allocatorOf(result).allocate(bytes(result));
        // Parameters and constants are written before the step starts: they keep their slot.
        // A result nobody reads dies where it is written.
        if (isTemporary(result))
          dies(result, i);
        if (captureAt && onDevice)
          live.insert(result);
        if (!onDevice)
          hostPlaced(result);
      }
      offsets[result] = offset;
    }
    if (arena.size() > topBefore)
      layout.peakOp = i;
    if (pool.size() > poolBefore)
      layout.hostPeakOp = i;
    if (captureAt && *captureAt == i)
      layout.liveAtCapture.assign(live.begin(), live.end());
    if (capture.host) {
      layout.hostLive.push_back({hostLive, hostHeld});
      if (capture.hostAt == i)
        layout.liveHostAtCapture.assign(liveHost.begin(), liveHost.end());
    }
    if (auto it = dying.find(i); it != dying.end()) {
      for (Value v : it->second) {
        allocatorOf(v).release(offsets.lookup(v), bytes(v));
        if (captureAt)
          live.remove(v);
        hostReleased(v);
      }
      dying.erase(it);
    }
  }
  layout.deviceArenaBytes = arena.size();
  layout.hostPoolBytes = alignUp(pool.size(), kHostAlignment);
  return layout;
}

//===--------------------------------------------------------------------------------------------===//
// StepFootprint
//===--------------------------------------------------------------------------------------------===//

std::optional<StepFootprint> StepFootprint::fit(Block &atB1, int64_t b1, Block &atB2, int64_t b2) {
  StepFootprint footprint;
  footprint.body = &atB1;
  auto line = [&](Value v1, Value v2) -> std::optional<Linear> {
    auto t1 = llvm::dyn_cast<RankedTensorType>(v1.getType());
    auto t2 = llvm::dyn_cast<RankedTensorType>(v2.getType());
    if (!t1 || !t2 || !t1.hasStaticShape() || !t2.hasStaticShape() ||
        t1.getRank() != t2.getRank() || t1.getElementType() != t2.getElementType())
      return std::nullopt;
    double s1 = double(storageBytes(t1)), s2 = double(storageBytes(t2));
    double slope = (s2 - s1) / double(b2 - b1);
    if (slope < 0)
      return std::nullopt;
    return Linear{s1 - slope * double(b1), slope};
  };
  if (atB1.getNumArguments() != atB2.getNumArguments())
    return std::nullopt;
  for (auto [a1, a2] : llvm::zip(atB1.getArguments(), atB2.getArguments())) {
    std::optional<Linear> l = line(a1, a2);
    if (!l)
      return std::nullopt;
    footprint.bytes[a1] = *l;
  }
  auto op2 = atB2.begin();
  for (Operation &op1 : atB1) {
    if (op2 == atB2.end() || op1.getName() != op2->getName() ||
        op1.getNumResults() != op2->getNumResults())
      return std::nullopt;
    for (auto [r1, r2] : llvm::zip(op1.getResults(), op2->getResults())) {
      std::optional<Linear> l = line(r1, r2);
      if (!l)
        return std::nullopt;
      footprint.bytes[r1] = *l;
    }
    ++op2;
  }
  if (op2 != atB2.end())
    return std::nullopt;
  return footprint;
}

StepFootprint StepFootprint::bound(Block &atB0) {
  StepFootprint footprint;
  footprint.body = &atB0;
  auto record = [&](Value v) {
    if (auto type = llvm::dyn_cast<RankedTensorType>(v.getType()); type && type.hasStaticShape())
      footprint.bytes[v] = Linear{double(storageBytes(type)), 0};
  };
  for (BlockArgument arg : atB0.getArguments())
    record(arg);
  for (Operation &op : atB0)
    for (Value result : op.getResults())
      record(result);
  return footprint;
}

namespace {

/// What a device buffer is, for the report.
const char *deviceKindOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (llvm::isa_and_nonnull<FetchParamsOp, AllGatherOp>(def))
    return "parameters (this group's, the next one's)";
  if (auto prefetch = llvm::dyn_cast_or_null<PrefetchOp>(def)) {
    if (prefetch->getOperand(0).getDefiningOp<ParamShardOp>())
      return "parameter shards (to all-gather)";
    return prefetch->getOperand(0).getDefiningOp<ConstantOp>()
               ? "constants (prefetched once)"
               : "prefetched boundary values and gradients";
  }
  return "computed values (activations, gradients)";
}

const char *hostKindOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return kInputsTerm;
  if (llvm::isa<ParamOp>(def))
    return "parameters";
  if (llvm::isa<ParamShardOp>(def))
    return "parameter shards (this rank's 1/world)";
  if (llvm::isa<ConstantOp>(def))
    return "constants";
  // A parameter gradient leaves the device once per pass and goes to the optimizer (through the
  // host sum) or is returned; a boundary value or its gradient goes back to the device.
  bool prefetched = llvm::any_of(v.getUsers(), [](Operation *user) {
    return llvm::isa<PrefetchOp>(user);
  });
  if (prefetched)
    return "offloaded boundaries and gradients (per group, sub-batch)";
  if (llvm::cast<RankedTensorType>(v.getType()).getRank() == 0)
    return "loss";
  // An inference step's outputs: each sub-batch's, and their join.
  auto step = v.getParentRegion()->getParentOfType<func::FuncOp>();
  if (step && step.getSymName() == kInferStepName)
    return "outputs (per sub-batch, and joined)";
  return "parameter gradients";
}

} // namespace

/// A host slot a prefetch reads back: an offloaded boundary value or gradient of one sub-batch.
static bool isOffloadedBoundary(Value v) {
  return memorySpaceOf(v) == MemorySpace::Host &&
         llvm::any_of(v.getUsers(), [](Operation *user) { return llvm::isa<PrefetchOp>(user); });
}

StepMemory StepFootprint::at(int64_t b, bool terms, int64_t growthOver) const {
  auto bytesAt = [&](Value v) -> uint64_t {
    auto it = bytes.find(v);
    if (it == bytes.end())
      return 0;
    return uint64_t(std::llround(std::max(0.0, it->second.at(b))));
  };
  LayoutCapture first;
  first.host = growthOver > 0;
  first.held = isOffloadedBoundary;
  StepLayout layout = layoutStep(*body, bytesAt, first);
  StepMemory memory;
  memory.deviceArenaBytes = double(layout.deviceArenaBytes);
  memory.hostPoolBytes = double(layout.hostPoolBytes);
  double inputs = 0;
  for (BlockArgument arg : body->getArguments())
    inputs += double(alignUp(std::max<uint64_t>(bytesAt(arg), 1), kHostAlignment));
  memory.hostInputBytes = inputs;
  if (growthOver > 0) {
    // The live host bytes after each op as a line in the number of sub-batches: the offloaded
    // boundaries held then grow in proportion to it, the rest stays.
    for (Operation &op : *body)
      for (Value result : op.getResults())
        if (memorySpaceOf(result) == MemorySpace::Host && isTemporary(result) &&
            !isOffloadedBoundary(result))
          memory.hostLargestSlot = std::max(
              memory.hostLargestSlot,
              double(alignUp(std::max<uint64_t>(bytesAt(result), 1), kHostAlignment)));
    for (auto [live, held] : layout.hostLive) {
      memory.hostLivePeak = std::max(memory.hostLivePeak, double(live));
      memory.hostLiveLines.add(
          Linear{double(live - held), double(held) / double(growthOver)});
    }
  }
  if (!terms)
    return memory;

  // The arena at its peak: the buffers live just after the op that last raised it, each taking
  // its size rounded up to the alignment; what remains of the arena is free ranges between them.
  LayoutCapture capture;
  capture.deviceAt = layout.peakOp;
  capture.host = true;
  capture.hostAt = layout.hostPeakOp;
  StepLayout captured = layoutStep(*body, bytesAt, capture);
  llvm::MapVector<llvm::StringRef, double> device;
  double held = 0;
  for (Value v : captured.liveAtCapture) {
    double aligned = double(alignUp(std::max<uint64_t>(bytesAt(v), 1), kDeviceAlignment));
    device[deviceKindOf(v)] += aligned;
    held += aligned;
  }
  for (auto &[name, amount] : device)
    memory.deviceTerms.push_back({name.str(), amount});
  memory.deviceTerms.push_back(
      {"free ranges between them (fragmentation)", memory.deviceArenaBytes - held});
  auto describe = [&](unsigned index) {
    Operation *peak = &*std::next(body->begin(), index);
    return llvm::formatv("op {0} of the step ({1})", index, peak->getName().getStringRef()).str();
  };
  llvm::SetVector<llvm::StringRef> groups;
  for (Value v : captured.liveAtCapture)
    if (auto fetch = v.getDefiningOp<FetchParamsOp>())
      groups.insert(fetch.getGroup());
  memory.devicePeak = llvm::formatv("{0}; parameters of {1} on the device",
                                    describe(layout.peakOp),
                                    groups.empty() ? "no group" : llvm::join(groups, ", "))
                          .str();

  // The pool at its peak, the same way: the inputs, then the slots live just after the op that
  // last raised it by kind; what remains is free ranges between them.
  llvm::MapVector<llvm::StringRef, double> host;
  host[kInputsTerm] = inputs;
  double hostHeld = inputs;
  for (Value v : captured.liveHostAtCapture) {
    double aligned = double(alignUp(std::max<uint64_t>(bytesAt(v), 1), kHostAlignment));
    host[hostKindOf(v)] += aligned;
    hostHeld += aligned;
  }
  for (auto &[name, amount] : host)
    memory.hostTerms.push_back({name.str(), amount});
  memory.hostTerms.push_back(
      {"free ranges between them (fragmentation)", memory.hostPoolBytes - hostHeld});
  memory.hostPeak = describe(layout.hostPeakOp);
  return memory;
}

} // namespace sl
