// RUN: sl-opt %s -canonicalize -split-input-file | FileCheck %s

// Exporters write SiLU as x * sigmoid(x); canonicalisation fuses it, in either operand order.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.silu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: %[[Z:.+]] = sl.silu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]], %[[Z]]
func.func @silu(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = sl.sigmoid %x : tensor<4x8xf32>
  %y = sl.mul %x, %s : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %z = sl.mul %s, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %y, %z : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Not SiLU: the sigmoid is of another value.
// CHECK-LABEL: func.func @not_silu
// CHECK: sl.sigmoid
// CHECK: sl.mul
// CHECK-NOT: sl.silu
func.func @not_silu(%x: tensor<4x8xf32>, %w: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = sl.sigmoid %w : tensor<4x8xf32>
  %y = sl.mul %x, %s : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
