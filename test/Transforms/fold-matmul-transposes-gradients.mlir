// RUN: sl-opt %s --pass-pipeline='builtin.module(sl-autodiff,func.func(sl-fold-matmul-transposes))' | FileCheck %s

// What the fold leaves of sl-autodiff's output for a linear layer whose weight the forward reads
// through trans_b: the input gradient reads the weight as stored (its two transposes cancel),
// the weight gradient is dy^T x over all rows through trans_a, and no transpose is left.
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x4x3xf32>, %[[W:[a-z0-9]+]]: tensor<5x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x4x5xf32>)
// CHECK-NOT: sl.transpose
// CHECK: %[[DX:.+]] = sl.matmul %[[DY]], %[[W]] : tensor<2x4x5xf32>, tensor<5x3xf32> -> tensor<2x4x3xf32>
// CHECK-DAG: %[[X2:.+]] = sl.reshape %[[X]], {{.+}} -> tensor<8x3xf32>
// CHECK-DAG: %[[DY2:.+]] = sl.reshape %[[DY]], {{.+}} -> tensor<8x5xf32>
// CHECK: %[[DW:.+]] = sl.matmul %[[DY2]], %[[X2]] {trans_a = true} : tensor<8x5xf32>, tensor<8x3xf32> -> tensor<5x3xf32>
// CHECK-NEXT: return %[[DX]], %[[DW]]
func.func private @block(%x: tensor<2x4x3xf32>, %w: tensor<5x3xf32>) -> tensor<2x4x5xf32> {
  %y = sl.matmul %x, %w {trans_b = true} : tensor<2x4x3xf32>, tensor<5x3xf32> -> tensor<2x4x5xf32>
  return %y : tensor<2x4x5xf32>
}
func.func @forward(%x: tensor<2x4x3xf32>, %w: tensor<5x3xf32>) -> tensor<2x4x5xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<2x4x3xf32>, tensor<5x3xf32>) -> tensor<2x4x5xf32>
  return %y : tensor<2x4x5xf32>
}
