// Before a run allocates anything: does the memory its schedule plans fit in the memory that is
// free now? A run that does not fit is refused up front, with the bytes it needs and the bytes
// there are, instead of failing (or being killed by the kernel's OOM killer) in the middle of a
// step, possibly hours in.
//
// Testing hooks: the environment variables SL_TEST_HOST_MEMORY_AVAILABLE and
// SL_TEST_DEVICE_MEMORY_AVAILABLE, each a byte count, replace what availableMemory() measures.
// With the second set, the device arena is checked against it on its own even on the CPU backend
// (whose arena is otherwise host RAM), so the device path is testable without a GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schedule/schedule.pb.h"

namespace slrt {

class Backend;

struct MemoryItem {
  std::string what; // "host pool", "AdamW state (master weights and two moments)"
  uint64_t bytes = 0;
};

// What a run needs: its device arena, and everything it holds in host memory (the host pool first,
// then what the runtime keeps beside it).
struct MemoryNeed {
  uint64_t deviceArena = 0;
  std::vector<MemoryItem> host;
  // Device memory the backend uses beyond the arena (Backend::deviceWorkingBytes); checked
  // against the free device memory together with the arena.
  uint64_t deviceWorking = 0;
};

// Which parts of sl-run's work a run does, beyond the schedule's arena and pool.
struct RunMemoryOptions {
  // A train schedule: AdamW keeps f32 master weights and two moments per parameter on the host.
  bool training = false;
  // --resume reads a checkpoint (the three tensors of every parameter) into memory.
  bool resume = false;
  // --save copies the state into a checkpoint and encodes it: twice the three tensors.
  bool save = false;
  // Inference: how many copies of its outputs the run holds in host memory beside the pool: one
  // (copied out, as Executor::run does), none (sl-run's inference on one rank writes and prints
  // them where they lie, streaming a file), or 1 + W on W ranks (its own rows, then every rank's).
  uint64_t outputCopies = 1;
};

// The memory a run of `schedule` with `options` needs. Sums saturate at UINT64_MAX.
MemoryNeed runMemoryNeed(const sl::schedule::Schedule &schedule, const RunMemoryOptions &options);

// The schedule's streams whose kernels run on the device: COMPUTE, HOST_TO_DEVICE,
// DEVICE_TO_HOST and COLLECTIVE (each is a host thread with a device context of its own).
unsigned deviceStreamCount(const sl::schedule::Schedule &schedule);

// Memory free now, and where each figure comes from (for messages).
struct MemoryAvailable {
  uint64_t hostBytes = 0;
  std::string hostSource;
  // Free device memory for the arena; nullopt where the arena is host memory (the CPU backend),
  // which is then counted against hostBytes.
  std::optional<uint64_t> deviceBytes;
  std::string deviceSource;
};

// Host memory available to this process: MemAvailable of `root`/proc/meminfo, or less when the
// process's memory cgroup (v2: memory.max; v1: memory.limit_in_bytes, under `root`/sys/fs/cgroup)
// leaves less room (its limit minus what it uses, not counting reclaimable file cache). Throws
// Error when /proc/meminfo cannot be read. `root` is "" on a real system; tests point it at a tree
// of their own.
MemoryAvailable availableHostMemory(const std::string &root = "");

// availableHostMemory(), with the backend's free device memory, and the testing hooks applied.
MemoryAvailable availableMemory(const Backend &backend);

// Throws Error, naming `what` (the schedule's path), the bytes needed with their parts and the
// bytes available with their source, when `need` does not fit in `available`.
void checkMemoryFits(const std::string &what, const MemoryNeed &need,
                     const MemoryAvailable &available);

} // namespace slrt
