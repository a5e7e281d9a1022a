// RUN: sl-opt %s -split-input-file --sl-assemble-train-step -verify-diagnostics

// expected-error @+1 {{sl-assemble-train-step: @forward has no 'loss' output; run sl-append-loss first}}
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {sl.name = "logits"}) {
  return %x : tensor<4xf32>
}

// -----

func.func private @block(%x: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}
func.func @forward(%x: tensor<f32>) -> (tensor<f32> {sl.name = "loss"}) {
  // expected-error @+1 {{sl-assemble-train-step: no @block_backward; run sl-autodiff first}}
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<f32>) -> tensor<f32>
  return %y : tensor<f32>
}
