// The schedule verifier: everything the executor and the backends trust is checked here, once.
#pragma once

#include "schedule/schedule.pb.h"

namespace slrt {

// The schedule version this runtime executes.
inline constexpr uint32_t kScheduleVersion = 1;
// 'SLSC' as a little-endian uint32 (Schedule.magic).
inline constexpr uint32_t kScheduleMagic = 0x43534c53;

// Throws Error describing the first inconsistency found (a buffer outside its memory space, a
// reference to a missing buffer, a shape that does not fit its op, an event waited on before it is
// recorded, ...). All arithmetic on sizes and offsets is overflow-checked. Does not look at the
// magic or version (loadSchedule does), nor at parameter files (resolveParameterFiles does).
//
// What a schedule that passes guarantees, beyond the proto's own comments:
//  - buffer i has id i, a set memory space, a known dtype, dims >= 0, bytes == numel * dtype size,
//    an offset that is a multiple of the dtype size, and lies inside device_arena_bytes or
//    host_pool_bytes;
//  - parameters, inputs and outputs name HOST buffers (parameters with equal dtype, shape and
//    bytes); input names and output names are non-empty and unique; no buffer is filled by two
//    parameters or inputs;
//  - every kernel has a known op, the operand and result counts of that op, valid buffer ids, a
//  valid
//    stream of the right kind (COPY on a copy stream, the rest on COMPUTE), attributes only where
//    the op takes them (GEMM requires them; a TRANSPOSE perm is a permutation of its operand's
//    dimensions), events < num_events and each waited event recorded by an earlier kernel;
//  - COPY moves equal bytes of equal dtype; compute kernels read and write only f32 DEVICE buffers
//    whose shapes fit the op; a result never partially overlaps an operand (MATMUL, GEMM and
//    TRANSPOSE results never overlap one at all; elementwise ops may run exactly in place).
void verifySchedule(const sl::schedule::Schedule &schedule);

} // namespace slrt
