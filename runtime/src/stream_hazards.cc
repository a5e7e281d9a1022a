#include "stream_hazards.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <unordered_map>
#include <vector>

#include "kernel_verifier.h"
#include "slrt/error.h"

namespace slrt {
namespace {

using namespace sl::schedule;

// One kernel's use of a byte range, through buffer `buffer`.
struct Access {
  int kernel = -1; // -1: none
  uint32_t buffer = 0;
  bool operator==(const Access &o) const { return kernel == o.kernel && buffer == o.buffer; }
};

// What the checker remembers of a byte range: its last writer, and the latest reader on each
// stream since that write. That is enough: every earlier access of the range is ordered before
// one of these (it was checked against them when they came), so a kernel ordered after all of
// them is ordered after every earlier access too.
struct Shadow {
  Access lastWrite;
  // At most one per stream, sorted by stream.
  std::vector<std::pair<uint32_t, Access>> reads;
  bool operator==(const Shadow &o) const { return lastWrite == o.lastWrite && reads == o.reads; }
};

struct Segment {
  uint64_t end;
  Shadow state;
};

// Disjoint byte ranges [start, end) of one memory space keyed by start; bytes no kernel touched
// yet are in no segment. Adjacent segments with equal state are merged, so buffers accessed whole
// (the common case) stay one segment each.
using SpaceMap = std::map<uint64_t, Segment>;

class HazardChecker {
public:
  explicit HazardChecker(const Schedule &schedule) : s_(schedule) {}

  void run() {
    assignStreamSlots();
    seq_.resize(static_cast<size_t>(s_.kernels_size()));
    std::vector<Access> reads, writes;
    // Where each program after the first begins. Streams are idle between two runs of programs,
    // and programs run in any order, so each is checked on its own: at a boundary, everything
    // before it is forgotten.
    std::vector<bool> programStart(static_cast<size_t>(s_.kernels_size()), false);
    for (const Program &p : s_.programs())
      if (p.first_kernel() > 0)
        programStart[p.first_kernel()] = true;
    for (int index = 0; index < s_.kernels_size(); ++index) {
      if (programStart[static_cast<size_t>(index)]) {
        device_.clear();
        host_.clear();
      }
      const Kernel &k = s_.kernels(index);
      advanceClock(index, k);
      reads.clear();
      writes.clear();
      for (uint32_t id : k.operands())
        reads.push_back({index, id});
      for (uint32_t id : k.results())
        writes.push_back({index, id});
      if (k.op() == OPTIMIZER_STEP) {
        for (uint32_t parameter : k.optimizer_step().parameters())
          writes.push_back({index, s_.parameters(static_cast<int>(parameter)).buffer()});
        for (uint32_t shard : k.optimizer_step().shards())
          writes.push_back({index, s_.shards(static_cast<int>(shard)).buffer()});
      }
      // Check everything against the state before this kernel, then record it: a kernel never
      // conflicts with itself (in-place ops read and write the same bytes).
      for (const Access &a : reads)
        check(a, /*writes=*/false);
      for (const Access &a : writes)
        check(a, /*writes=*/true);
      for (const Access &a : reads)
        recordRead(a);
      for (const Access &a : writes)
        recordWrite(a);
    }
  }

private:
  // Streams that carry kernels get dense slots 0..D-1, the entries of every vector clock.
  void assignStreamSlots() {
    slot_.assign(static_cast<size_t>(s_.streams_size()), kNoSlot);
    uint32_t used = 0;
    for (const Kernel &k : s_.kernels()) {
      uint32_t &slot = slot_[k.stream()];
      if (slot != kNoSlot)
        continue;
      if (used == kMaxStreamsWithKernels)
        throw makeError("kernels run on more than ", kMaxStreamsWithKernels,
                        " streams; this runtime runs each stream on a host thread of its own and "
                        "takes at most ",
                        kMaxStreamsWithKernels);
      slot = used++;
    }
    streamClock_.assign(used, std::vector<uint32_t>(used, 0));
  }

  // Kernel `index`'s vector clock: its stream's clock joined with the clock of every event it
  // waits for, then one step further on its own stream. Entry j of a clock is how many kernels of
  // stream slot j happen before (or are) the kernel.
  void advanceClock(int index, const Kernel &k) {
    uint32_t slot = slot_[k.stream()];
    std::vector<uint32_t> &clock = streamClock_[slot];
    for (uint32_t event : k.wait_events()) {
      const std::vector<uint32_t> &recorded = eventClock_.at(event);
      for (size_t j = 0; j < clock.size(); ++j)
        clock[j] = std::max(clock[j], recorded[j]);
    }
    seq_[static_cast<size_t>(index)] = ++clock[slot];
    for (uint32_t event : k.record_events())
      eventClock_[event] = clock;
  }

  // Whether `earlier` happens before kernel `later` (whose clock is its stream's current one).
  bool ordered(int earlier, int later) const {
    uint32_t a = slot_[s_.kernels(earlier).stream()];
    uint32_t b = slot_[s_.kernels(later).stream()];
    return a == b || streamClock_[b][a] >= seq_[static_cast<size_t>(earlier)];
  }

  SpaceMap &space(uint32_t buffer) {
    return s_.buffers(static_cast<int>(buffer)).space() == DEVICE ? device_ : host_;
  }

  // The byte range of a buffer; empty buffers touch nothing.
  std::pair<uint64_t, uint64_t> range(uint32_t buffer) const {
    const Buffer &b = s_.buffers(static_cast<int>(buffer));
    return {b.offset(), b.offset() + b.bytes()}; // bounds were checked: no overflow
  }

  // The first segment that overlaps [lo, ...), or end().
  static SpaceMap::iterator firstOverlapping(SpaceMap &map, uint64_t lo) {
    auto it = map.upper_bound(lo);
    if (it != map.begin() && std::prev(it)->second.end > lo)
      --it;
    return it;
  }

  void check(const Access &access, bool writes) {
    auto [lo, hi] = range(access.buffer);
    if (lo == hi)
      return;
    SpaceMap &map = space(access.buffer);
    for (auto it = firstOverlapping(map, lo); it != map.end() && it->first < hi; ++it) {
      const Shadow &state = it->second.state;
      if (state.lastWrite.kernel >= 0 && !ordered(state.lastWrite.kernel, access.kernel))
        fail(access, writes, state.lastWrite, true);
      if (writes)
        for (const auto &[stream, read] : state.reads)
          if (!ordered(read.kernel, access.kernel))
            fail(access, writes, read, false);
    }
  }

  [[noreturn]] void fail(const Access &later, bool laterWrites, const Access &earlier,
                         bool earlierWrites) const {
    const Kernel &a = s_.kernels(later.kernel), &b = s_.kernels(earlier.kernel);
    std::string as = earlier.buffer == later.buffer ? "" : " as " + bufferText(s_, earlier.buffer);
    throw makeError(kernelText(later.kernel, a), " on stream ", a.stream(),
                    laterWrites ? " writes" : " reads", " bytes of ", bufferText(s_, later.buffer),
                    " that ", kernelText(earlier.kernel, b), " on stream ", b.stream(),
                    earlierWrites ? " writes" : " reads", as,
                    ", with no event ordering them (kernels on different streams that touch "
                    "overlapping bytes, one of them writing, must be ordered by events)");
  }

  // Makes `at` a segment boundary where a segment spans it.
  static void splitAt(SpaceMap &map, uint64_t at) {
    auto it = map.upper_bound(at);
    if (it == map.begin())
      return;
    --it;
    if (it->first < at && it->second.end > at) {
      Segment right{it->second.end, it->second.state};
      it->second.end = at;
      map.emplace_hint(std::next(it), at, std::move(right));
    }
  }

  // Merges adjacent segments of equal state from the one before `lo` to the one at `hi`.
  static void mergeAround(SpaceMap &map, uint64_t lo, uint64_t hi) {
    auto it = map.lower_bound(lo);
    if (it != map.begin())
      --it;
    while (it != map.end() && it->first <= hi) {
      auto next = std::next(it);
      if (next != map.end() && it->second.end == next->first &&
          it->second.state == next->second.state) {
        it->second.end = next->second.end;
        map.erase(next);
      } else {
        it = next;
      }
    }
  }

  void recordRead(const Access &access) {
    auto [lo, hi] = range(access.buffer);
    if (lo == hi)
      return;
    SpaceMap &map = space(access.buffer);
    uint32_t stream = s_.kernels(access.kernel).stream();
    splitAt(map, lo);
    splitAt(map, hi);
    auto addRead = [&](Shadow &state) {
      auto at = std::lower_bound(state.reads.begin(), state.reads.end(), stream,
                                 [](const auto &entry, uint32_t s) { return entry.first < s; });
      if (at != state.reads.end() && at->first == stream)
        at->second = access; // the latest read of a stream is ordered after its earlier ones
      else
        state.reads.insert(at, {stream, access});
    };
    uint64_t cursor = lo;
    auto it = map.lower_bound(lo);
    while (cursor < hi) {
      if (it == map.end() || it->first > cursor) {
        // Bytes nobody touched yet: a new segment with this read alone.
        uint64_t end = it == map.end() ? hi : std::min(hi, it->first);
        Shadow state;
        state.reads.push_back({stream, access});
        map.emplace_hint(it, cursor, Segment{end, std::move(state)});
        cursor = end;
        continue;
      }
      addRead(it->second.state);
      cursor = it->second.end;
      ++it;
    }
    mergeAround(map, lo, hi);
  }

  void recordWrite(const Access &access) {
    auto [lo, hi] = range(access.buffer);
    if (lo == hi)
      return;
    SpaceMap &map = space(access.buffer);
    splitAt(map, lo);
    splitAt(map, hi);
    map.erase(map.lower_bound(lo), map.lower_bound(hi));
    map.emplace(lo, Segment{hi, Shadow{access, {}}});
    mergeAround(map, lo, hi);
  }

  static constexpr uint32_t kNoSlot = UINT32_MAX;

  const Schedule &s_;
  std::vector<uint32_t> slot_; // by stream id
  std::vector<std::vector<uint32_t>> streamClock_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> eventClock_;
  std::vector<uint32_t> seq_; // by kernel: its position on its stream, from 1
  SpaceMap device_, host_;
};

} // namespace

void verifyStreamHazards(const sl::schedule::Schedule &schedule) { HazardChecker(schedule).run(); }

} // namespace slrt
