// RUN: sl-opt %s -split-input-file --sl-autodiff | FileCheck %s

// A backward function per stage: (inputs, params, output gradients) -> (float input gradients,
// param gradients), recomputing the forward first. The bias of a broadcast add gets the output
// gradient summed over the broadcast dimensions; a weight shared by every batch row gets one
// [K, rows] x [rows, N] product.
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>, %[[W:.+]]: tensor<4x5xf32> {sl.param}, %[[B:.+]]: tensor<5xf32> {sl.param}, %[[DY:.+]]: tensor<2x3x5xf32>)
// CHECK-SAME: -> (tensor<2x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>)
// CHECK-SAME: attributes {sl.backward_of = @block}
// CHECK: %[[M:.+]] = sl.matmul %[[X]], %[[W]]
// CHECK: %[[Y:.+]] = sl.add %[[M]], %[[B]]
// CHECK: %[[DB:.+]] = sl.reduce_sum %[[DY]], %{{.+}} {keepdims} : (tensor<2x3x5xf32>, tensor<2xi64>) -> tensor<1x1x5xf32>
// CHECK: %[[DB5:.+]] = sl.reshape %[[DB]], %{{.+}} {allowzero} : tensor<1x1x5xf32>, tensor<1xi64> -> tensor<5xf32>
// CHECK: %[[WT:.+]] = sl.transpose %[[W]] [1, 0]
// CHECK: %[[DX:.+]] = sl.matmul %[[DY]], %[[WT]] : tensor<2x3x5xf32>, tensor<5x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[X2:.+]] = sl.reshape %[[X]], %{{.+}} : tensor<2x3x4xf32>, tensor<2xi64> -> tensor<6x4xf32>
// CHECK: %[[DY2:.+]] = sl.reshape %[[DY]], %{{.+}} : tensor<2x3x5xf32>, tensor<2xi64> -> tensor<6x5xf32>
// CHECK: %[[X2T:.+]] = sl.transpose %[[X2]] [1, 0]
// CHECK: %[[DW:.+]] = sl.matmul %[[X2T]], %[[DY2]] : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>
// CHECK: return %[[DX]], %[[DW]], %[[DB5]]
func.func private @block(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32> {sl.param}, %b: tensor<5xf32> {sl.param}) -> tensor<2x3x5xf32> {
  %m = sl.matmul %x, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %y = sl.add %m, %b : tensor<2x3x5xf32>, tensor<5xf32> -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<2x3x5xf32> {
  %w = sl.param "layers.0.w" : tensor<4x5xf32>
  %b = sl.param "layers.0.b" : tensor<5xf32>
  %y = sl.layer @block(%x) params(%w, %b) {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// A value used twice gets the sum of both gradients; ReLU masks the gradient where x <= 0.
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[DY:.+]]: tensor<4xf32>)
// CHECK: %[[ZERO:.+]] = sl.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[POS:.+]] = sl.less %[[ZERO]], %[[X]] : tensor<f32>, tensor<4xf32> -> tensor<4xi1>
// CHECK: %[[DR:.+]] = sl.where %[[POS]], %[[DY]], %{{.+}} : tensor<4xi1>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: %[[SUM:.+]] = sl.add %[[DY]], %[[DR]]
// CHECK: return %[[SUM]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = sl.relu %x : tensor<4xf32>
  %y = sl.add %x, %r : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The embedding: token ids get no gradient, the table gets sl.gather_grad; a parameter the
// output does not depend on gets zeros.
// CHECK-LABEL: func.func private @prologue_backward
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x3xi64>, %[[E:.+]]: tensor<16x4xf32> {sl.param}, %[[U:.+]]: tensor<4xf32> {sl.param}, %[[DH:.+]]: tensor<2x3x4xf32>)
// CHECK-SAME: -> (tensor<16x4xf32>, tensor<4xf32>)
// CHECK: %[[DE:.+]] = sl.gather_grad %[[IDS]], %[[DH]] {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<16x4xf32>
// CHECK: %[[DU:.+]] = sl.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK: return %[[DE]], %[[DU]]
func.func private @prologue(%ids: tensor<2x3xi64>, %e: tensor<16x4xf32> {sl.param}, %unused: tensor<4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %h = sl.gather %e, %ids : tensor<16x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %e = sl.param "embed" : tensor<16x4xf32>
  %u = sl.param "unused" : tensor<4xf32>
  %h = sl.layer @prologue(%ids) params(%e, %u) {index = 0 : i64, stage = "prologue"} : (tensor<2x3xi64>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}

// -----

// Fused ops and the loss have gradient ops of their own.
// CHECK-LABEL: func.func private @epilogue_backward
// CHECK-SAME: (%[[H:.+]]: tensor<2x3x4xf32>, %[[L:.+]]: tensor<2x3xi64>, %[[G:.+]]: tensor<4xf32> {sl.param}, %[[HEAD:.+]]: tensor<4x8xf32> {sl.param}, %[[DLOSS:.+]]: tensor<f32>)
// CHECK: %[[N:.+]] = sl.rms_norm %[[H]], %[[G]]
// CHECK: %[[LOGITS:.+]] = sl.matmul %[[N]], %[[HEAD]]
// CHECK: %[[DLOGITS:.+]] = sl.cross_entropy_grad %[[L]], %[[DLOSS]], %[[LOGITS]] :
// CHECK: %[[DN:.+]] = sl.matmul %[[DLOGITS]], %{{.+}}
// CHECK: %[[DX:[^ ]+]], %[[DW:[^ ]+]] = sl.rms_norm_grad %[[H]], %[[G]], %[[DN]] {epsilon = 9.99999997E-7 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>)
// CHECK: return %[[DX]], %[[DW]], %{{.+}} : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4x8xf32>
func.func private @epilogue(%h: tensor<2x3x4xf32>, %labels: tensor<2x3xi64>, %g: tensor<4xf32> {sl.param}, %head: tensor<4x8xf32> {sl.param}) -> tensor<f32> {
  %n = sl.rms_norm %h, %g {epsilon = 1.0e-6 : f32} : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %logits = sl.matmul %n, %head : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %loss = sl.cross_entropy %logits, %labels : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @forward(%h: tensor<2x3x4xf32>, %labels: tensor<2x3xi64>) -> tensor<f32> {
  %g = sl.param "norm" : tensor<4xf32>
  %head = sl.param "head" : tensor<4x8xf32>
  %loss = sl.layer @epilogue(%h, %labels) params(%g, %head) {index = 0 : i64, stage = "epilogue"} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<4xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
