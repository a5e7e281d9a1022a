// RUN: sl-opt %s -split-input-file --sl-autodiff | FileCheck %s
// One gradient rule per stage: each case checks the ops that make up the rule.

// sub
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[W:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: sl.neg %[[DY]]
func.func private @block(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.sub %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// mul
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[W:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: sl.mul %[[DY]], %[[W]]
// CHECK: sl.mul %[[DY]], %[[X]]
func.func private @block(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// div
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[W:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[Q:.+]] = sl.div %[[X]], %[[W]]
// CHECK: sl.div %[[DY]], %[[W]]
// CHECK: sl.mul %[[DY]], %[[Q]]
// CHECK: sl.neg
func.func private @block(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.div %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sqrt
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[Y:.+]] = sl.sqrt %[[X]]
// CHECK: sl.constant dense<5.000000e-01>
// CHECK: sl.div %{{.+}}, %[[Y]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.sqrt %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// reciprocal
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[Y:.+]] = sl.reciprocal %[[X]]
// CHECK: sl.mul %[[Y]], %[[Y]]
// CHECK: sl.neg
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.reciprocal %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// neg
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: sl.neg %[[DY]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.neg %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// exp
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[Y:.+]] = sl.exp %[[X]]
// CHECK: sl.mul %[[DY]], %[[Y]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// cos: dx = -(dy * sin x)
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[S:.+]] = sl.sin %[[X]]
// CHECK: %[[P:.+]] = sl.mul %[[DY]], %[[S]]
// CHECK: sl.neg %[[P]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.cos %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sin: dx = dy * cos x
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[C:.+]] = sl.cos %[[X]]
// CHECK: sl.mul %[[DY]], %[[C]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.sin %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// tanh
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[Y:.+]] = sl.tanh %[[X]]
// CHECK: sl.mul %[[Y]], %[[Y]]
// CHECK: sl.sub
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.tanh %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// sigmoid
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[Y:.+]] = sl.sigmoid %[[X]]
// CHECK: sl.sub %{{.+}}, %[[Y]]
// CHECK: sl.mul %[[Y]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.sigmoid %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// erf
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: sl.mul %[[X]], %[[X]]
// CHECK: sl.exp
// CHECK: sl.constant dense<1.12837
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.erf %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// silu
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[S:.+]] = sl.sigmoid %[[X]]
// CHECK: sl.sub %{{.+}}, %[[S]]
// CHECK: sl.mul %[[X]]
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.silu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// where
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[W:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[C:.+]] = sl.less %[[X]], %[[W]]
// CHECK: sl.where %[[C]], %[[DY]], %{{.+}}
// CHECK: sl.where %[[C]], %{{.+}}, %[[DY]]
func.func private @block(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %c = sl.less %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  %y = sl.where %c, %x, %w : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// gemm
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[W:[a-z0-9]+]]: tensor<5x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x5xf32>)
// CHECK: sl.constant dense<2.000000e+00>
// CHECK: %[[S:.+]] = sl.mul %[[DY]]
// CHECK: sl.matmul %[[S]], %{{.+}} : tensor<2x5xf32>, tensor<5x3xf32> -> tensor<2x3xf32>
// CHECK: sl.matmul {{.+}}, %[[S]] : tensor<3x2xf32>, tensor<2x5xf32> -> tensor<3x5xf32>
// CHECK: sl.transpose {{.+}} [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
func.func private @block(%x: tensor<2x3xf32>, %w: tensor<5x3xf32>) -> tensor<2x5xf32> {
  %y = sl.gemm %x, %w {trans_b = true, alpha = 2.0 : f32} : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}
func.func @forward(%x: tensor<2x3xf32>, %w: tensor<5x3xf32>) -> tensor<2x5xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

// matmul with transpose flags: the rule works on op(A) = A^T and op(B) = B^T with the transposes
// spelled out (sl-fold-matmul-transposes turns them back into flags): d op(A) = dy op(B)^T and
// d op(B) = op(A)^T dy, each transposed back to its operand's stored shape.
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<3x2xf32>, %[[B:[a-z0-9]+]]: tensor<5x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x5xf32>)
// CHECK: %[[OPA:.+]] = sl.transpose %[[A]] [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
// CHECK: %[[OPB:.+]] = sl.transpose %[[B]] [1, 0] : tensor<5x3xf32> -> tensor<3x5xf32>
// CHECK: %[[OPBT:.+]] = sl.transpose %[[OPB]] [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
// CHECK: %[[DOPA:.+]] = sl.matmul %[[DY]], %[[OPBT]] : tensor<2x5xf32>, tensor<5x3xf32> -> tensor<2x3xf32>
// CHECK: %[[DA:.+]] = sl.transpose %[[DOPA]] [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK: %[[OPAT:.+]] = sl.transpose %[[OPA]] [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK: %[[DOPB:.+]] = sl.matmul %[[OPAT]], %[[DY]] : tensor<3x2xf32>, tensor<2x5xf32> -> tensor<3x5xf32>
// CHECK: %[[DB:.+]] = sl.transpose %[[DOPB]] [1, 0] : tensor<3x5xf32> -> tensor<5x3xf32>
// CHECK: return %[[DA]], %[[DB]]
func.func private @block(%a: tensor<3x2xf32>, %b: tensor<5x3xf32>) -> tensor<2x5xf32> {
  %y = sl.matmul %a, %b {trans_a = true, trans_b = true} : tensor<3x2xf32>, tensor<5x3xf32> -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}
func.func @forward(%a: tensor<3x2xf32>, %b: tensor<5x3xf32>) -> tensor<2x5xf32> {
  %y = sl.layer @block(%a, %b) params() {index = 0 : i64, stage = "block"} : (tensor<3x2xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}

// -----

// transpose
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[DY:[a-z0-9]+]]: tensor<4x2x3xf32>)
// CHECK: sl.transpose %[[DY]] [1, 2, 0] : tensor<4x2x3xf32> -> tensor<2x3x4xf32>
func.func private @block(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %y = sl.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %y : tensor<4x2x3xf32>
}
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %y : tensor<4x2x3xf32>
}

// -----

// reshape
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>, %[[DY:[a-z0-9]+]]: tensor<6x4xf32>)
// CHECK: sl.reshape %[[DY]], %{{.+}} {allowzero} : tensor<6x4xf32>, tensor<3xi64> -> tensor<2x3x4xf32>
func.func private @block(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %s = sl.constant dense<[6, 4]> : tensor<2xi64>
  %y = sl.reshape %x, %s : tensor<2x3x4xf32>, tensor<2xi64> -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}
func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<6x4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  return %y : tensor<6x4xf32>
}

// -----

// expand
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x4xf32>, %[[DY:[a-z0-9]+]]: tensor<3x4xf32>)
// CHECK: sl.reduce_sum %[[DY]], %{{.+}} {keepdims} : (tensor<3x4xf32>, tensor<1xi64>) -> tensor<1x4xf32>
func.func private @block(%x: tensor<1x4xf32>) -> tensor<3x4xf32> {
  %s = sl.constant dense<[3, 4]> : tensor<2xi64>
  %y = sl.expand %x, %s : tensor<1x4xf32>, tensor<2xi64> -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
func.func @forward(%x: tensor<1x4xf32>) -> tensor<3x4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<1x4xf32>) -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}

// -----

// reduce_sum
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2xf32>)
// CHECK: sl.reshape %[[DY]], %{{.+}} {allowzero} : tensor<2xf32>, tensor<2xi64> -> tensor<2x1xf32>
// CHECK: sl.expand {{.+}} : tensor<2x1xf32>, tensor<2xi64> -> tensor<2x3xf32>
func.func private @block(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %a = sl.constant dense<1> : tensor<1xi64>
  %y = sl.reduce_sum %x, %a : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// reduce_mean
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x1xf32>)
// CHECK: sl.expand %[[DY]], %{{.+}} : tensor<2x1xf32>, tensor<2xi64> -> tensor<2x3xf32>
// CHECK: sl.constant dense<3.000000e+00>
// CHECK: sl.div
func.func private @block(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %a = sl.constant dense<-1> : tensor<1xi64>
  %y = sl.reduce_mean %x, %a {keepdims} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2x1xf32>
  return %y : tensor<2x1xf32>
}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return %y : tensor<2x1xf32>
}

// -----

// softmax
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK: %[[Y:.+]] = sl.softmax %[[X]]
// CHECK: %[[P:.+]] = sl.mul %[[DY]], %[[Y]]
// CHECK: %[[S:.+]] = sl.reduce_sum %[[P]], %{{.+}} {keepdims}
// CHECK: %[[D:.+]] = sl.sub %[[DY]], %[[S]]
// CHECK: sl.mul %[[Y]], %[[D]]
func.func private @block(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = sl.softmax %x : tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// concat
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[W:[a-z0-9]+]]: tensor<2x5xf32>, %[[DY:[a-z0-9]+]]: tensor<2x8xf32>)
// CHECK: sl.slice %[[DY]], %{{.+}}, %{{.+}} axes %{{.+}} steps %{{.+}} : ({{.+}}) -> tensor<2x3xf32>
// CHECK: sl.slice %[[DY]], %{{.+}}, %{{.+}} axes %{{.+}} steps %{{.+}} : ({{.+}}) -> tensor<2x5xf32>
func.func private @block(%x: tensor<2x3xf32>, %w: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %y = sl.concat %x, %w {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
func.func @forward(%x: tensor<2x3xf32>, %w: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// slice
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4x2xf32>, %[[DY:[a-z0-9]+]]: tensor<2x2xf32>)
// CHECK: sl.slice_grad %[[DY]], {{.+}} -> tensor<4x2xf32>
func.func private @block(%x: tensor<4x2xf32>) -> tensor<2x2xf32> {
  %s = sl.constant dense<1> : tensor<1xi64>
  %e = sl.constant dense<3> : tensor<1xi64>
  %y = sl.slice %x, %s, %e : (tensor<4x2xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
func.func @forward(%x: tensor<4x2xf32>) -> tensor<2x2xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

// trilu
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3x3xf32>, %[[DY:[a-z0-9]+]]: tensor<3x3xf32>)
// CHECK: sl.trilu %[[DY]] {upper}
func.func private @block(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %y = sl.trilu %x {upper} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}
func.func @forward(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}

// -----

// cumsum: the running sum of dy taken from the other end.
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK: %[[AXIS:.+]] = sl.constant dense<1> : tensor<i64>
// CHECK: sl.cumsum %[[DY]], %[[AXIS]] {reverse} : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
func.func private @block(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %axis = sl.constant dense<1> : tensor<i64>
  %y = sl.cumsum %x, %axis : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// cumsum, exclusive and reversed: exclusive, from the front.
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>, %[[DY:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK: %[[AXIS:.+]] = sl.constant dense<0> : tensor<i64>
// CHECK: sl.cumsum %[[DY]], %[[AXIS]] {exclusive} : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
func.func private @block(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %axis = sl.constant dense<0> : tensor<i64>
  %y = sl.cumsum %x, %axis {exclusive, reverse} : (tensor<2x3xf32>, tensor<i64>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// layer_norm
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x4xf32>, %[[W:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<2x4xf32>)
// CHECK: sl.layer_norm_grad %[[X]], %[[W]], %[[DY]] {axis = 1 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  %y = sl.layer_norm %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
func.func @forward(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// gelu
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: sl.gelu_grad %[[X]], %[[DY]] {tanh}
func.func private @block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.gelu %x {tanh} : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// swiglu
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<4xf32>, %[[W:[a-z0-9]+]]: tensor<4xf32>, %[[DY:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: sl.swiglu_grad %[[X]], %[[W]], %[[DY]] : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
func.func private @block(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.swiglu %x, %w : tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x, %w) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// rotary: cos and sin are constants; only x gets a gradient
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<1x2x4xf32>, %[[DY:[a-z0-9]+]]: tensor<1x2x4xf32>)
// CHECK: sl.rotary_grad %[[DY]], %{{.+}}, %{{.+}} {interleaved} : (tensor<1x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
func.func private @block(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %c = sl.constant dense<0.5> : tensor<2x4xf32>
  %s = sl.constant dense<0.25> : tensor<2x4xf32>
  %y = sl.rotary %x, %c, %s {interleaved} : (tensor<1x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}
func.func @forward(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}

// -----

// attention: q, k and v each get their gradient (GQA: k, v keep their fewer heads)
// CHECK-LABEL: func.func private @block_backward
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<1x4x3x2xf32>, %[[K:[a-z0-9]+]]: tensor<1x2x3x2xf32>, %[[V:[a-z0-9]+]]: tensor<1x2x3x2xf32>, %[[DY:[a-z0-9]+]]: tensor<1x4x3x2xf32>)
// CHECK: %[[GQ:[^ ]+]], %[[GK:[^ ]+]], %[[GV:[^ ]+]] = sl.attention_grad %[[Q]], %[[K]], %[[V]], %[[DY]] {causal, scale = 5.000000e-01 : f32} : (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x4x3x2xf32>) -> (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>)
// CHECK: return %[[GQ]], %[[GK]], %[[GV]]
func.func private @block(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32> {
  %y = sl.attention %q, %k, %v {causal, scale = 0.5 : f32} : (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32>
  return %y : tensor<1x4x3x2xf32>
}
func.func @forward(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32> {
  %y = sl.layer @block(%q, %k, %v) params() {index = 0 : i64, stage = "block"} : (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32>
  return %y : tensor<1x4x3x2xf32>
}
