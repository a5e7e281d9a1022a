// RUN: sl-opt %S/Inputs/explicit-step.mlir --sl-assign-streams | FileCheck %s

// Copies in on h2d, out on d2h, host accumulation and the optimizer on the host stream, the rest
// on compute; parameters, views and constants are no kernels.
// CHECK-LABEL: func.func @step
// CHECK: sl.param "w" :
// CHECK: sl.sub_batch %{{.+}} {count = 2 : i64, index = 0 : i64} :
// CHECK: sl.fetch_params %{{.+}} {group = "g", sl.stream = #sl.stream<h2d>}
// CHECK: sl.prefetch %{{.+}} {sl.stream = #sl.stream<h2d>}
// CHECK: sl.prefetch %{{.+}} {sl.stream = #sl.stream<h2d>}
// CHECK: sl.matmul %{{.+}} {sl.stream = #sl.stream<compute>}
// CHECK: sl.transpose %{{.+}} [1, 0] {sl.stream = #sl.stream<compute>}
// CHECK: sl.accumulate %{{.+}}, %{{.+}} {sl.stream = #sl.stream<compute>}
// CHECK: sl.offload %{{.+}} {sl.stream = #sl.stream<d2h>}
// CHECK: sl.accumulate %{{.+}}, %{{.+}} {sl.stream = #sl.stream<host>}
// CHECK: sl.constant dense<0.000000e+00> : tensor<f32>
// CHECK: sl.optimizer_step {{.+}} {sl.stream = #sl.stream<host>}
// CHECK-LABEL: func.func @forward
// CHECK-NOT: sl.stream
