// Filling the buffers an executor allocated with what a schedule's model holds: every parameter
// from its file (or seeded random values) and every constant from the schedule. The executor
// calls these once, when it is created; they know nothing of kernels, streams or runs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "slrt/backend.h"
#include "slrt/schedule_loader.h"

namespace slrt {

// Reads every parameter of `loaded` (its file resolved by loadSchedule) into its host buffer,
// `buffers[i]` locating buffer i of the schedule in host-addressable memory. For a schedule of
// world > 1 each parameter is sharded: only the elements in rank `rank`'s part of its shard are
// read, into that shard's buffer, whose other bytes (padding, other parameters' parts) are zeroed.
// A parameter whose file dtype is f32 and buffer dtype bf16 is rounded to nearest even as it is
// read, a chunk at a time. With `randomWeightsSeed` the files are never opened: every parameter
// is filled by fillRandomWeights (schedules of one rank only). Returns the bytes read from files.
// Throws Error for a file that cannot be opened or read or that ended early (it changed after
// the schedule was loaded), and for a float parameter holding a NaN, naming the parameter, the
// element and the file.
uint64_t loadParameters(const LoadedSchedule &loaded, const std::vector<TensorRef> &buffers,
                        int rank, std::optional<uint64_t> randomWeightsSeed);

// Writes every constant of `schedule` into its buffer: its bytes, or its one element repeated
// over the whole buffer (a splat).
void writeConstants(const sl::schedule::Schedule &schedule, const std::vector<TensorRef> &buffers);

} // namespace slrt
