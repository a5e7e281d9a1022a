// RUN: rm -rf %t && split-file %s %t
// RUN: sl-opt %t/model.mlir --sl-explicit-forward | FileCheck %s
// RUN: sl-opt %t/model.mlir --sl-explicit-forward --sl-assign-streams --sl-allocate --sl-insert-events | FileCheck %s --check-prefix=LOWERED
// RUN: sl-opt %t/dynamic.mlir --sl-explicit-forward -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/stages.mlir --sl-explicit-forward -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/twice.mlir --sl-explicit-forward -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/entry.mlir --sl-explicit-forward=entry=block | FileCheck %s --check-prefix=ENTRY
// RUN: sl-opt %t/entry.mlir --sl-explicit-forward=entry=missing -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/table.mlir --sl-explicit-forward --sl-assign-streams | FileCheck %s --check-prefix=TABLE

// A bound @forward becomes @infer_step: constants first (a device kernel reads a device copy),
// one fetch of the parameters something computes with ("unused" is not fetched), the input
// prefetched, the body, the outputs offloaded; the constant output goes to the device and back
// into a host slot of its own (a constant's host value is no output buffer). @forward is gone. The plan: one sub-batch of the batch (dimension 0 of the first
// input), every parameter's bytes (4x4 + 4 floats).
// CHECK-NOT: func.func @forward
// CHECK-LABEL: func.func @infer_step(
// CHECK-SAME: %[[X:.+]]: tensor<2x4xf32> {sl.name = "x"}) -> (tensor<2x4xf32> {sl.name = "y"}, tensor<4xf32> {sl.name = "c"})
// CHECK-SAME: attributes {sl.plan = #sl.plan<num_sub_batches = 1, parameter_bytes = 80, sub_batch_size = 2>}
// CHECK-NEXT: %[[B:.+]] = sl.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK-NEXT: %[[BD:.+]] = sl.prefetch %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[W:.+]] = sl.param "w" : tensor<4x4xf32>
// CHECK-NEXT: %[[WD:.+]] = sl.fetch_params %[[W]] {group = "model"} : tensor<4x4xf32>
// CHECK-NEXT: %[[XD:.+]] = sl.prefetch %[[X]] : tensor<2x4xf32>
// CHECK-NEXT: %[[M:.+]] = sl.matmul %[[XD]], %[[WD]]
// CHECK-NEXT: %[[Y:.+]] = sl.add %[[M]], %[[BD]]
// CHECK-NEXT: %[[YH:.+]] = sl.offload %[[Y]] : tensor<2x4xf32>
// CHECK-NEXT: %[[BD2:.+]] = sl.prefetch %[[B]] : tensor<4xf32>
// CHECK-NEXT: %[[BH:.+]] = sl.offload %[[BD2]] : tensor<4xf32>
// CHECK-NEXT: return %[[YH]], %[[BH]] : tensor<2x4xf32>, tensor<4xf32>
// CHECK-NOT: sl.param "unused"

// Lowered like any explicit step, in 256-byte units of the arena: the constant's copy at 0, the
// weight at 256, the input at 512, the product at 768; the sum takes the weight's range, free
// once the product has read it.
// LOWERED: sl.prefetch {{.*}}sl.offsets = array<i64: 0>, sl.stream = #sl.stream<h2d>
// LOWERED: sl.fetch_params {{.*}}sl.offsets = array<i64: 256>, sl.stream = #sl.stream<h2d>
// LOWERED: sl.prefetch {{.*}}sl.offsets = array<i64: 512>, sl.record = 0 : i64, sl.stream = #sl.stream<h2d>
// LOWERED: sl.matmul {{.*}}sl.offsets = array<i64: 768>, sl.stream = #sl.stream<compute>, sl.wait = array<i64: 0>
// LOWERED: sl.add {{.*}}sl.offsets = array<i64: 256>, sl.record = 1 : i64, sl.stream = #sl.stream<compute>
// LOWERED: sl.offload {{.*}}sl.stream = #sl.stream<d2h>, sl.wait = array<i64: 1>

// entry=block: a stage function becomes the step. Its parameter argument is an input like the
// others (no sl.param, nothing fetched), unnamed inputs are named arg<N> as sl-run's --input
// names them, and @block stays: @forward still calls it.
// ENTRY-LABEL: func.func private @block(
// ENTRY-LABEL: func.func @infer_step(
// ENTRY-SAME: %{{.+}}: tensor<2x4xf32> {sl.name = "arg0"}, %{{.+}}: tensor<4x4xf32> {sl.name = "arg1"})
// ENTRY-SAME: attributes {sl.plan = #sl.plan<num_sub_batches = 1, parameter_bytes = 0, sub_batch_size = 2>}
// ENTRY-NEXT: %[[X:.+]] = sl.prefetch %{{.+}} : tensor<2x4xf32>
// ENTRY-NEXT: %[[W:.+]] = sl.prefetch %{{.+}} : tensor<4x4xf32>
// ENTRY-NEXT: %[[Y:.+]] = sl.matmul %[[X]], %[[W]]
// ENTRY-NEXT: %[[YH:.+]] = sl.offload %[[Y]] : tensor<2x4xf32>
// ENTRY-NEXT: return %[[YH]]
// ENTRY-NOT: sl.fetch_params
// ENTRY-LABEL: func.func @forward(

// A concatenation of constants alone (HF LLaMA's cat(freqs, freqs) when the rotary table is too
// big to fold, at a long context) is a device kernel: its constants are prefetched for it, and
// the cosine reads a device value. (It was taken for a host join of offloaded outputs, and the
// schedule emitter refused the cosine: "a compute kernel reads a host value".)
// TABLE-LABEL: func.func @infer_step
// TABLE-DAG: %[[F:.+]] = sl.constant dense<{{.+}}> : tensor<2x2xf32>
// TABLE-DAG: %[[FD:.+]] = sl.prefetch %[[F]] {sl.stream = #sl.stream<h2d>} : tensor<2x2xf32>
// TABLE: %[[T:.+]] = sl.concat %[[FD]], %[[FD]] {axis = -1 : i64, sl.stream = #sl.stream<compute>}
// TABLE: sl.cos %[[T]] {sl.stream = #sl.stream<compute>}

//--- model.mlir
module {
  func.func @forward(%x: tensor<2x4xf32> {sl.name = "x"}) -> (tensor<2x4xf32> {sl.name = "y"}, tensor<4xf32> {sl.name = "c"}) {
    %w = sl.param "w" : tensor<4x4xf32>
    %unused = sl.param "unused" : tensor<4xf32>
    %b = sl.constant dense<1.0> : tensor<4xf32>
    %m = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %y = sl.add %m, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
    return %y, %b : tensor<2x4xf32>, tensor<4xf32>
  }
}

//--- dynamic.mlir
module {
  // expected-error @+1 {{sl-explicit-forward: input 'arg0' of type 'tensor<?x4xf32>' has no static shape; bind the batch and sequence sizes first (--sl-infer="batch=N seq=N" or --sl-bind-shapes)}}
  func.func @forward(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
    return %x : tensor<?x4xf32>
  }
}

//--- stages.mlir
module {
  func.func private @block(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // expected-error @+1 {{sl-explicit-forward: @forward calls stage functions; schedule stages with sl-schedule-subbatches}}
    %h = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %h : tensor<2x4xf32>
  }
}

//--- twice.mlir
// expected-error @+1 {{sl-explicit-forward: the module already has a @infer_step}}
module {
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
  func.func @infer_step(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

//--- entry.mlir
// expected-error @+1 {{sl-explicit-forward: no @missing function}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w = sl.param "w" : tensor<4x4xf32>
    %h = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %h : tensor<2x4xf32>
  }
}

//--- table.mlir
module {
  func.func @forward(%x: tensor<2x4xf32> {sl.name = "x"}) -> (tensor<2x4xf32> {sl.name = "y"}) {
    %f = sl.constant dense<[[0.5, 1.0], [1.5, 2.0]]> : tensor<2x2xf32>
    %t = sl.concat %f, %f {axis = -1 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
    %c = sl.cos %t : tensor<2x4xf32>
    %y = sl.mul %x, %c : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
