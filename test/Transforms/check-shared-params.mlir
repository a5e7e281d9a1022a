// RUN: sl-opt %s -split-input-file --sl-check-shared-params -verify-diagnostics

// A fresh model exported in eval mode: its all-ones norm weights are merged into the first one,
// read by every block and by the final norm.
func.func @forward(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-warning @+1 {{sl-check-shared-params: parameter 'model.layers.0.input_layernorm.weight' is read in blocks 0, 1 and outside the blocks (node '/model/norm/Mul_1'): this looks like torch.onnx.export merging initializers of equal values}}
  %g = sl.param "model.layers.0.input_layernorm.weight" : tensor<8xf32>
  %a = sl.mul %h, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/layers.0/input_layernorm/Mul_1")
  %b = sl.mul %a, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/layers.1/input_layernorm/Mul_1")
  %c = sl.mul %b, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/norm/Mul_1")
  return %c : tensor<2x8xf32>
}

// -----

// Named after block 0 and read outside it: merged too (a one-block model's final norm).
func.func @forward(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-warning @+1 {{parameter 'model.layers.0.post_attention_layernorm.weight' is read in blocks 0 and outside the blocks (node '/model/norm/Mul_1')}}
  %g = sl.param "model.layers.0.post_attention_layernorm.weight" : tensor<8xf32>
  %a = sl.mul %h, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/layers.0/post_attention_layernorm/Mul_1")
  %c = sl.mul %a, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/norm/Mul_1")
  return %c : tensor<2x8xf32>
}

// -----

// A real tie, the embedding reused as the head (nn.Module or functional, `wte.weight.t()`), and a
// weight read twice inside its own block: no warning.
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %e = sl.param "transformer.wte.weight" : tensor<16x8xf32>
  %w = sl.param "transformer.h.0.mlp.weight" : tensor<8x8xf32>
  %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<2x4xi64> -> tensor<2x4x8xf32> loc("/transformer/wte/Gather")
  %m = sl.matmul %h, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("/transformer/h.0/mlp/MatMul")
  %n = sl.matmul %m, %w : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("/transformer/h.0/mlp/MatMul_1")
  %t = sl.transpose %e [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32> loc("/Transpose")
  %y = sl.matmul %n, %t : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32> loc("/MatMul")
  return %y : tensor<2x4x16xf32>
}
