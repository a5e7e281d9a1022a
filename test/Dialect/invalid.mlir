// RUN: sl-opt %s -split-input-file -verify-diagnostics

func.func @param_dynamic() -> tensor<?x4xf32> {
  // expected-error @+1 {{parameter 'w' must have a static shape, got 'tensor<?x4xf32>'}}
  %w = sl.param "w" : tensor<?x4xf32>
  return %w : tensor<?x4xf32>
}

// -----

func.func @param_empty_name() -> tensor<4xf32> {
  // expected-error @+1 {{parameter name must not be empty}}
  %w = sl.param "" : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

func.func @param_file_without_offset() -> tensor<4xf32> {
  // expected-error @+1 {{parameter 'w' needs both a file and an offset, or neither}}
  %w = "sl.param"() {name = "w", file = "m.onnx"} : () -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

func.func @param_negative_offset() -> tensor<4xf32> {
  // expected-error @+1 {{parameter 'w' has negative byte offset -8}}
  %w = sl.param "w" from "m.onnx" at -8 : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

func.func @matmul_contracting(%a: tensor<4x32xf32>, %b: tensor<16x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{sl.matmul: contracting dimensions differ: lhs 'tensor<4x32xf32>' has 32, rhs 'tensor<16x8xf32>' has 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.matmul %a, %b : tensor<4x32xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_batch(%a: tensor<3x4x32xf32>, %b: tensor<2x32x8xf32>) -> tensor<3x4x8xf32> {
  // expected-error @+2 {{batch dimensions of 'tensor<3x4x32xf32>' and 'tensor<2x32x8xf32>' cannot be broadcast together}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.matmul %a, %b : tensor<3x4x32xf32>, tensor<2x32x8xf32> -> tensor<3x4x8xf32>
  return %y : tensor<3x4x8xf32>
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4x8xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{sl.matmul: operands must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.matmul %a, %b : tensor<f32>, tensor<4x8xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @matmul_wrong_result(%a: tensor<4x32xf32>, %b: tensor<32x8xf32>) -> tensor<4x9xf32> {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x9xf32>'}}
  %y = sl.matmul %a, %b : tensor<4x32xf32>, tensor<32x8xf32> -> tensor<4x9xf32>
  return %y : tensor<4x9xf32>
}

// -----

func.func @matmul_element_types(%a: tensor<4x32xf32>, %b: tensor<32x8xf16>) -> tensor<4x8xf32> {
  // expected-error @+2 {{sl.matmul: operand element types differ: 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.matmul %a, %b : tensor<4x32xf32>, tensor<32x8xf16> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @gemm_rank(%a: tensor<2x4x32xf32>, %b: tensor<32x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{sl.gemm: a and b must have rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gemm %a, %b : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @gemm_trans(%a: tensor<4x32xf32>, %b: tensor<32x8xf32>) -> tensor<4x32xf32> {
  // expected-error @+2 {{sl.gemm: contracting dimensions differ: op(a) has 32, op(b) has 8 (trans_a = 0, trans_b = 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gemm %a, %b {trans_b = true} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @gemm_bias(%a: tensor<4x32xf32>, %b: tensor<32x8xf32>, %c: tensor<4x1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{sl.gemm: c 'tensor<4x1x8xf32>' cannot be broadcast to the result 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gemm %a, %b, %c : (tensor<4x32xf32>, tensor<32x8xf32>, tensor<4x1x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @gemm_bias_grows(%a: tensor<1x32xf32>, %b: tensor<32x8xf32>, %c: tensor<4x8xf32>) -> tensor<1x8xf32> {
  // Unidirectional: c may not make the result larger.
  // expected-error @+2 {{sl.gemm: c 'tensor<4x8xf32>' cannot be broadcast to the result 'tensor<1x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gemm %a, %b, %c : (tensor<1x32xf32>, tensor<32x8xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// -----

func.func @add_broadcast(%a: tensor<4x32xf32>, %b: tensor<8xf32>) -> tensor<4x32xf32> {
  // expected-error @+2 {{sl.add: shapes 'tensor<4x32xf32>' and 'tensor<8xf32>' cannot be broadcast together}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.add %a, %b : tensor<4x32xf32>, tensor<8xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

func.func @mul_element_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+2 {{sl.mul: operand element types differ: 'f32' and 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.mul %a, %b : tensor<4xf32>, tensor<4xbf16> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @relu_integer(%a: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %y = sl.relu %a : tensor<4xi32>
  return %y : tensor<4xi32>
}

// -----

func.func @transpose_not_permutation(%a: tensor<2x3x4xf32>) -> tensor<2x2x4xf32> {
  // expected-error @+2 {{sl.transpose: perm [0, 0, 2] is not a permutation of the dimensions of 'tensor<2x3x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.transpose %a [0, 0, 2] : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
  return %y : tensor<2x2x4xf32>
}

// -----

func.func @transpose_rank(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{sl.transpose: perm [1, 0, 2] is not a permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.transpose %a [1, 0, 2] : tensor<2x3xf32> -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}
