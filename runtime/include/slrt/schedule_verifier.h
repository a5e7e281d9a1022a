// The schedule verifier: everything the executor and the backends trust is checked here, once.
#pragma once

#include "schedule/schedule.pb.h"

namespace slrt {

// The schedule version this runtime executes and sl-opt writes, and the oldest it still accepts
// (version 4 is version 5 without MATMUL's transpose flags and ALiBi slopes; version 5 is
// version 6 without attention's BSHD layout).
inline constexpr uint32_t kScheduleVersion = 7;
inline constexpr uint32_t kOldestScheduleVersion = 4;
// 'SLSC' as a little-endian uint32 (Schedule.magic).
inline constexpr uint32_t kScheduleMagic = 0x43534c53;

// The generation contract (Schedule.generation, slrt/generator.h): the kind, its two programs and
// the names of their bindings.
inline constexpr const char *kGenerateKind = "generate";
inline constexpr const char *kPrefillProgram = "prefill";
inline constexpr const char *kDecodeProgram = "decode";
inline constexpr const char *kInputIdsInput = "input_ids";
inline constexpr const char *kLastIndexInput = "last_index";
inline constexpr const char *kPositionInput = "position";
inline constexpr const char *kLogitsOutput = "logits";

// Throws Error describing the first inconsistency found (a buffer outside its memory space, a
// reference to a missing buffer, a shape that does not fit its op, an event waited on before it is
// recorded, ...). Kernel messages start with "kernel N 'name' (OP): " and name the offending
// buffers and shapes. All arithmetic on sizes and offsets is overflow-checked. Does not look at
// the magic or version (loadSchedule does), nor at parameter files (resolveParameterFiles does).
//
// What a schedule that passes guarantees, beyond the proto's own comments:
//  - buffer i has id i, a set memory space, a known dtype, dims >= 0, bytes == numel * dtype size,
//    an offset that is a multiple of the dtype size, and lies inside device_arena_bytes or
//    host_pool_bytes;
//  - programs (version 4), when there are any: non-empty unique names, at least one kernel each,
//    contiguous and in order from kernel 0, covering every kernel; every event is recorded and
//    waited within one program;
//  - parameters, constants, inputs and outputs name HOST buffers (parameters with equal dtype,
//    shape and bytes, except that an unsharded bf16 parameter may have file_dtype f32 and then
//    bytes = numel * 4, the size in its file; constants with data of the buffer's bytes or of exactly one element); input
//    names and output names are non-empty and unique per program; a binding's program is a valid
//    index (0 when there are no programs); no buffer is filled by two of the parameters,
//    constants and inputs;
//  - streams have a kind from COMPUTE to HOST_COMPUTE, and at most kMaxStreamsWithKernels
//    (stream_hazards.h: 256) of them carry kernels;
//  - every kernel has a known op, the operand and result counts of that op (1 result, except
//    RMS_NORM_GRAD and SWIGLU_GRAD 2, LAYER_NORM_GRAD and ATTENTION_GRAD 3 and OPTIMIZER_STEP
//    none; CONCAT 1 or more operands, OPTIMIZER_STEP 1 or more), valid buffer ids, a valid stream
//    of the right kind (COPY on a HOST_TO_DEVICE or DEVICE_TO_HOST stream, ACCUMULATE on COMPUTE
//    or HOST_COMPUTE, OPTIMIZER_STEP and KV_WRITE on HOST_COMPUTE, the rest on COMPUTE),
//    events < num_events,
//    each event recorded by exactly one kernel and each waited event by an earlier one;
//  - attributes: exactly the message the op takes and no other. GEMM, SOFTMAX, GATHER, CONCAT
//    (axis), REDUCE_* (reduce), SLICE, TRILU, LAYER_NORM and RMS_NORM (norm), ROTARY, ATTENTION,
//    GELU, CROSS_ENTROPY, OPTIMIZER_STEP and every backward kernel but SWIGLU_GRAD (the forward's
//    message) require
//    theirs even when every field is at its default; TRANSPOSE may omit its perm (rank 0); the
//    other ops take none;
//  - COPY moves equal bytes of equal dtype; kernels on a COMPUTE stream read and write only DEVICE
//    buffers, kernels on a HOST_COMPUTE stream only HOST buffers;
//  - ACCUMULATE adds two float operands of one shape into a result of that shape;
//  - OPTIMIZER_STEP: operand 0 is the buffer of output "loss" (of its program); optimizer_step.
//    parameters holds one valid parameter index per further operand, and operand i + 1 is the
//    buffer of output "grad:<name of parameters[i]>"; no parameter is named by two
//    OPTIMIZER_STEPs (nor twice by one);
//  - generation kernels: KV_WRITE (cache [B, 2, Hkv, C, D], k and v [B, Hkv, T, D] with T <= C
//    [, start i64 [B]]) has result 0 the very buffer of operand 0 and no other operand overlapping
//    it; DECODE_ATTENTION (q [B, Hq, 1, D], k and v [B, Hkv, 1, D], cache [B, 2, Hkv, C, D],
//    length i64 [B] [, slopes [Hq] exactly with attention.alibi]) has Hkv > 0 dividing Hq, a finite
//    non-zero attention.scale and result [B, Hq, 1, D]; both are f32, bf16 or f64 throughout; TAKE_ROWS (x [B, S, H] of any dtype, index
//    i64 [B]) has result [B, 1, H] of x's dtype;
//  - kind "generate" exactly when there is a generation message, whose counts are positive, with
//    cache_len = max_prompt_len + max_new_tokens and batch = num_sub_batches * sub_batch_size;
//    then the programs are exactly "prefill" and "decode"; prefill's inputs are exactly
//    input_ids i64 [batch, max_prompt_len] and last_index i64 [batch], decode's input_ids
//    i64 [batch, 1] and position i64 [batch], and each has an output logits f32, bf16 or f64
//    [batch, 1, vocab] (other outputs are allowed);
//  - dtypes: f32 throughout, or bf16 or f64 throughout a float kernel's float buffers (one float
//    dtype per kernel), except SUB, DIV, NEG (all float or all i64), EQUAL, LESS (float or i64
//    operands of one dtype, BOOL result), WHERE (BOOL condition; x, y and result of one dtype),
//    CAST (operand and result each f32, bf16, f64, i64, i32 or bool), GATHER (i64 or i32 indices; data
//    and result of one dtype), CONCAT, SLICE, EXPAND, TRILU (one dtype, any), CROSS_ENTROPY and
//    CROSS_ENTROPY_GRAD (i64 labels), GATHER_GRAD (i64 or i32 indices);
//  - shapes: binary ops and WHERE broadcast their operands to exactly the result shape; unary
//    ops, CAST, GELU, SOFTMAX (axis < rank), TRILU (rank >= 2) keep the operand shape; SWIGLU's
//    operands and result share one shape; REDUCE_* axes are sorted, unique and < rank, and the
//    result drops them or keeps them as 1 (keepdims); GATHER's result is data[:axis] + indices +
//    data[axis+1:]; CONCAT's operands share rank and every dimension but axis, whose extents sum
//    to the result's; SLICE has one start and one non-zero step per dimension, result rank equal
//    to the operand's, and every index it reads (start + i * step, i < the result extent) inside
//    the operand (a start may be one past the end only where the result extent is 0); EXPAND's
//    operand broadcasts to the result; LAYER_NORM's scale and bias broadcast to x.shape[axis:];
//    RMS_NORM's x has rank >= 1, norm.axis 0 or rank - 1, and scale [D] for x [..., D]; ROTARY's
//    x has rank >= 2 and an even last dimension, and cos and sin broadcast to it; ATTENTION's
//    q [B, Hq, S, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv] agree, Hkv > 0 divides Hq, the mask
//    broadcasts to [B, Hq, S, T], the slopes (last, exactly with attention.alibi) are [Hq] and the
//    result is [B, Hq, S, Dv]; MATMUL follows numpy.matmul,
//    GEMM's op(A) and op(B) are rank 2 with equal inner dimensions and C broadcasts to [M, N], and
//    TRANSPOSE's perm is a permutation of its operand's dimensions;
//  - backward kernels: dy has the forward result's shape and each gradient its input's shape,
//    with the forward's rules on the inputs. CROSS_ENTROPY_GRAD (labels, dloss [], logits) ->
//    dlogits; SOFTMAX_GRAD (y, dy) -> dx; RMS_NORM_GRAD (x, scale, dy) -> (dx, dscale [D]);
//    LAYER_NORM_GRAD (x, scale, dy) -> (dx, dscale, dbias), both of shape x.shape[axis:] whatever
//    scale broadcasts from; ROTARY_GRAD (dy, cos, sin) -> dx; ATTENTION_GRAD (q, k, v, dy
//    [, mask] [, slopes]) -> (dq, dk, dv) with dk and dv of k's and v's [B, Hkv, ...] shapes; GELU_GRAD
//    (x, dy) -> dx and SWIGLU_GRAD (gate, up, dy) -> (dgate, dup), one shape throughout;
//    GATHER_GRAD (indices, dy) -> ddata with dy the GATHER of ddata's shape along axis by the
//    indices; SLICE_GRAD dy -> dx with dy the SLICE of dx as SLICE checks it;
//  - a result never partially overlaps an operand. Elementwise ops (unary, binary, comparisons,
//    WHERE, CAST, GELU, SWIGLU, TRILU), the row-local SOFTMAX, LAYER_NORM, RMS_NORM and ROTARY,
//    and COPY may run exactly in place (same offset, bytes and element size), and so may result 0
//    of CROSS_ENTROPY_GRAD, SOFTMAX_GRAD, RMS_NORM_GRAD, LAYER_NORM_GRAD, ROTARY_GRAD, GELU_GRAD
//    and SWIGLU_GRAD, and ACCUMULATE; MATMUL, GEMM, TRANSPOSE, REDUCE_*, GATHER, CONCAT, SLICE,
//    EXPAND, ATTENTION, ATTENTION_GRAD, GATHER_GRAD, SLICE_GRAD, DECODE_ATTENTION and TAKE_ROWS
//    results, and the further results of a backward kernel, overlap no operand (KV_WRITE's result
//    is its cache, as above); no two results of a kernel overlap;
//  - streams run concurrently: buffers of one space may overlap (arena reuse), and any two kernels
//    on different streams that touch overlapping bytes, one of them writing, are ordered by events
//    (the earlier one in list order happens before the later one; verifyStreamHazards in
//    stream_hazards.h). An OPTIMIZER_STEP counts as writing the host buffers of the parameters it
//    names. Program boundaries are full barriers: each program is checked on its own, since every
//    stream is idle between two runs.
//
// Run-time conditions the verifier cannot see (a GATHER or GATHER_GRAD index out of range, a
// CROSS_ENTROPY or CROSS_ENTROPY_GRAD label outside the vocabulary, an i64 DIV by zero, a
// KV_WRITE start, DECODE_ATTENTION length or TAKE_ROWS index out of range) are Errors from the
// backend, named by the executor.
void verifySchedule(const sl::schedule::Schedule &schedule);

} // namespace slrt
