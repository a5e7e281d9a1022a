// RUN: sl-opt %S/Inputs/explicit-step.mlir --sl-assign-streams --sl-allocate --sl-insert-events | FileCheck %s

// A wait only where stream order and earlier waits do not already order two kernels.
// CHECK-LABEL: func.func @step
// CHECK-SAME: sl.num_events = 4 : i64
// The fetch needs no event of its own: the prefetch after it on the same stream records one.
// CHECK: sl.fetch_params {{.+}}sl.stream = #sl.stream<h2d>}
// CHECK: sl.prefetch {{.+}}sl.record = 0 : i64, sl.stream = #sl.stream<h2d>}
// CHECK: sl.prefetch {{.+}}sl.record = 1 : i64, sl.stream = #sl.stream<h2d>}
// CHECK: sl.matmul {{.+}}sl.stream = #sl.stream<compute>, sl.wait = array<i64: 0>}
// Writing over the first prefetch's buffer: it was read on this stream, written on h2d before
// event 0: no wait.
// CHECK: sl.transpose {{.+}}sl.offsets = array<i64: 256>, sl.stream = #sl.stream<compute>}
// CHECK: sl.matmul {{.+}}sl.stream = #sl.stream<compute>}
// CHECK: sl.matmul {{.+}}sl.stream = #sl.stream<compute>, sl.wait = array<i64: 1>}
// CHECK: sl.transpose {{.+}}sl.stream = #sl.stream<compute>}
// CHECK: sl.matmul {{.+}}sl.stream = #sl.stream<compute>}
// CHECK: sl.accumulate {{.+}}sl.record = 2 : i64, sl.stream = #sl.stream<compute>}
// CHECK: sl.offload {{.+}}sl.record = 3 : i64, sl.stream = #sl.stream<d2h>, sl.wait = array<i64: 2>}
// CHECK: sl.accumulate {{.+}}sl.stream = #sl.stream<host>, sl.wait = array<i64: 3>}
// The optimizer writes the parameter the fetch read: ordered already through event 3.
// CHECK: sl.optimizer_step {{.+}} {sl.stream = #sl.stream<host>}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: sl.wait
