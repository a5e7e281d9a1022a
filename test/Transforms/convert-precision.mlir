// RUN: sl-opt %s -split-input-file --sl-convert-precision | FileCheck %s
// RUN: sl-opt %s -split-input-file --sl-convert-precision=precision=f32 | FileCheck %s --check-prefix=F32

// Every f32 tensor becomes bf16: the signature, the parameters (whose bytes stay f32 in the
// file), constants, op results and cast targets; integer tensors are left alone.
// CHECK-LABEL: func.func @model
// CHECK-SAME: (%{{.+}}: tensor<2x4xbf16>, %{{.+}}: tensor<2x8xi64>) -> (tensor<2x8xbf16>, tensor<2x8xi1>)
// CHECK: sl.param "w" from "m.onnx" at 64 stored_as f32 : tensor<8x4xbf16>
// CHECK: sl.param "b" from "m.onnx" at 0 stored_as f32 : tensor<8xbf16>
// CHECK: sl.param "inline" : tensor<8xbf16>
// CHECK: sl.constant dense<[1.000000e+00, 1.000000e+00, 1.007810e+00, -3.389530e+38, 0xFF80, 0x7FC0]> : tensor<6xbf16>
// CHECK: sl.gemm {{.+}} -> tensor<2x8xbf16>
// CHECK: sl.cast %{{.+}} to bf16 : tensor<2x8xi64> -> tensor<2x8xbf16>
// CHECK: sl.cast %{{.+}} to i1 : tensor<2x8xbf16> -> tensor<2x8xi1>
// F32-LABEL: func.func @model
// F32: sl.param "w" from "m.onnx" at 64 : tensor<8x4xf32>
// F32: sl.gemm {{.+}} -> tensor<2x8xf32>
func.func @model(%x: tensor<2x4xf32>, %ids: tensor<2x8xi64>) -> (tensor<2x8xf32>, tensor<2x8xi1>) {
  %w = sl.param "w" from "m.onnx" at 64 : tensor<8x4xf32>
  %b = sl.param "b" from "m.onnx" at 0 : tensor<8xf32>
  %i = sl.param "inline" : tensor<8xf32>
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even, 1; 1 + 3 * 2^-9 rounds up; the most
  // negative f32 stays finite; -inf and NaN stay what they are.
  %c = sl.constant dense<[1.0, 1.0039063, 1.0058594, -3.4028235e+38, 0xFF800000, 0x7FC00000]> : tensor<6xf32>
  %y = sl.gemm %x, %w, %b {trans_b = true} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %f = sl.cast %ids to f32 : tensor<2x8xi64> -> tensor<2x8xf32>
  %s = sl.add %y, %f : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %t = sl.add %s, %i : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %m = sl.cast %t to i1 : tensor<2x8xf32> -> tensor<2x8xi1>
  return %t, %m : tensor<2x8xf32>, tensor<2x8xi1>
}

// -----

// f64 and f16 are left as they are; a splat converts as a splat.
// CHECK-LABEL: func.func @others
// CHECK: sl.constant dense<2.500000e-01> : tensor<4x4xbf16>
// CHECK: sl.param "d" from "m.onnx" at 0 : tensor<4xf64>
// CHECK: sl.param "h" from "m.onnx" at 32 : tensor<4xf16>
func.func @others() -> (tensor<4x4xf32>, tensor<4xf64>, tensor<4xf16>) {
  %c = sl.constant dense<0.25> : tensor<4x4xf32>
  %d = sl.param "d" from "m.onnx" at 0 : tensor<4xf64>
  %h = sl.param "h" from "m.onnx" at 32 : tensor<4xf16>
  return %c, %d, %h : tensor<4x4xf32>, tensor<4xf64>, tensor<4xf16>
}

// -----

// The rounding at the edges of the encoding: a subnormal keeps its top bits (1e-40, and 2^-149
// rounds to +0); a value halfway between the largest finite bf16 and 2^128 rounds to infinity,
// which stays the largest finite; -0 stays -0; 1 + 3 * 2^-8 is a tie whose lower neighbour is
// odd, so it rounds up to 1 + 2^-6; NaNs stay NaN, even one whose payload lies only in the bits
// that are rounded away (0x7F800001, not infinity).
// CHECK-LABEL: func.func @edges
// CHECK: sl.constant dense<[9.183550e-41, 0.000000e+00, 3.389530e+38, -0.000000e+00, 1.015630e+00, 0x7FC0, 0xFFC0]> : tensor<7xbf16>
func.func @edges() -> tensor<7xf32> {
  %c = sl.constant dense<[1.0e-40, 0x00000001, 3.3961776e+38, -0.0, 1.01171875, 0x7F800001, 0xFFC00001]> : tensor<7xf32>
  return %c : tensor<7xf32>
}
