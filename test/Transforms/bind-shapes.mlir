// RUN: sl-opt %s -split-input-file --sl-bind-shapes="batch=4 seq=16" | FileCheck %s

// Named dimensions take their sizes; shapes propagate through every op to the function type.
// CHECK-LABEL: func.func @named
// CHECK-SAME: (%{{.+}}: tensor<4x16x32xf32> {sl.dims = ["batch", "seq", ""], sl.name = "x"}) -> tensor<4x16x64xf32>
// CHECK: sl.matmul {{.+}} -> tensor<4x16x64xf32>
// CHECK: sl.add {{.+}} -> tensor<4x16x64xf32>
// CHECK: sl.relu %{{.+}} : tensor<4x16x64xf32>
// CHECK: return %{{.+}} : tensor<4x16x64xf32>
func.func @named(%x: tensor<?x?x32xf32> {sl.dims = ["batch", "seq", ""], sl.name = "x"}) -> tensor<?x?x64xf32> {
  %w = sl.param "w" : tensor<32x64xf32>
  %b = sl.param "b" : tensor<64xf32>
  %y = sl.matmul %x, %w : tensor<?x?x32xf32>, tensor<32x64xf32> -> tensor<?x?x64xf32>
  %z = sl.add %y, %b : tensor<?x?x64xf32>, tensor<64xf32> -> tensor<?x?x64xf32>
  %r = sl.relu %z : tensor<?x?x64xf32>
  return %r : tensor<?x?x64xf32>
}

// -----

// Unnamed dynamic dimensions follow the model contract [batch, seq, ...].
// CHECK-LABEL: func.func @positional
// CHECK-SAME: tensor<4x16x8xf32>
// CHECK: sl.gemm {{.+}} -> tensor<4x2xf32>
func.func @positional(%x: tensor<?x?x8xf32>, %a: tensor<?x8xf32>) -> (tensor<?x?x8xf32>, tensor<?x2xf32>) {
  %w = sl.param "w" : tensor<2x8xf32>
  %g = sl.gemm %a, %w {trans_b = true} : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x2xf32>
  return %x, %g : tensor<?x?x8xf32>, tensor<?x2xf32>
}

// -----

// Aliases exporters use for the same dimensions.
// CHECK-LABEL: func.func @aliases
// CHECK-SAME: tensor<4x16xf32>
func.func @aliases(%x: tensor<?x?xf32> {sl.dims = ["batch_size", "sequence_length"]}) -> tensor<?x?xf32> {
  return %x : tensor<?x?xf32>
}

// -----

// Static programs are left as they are.
// CHECK-LABEL: func.func @static
// CHECK-SAME: (%{{.+}}: tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @static(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = sl.sigmoid %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
