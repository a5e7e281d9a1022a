// RUN: sl-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sl-fold-matmul-transposes))' | FileCheck %s

// A linear layer's weight as exporters write it (transpose, then matmul): the weight is read
// through trans_b and the transposed copy is gone.
// CHECK-LABEL: func.func @weight
// CHECK-SAME: (%[[X:.+]]: tensor<4x8x32xf32>, %[[W:.+]]: tensor<64x32xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.matmul %[[X]], %[[W]] {trans_b = true} : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
// CHECK-NEXT: return %[[Y]]
func.func @weight(%x: tensor<4x8x32xf32>, %w: tensor<64x32xf32>) -> tensor<4x8x64xf32> {
  %t = sl.transpose %w [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %y = sl.matmul %x, %t : tensor<4x8x32xf32>, tensor<32x64xf32> -> tensor<4x8x64xf32>
  return %y : tensor<4x8x64xf32>
}

// -----

// A batched operand whose last two dimensions are swapped, on the left.
// CHECK-LABEL: func.func @batched_lhs
// CHECK-SAME: (%[[A:.+]]: tensor<2x3x5x4xf32>, %[[B:.+]]: tensor<2x3x5x6xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.matmul %[[A]], %[[B]] {trans_a = true} : tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32> -> tensor<2x3x4x6xf32>
// CHECK-NEXT: return %[[Y]]
func.func @batched_lhs(%a: tensor<2x3x5x4xf32>, %b: tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32> {
  %t = sl.transpose %a [0, 1, 3, 2] : tensor<2x3x5x4xf32> -> tensor<2x3x4x5xf32>
  %y = sl.matmul %t, %b : tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32> -> tensor<2x3x4x6xf32>
  return %y : tensor<2x3x4x6xf32>
}

// -----

// Both operands transposed, one of them broadcast over the other's batch.
// CHECK-LABEL: func.func @both
// CHECK-SAME: (%[[A:.+]]: tensor<2x5x4xf32>, %[[B:.+]]: tensor<6x5xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.matmul %[[A]], %[[B]] {trans_a = true, trans_b = true} : tensor<2x5x4xf32>, tensor<6x5xf32> -> tensor<2x4x6xf32>
// CHECK-NEXT: return %[[Y]]
func.func @both(%a: tensor<2x5x4xf32>, %b: tensor<6x5xf32>) -> tensor<2x4x6xf32> {
  %ta = sl.transpose %a [0, 2, 1] : tensor<2x5x4xf32> -> tensor<2x4x5xf32>
  %tb = sl.transpose %b [1, 0] : tensor<6x5xf32> -> tensor<5x6xf32>
  %y = sl.matmul %ta, %tb : tensor<2x4x5xf32>, tensor<5x6xf32> -> tensor<2x4x6xf32>
  return %y : tensor<2x4x6xf32>
}

// -----

// A transpose with another user stays for that user; the product still reads the original.
// CHECK-LABEL: func.func @other_user
// CHECK-SAME: (%[[X:.+]]: tensor<8x32xf32>, %[[W:.+]]: tensor<32x32xf32>)
// CHECK-NEXT: %[[T:.+]] = sl.transpose %[[W]] [1, 0]
// CHECK-NEXT: %[[Y:.+]] = sl.matmul %[[X]], %[[W]] {trans_b = true}
// CHECK-NEXT: %[[S:.+]] = sl.add %[[T]], %[[W]]
// CHECK-NEXT: return %[[Y]], %[[S]]
func.func @other_user(%x: tensor<8x32xf32>, %w: tensor<32x32xf32>) -> (tensor<8x32xf32>, tensor<32x32xf32>) {
  %t = sl.transpose %w [1, 0] : tensor<32x32xf32> -> tensor<32x32xf32>
  %y = sl.matmul %x, %t : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  %s = sl.add %t, %w : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  return %y, %s : tensor<8x32xf32>, tensor<32x32xf32>
}

// -----

// Permutations that move any other dimension are no flag: the attention heads' [0, 2, 1, 3]
// and a 3-D [1, 0, 2] stay as they are.
// CHECK-LABEL: func.func @not_last_two
// CHECK: %[[H:.+]] = sl.transpose %{{.+}} [0, 2, 1, 3]
// CHECK: sl.matmul %[[H]], %{{.+}} : tensor<2x4x3x8xf32>, tensor<8x5xf32>
// CHECK: %[[P:.+]] = sl.transpose %{{.+}} [1, 0, 2]
// CHECK: sl.matmul %[[P]], %{{.+}} : tensor<3x2x8xf32>, tensor<8x5xf32>
// CHECK-NOT: trans_
func.func @not_last_two(%q: tensor<2x3x4x8xf32>, %x: tensor<2x3x8xf32>, %w: tensor<8x5xf32>) -> (tensor<2x4x3x5xf32>, tensor<3x2x5xf32>) {
  %h = sl.transpose %q [0, 2, 1, 3] : tensor<2x3x4x8xf32> -> tensor<2x4x3x8xf32>
  %y = sl.matmul %h, %w : tensor<2x4x3x8xf32>, tensor<8x5xf32> -> tensor<2x4x3x5xf32>
  %p = sl.transpose %x [1, 0, 2] : tensor<2x3x8xf32> -> tensor<3x2x8xf32>
  %z = sl.matmul %p, %w : tensor<3x2x8xf32>, tensor<8x5xf32> -> tensor<3x2x5xf32>
  return %y, %z : tensor<2x4x3x5xf32>, tensor<3x2x5xf32>
}

// -----

// A weight gradient as sl-autodiff writes it, (x^T dy)^T: the product takes its operands the
// other way round and reads both transposed where needed, dW = dy^T x, with no transpose left.
// CHECK-LABEL: func.func @weight_gradient
// CHECK-SAME: (%[[X:.+]]: tensor<16x32xf32>, %[[DY:.+]]: tensor<16x64xf32>)
// CHECK-NEXT: %[[DW:.+]] = sl.matmul %[[DY]], %[[X]] {trans_a = true} : tensor<16x64xf32>, tensor<16x32xf32> -> tensor<64x32xf32>
// CHECK-NEXT: return %[[DW]]
func.func @weight_gradient(%x: tensor<16x32xf32>, %dy: tensor<16x64xf32>) -> tensor<64x32xf32> {
  %xt = sl.transpose %x [1, 0] : tensor<16x32xf32> -> tensor<32x16xf32>
  %dwt = sl.matmul %xt, %dy : tensor<32x16xf32>, tensor<16x64xf32> -> tensor<32x64xf32>
  %dw = sl.transpose %dwt [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  return %dw : tensor<64x32xf32>
}

// -----

// A transposed product with another user is computed once and transposed, not twice.
// CHECK-LABEL: func.func @result_other_user
// CHECK-NEXT: %[[P:.+]] = sl.matmul
// CHECK-NEXT: %[[T:.+]] = sl.transpose %[[P]] [1, 0]
// CHECK-NEXT: return %[[P]], %[[T]]
func.func @result_other_user(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
  %p = sl.matmul %a, %b : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  %t = sl.transpose %p [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  return %p, %t : tensor<4x6xf32>, tensor<6x4xf32>
}

// -----

// The input gradient of a flagged forward product as sl-autodiff writes it: dy @ (w^T)^T, where
// the transposes cancel (the transpose folder) and no flag remains; a transpose of an operand
// already read transposed clears its flag.
// CHECK-LABEL: func.func @cancelling
// CHECK-SAME: (%[[DY:.+]]: tensor<4x64xf32>, %[[W:.+]]: tensor<64x32xf32>, %[[V:.+]]: tensor<32x64xf32>)
// CHECK-NEXT: %[[DX:.+]] = sl.matmul %[[DY]], %[[W]] : tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
// CHECK-NEXT: %[[Z:.+]] = sl.matmul %[[DY]], %[[W]] : tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
// CHECK-NEXT: return %[[DX]], %[[Z]]
func.func @cancelling(%dy: tensor<4x64xf32>, %w: tensor<64x32xf32>, %v: tensor<32x64xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %wt = sl.transpose %w [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %wtt = sl.transpose %wt [1, 0] : tensor<32x64xf32> -> tensor<64x32xf32>
  %dx = sl.matmul %dy, %wtt : tensor<4x64xf32>, tensor<64x32xf32> -> tensor<4x32xf32>
  %z = sl.matmul %dy, %wt {trans_b = true} : tensor<4x64xf32>, tensor<32x64xf32> -> tensor<4x32xf32>
  return %dx, %z : tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// sl.gemm's operands fold into its own flags; a vector product has no flags and keeps its
// transpose.
// CHECK-LABEL: func.func @gemm_and_vector
// CHECK-SAME: (%[[A:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<5x3xf32>, %[[C:.+]]: tensor<5xf32>, %[[V:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[G:.+]] = sl.gemm %[[A]], %[[B]], %[[C]] {trans_a = true, trans_b = true} : (tensor<3x4xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %[[T:.+]] = sl.transpose %[[B]] [1, 0]
// CHECK-NEXT: %[[M:.+]] = sl.matmul %[[V]], %[[T]] : tensor<3xf32>, tensor<3x5xf32> -> tensor<5xf32>
// CHECK-NEXT: return %[[G]], %[[M]]
func.func @gemm_and_vector(%a: tensor<3x4xf32>, %b: tensor<5x3xf32>, %c: tensor<5xf32>, %v: tensor<3xf32>) -> (tensor<4x5xf32>, tensor<5xf32>) {
  %at = sl.transpose %a [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  %g = sl.gemm %at, %b, %c {trans_b = true} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %bt = sl.transpose %b [1, 0] : tensor<5x3xf32> -> tensor<3x5xf32>
  %m = sl.matmul %v, %bt : tensor<3xf32>, tensor<3x5xf32> -> tensor<5xf32>
  return %g, %m : tensor<4x5xf32>, tensor<5xf32>
}
