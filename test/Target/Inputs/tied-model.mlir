// The model of test/Transforms/schedule-subbatches.mlir (a prologue, three blocks, an epilogue
// tied to the embedding) with byte locations for its parameters, so that its steps can be emitted.
func.func private @prologue(%ids: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %h = sl.gather %e, %ids : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func private @block(%h: tensor<2x3x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %m = sl.matmul %h, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %r = sl.add %m, %h : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}
func.func private @epilogue(%h: tensor<2x3x4xf32>, %labels: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<f32> {
  %et = sl.transpose %e [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %logits = sl.matmul %h, %et : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %loss = sl.cross_entropy %logits, %labels : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @forward(%ids: tensor<2x3xi64> {sl.name = "input_ids"}, %labels: tensor<2x3xi64> {sl.name = "labels"}) -> (tensor<f32> {sl.name = "loss"}) {
  %e = sl.param "embed" from "model.onnx" at 1024 : tensor<8x4xf32>
  %w0 = sl.param "layers.0.w" from "model.onnx" at 2048 : tensor<4x4xf32>
  %w1 = sl.param "layers.1.w" from "model.onnx" at 3072 : tensor<4x4xf32>
  %w2 = sl.param "layers.2.w" from "model.onnx" at 4096 : tensor<4x4xf32>
  %h0 = sl.layer @prologue(%ids) params(%e) {index = 0 : i64, stage = "prologue"} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %h1 = sl.layer @block(%h0) params(%w0) {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %h2 = sl.layer @block(%h1) params(%w1) {index = 1 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %h3 = sl.layer @block(%h2) params(%w2) {index = 2 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %loss = sl.layer @epilogue(%h3, %labels) params(%e) {index = 0 : i64, stage = "epilogue"} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}



