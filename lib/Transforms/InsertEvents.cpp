//===- InsertEvents.cpp - sl-insert-events: waits between the streams of an explicit step ------===//
//
// Walks the kernels in issue order with a map of the bytes each memory space has seen accessed:
// for every byte range, the last kernel that wrote it and the last kernel of each stream that
// read it since. A kernel depends on the last writer of what it reads, and on the last writer
// and the readers of what it writes (reuse of a freed buffer is such a write). Dependences on
// the same stream hold by stream order; one on another stream needs a wait unless the kernel's
// vector clock shows it is ordered already.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <array>
#include <map>

namespace sl {
#define GEN_PASS_DEF_INSERTEVENTSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

constexpr unsigned kStreams = getMaxEnumValForStreamKind() + 1;
constexpr int kNone = -1;
using Clock = std::array<int, kStreams>; // per stream: the last kernel (position) ordered before

/// Who touched a byte range last: the writing kernel and, per stream, the last reader since.
struct Segment {
  uint64_t end;
  int writer = kNone;
  std::array<int, kStreams> readers;
  Segment(uint64_t end) : end(end) { readers.fill(kNone); }
};

/// Disjoint segments covering every byte accessed so far in one memory space.
class AccessMap {
public:
  /// Calls `visit` on the segments covering [begin, end), creating and splitting them so that
  /// they cover exactly that range.
  template <typename Visit> void forEach(uint64_t begin, uint64_t end, Visit visit) {
    if (begin >= end)
      return;
    split(begin);
    split(end);
    uint64_t at = begin;
    auto it = segments_.lower_bound(begin);
    while (at < end) {
      if (it == segments_.end() || it->first > at) {
        uint64_t gapEnd = it == segments_.end() ? end : std::min(end, it->first);
        it = segments_.emplace_hint(it, at, Segment(gapEnd));
      }
      visit(it->second);
      at = it->second.end;
      ++it;
    }
  }

private:
  void split(uint64_t at) {
    auto it = segments_.upper_bound(at);
    if (it == segments_.begin())
      return;
    --it;
    if (it->first < at && at < it->second.end) {
      Segment tail = it->second;
      it->second.end = at;
      segments_.emplace(at, tail);
    }
  }
  std::map<uint64_t, Segment> segments_;
};

struct Kernel {
  Operation *op;
  unsigned stream;
  int position; // in its stream
  Clock clock;  // what is ordered before it completes, itself included
  std::optional<int64_t> event;
};

struct InsertEventsPass : public impl::InsertEventsPassBase<InsertEventsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!isExplicitStep(func))
      return;
    Builder builder(func.getContext());
    std::vector<Kernel> kernels;
    std::array<Clock, kStreams> streamClock;
    for (Clock &clock : streamClock)
      clock.fill(kNone);
    std::array<int, kStreams> nextPosition{};
    AccessMap host, device;
    int64_t events = 0;

    for (Operation &op : func.getBody().front()) {
      if (llvm::isa<ProgramOp>(op)) {
        // Every stream is idle between programs: nothing before this one needs a wait.
        host = AccessMap();
        device = AccessMap();
        continue;
      }
      auto kind = op.getAttrOfType<StreamKindAttr>(kStreamAttr);
      if (!kind)
        continue;
      unsigned stream = static_cast<unsigned>(kind.getValue());
      struct Range {
        AccessMap *space;
        uint64_t begin, end;
      };
      SmallVector<Range> reads, writes;
      auto rangeOf = [&](Value v) -> std::optional<Range> {
        std::optional<uint64_t> offset = allocatedOffset(v);
        if (!offset)
          return std::nullopt;
        AccessMap *space = memorySpaceOf(v) == MemorySpace::Host ? &host : &device;
        return Range{space, *offset, *offset + storageBytes(v.getType())};
      };
      bool complete = true;
      for (unsigned index : dataOperandIndices(&op)) {
        auto range = rangeOf(op.getOperand(index));
        complete &= range.has_value();
        if (range)
          reads.push_back(*range);
      }
      for (Value result : op.getResults()) {
        auto range = rangeOf(result);
        complete &= range.has_value();
        if (range)
          writes.push_back(*range);
      }
      if (auto step = llvm::dyn_cast<OptimizerStepOp>(op))
        for (Value param : step.getParams()) {
          auto range = rangeOf(param);
          complete &= range.has_value();
          if (range)
            writes.push_back(*range);
        }
      if (!complete) {
        op.emitError("sl-insert-events: a value has no offset; run sl-allocate first");
        return signalPassFailure();
      }

      // The kernels this one must follow: the latest one per stream is enough.
      Clock needed;
      needed.fill(kNone);
      auto need = [&](int kernel) {
        if (kernel == kNone)
          return;
        Kernel &k = kernels[kernel];
        needed[k.stream] = std::max(needed[k.stream], kernel);
      };
      for (Range &r : reads)
        r.space->forEach(r.begin, r.end, [&](Segment &s) { need(s.writer); });
      for (Range &r : writes)
        r.space->forEach(r.begin, r.end, [&](Segment &s) {
          need(s.writer);
          for (int reader : s.readers)
            need(reader);
        });

      int self = kernels.size();
      Clock &clock = streamClock[stream];
      SmallVector<int64_t> waits;
      for (unsigned t = 0; t < kStreams; ++t) {
        if (t == stream || needed[t] == kNone)
          continue;
        Kernel &other = kernels[needed[t]];
        if (clock[t] >= other.position)
          continue; // ordered already, through an earlier wait
        if (!other.event) {
          other.event = events++;
          other.op->setAttr(kRecordAttr, builder.getI64IntegerAttr(*other.event));
        }
        waits.push_back(*other.event);
        for (unsigned u = 0; u < kStreams; ++u)
          clock[u] = std::max(clock[u], other.clock[u]);
      }
      if (!waits.empty())
        op.setAttr(kWaitAttr, builder.getDenseI64ArrayAttr(waits));
      else
        op.removeAttr(kWaitAttr);
      op.removeAttr(kRecordAttr);
      int position = nextPosition[stream]++;
      clock[stream] = position;
      kernels.push_back({&op, stream, position, clock, std::nullopt});

      for (Range &r : reads)
        r.space->forEach(r.begin, r.end, [&](Segment &s) { s.readers[stream] = self; });
      for (Range &r : writes)
        r.space->forEach(r.begin, r.end, [&](Segment &s) {
          s.writer = self;
          s.readers.fill(kNone);
        });
    }
    func->setAttr(kNumEventsAttr, builder.getI64IntegerAttr(events));
  }
};

} // namespace
} // namespace sl
