// The host-side state of a backend's event slots: whether each has been recorded since the last
// reset. Both backends keep it, so that a wait on a slot nobody recorded is an Error on every
// backend, not a wait on nothing (CUDA's cudaStreamWaitEvent on a never-recorded event returns at
// once). A slot is marked only after its record is issued, and read with acquire ordering, so a
// thread that sees it recorded also sees what the recording thread wrote before.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "slrt/error.h"

namespace slrt {

class EventFlags {
public:
  void create(size_t count) {
    flags_ = std::make_unique<std::atomic<bool>[]>(count);
    count_ = count;
    reset();
  }

  void reset() {
    for (size_t i = 0; i < count_; ++i)
      flags_[i].store(false, std::memory_order_relaxed);
  }

  // Before issuing slot's record: Error for a slot out of range or recorded already this run.
  void checkRecordable(uint32_t slot) const {
    checkRange(slot);
    if (flags_[slot].load(std::memory_order_relaxed))
      throw makeError("event slot ", slot, " is recorded twice in one run");
  }

  // After issuing slot's record.
  void markRecorded(uint32_t slot) { flags_[slot].store(true, std::memory_order_release); }

  // Before a wait on slot: Error unless its record has been issued since the last reset.
  void checkRecorded(uint32_t slot) const {
    checkRange(slot);
    if (!flags_[slot].load(std::memory_order_acquire))
      throw makeError("a wait for event slot ", slot,
                      ", which has not been recorded in this run (its record must be issued "
                      "before the wait)");
  }

private:
  void checkRange(uint32_t slot) const {
    if (slot >= count_)
      throw makeError("event slot ", slot, " is out of range (", count_, " slots)");
  }

  std::unique_ptr<std::atomic<bool>[]> flags_;
  size_t count_ = 0;
};

} // namespace slrt
