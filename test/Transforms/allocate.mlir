// RUN: sl-opt %S/Inputs/explicit-step.mlir --sl-assign-streams --sl-allocate | FileCheck %s

// Host: the input, the parameter, the offloaded gradient (accumulated in place) and the constant,
// one slot each, 64-byte aligned. Device: best fit, reusing a buffer after its last reader,
// 256-byte aligned.
// CHECK-LABEL: func.func @step
// CHECK-SAME: sl.name = "x", sl.offset = 0 : i64
// CHECK-SAME: sl.device_arena_bytes = 1280 : i64, sl.host_pool_bytes = 256 : i64
// CHECK: sl.param "w" {sl.offsets = array<i64: 64>}
// Sub-batch views: the input's bytes, 16 bytes (one row) apart.
// CHECK: sl.sub_batch {{.+}}sl.offsets = array<i64: 0>}
// CHECK: sl.sub_batch {{.+}}sl.offsets = array<i64: 16>}
// CHECK: %[[WD:.+]] = sl.fetch_params {{.+}}sl.offsets = array<i64: 0>
// CHECK: %[[D0:.+]] = sl.prefetch {{.+}}sl.offsets = array<i64: 256>
// CHECK: %[[D1:.+]] = sl.prefetch {{.+}}sl.offsets = array<i64: 512>
// CHECK: %[[Y0:.+]] = sl.matmul %[[D0]], %[[WD]] {sl.offsets = array<i64: 768>
// d0 is dead: its buffer is reused.
// CHECK: sl.transpose %[[Y0]] [1, 0] {sl.offsets = array<i64: 256>
// CHECK: %[[G0:.+]] = sl.matmul {{.+}}sl.offsets = array<i64: 1024>
// CHECK: sl.matmul %[[D1]], %[[WD]] {sl.offsets = array<i64: 256>
// The fetched weight is dead after its last reader.
// CHECK: sl.transpose {{.+}}sl.offsets = array<i64: 0>
// CHECK: sl.matmul {{.+}}sl.offsets = array<i64: 512>
// In place: the accumulator dies here.
// CHECK: sl.accumulate %[[G0]], {{.+}}sl.offsets = array<i64: 1024>
// CHECK: sl.offload {{.+}}sl.offsets = array<i64: 128>
// CHECK: sl.accumulate {{.+}}sl.offsets = array<i64: 128>
// CHECK: sl.constant {{.+}}sl.offsets = array<i64: 192>
// CHECK-LABEL: func.func @forward
// CHECK-NOT: sl.offset
