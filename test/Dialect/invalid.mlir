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

func.func @matmul_transposed_contracting(%a: tensor<4x32xf32>, %b: tensor<8x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{sl.matmul: contracting dimensions differ: lhs 'tensor<4x32xf32>' has 32, rhs 'tensor<8x16xf32>' (transposed) has 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.matmul %a, %b {trans_b = true} : tensor<4x32xf32>, tensor<8x16xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @matmul_transposed_vector(%a: tensor<32xf32>, %b: tensor<8x32xf32>) -> tensor<8xf32> {
  // expected-error @+2 {{sl.matmul: with a transposed operand both operands must have rank >= 2, got 'tensor<32xf32>' and 'tensor<8x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.matmul %a, %b {trans_b = true} : tensor<32xf32>, tensor<8x32xf32> -> tensor<8xf32>
  return %y : tensor<8xf32>
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

// -----

func.func @constant_type_mismatch() -> tensor<3xi64> {
  // expected-error @+1 {{'sl.constant' op failed to verify that all of {value, result} have same type}}
  %c = "sl.constant"() {value = dense<[1, 2]> : tensor<2xi64>} : () -> tensor<3xi64>
  return %c : tensor<3xi64>
}

// -----

func.func @constant_element_type() -> tensor<2xi8> {
  // expected-error @+1 {{'sl.constant' op result #0 must be ranked tensor of}}
  %c = sl.constant dense<[1, 2]> : tensor<2xi8>
  return %c : tensor<2xi8>
}

// -----

func.func @sub_broadcast(%a: tensor<4x3xf32>, %b: tensor<2x1xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{sl.sub: shapes 'tensor<4x3xf32>' and 'tensor<2x1xf32>' cannot be broadcast together}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.sub %a, %b : tensor<4x3xf32>, tensor<2x1xf32> -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @div_element_types(%a: tensor<4xi64>, %b: tensor<4xi32>) -> tensor<4xi64> {
  // expected-error @+2 {{sl.div: operand element types differ: 'i64' and 'i32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.div %a, %b : tensor<4xi64>, tensor<4xi32> -> tensor<4xi64>
  return %y : tensor<4xi64>
}

// -----

func.func @pow_integer(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'sl.pow' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %y = sl.pow %a, %a : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  return %y : tensor<4xi64>
}

// -----

func.func @equal_result_type(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'sl.equal' op result #0 must be ranked tensor of 1-bit signless integer values}}
  %y = sl.equal %a, %a : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  return %y : tensor<4xi64>
}

// -----

func.func @equal_broadcast(%a: tensor<4xi64>, %b: tensor<3xi64>) -> tensor<4xi1> {
  // expected-error @+2 {{sl.equal: shapes 'tensor<4xi64>' and 'tensor<3xi64>' cannot be broadcast together}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.equal %a, %b : tensor<4xi64>, tensor<3xi64> -> tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @less_bool(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sl.less' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float or 64-bit signless integer or 32-bit signless integer values}}
  %y = sl.less %a, %a : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @less_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xi1> {
  // expected-error @+2 {{sl.less: operand element types differ: 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.less %a, %b : tensor<4xf32>, tensor<4xf16> -> tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @where_element_types(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xi64>) -> tensor<4xf32> {
  // expected-error @+2 {{sl.where: x and y element types differ: 'f32' and 'i64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = sl.where %c, %x, %y : tensor<4xi1>, tensor<4xf32>, tensor<4xi64> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @where_broadcast(%c: tensor<3xi1>, %x: tensor<4xf32>, %y: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+2 {{sl.where: shapes 'tensor<3xi1>', 'tensor<4xf32>' and 'tensor<f32>' cannot be broadcast together}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = sl.where %c, %x, %y : tensor<3xi1>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @where_condition(%c: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'sl.where' op operand #0 must be ranked tensor of 1-bit signless integer values}}
  %r = sl.where %c, %x, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

func.func @neg_bool(%a: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'sl.neg' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float or 64-bit signless integer or 32-bit signless integer values}}
  %y = sl.neg %a : tensor<4xi1>
  return %y : tensor<4xi1>
}

// -----

func.func @cast_shape(%a: tensor<4xf32>) -> tensor<5xi64> {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4xi64>' are incompatible with return type(s) of operation 'tensor<5xi64>'}}
  %y = sl.cast %a to i64 : tensor<4xf32> -> tensor<5xi64>
  return %y : tensor<5xi64>
}

// -----

func.func @cast_to_mismatch(%a: tensor<4xf32>) -> tensor<4xi32> {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4xi64>' are incompatible with return type(s) of operation 'tensor<4xi32>'}}
  %y = sl.cast %a to i64 : tensor<4xf32> -> tensor<4xi32>
  return %y : tensor<4xi32>
}

// -----

func.func @sqrt_integer(%a: tensor<4xi64>) -> tensor<4xi64> {
  // expected-error @+1 {{'sl.sqrt' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %y = sl.sqrt %a : tensor<4xi64>
  return %y : tensor<4xi64>
}

// -----

func.func @swiglu_types(%a: tensor<4xf32>, %b: tensor<4xf16>) -> tensor<4xf32> {
  // expected-error @+1 {{'sl.swiglu' op requires the same type for all operands and results}}
  %y = "sl.swiglu"(%a, %b) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @shape_length(%x: tensor<2x3x4xf32>) -> tensor<3xi64> {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<2xi64>' are incompatible with return type(s) of operation 'tensor<3xi64>'}}
  %s = sl.shape %x {start = 1} : tensor<2x3x4xf32> -> tensor<3xi64>
  return %s : tensor<3xi64>
}

// -----

func.func @gather_scalar(%x: tensor<f32>, %i: tensor<i64>) -> tensor<f32> {
  // expected-error @+2 {{sl.gather: data must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gather %x, %i : tensor<f32>, tensor<i64> -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @gather_axis(%x: tensor<4x8xf32>, %i: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+2 {{sl.gather: axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gather %x, %i {axis = -3} : tensor<4x8xf32>, tensor<i64> -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @gather_float_indices(%x: tensor<4x8xf32>, %i: tensor<2xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sl.gather' op operand #1 must be ranked tensor of 64-bit signless integer or 32-bit signless integer values}}
  %y = sl.gather %x, %i : tensor<4x8xf32>, tensor<2xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

func.func @reshape_shape_rank(%x: tensor<4x8xf32>, %s: tensor<2x1xi64>) -> tensor<?x?xf32> {
  // expected-error @+2 {{sl.reshape: the target shape must be a 1-D tensor of static length, got 'tensor<2x1xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reshape %x, %s : tensor<4x8xf32>, tensor<2x1xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @reshape_copy_beyond_rank(%x: tensor<4x8xf32>) -> tensor<4x8x1xf32> {
  %s = sl.constant dense<[4, 8, 0]> : tensor<3xi64>
  // expected-error @+2 {{sl.reshape: target dimension 2 is 0 (copy) but the input has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reshape %x, %s : tensor<4x8xf32>, tensor<3xi64> -> tensor<4x8x1xf32>
  return %y : tensor<4x8x1xf32>
}

// -----

func.func @reshape_two_minus_one(%x: tensor<4x8xf32>) -> tensor<?x?xf32> {
  %s = sl.constant dense<[-1, -1]> : tensor<2xi64>
  // expected-error @+2 {{sl.reshape: the target shape has more than one -1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reshape %x, %s : tensor<4x8xf32>, tensor<2xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @reshape_negative(%x: tensor<4x8xf32>) -> tensor<?x?xf32> {
  %s = sl.constant dense<[-2, 16]> : tensor<2xi64>
  // expected-error @+2 {{sl.reshape: invalid target dimension -2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reshape %x, %s : tensor<4x8xf32>, tensor<2xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @reshape_indivisible(%x: tensor<4x8xf32>) -> tensor<?x5xf32> {
  %s = sl.constant dense<[-1, 5]> : tensor<2xi64>
  // expected-error @+2 {{sl.reshape: cannot reshape 'tensor<4x8xf32>' with -1 into 5-element pieces}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reshape %x, %s : tensor<4x8xf32>, tensor<2xi64> -> tensor<?x5xf32>
  return %y : tensor<?x5xf32>
}

// -----

func.func @reshape_count(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %s = sl.constant dense<[4, 4]> : tensor<2xi64>
  // expected-error @+2 {{sl.reshape: cannot reshape 'tensor<4x8xf32>' (32 elements) into 'tensor<4x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reshape %x, %s : tensor<4x8xf32>, tensor<2xi64> -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @concat_no_inputs() -> tensor<0xi64> {
  // expected-error @+1 {{'sl.concat' op needs at least one input}}
  %c = sl.concat {axis = 0} : () -> tensor<0xi64>
  return %c : tensor<0xi64>
}

// -----

func.func @concat_axis(%a: tensor<2xi64>) -> tensor<4xi64> {
  // expected-error @+2 {{sl.concat: axis 1 is out of range for rank 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = sl.concat %a, %a {axis = 1} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  return %c : tensor<4xi64>
}

// -----

func.func @concat_rank(%a: tensor<2xi64>, %b: tensor<1x2xi64>) -> tensor<4xi64> {
  // expected-error @+2 {{sl.concat: inputs 'tensor<2xi64>' and 'tensor<1x2xi64>' differ in rank or element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = sl.concat %a, %b {axis = 0} : (tensor<2xi64>, tensor<1x2xi64>) -> tensor<4xi64>
  return %c : tensor<4xi64>
}

// -----

func.func @concat_element_type(%a: tensor<2xi64>, %b: tensor<2xi32>) -> tensor<4xi64> {
  // expected-error @+2 {{sl.concat: inputs 'tensor<2xi64>' and 'tensor<2xi32>' differ in rank or element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = sl.concat %a, %b {axis = 0} : (tensor<2xi64>, tensor<2xi32>) -> tensor<4xi64>
  return %c : tensor<4xi64>
}

// -----

func.func @concat_other_dimension(%a: tensor<4x2xf32>, %b: tensor<3x2xf32>) -> tensor<4x4xf32> {
  // expected-error @+2 {{sl.concat: inputs 'tensor<4x2xf32>' and 'tensor<3x2xf32>' differ in dimension 0, which is not the axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %c = sl.concat %a, %b {axis = -1} : (tensor<4x2xf32>, tensor<3x2xf32>) -> tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// -----

func.func @slice_axis(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %s = sl.constant dense<0> : tensor<1xi64>
  %e = sl.constant dense<2> : tensor<1xi64>
  %a = sl.constant dense<2> : tensor<1xi64>
  // expected-error @+2 {{sl.slice: axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.slice %x, %s, %e axes %a : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

func.func @slice_lengths(%x: tensor<4x10xf32>) -> tensor<?x?xf32> {
  %s = sl.constant dense<0> : tensor<2xi64>
  %e = sl.constant dense<2> : tensor<1xi64>
  // expected-error @+2 {{sl.slice: starts, ends, axes and steps differ in length}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.slice %x, %s, %e : (tensor<4x10xf32>, tensor<2xi64>, tensor<1xi64>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @slice_step_zero(%x: tensor<4x10xf32>) -> tensor<4x?xf32> {
  %s = sl.constant dense<0> : tensor<1xi64>
  %e = sl.constant dense<8> : tensor<1xi64>
  %a = sl.constant dense<-1> : tensor<1xi64>
  %z = sl.constant dense<0> : tensor<1xi64>
  // expected-error @+2 {{sl.slice: step 0 on axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.slice %x, %s, %e axes %a steps %z : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x?xf32>
  return %y : tensor<4x?xf32>
}

// -----

func.func @slice_result(%x: tensor<4x10xf32>) -> tensor<4x4xf32> {
  %s = sl.constant dense<1> : tensor<1xi64>
  %e = sl.constant dense<8> : tensor<1xi64>
  %a = sl.constant dense<1> : tensor<1xi64>
  %t = sl.constant dense<2> : tensor<1xi64>
  // x[:, 1:8:2] has 4 columns: 1, 3, 5, 7.
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<4x3xf32>'}}
  %y = sl.slice %x, %s, %e axes %a steps %t : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

func.func @expand_shape_rank(%x: tensor<4xf32>, %s: tensor<1x2xi64>) -> tensor<?x?xf32> {
  // expected-error @+2 {{sl.expand: the shape must be a 1-D tensor of static length}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.expand %x, %s : tensor<4xf32>, tensor<1x2xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @expand_incompatible(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %s = sl.constant dense<[3, 5]> : tensor<2xi64>
  // expected-error @+2 {{sl.expand: 'tensor<3x4xf32>' cannot be broadcast to 'tensor<3x5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.expand %x, %s : tensor<3x4xf32>, tensor<2xi64> -> tensor<3x5xf32>
  return %y : tensor<3x5xf32>
}

// -----

func.func @tile_repeats(%x: tensor<2x4xf32>, %r: tensor<3xi64>) -> tensor<?x?xf32> {
  // expected-error @+2 {{sl.tile: repeats must be a 1-D tensor of the input's rank 2, got 'tensor<3xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.tile %x, %r : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @gather_elements_rank(%x: tensor<2x4xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+2 {{sl.gather_elements: data and indices must have one rank >= 1, got 'tensor<2x4xf32>' and 'tensor<2xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.gather_elements %x, %i {axis = 1} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @cumsum_axis(%x: tensor<2x4xi64>) -> tensor<2x4xi64> {
  %axis = sl.constant dense<2> : tensor<i64>
  // expected-error @+2 {{sl.cumsum: axis 2 is out of range for 'tensor<2x4xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.cumsum %x, %axis : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
  return %y : tensor<2x4xi64>
}

// -----

func.func @trilu_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{sl.trilu: input must have rank >= 2, got 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.trilu %x {upper} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @trilu_k(%x: tensor<4x4xf32>, %k: tensor<2xi64>) -> tensor<4x4xf32> {
  // expected-error @+2 {{sl.trilu: k must be a single value}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.trilu %x, %k {upper} : (tensor<4x4xf32>, tensor<2xi64>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @constant_of_shape_value(%s: tensor<2xi64>) -> tensor<?x?xf32> {
  // expected-error @+2 {{sl.constant_of_shape: value must have one element}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.constant_of_shape %s {value = dense<0.0> : tensor<2xf32>} : tensor<2xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @constant_of_shape_shape(%s: tensor<?xi64>) -> tensor<?x?xf32> {
  // expected-error @+2 {{sl.constant_of_shape: the shape must be a 1-D tensor of static length}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.constant_of_shape %s {value = dense<0.0> : tensor<1xf32>} : tensor<?xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @constant_of_shape_negative() -> tensor<?x?xf32> {
  %s = sl.constant dense<[2, -3]> : tensor<2xi64>
  // expected-error @+2 {{sl.constant_of_shape: negative dimension -3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.constant_of_shape %s {value = dense<0.0> : tensor<1xf32>} : tensor<2xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

func.func @range_types(%a: tensor<i64>, %b: tensor<i32>) -> tensor<?xi64> {
  // expected-error @+2 {{sl.range: start, limit and delta must be scalars of one type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.range %a, %b, %a : tensor<i64>, tensor<i32>, tensor<i64> -> tensor<?xi64>
  return %y : tensor<?xi64>
}

// -----

func.func @range_not_scalar(%a: tensor<i64>, %b: tensor<2xi64>) -> tensor<?xi64> {
  // expected-error @+2 {{sl.range: start, limit and delta must be scalars of one type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.range %a, %b, %a : tensor<i64>, tensor<2xi64>, tensor<i64> -> tensor<?xi64>
  return %y : tensor<?xi64>
}

// -----

func.func @range_delta_zero() -> tensor<?xi64> {
  %a = sl.constant dense<0> : tensor<i64>
  %b = sl.constant dense<4> : tensor<i64>
  %z = sl.constant dense<0> : tensor<i64>
  // expected-error @+2 {{sl.range: delta is 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.range %a, %b, %z : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<?xi64>
  return %y : tensor<?xi64>
}

// -----

func.func @range_count(%x: tensor<f32>) -> tensor<3xi64> {
  %a = sl.constant dense<0> : tensor<i64>
  %b = sl.constant dense<10> : tensor<i64>
  %d = sl.constant dense<3> : tensor<i64>
  // 0, 3, 6, 9
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4xi64>' are incompatible with return type(s) of operation 'tensor<3xi64>'}}
  %y = sl.range %a, %b, %d : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<3xi64>
  return %y : tensor<3xi64>
}

// -----

func.func @softmax_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{sl.softmax: axis 2 is out of range for rank 2}}
  %y = sl.softmax %x {axis = 2} : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @softmax_integer(%x: tensor<4x8xi64>) -> tensor<4x8xi64> {
  // expected-error @+1 {{'sl.softmax' op operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type or 64-bit float values}}
  %y = sl.softmax %x : tensor<4x8xi64>
  return %y : tensor<4x8xi64>
}

// -----

func.func @reduce_axes_not_constant(%x: tensor<4x8xf32>, %axes: tensor<1xi64>) -> tensor<4x1xf32> {
  // expected-error @+2 {{sl.reduce_mean: axes must be constant}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reduce_mean %x, %axes {keepdims} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<4x1xf32>
  return %y : tensor<4x1xf32>
}

// -----

func.func @reduce_axis(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %axes = sl.constant dense<[-3]> : tensor<1xi64>
  // expected-error @+2 {{sl.reduce_sum: axis -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sl.reduce_sum %x, %axes : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @reduce_keepdims(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %axes = sl.constant dense<[1]> : tensor<1xi64>
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  %y = sl.reduce_mean %x, %axes {keepdims} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @layer_norm_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{sl.layer_norm: axis -3 is out of range for rank 2}}
  %y = sl.layer_norm %x, %g {axis = -3} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_norm_result(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'sl.layer_norm' op result type 'tensor<4x8xf16>' differs from the input's 'tensor<4x8xf32>'}}
  %y = sl.layer_norm %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  return %y : tensor<4x8xf16>
}

// -----

func.func @layer_norm_scale(%x: tensor<4x8xf32>, %g: tensor<4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sl.layer_norm' op scale and bias must broadcast to the normalised dimensions 'tensor<8xf32>', got 'tensor<4xf32>'}}
  %y = sl.layer_norm %x, %g : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @layer_norm_bias(%x: tensor<2x4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  // The bias may not be larger than the normalised dimensions [4, 8].
  // expected-error @+1 {{'sl.layer_norm' op scale and bias must broadcast to the normalised dimensions 'tensor<4x8xf32>', got 'tensor<2x4x8xf32>'}}
  %y = sl.layer_norm %x, %g, %b {axis = 1} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

func.func @rms_norm_result(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x9xf32> {
  // expected-error @+1 {{'sl.rms_norm' op result type 'tensor<4x9xf32>' differs from the input's 'tensor<4x8xf32>'}}
  %y = sl.rms_norm %x, %g {epsilon = 1.0e-06 : f32} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x9xf32>
  return %y : tensor<4x9xf32>
}

// -----

func.func @rms_norm_scale(%x: tensor<4x8xf32>, %g: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sl.rms_norm' op scale must be a vector of the last dimension's size, got 'tensor<1x8xf32>' for 'tensor<4x8xf32>'}}
  %y = sl.rms_norm %x, %g {epsilon = 1.0e-06 : f32} : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @rms_norm_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'sl.rms_norm' op requires attribute 'epsilon'}}
  %y = sl.rms_norm %x, %g : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @rotary_result(%x: tensor<2x16x8xf32>, %t: tensor<16x8xf32>) -> tensor<2x16x8xf16> {
  // expected-error @+1 {{'sl.rotary' op result type 'tensor<2x16x8xf16>' differs from the input's 'tensor<2x16x8xf32>'}}
  %y = sl.rotary %x, %t, %t : (tensor<2x16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<2x16x8xf16>
  return %y : tensor<2x16x8xf16>
}

// -----

func.func @rotary_rank(%x: tensor<8xf32>, %t: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'sl.rotary' op input must have rank >= 2, got 'tensor<8xf32>'}}
  %y = sl.rotary %x, %t, %t : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @rotary_odd(%x: tensor<2x16x7xf32>, %t: tensor<16x7xf32>) -> tensor<2x16x7xf32> {
  // expected-error @+1 {{'sl.rotary' op the rotated dimension must be even, got 7}}
  %y = sl.rotary %x, %t, %t : (tensor<2x16x7xf32>, tensor<16x7xf32>, tensor<16x7xf32>) -> tensor<2x16x7xf32>
  return %y : tensor<2x16x7xf32>
}

// -----

func.func @rotary_tables(%x: tensor<2x16x8xf32>, %c: tensor<16x8xf32>, %s: tensor<32x8xf32>) -> tensor<2x16x8xf32> {
  // expected-error @+1 {{'sl.rotary' op cos and sin must broadcast to the input 'tensor<2x16x8xf32>', got 'tensor<32x8xf32>'}}
  %y = sl.rotary %x, %c, %s : (tensor<2x16x8xf32>, tensor<16x8xf32>, tensor<32x8xf32>) -> tensor<2x16x8xf32>
  return %y : tensor<2x16x8xf32>
}

// -----

func.func @attention_rank(%q: tensor<8x16x16xf32>) -> tensor<8x16x16xf32> {
  // expected-error @+1 {{'sl.attention' op q, k, v and the result must have rank 4 ([batch, heads, seq, dim], or [batch, seq, heads, dim] with layout bshd), got 'tensor<8x16x16xf32>', 'tensor<8x16x16xf32>', 'tensor<8x16x16xf32>' and 'tensor<8x16x16xf32>'}}
  %o = sl.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<8x16x16xf32>, tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  return %o : tensor<8x16x16xf32>
}

// -----

func.func @attention_batch(%q: tensor<4x8x16x16xf32>, %k: tensor<2x8x16x16xf32>) -> tensor<4x8x16x16xf32> {
  // expected-error @+1 {{'sl.attention' op q, k and v must have one batch size}}
  %o = sl.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<2x8x16x16xf32>, tensor<2x8x16x16xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

func.func @attention_kv(%q: tensor<4x8x16x16xf32>, %k: tensor<4x8x16x16xf32>, %v: tensor<4x8x12x16xf32>) -> tensor<4x8x16x16xf32> {
  // expected-error @+1 {{'sl.attention' op k and v must have the same heads and length, got 'tensor<4x8x16x16xf32>' and 'tensor<4x8x12x16xf32>'}}
  %o = sl.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x8x16x16xf32>, tensor<4x8x12x16xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

func.func @attention_head_dim(%q: tensor<4x8x16x16xf32>, %k: tensor<4x8x16x32xf32>) -> tensor<4x8x16x32xf32> {
  // expected-error @+1 {{'sl.attention' op q and k must have one head dimension, got 'tensor<4x8x16x16xf32>' and 'tensor<4x8x16x32xf32>'}}
  %o = sl.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x8x16x32xf32>, tensor<4x8x16x32xf32>) -> tensor<4x8x16x32xf32>
  return %o : tensor<4x8x16x32xf32>
}

// -----

func.func @attention_heads(%q: tensor<4x8x16x16xf32>, %k: tensor<4x3x16x16xf32>) -> tensor<4x8x16x16xf32> {
  // expected-error @+1 {{'sl.attention' op query heads (8) must be a multiple of key/value heads (3)}}
  %o = sl.attention %q, %k, %k {scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x3x16x16xf32>, tensor<4x3x16x16xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

// In layout bshd the heads are dimension 2: 16 query heads over 3 key/value heads.
func.func @attention_bshd_heads(%q: tensor<4x8x16x16xf32>, %k: tensor<4x8x3x16xf32>) -> tensor<4x8x16x16xf32> {
  // expected-error @+1 {{'sl.attention' op query heads (16) must be a multiple of key/value heads (3)}}
  %o = sl.attention %q, %k, %k {layout = #sl.head_layout<bshd>, scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x8x3x16xf32>, tensor<4x8x3x16xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

func.func @attention_bshd_mask(%q: tensor<4x8x2x16xf32>, %k: tensor<4x12x2x16xf32>, %m: tensor<8x8xf32>) -> tensor<4x8x2x16xf32> {
  // expected-error @+1 {{'sl.attention' op mask 'tensor<8x8xf32>' must broadcast to the scores 'tensor<4x2x8x12xf32>'}}
  %o = sl.attention %q, %k, %k, mask %m {layout = #sl.head_layout<bshd>, scale = 1.0 : f32} : (tensor<4x8x2x16xf32>, tensor<4x12x2x16xf32>, tensor<4x12x2x16xf32>, tensor<8x8xf32>) -> tensor<4x8x2x16xf32>
  return %o : tensor<4x8x2x16xf32>
}

// -----

func.func @attention_bad_layout(%q: tensor<4x8x2x16xf32>) -> tensor<4x8x2x16xf32> {
  // expected-error @+2 {{expected ::sl::HeadLayout to be one of: bhsd, bshd}}
  // expected-error @+1 {{failed to parse SL_HeadLayoutAttr parameter 'value'}}
  %o = sl.attention %q, %q, %q {layout = #sl.head_layout<sbhd>, scale = 1.0 : f32} : (tensor<4x8x2x16xf32>, tensor<4x8x2x16xf32>, tensor<4x8x2x16xf32>) -> tensor<4x8x2x16xf32>
  return %o : tensor<4x8x2x16xf32>
}

// -----

func.func @attention_result(%q: tensor<4x8x16x16xf32>, %k: tensor<4x2x16x16xf32>, %v: tensor<4x2x16x32xf32>) -> tensor<4x8x16x16xf32> {
  // The result takes v's head dimension.
  // expected-error @+1 {{'sl.attention' op result must be 'tensor<4x8x16x32xf32>', got 'tensor<4x8x16x16xf32>'}}
  %o = sl.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x32xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

func.func @attention_mask(%q: tensor<4x8x16x16xf32>, %k: tensor<4x2x24x16xf32>, %m: tensor<16x16xf32>) -> tensor<4x8x16x16xf32> {
  // The scores are [batch, heads, 16 queries, 24 keys].
  // expected-error @+1 {{'sl.attention' op mask 'tensor<16x16xf32>' must broadcast to the scores 'tensor<4x8x16x24xf32>'}}
  %o = sl.attention %q, %k, %k, mask %m {scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x24x16xf32>, tensor<4x2x24x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

func.func @attention_alibi_slopes(%q: tensor<4x8x16x16xf32>, %k: tensor<4x2x16x16xf32>, %s: tensor<2xf32>) -> tensor<4x8x16x16xf32> {
  // expected-error @+1 {{'sl.attention' op alibi_slopes must be one 'f32' per query head ([8]), got 'tensor<2xf32>'}}
  %o = sl.attention %q, %k, %k alibi_slopes %s {causal, scale = 1.0 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<2xf32>) -> tensor<4x8x16x16xf32>
  return %o : tensor<4x8x16x16xf32>
}

// -----

func.func @layer_missing(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{stage function 'nowhere' does not exist}}
  %h = sl.layer @nowhere(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %h : tensor<2x8xf32>
}

// -----

func.func private @block(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  return %h : tensor<2x8xf32>
}
func.func @layer_types(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{operands and results '(tensor<2x4xf32>) -> tensor<2x4xf32>' do not match stage function 'block' of type '(tensor<2x8xf32>) -> tensor<2x8xf32>'}}
  %h = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %h : tensor<2x4xf32>
}

// -----

func.func private @block(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  return %h : tensor<2x8xf32>
}
func.func @layer_stage(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{stage must be prologue, block or epilogue, got 'middle'}}
  %h = sl.layer @block(%x) params() {index = 0 : i64, stage = "middle"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %h : tensor<2x8xf32>
}

// -----

func.func @param_stored_as_without_file() {
  // expected-error @+1 {{parameter 'w' has stored_as but no file to read the bytes from}}
  %w = sl.param "w" stored_as f32 : tensor<4xbf16>
  return
}

// -----

func.func @param_stored_as_unsupported() {
  // expected-error @+1 {{parameter 'w' is 'f32' stored as 'bf16': the runtime converts only f32 bytes to bf16}}
  %w = sl.param "w" from "m.onnx" at 0 stored_as bf16 : tensor<4xf32>
  return
}

// -----

// Gradient ops have named operands and results: a missing operand is refused where it is written.
func.func @rms_norm_grad_missing_dy(%x: tensor<4x64xf32>, %w: tensor<64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{expected 3 operands, but found 2}}
  %dx, %dw = sl.rms_norm_grad %x, %w {epsilon = 1.0e-06 : f32} : (tensor<4x64xf32>, tensor<64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)
  return %dx : tensor<4x64xf32>
}

// -----

func.func @gelu_grad_result_type(%x: tensor<4x64xf32>, %dy: tensor<4x64xf32>) -> tensor<4x32xf32> {
  // expected-error @+1 {{all of {input, dy, dinput} have same type}}
  %dx = sl.gelu_grad %x, %dy : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x32xf32>
  return %dx : tensor<4x32xf32>
}

// -----

func.func @swiglu_grad_one_result(%g: tensor<4x64xf32>, %u: tensor<4x64xf32>, %dy: tensor<4x64xf32>) -> tensor<4x64xf32> {
  // expected-error @+1 {{expected 2 results}}
  %dg = "sl.swiglu_grad"(%g, %u, %dy) : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return %dg : tensor<4x64xf32>
}

// -----

func.func @gather_grad_float_indices(%ids: tensor<4x16xf32>, %dy: tensor<4x16x64xf32>) -> tensor<256x64xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 64-bit signless integer or 32-bit signless integer values}}
  %d = sl.gather_grad %ids, %dy {axis = 0 : i64} : (tensor<4x16xf32>, tensor<4x16x64xf32>) -> tensor<256x64xf32>
  return %d : tensor<256x64xf32>
}

// -----

func.func @cross_entropy_grad_logits_type(%labels: tensor<4x16xi64>, %dloss: tensor<f32>, %logits: tensor<4x16x256xf32>) -> tensor<4x16x128xf32> {
  // expected-error @+1 {{all of {logits, dlogits} have same type}}
  %d = sl.cross_entropy_grad %labels, %dloss, %logits : (tensor<4x16xi64>, tensor<f32>, tensor<4x16x256xf32>) -> tensor<4x16x128xf32>
  return %d : tensor<4x16x128xf32>
}
