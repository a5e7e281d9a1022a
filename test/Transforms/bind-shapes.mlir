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

// -----

// The exporter's shape arithmetic (Shape, Gather, Unsqueeze as a reshape, Concat) folds to a
// constant target shape, and the Reshape it feeds becomes static.
// CHECK-LABEL: func.func @shape_arithmetic
// CHECK-SAME: (%[[X:.+]]: tensor<4x16x64xf32>) -> tensor<4x16x4x16xf32>
// CHECK-DAG: %[[SHAPE:.+]] = sl.constant dense<[4, 16, 4, 16]> : tensor<4xi64>
// CHECK-DAG: %[[Y:.+]] = sl.reshape %[[X]], %[[SHAPE]] : tensor<4x16x64xf32>, tensor<4xi64> -> tensor<4x16x4x16xf32>
// CHECK-NOT: sl.shape
// CHECK-NOT: sl.gather
// CHECK-NOT: sl.concat
// CHECK: return %[[Y]]
func.func @shape_arithmetic(%x: tensor<?x?x64xf32>) -> tensor<?x?x?x?xf32> {
  %s = sl.shape %x : tensor<?x?x64xf32> -> tensor<3xi64>
  %i0 = sl.constant dense<0> : tensor<i64>
  %i1 = sl.constant dense<1> : tensor<i64>
  %b = sl.gather %s, %i0 : tensor<3xi64>, tensor<i64> -> tensor<i64>
  %q = sl.gather %s, %i1 : tensor<3xi64>, tensor<i64> -> tensor<i64>
  %one = sl.constant dense<1> : tensor<1xi64>
  %ub = sl.reshape %b, %one {allowzero} : tensor<i64>, tensor<1xi64> -> tensor<1xi64>
  %uq = sl.reshape %q, %one {allowzero} : tensor<i64>, tensor<1xi64> -> tensor<1xi64>
  %heads = sl.constant dense<[4, 16]> : tensor<2xi64>
  %new = sl.concat %ub, %uq, %heads {axis = 0} : (tensor<1xi64>, tensor<1xi64>, tensor<2xi64>) -> tensor<4xi64>
  %y = sl.reshape %x, %new : tensor<?x?x64xf32>, tensor<4xi64> -> tensor<?x?x?x?xf32>
  return %y : tensor<?x?x?x?xf32>
}

// -----

// Ops whose type follows their operand's (softmax, the unary ops, neg, gelu) and the shape rules
// of the others (reduce, expand, slice with a negative step) refine alike.
// CHECK-LABEL: func.func @refine
// CHECK-SAME: -> (tensor<4x16x64xf32>, tensor<4x16x1xf32>, tensor<4x16x64xf32>, tensor<4x8x64xf32>)
// CHECK: sl.softmax %{{.+}} : tensor<4x16x64xf32>
// CHECK: sl.gelu %{{.+}} {tanh} : tensor<4x16x64xf32>
// CHECK: sl.neg %{{.+}} : tensor<4x16x64xf32>
// CHECK: sl.reduce_mean {{.+}} -> tensor<4x16x1xf32>
// CHECK: sl.expand {{.+}} -> tensor<4x16x64xf32>
// CHECK: sl.slice {{.+}} -> tensor<4x8x64xf32>
func.func @refine(%x: tensor<?x?x64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x1xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %p = sl.softmax %x : tensor<?x?x64xf32>
  %g = sl.gelu %p {tanh} : tensor<?x?x64xf32>
  %n = sl.neg %g : tensor<?x?x64xf32>
  %last = sl.constant dense<-1> : tensor<1xi64>
  %m = sl.reduce_mean %n, %last {keepdims} : (tensor<?x?x64xf32>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %u = sl.constant dense<[1, 1, 64]> : tensor<3xi64>
  %e = sl.expand %m, %u : tensor<?x?x1xf32>, tensor<3xi64> -> tensor<?x?x64xf32>
  %m1 = sl.constant dense<-1> : tensor<1xi64>
  %min = sl.constant dense<-9223372036854775808> : tensor<1xi64>
  %one = sl.constant dense<1> : tensor<1xi64>
  %m2 = sl.constant dense<-2> : tensor<1xi64>
  %r = sl.slice %n, %m1, %min axes %one steps %m2 : (tensor<?x?x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x64xf32>
  return %n, %m, %e, %r : tensor<?x?x64xf32>, tensor<?x?x1xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// Roles come from input_ids' dimensions, whatever their names: `b`/`s` here, and every input's
// dimension of the same name takes the same size.
// CHECK-LABEL: func.func @roles_from_input_ids
// CHECK-SAME: tensor<4x16xi64>
// CHECK-SAME: tensor<4x16x32xf32>
func.func @roles_from_input_ids(%ids: tensor<?x?xi64> {sl.dims = ["b", "s"], sl.name = "input_ids"}, %h: tensor<?x?x32xf32> {sl.dims = ["b", "s", ""], sl.name = "h"}) -> tensor<?x?x32xf32> {
  return %h : tensor<?x?x32xf32>
}

// -----

// torch's names for list-form dynamic_axes.
// CHECK-LABEL: func.func @list_axes
// CHECK-SAME: tensor<4x16xi64>
func.func @list_axes(%ids: tensor<?x?xi64> {sl.dims = ["input_ids_dynamic_axes_1", "input_ids_dynamic_axes_2"], sl.name = "input_ids"}) -> tensor<?x?xi64> {
  return %ids : tensor<?x?xi64>
}
