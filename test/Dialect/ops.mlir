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
