// The cross-stream half of the schedule verifier: streams run concurrently (one host thread each
// on the CPU backend, CUDA streams on a GPU), so two kernels on different streams that touch
// overlapping bytes of one memory space, one of them writing, must be ordered by events.
#pragma once

#include <cstdint>

#include "schedule/schedule.pb.h"

namespace slrt {

// The most streams that may carry kernels: the executor runs each on a host thread of its own,
// and the check below keeps a vector clock of this many entries per stream and per event.
inline constexpr uint32_t kMaxStreamsWithKernels = 256;

// Throws Error unless, for every two kernels on different streams whose buffers overlap in bytes
// of one memory space with at least one of them writing, the earlier one in list order happens
// before the later one: through the order of its own stream, the events the later one (or a
// kernel before it on its stream) waits for, and so on transitively. A kernel reads its operands
// and writes its results; an OPTIMIZER_STEP also writes the host buffers of the parameters it
// names (the optimizer updates the weights there). The message names both kernels, their streams
// and the buffers. Program boundaries (Schedule.programs) are full barriers: every stream is idle
// between two runs, so a kernel is only checked against the kernels of its own program.
//
// The schedule has passed every other check of verifySchedule (ids in range, events recorded once
// and before they are waited for). Cost: O(K * D) for the vector clocks, with D the streams that
// carry kernels, plus O(log) per buffer access for the interval map of the last writer and the
// latest reader per stream of every byte range.
void verifyStreamHazards(const sl::schedule::Schedule &schedule);

} // namespace slrt
