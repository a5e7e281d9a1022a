// RUN: sl-opt %s | FileCheck %s
// RUN: sl-opt %s | sl-opt | FileCheck %s
// RUN: sl-opt %s --mlir-print-op-generic | sl-opt | FileCheck %s

// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<4x32xf32>) -> tensor<4x16xf32> {
  // CHECK: %[[W1:.+]] = sl.param "fc1.weight" from "/models/mlp.onnx" at 1024 : tensor<64x32xf32>
  %w1 = sl.param "fc1.weight" from "/models/mlp.onnx" at 1024 : tensor<64x32xf32>
  // CHECK: %[[B1:.+]] = sl.param "fc1.bias" : tensor<64xf32>
  %b1 = sl.param "fc1.bias" : tensor<64xf32>
  // CHECK: %[[H:.+]] = sl.gemm %{{.+}}, %[[W1]], %[[B1]] {trans_b = true} : (tensor<4x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  %h = sl.gemm %x, %w1, %b1 {trans_b = true} : (tensor<4x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  // CHECK: sl.relu %[[H]] : tensor<4x64xf32>
  %r = sl.relu %h : tensor<4x64xf32>
  // CHECK: sl.silu
  %s = sl.silu %r : tensor<4x64xf32>
  // CHECK: sl.sigmoid
  %g = sl.sigmoid %s : tensor<4x64xf32>
  // CHECK: sl.mul %{{.+}}, %{{.+}} : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %m = sl.mul %s, %g : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  %w2 = sl.param "fc2.weight" : tensor<64x16xf32>
  // CHECK: sl.gemm %{{.+}}, %{{.+}} {alpha = 5.000000e-01 : f32} : (tensor<4x64xf32>, tensor<64x16xf32>) -> tensor<4x16xf32>
  %y = sl.gemm %m, %w2 {alpha = 0.5 : f32} : (tensor<4x64xf32>, tensor<64x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @broadcasting
func.func @broadcasting(%x: tensor<?x8x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>) -> tensor<?x8x16xf32> {
  // CHECK: sl.matmul %{{.+}}, %{{.+}} : tensor<?x8x32xf32>, tensor<32x16xf32> -> tensor<?x8x16xf32>
  %y = sl.matmul %x, %w : tensor<?x8x32xf32>, tensor<32x16xf32> -> tensor<?x8x16xf32>
  // CHECK: sl.add %{{.+}}, %{{.+}} : tensor<16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  %z = sl.add %b, %y : tensor<16xf32>, tensor<?x8x16xf32> -> tensor<?x8x16xf32>
  return %z : tensor<?x8x16xf32>
}

// CHECK-LABEL: func.func @transposed_operands
func.func @transposed_operands(%x: tensor<2x32x8xf32>, %w: tensor<16x32xf32>) -> tensor<2x8x16xf32> {
  // Stored [..., K, M] and [N, K], read transposed; unset flags are not printed.
  // CHECK: sl.matmul %{{.+}}, %{{.+}} {trans_a = true, trans_b = true} : tensor<2x32x8xf32>, tensor<16x32xf32> -> tensor<2x8x16xf32>
  %y = sl.matmul %x, %w {trans_a = true, trans_b = true} : tensor<2x32x8xf32>, tensor<16x32xf32> -> tensor<2x8x16xf32>
  return %y : tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @vectors
func.func @vectors(%v: tensor<32xf32>, %m: tensor<2x32x16xf32>) -> tensor<2x16xf32> {
  // A rank-1 lhs is a row vector whose added dimension is dropped from the result.
  // CHECK: sl.matmul {{.+}} -> tensor<2x16xf32>
  %y = sl.matmul %v, %m : tensor<32xf32>, tensor<2x32x16xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// CHECK-LABEL: func.func @transpose
func.func @transpose(%w: tensor<64x32xf32>, %x: tensor<2x3x4xf32>) -> (tensor<32x64xf32>, tensor<4x2x3xf32>) {
  // CHECK: sl.transpose %{{.+}} [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  %t = sl.transpose %w [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
  // CHECK: sl.transpose %{{.+}} [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %u = sl.transpose %x [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %t, %u : tensor<32x64xf32>, tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<4xi64>, tensor<f32>, tensor<2x2xi1>, tensor<0xi64>, tensor<3xbf16>) {
  // CHECK: sl.constant dense<[4, 16, 2, 32]> : tensor<4xi64>
  %shape = sl.constant dense<[4, 16, 2, 32]> : tensor<4xi64>
  // CHECK: sl.constant dense<0xFF800000> : tensor<f32>
  %ninf = sl.constant dense<0xFF800000> : tensor<f32>
  // CHECK: sl.constant dense<{{\[}}[true, false], [true, true]]> : tensor<2x2xi1>
  %mask = sl.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  // CHECK: sl.constant dense<> : tensor<0xi64>
  %empty = sl.constant dense<> : tensor<0xi64>
  // CHECK: sl.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xbf16>
  %h = sl.constant dense<[1.0, 2.0, 3.0]> : tensor<3xbf16>
  return %shape, %ninf, %mask, %empty, %h : tensor<4xi64>, tensor<f32>, tensor<2x2xi1>, tensor<0xi64>, tensor<3xbf16>
}

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x64xf32>, %[[M:[^:]+]]: tensor<4x1xf32>, %[[N:[^:]+]]: tensor<f32>, %[[A:[^:]+]]: tensor<16xi64>, %[[B:[^:]+]]: tensor<16x1xi64>)
func.func @elementwise(%x: tensor<4x64xf32>, %m: tensor<4x1xf32>, %n: tensor<f32>, %a: tensor<16xi64>, %b: tensor<16x1xi64>) -> (tensor<4x64xf32>, tensor<16x16xi1>, tensor<16x16xi1>, tensor<16x16xi64>) {
  // CHECK: %[[SUB:.+]] = sl.sub %[[X]], %[[M]] : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  %sub = sl.sub %x, %m : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  // CHECK: %[[DIV:.+]] = sl.div %[[SUB]], %[[N]] : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>
  %div = sl.div %sub, %n : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>
  // CHECK: %[[POW:.+]] = sl.pow %[[DIV]], %[[N]] : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>
  %pow = sl.pow %div, %n : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>
  // CHECK: %[[EQ:.+]] = sl.equal %[[A]], %[[B]] : tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi1>
  %eq = sl.equal %a, %b : tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi1>
  // CHECK: %[[LT:.+]] = sl.less %[[A]], %[[B]] : tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi1>
  %lt = sl.less %a, %b : tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi1>
  // CHECK: %[[SEL:.+]] = sl.where %[[LT]], %[[A]], %[[B]] : tensor<16x16xi1>, tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi64>
  %sel = sl.where %lt, %a, %b : tensor<16x16xi1>, tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi64>
  // CHECK: return %[[POW]], %[[EQ]], %[[LT]], %[[SEL]]
  return %pow, %eq, %lt, %sel : tensor<4x64xf32>, tensor<16x16xi1>, tensor<16x16xi1>, tensor<16x16xi64>
}

// Dynamic dimensions broadcast against 1 stay dynamic and against n > 1 become n; a result may be
// written with ? where the rule knows the size.
// CHECK-LABEL: func.func @broadcast_dynamic
func.func @broadcast_dynamic(%x: tensor<?x1x?xf32>, %y: tensor<?x5xf32>) -> (tensor<?x?x5xf32>, tensor<?x?x?xf32>) {
  // CHECK: sl.sub %{{.+}}, %{{.+}} : tensor<?x1x?xf32>, tensor<?x5xf32> -> tensor<?x?x5xf32>
  %a = sl.sub %x, %y : tensor<?x1x?xf32>, tensor<?x5xf32> -> tensor<?x?x5xf32>
  // CHECK: sl.div %{{.+}}, %{{.+}} : tensor<?x1x?xf32>, tensor<?x5xf32> -> tensor<?x?x?xf32>
  %b = sl.div %x, %y : tensor<?x1x?xf32>, tensor<?x5xf32> -> tensor<?x?x?xf32>
  return %a, %b : tensor<?x?x5xf32>, tensor<?x?x?xf32>
}

// CHECK-LABEL: func.func @unary
func.func @unary(%x: tensor<4x64xf32>, %i: tensor<4xi64>, %m: tensor<16x16xi1>) -> (tensor<4x64xf32>, tensor<4xi64>, tensor<16x16xf32>, tensor<4xi1>) {
  // CHECK: sl.neg %{{.+}} : tensor<4x64xf32>
  %n = sl.neg %x : tensor<4x64xf32>
  // CHECK: sl.sqrt %{{.+}} : tensor<4x64xf32>
  %s = sl.sqrt %n : tensor<4x64xf32>
  // CHECK: sl.reciprocal %{{.+}} : tensor<4x64xf32>
  %r = sl.reciprocal %s : tensor<4x64xf32>
  // CHECK: sl.exp %{{.+}} : tensor<4x64xf32>
  %e = sl.exp %r : tensor<4x64xf32>
  // CHECK: sl.erf %{{.+}} : tensor<4x64xf32>
  %f = sl.erf %e : tensor<4x64xf32>
  // CHECK: sl.tanh %{{.+}} : tensor<4x64xf32>
  %t = sl.tanh %f : tensor<4x64xf32>
  // CHECK: sl.gelu %{{.+}} : tensor<4x64xf32>
  %g = sl.gelu %t : tensor<4x64xf32>
  // CHECK: sl.gelu %{{.+}} {tanh} : tensor<4x64xf32>
  %gt = sl.gelu %g {tanh} : tensor<4x64xf32>
  // CHECK: sl.swiglu %{{.+}}, %{{.+}} : tensor<4x64xf32>
  %sw = sl.swiglu %g, %gt : tensor<4x64xf32>
  // CHECK: sl.neg %{{.+}} : tensor<4xi64>
  %ni = sl.neg %i : tensor<4xi64>
  // CHECK: sl.cast %{{.+}} to f32 : tensor<16x16xi1> -> tensor<16x16xf32>
  %mf = sl.cast %m to f32 : tensor<16x16xi1> -> tensor<16x16xf32>
  // CHECK: sl.cast %{{.+}} to i1 : tensor<4xi64> -> tensor<4xi1>
  %ib = sl.cast %ni to i1 : tensor<4xi64> -> tensor<4xi1>
  return %sw, %ni, %mf, %ib : tensor<4x64xf32>, tensor<4xi64>, tensor<16x16xf32>, tensor<4xi1>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: tensor<?x?x64xf32>, %table: tensor<256x64xf32>, %ids: tensor<4x16xi64>) -> (tensor<3xi64>, tensor<2xi64>, tensor<4x16x64xf32>, tensor<?x?x4x16xf32>) {
  // CHECK: sl.shape %{{.+}} : tensor<?x?x64xf32> -> tensor<3xi64>
  %s = sl.shape %x : tensor<?x?x64xf32> -> tensor<3xi64>
  // CHECK: sl.shape %{{.+}} {end = -1 : i64, start = -3 : i64} : tensor<?x?x64xf32> -> tensor<2xi64>
  %s2 = sl.shape %x {start = -3, end = -1} : tensor<?x?x64xf32> -> tensor<2xi64>
  // CHECK: sl.gather %{{.+}}, %{{.+}} : tensor<256x64xf32>, tensor<4x16xi64> -> tensor<4x16x64xf32>
  %h = sl.gather %table, %ids : tensor<256x64xf32>, tensor<4x16xi64> -> tensor<4x16x64xf32>
  %shape = sl.constant dense<[0, 0, 4, -1]> : tensor<4xi64>
  // CHECK: sl.reshape %{{.+}}, %{{.+}} : tensor<?x?x64xf32>, tensor<4xi64> -> tensor<?x?x4x16xf32>
  %r = sl.reshape %x, %shape : tensor<?x?x64xf32>, tensor<4xi64> -> tensor<?x?x4x16xf32>
  return %s, %s2, %h, %r : tensor<3xi64>, tensor<2xi64>, tensor<4x16x64xf32>, tensor<?x?x4x16xf32>
}

// CHECK-LABEL: func.func @gather_axis
func.func @gather_axis(%x: tensor<4x16x64xf32>, %i: tensor<i64>, %j: tensor<2x3xi32>) -> (tensor<4x64xf32>, tensor<4x16x2x3xf32>) {
  // CHECK: sl.gather %{{.+}}, %{{.+}} {axis = 1 : i64} : tensor<4x16x64xf32>, tensor<i64> -> tensor<4x64xf32>
  %last = sl.gather %x, %i {axis = 1} : tensor<4x16x64xf32>, tensor<i64> -> tensor<4x64xf32>
  // CHECK: sl.gather %{{.+}}, %{{.+}} {axis = -1 : i64} : tensor<4x16x64xf32>, tensor<2x3xi32> -> tensor<4x16x2x3xf32>
  %g = sl.gather %x, %j {axis = -1} : tensor<4x16x64xf32>, tensor<2x3xi32> -> tensor<4x16x2x3xf32>
  return %last, %g : tensor<4x64xf32>, tensor<4x16x2x3xf32>
}

// CHECK-LABEL: func.func @reshape_allowzero
func.func @reshape_allowzero(%x: tensor<2x0x3xf32>) -> tensor<3x0xf32> {
  %s = sl.constant dense<[3, 0]> : tensor<2xi64>
  // CHECK: sl.reshape %{{.+}}, %{{.+}} {allowzero} : tensor<2x0x3xf32>, tensor<2xi64> -> tensor<3x0xf32>
  %y = sl.reshape %x, %s {allowzero} : tensor<2x0x3xf32>, tensor<2xi64> -> tensor<3x0xf32>
  return %y : tensor<3x0xf32>
}

// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2xi64>, %b: tensor<1xi64>, %x: tensor<4x?x8xf32>, %y: tensor<4x3x8xf32>) -> (tensor<3xi64>, tensor<4x?x8xf32>) {
  // CHECK: sl.concat %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %s = sl.concat %a, %b {axis = 0} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  // CHECK: sl.concat %{{.+}}, %{{.+}}, %{{.+}} {axis = -2 : i64} : (tensor<4x?x8xf32>, tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x?x8xf32>
  %c = sl.concat %x, %y, %y {axis = -2} : (tensor<4x?x8xf32>, tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x?x8xf32>
  return %s, %c : tensor<3xi64>, tensor<4x?x8xf32>
}

// CHECK-LABEL: func.func @slice
func.func @slice(%cos: tensor<128x16xf32>, %x: tensor<4x10xf32>, %s: tensor<1xi64>) -> (tensor<?x16xf32>, tensor<4x3xf32>, tensor<?x?xf32>) {
  %zero = sl.constant dense<0> : tensor<1xi64>
  // CHECK: sl.slice %{{.+}}, %{{.+}}, %{{.+}} axes %{{.+}} : (tensor<128x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x16xf32>
  %c = sl.slice %cos, %zero, %s axes %zero : (tensor<128x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x16xf32>
  %m1 = sl.constant dense<-1> : tensor<1xi64>
  %min = sl.constant dense<-9223372036854775808> : tensor<1xi64>
  %m3 = sl.constant dense<-3> : tensor<1xi64>
  // x[:, -2::-3] is columns 8, 5 and 2.
  %m2 = sl.constant dense<-2> : tensor<1xi64>
  // CHECK: sl.slice %{{.+}}, %{{.+}}, %{{.+}} axes %{{.+}} steps %{{.+}} : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x3xf32>
  %r = sl.slice %x, %m2, %min axes %m1 steps %m3 : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x3xf32>
  // Axes not known: every dimension may change.
  // CHECK: sl.slice %{{.+}}, %{{.+}}, %{{.+}} axes %{{.+}} : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  %u = sl.slice %x, %zero, %m1 axes %s : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  return %c, %r, %u : tensor<?x16xf32>, tensor<4x3xf32>, tensor<?x?xf32>
}

// CHECK-LABEL: func.func @expand_trilu
func.func @expand_trilu(%k: tensor<4x2x1x16x8xf32>, %full: tensor<16x16xf32>, %one: tensor<i64>, %s: tensor<2xi64>) -> (tensor<4x2x2x16x8xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<?x?x?x?x?xf32>) {
  %shape = sl.constant dense<[4, 2, 2, 16, 8]> : tensor<5xi64>
  // CHECK: sl.expand %{{.+}}, %{{.+}} : tensor<4x2x1x16x8xf32>, tensor<5xi64> -> tensor<4x2x2x16x8xf32>
  %k2 = sl.expand %k, %shape : tensor<4x2x1x16x8xf32>, tensor<5xi64> -> tensor<4x2x2x16x8xf32>
  // CHECK: sl.trilu %{{.+}}, %{{.+}} {upper} : (tensor<16x16xf32>, tensor<i64>) -> tensor<16x16xf32>
  %u = sl.trilu %full, %one {upper} : (tensor<16x16xf32>, tensor<i64>) -> tensor<16x16xf32>
  // CHECK: sl.trilu %{{.+}} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  %l = sl.trilu %full : (tensor<16x16xf32>) -> tensor<16x16xf32>
  // A shape known only at run time: rank max(5, 2), every dimension unknown.
  // CHECK: sl.expand %{{.+}}, %{{.+}} : tensor<4x2x1x16x8xf32>, tensor<2xi64> -> tensor<?x?x?x?x?xf32>
  %d = sl.expand %k, %s : tensor<4x2x1x16x8xf32>, tensor<2xi64> -> tensor<?x?x?x?x?xf32>
  return %k2, %u, %l, %d : tensor<4x2x2x16x8xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<?x?x?x?x?xf32>
}

// CHECK-LABEL: func.func @constant_of_shape_range
func.func @constant_of_shape_range(%s: tensor<2xi64>, %seq: tensor<i64>) -> (tensor<?x?xf32>, tensor<2x3xi64>, tensor<?xi64>, tensor<4xf32>) {
  // CHECK: sl.constant_of_shape %{{.+}} {value = dense<0.000000e+00> : tensor<1xf32>} : tensor<2xi64> -> tensor<?x?xf32>
  %z = sl.constant_of_shape %s {value = dense<0.0> : tensor<1xf32>} : tensor<2xi64> -> tensor<?x?xf32>
  %c = sl.constant dense<[2, 3]> : tensor<2xi64>
  // CHECK: sl.constant_of_shape %{{.+}} {value = dense<1> : tensor<1xi64>} : tensor<2xi64> -> tensor<2x3xi64>
  %o = sl.constant_of_shape %c {value = dense<1> : tensor<1xi64>} : tensor<2xi64> -> tensor<2x3xi64>
  %zero = sl.constant dense<0> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  // CHECK: sl.range %{{.+}}, %{{.+}}, %{{.+}} : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<?xi64>
  %pos = sl.range %zero, %seq, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<?xi64>
  %a = sl.constant dense<0.5> : tensor<f32>
  %b = sl.constant dense<2.0> : tensor<f32>
  %d = sl.constant dense<0.4> : tensor<f32>
  // ceil((2.0 - 0.5) / 0.4) = 4 elements
  // CHECK: sl.range %{{.+}}, %{{.+}}, %{{.+}} : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  %f = sl.range %a, %b, %d : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<4xf32>
  return %z, %o, %pos, %f : tensor<?x?xf32>, tensor<2x3xi64>, tensor<?xi64>, tensor<4xf32>
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x16x64xf32>, %i: tensor<4x16xi64>) -> (tensor<4x16xf32>, tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<i64>, tensor<4x16xi64>, tensor<4x16x64xf32>) {
  // CHECK: sl.softmax %{{.+}} {axis = 1 : i64} : tensor<4x16x64xf32>
  %p = sl.softmax %x {axis = 1} : tensor<4x16x64xf32>
  // CHECK: sl.softmax %{{.+}} : tensor<4x16x64xf32>
  %q = sl.softmax %p : tensor<4x16x64xf32>
  %last = sl.constant dense<-1> : tensor<1xi64>
  // CHECK: sl.reduce_mean %{{.+}}, %{{.+}} : (tensor<4x16x64xf32>, tensor<1xi64>) -> tensor<4x16xf32>
  %m = sl.reduce_mean %q, %last : (tensor<4x16x64xf32>, tensor<1xi64>) -> tensor<4x16xf32>
  %ax = sl.constant dense<[-1, 0]> : tensor<2xi64>
  // CHECK: sl.reduce_sum %{{.+}}, %{{.+}} {keepdims} : (tensor<4x16x64xf32>, tensor<2xi64>) -> tensor<1x16x1xf32>
  %r = sl.reduce_sum %x, %ax {keepdims} : (tensor<4x16x64xf32>, tensor<2xi64>) -> tensor<1x16x1xf32>
  // Without axes: every axis.
  // CHECK: sl.reduce_mean %{{.+}} {keepdims} : (tensor<4x16x64xf32>) -> tensor<1x1x1xf32>
  %all = sl.reduce_mean %x {keepdims} : (tensor<4x16x64xf32>) -> tensor<1x1x1xf32>
  // CHECK: sl.reduce_sum %{{.+}} : (tensor<4x16xi64>) -> tensor<i64>
  %n = sl.reduce_sum %i : (tensor<4x16xi64>) -> tensor<i64>
  // With noop_with_empty_axes, no axes (or an empty list) reduce nothing.
  %none = sl.constant dense<> : tensor<0xi64>
  // CHECK: sl.reduce_sum %{{.+}}, %{{.+}} {noop_with_empty_axes} : (tensor<4x16xi64>, tensor<0xi64>) -> tensor<4x16xi64>
  %same = sl.reduce_sum %i, %none {noop_with_empty_axes} : (tensor<4x16xi64>, tensor<0xi64>) -> tensor<4x16xi64>
  // CHECK: sl.reduce_mean %{{.+}} {keepdims, noop_with_empty_axes} : (tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  %same2 = sl.reduce_mean %x {keepdims, noop_with_empty_axes} : (tensor<4x16x64xf32>) -> tensor<4x16x64xf32>
  return %m, %r, %all, %n, %same, %same2 : tensor<4x16xf32>, tensor<1x16x1xf32>, tensor<1x1x1xf32>, tensor<i64>, tensor<4x16xi64>, tensor<4x16x64xf32>
}

// CHECK-LABEL: func.func @normalisation
func.func @normalisation(%x: tensor<4x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %g2: tensor<16x64xf32>) -> (tensor<4x16x64xf32>, tensor<4x16x64xf32>, tensor<4x16x64xf32>) {
  // The defaults (axis -1, epsilon 1e-5) are not printed.
  // CHECK: sl.layer_norm %{{.+}}, %{{.+}}, %{{.+}} : (tensor<4x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x16x64xf32>
  %y = sl.layer_norm %x, %g, %b {axis = -1, epsilon = 1.0e-05 : f32} : (tensor<4x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x16x64xf32>
  // CHECK: sl.layer_norm %{{.+}}, %{{.+}} {axis = 1 : i64, epsilon = 9.99999997E-7 : f32} : (tensor<4x16x64xf32>, tensor<16x64xf32>) -> tensor<4x16x64xf32>
  %z = sl.layer_norm %y, %g2 {axis = 1, epsilon = 1.0e-06 : f32} : (tensor<4x16x64xf32>, tensor<16x64xf32>) -> tensor<4x16x64xf32>
  // CHECK: sl.rms_norm %{{.+}}, %{{.+}} {epsilon = 9.99999997E-7 : f32} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16x64xf32>
  %r = sl.rms_norm %z, %g {epsilon = 1.0e-06 : f32} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16x64xf32>
  return %y, %z, %r : tensor<4x16x64xf32>, tensor<4x16x64xf32>, tensor<4x16x64xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<4x8x16x16xf32>, %k: tensor<4x2x16x16xf32>, %v: tensor<4x2x16x32xf32>, %cos: tensor<1x1x16x16xf32>, %sin: tensor<16x16xf32>, %mask: tensor<16x16xf32>) -> (tensor<4x8x16x32xf32>, tensor<4x8x16x32xf32>) {
  // CHECK: sl.rotary %{{.+}}, %{{.+}}, %{{.+}} : (tensor<4x8x16x16xf32>, tensor<1x1x16x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16x16xf32>
  %q2 = sl.rotary %q, %cos, %sin : (tensor<4x8x16x16xf32>, tensor<1x1x16x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16x16xf32>
  // CHECK: sl.rotary %{{.+}}, %{{.+}}, %{{.+}} {interleaved} : (tensor<4x2x16x16xf32>, tensor<1x1x16x16xf32>, tensor<16x16xf32>) -> tensor<4x2x16x16xf32>
  %k2 = sl.rotary %k, %cos, %sin {interleaved} : (tensor<4x2x16x16xf32>, tensor<1x1x16x16xf32>, tensor<16x16xf32>) -> tensor<4x2x16x16xf32>
  // CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 2.500000e-01 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x32xf32>) -> tensor<4x8x16x32xf32>
  %o = sl.attention %q2, %k2, %v {causal, scale = 0.25 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x32xf32>) -> tensor<4x8x16x32xf32>
  // CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}}, mask %{{.+}} {scale = 1.250000e-01 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x32xf32>, tensor<16x16xf32>) -> tensor<4x8x16x32xf32>
  %m = sl.attention %q2, %k2, %v, mask %mask {scale = 0.125 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x32xf32>, tensor<16x16xf32>) -> tensor<4x8x16x32xf32>
  return %o, %m : tensor<4x8x16x32xf32>, tensor<4x8x16x32xf32>
}

// The projections' [B, S, H, D] order (layout bshd), forward and gradient; bhsd, the default,
// is not printed.
// CHECK-LABEL: func.func @attention_bshd
func.func @attention_bshd(%q: tensor<4x16x8x16xf32>, %k: tensor<4x16x2x16xf32>, %v: tensor<4x16x2x32xf32>, %dy: tensor<4x16x8x32xf32>) -> (tensor<4x16x8x32xf32>, tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>, tensor<4x16x8x32xf32>) {
  // CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, layout = #sl.head_layout<bshd>, scale = 2.500000e-01 : f32} : (tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>) -> tensor<4x16x8x32xf32>
  %o = sl.attention %q, %k, %v {causal, layout = #sl.head_layout<bshd>, scale = 0.25 : f32} : (tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>) -> tensor<4x16x8x32xf32>
  // CHECK: sl.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {causal, layout = #sl.head_layout<bshd>, scale = 2.500000e-01 : f32}
  %g:3 = sl.attention_grad %q, %k, %v, %dy {causal, layout = #sl.head_layout<bshd>, scale = 0.25 : f32} : (tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>, tensor<4x16x8x32xf32>) -> (tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>)
  // A written bhsd is the default, not printed: 16 heads of 8 positions here.
  // CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} {scale = 2.500000e-01 : f32} : (tensor<4x16x8x16xf32>
  %b = sl.attention %q, %k, %v {layout = #sl.head_layout<bhsd>, scale = 0.25 : f32} : (tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>) -> tensor<4x16x8x32xf32>
  return %o, %g#0, %g#1, %g#2, %b : tensor<4x16x8x32xf32>, tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x32xf32>, tensor<4x16x8x32xf32>
}

// CHECK-LABEL: func.func @attention_alibi
func.func @attention_alibi(%q: tensor<4x8x16x16xf32>, %k: tensor<4x2x16x16xf32>, %mask: tensor<16x16xf32>, %slopes: tensor<8xf32>, %cache: tensor<4x2x2x24x16xf32>, %length: tensor<4xi64>) -> (tensor<4x8x16x16xf32>, tensor<4x8x16x16xf32>, tensor<4x8x1x16xf32>) {
  // CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} alibi_slopes %{{.+}} {causal, scale = 2.500000e-01 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
  %a = sl.attention %q, %k, %k alibi_slopes %slopes {causal, scale = 0.25 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
  // CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}}, mask %{{.+}} alibi_slopes %{{.+}} {scale = 2.500000e-01 : f32}
  %b = sl.attention %q, %k, %k, mask %mask alibi_slopes %slopes {scale = 0.25 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<16x16xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
  %q1 = sl.constant dense<1.0> : tensor<4x8x1x16xf32>
  %k1 = sl.constant dense<1.0> : tensor<4x2x1x16xf32>
  // CHECK: sl.decode_attention %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} alibi_slopes %{{.+}} {scale = 2.500000e-01 : f32}
  %d = sl.decode_attention %q1, %k1, %k1, %cache, %length alibi_slopes %slopes {scale = 0.25 : f32} : (tensor<4x8x1x16xf32>, tensor<4x2x1x16xf32>, tensor<4x2x1x16xf32>, tensor<4x2x2x24x16xf32>, tensor<4xi64>, tensor<8xf32>) -> tensor<4x8x1x16xf32>
  return %a, %b, %d : tensor<4x8x16x16xf32>, tensor<4x8x16x16xf32>, tensor<4x8x1x16xf32>
}

// CHECK-LABEL: func.func private @block
func.func private @block(%h: tensor<2x8xf32>, %w: tensor<8x8xf32> {sl.param}) -> tensor<2x8xf32> {
  %m = sl.matmul %h, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  return %m : tensor<2x8xf32>
}
// CHECK-LABEL: func.func @staged
func.func @staged(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = sl.param "layers.0.w" : tensor<8x8xf32>
  // CHECK: sl.layer @block(%{{.+}}) params(%{{.+}}) {index = 0 : i64, stage = "block"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %h = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  return %h : tensor<2x8xf32>
}
