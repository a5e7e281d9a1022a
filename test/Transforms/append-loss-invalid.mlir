// RUN: sl-opt %s -split-input-file --sl-append-loss -verify-diagnostics

// expected-error @+1 {{sl-append-loss: no function has an output named 'logits'}}
module {
  func.func @forward(%x: tensor<4x8xf32>) -> (tensor<4x8xf32> {sl.name = "y"}) {
    return %x : tensor<4x8xf32>
  }
}

// -----

// expected-error @+1 {{sl-append-loss: output 'logits' must be [..., vocab] logits, got 'tensor<8xf32>'}}
func.func @forward(%x: tensor<8xf32>) -> (tensor<8xf32> {sl.name = "logits"}) {
  return %x : tensor<8xf32>
}

// -----

// expected-error @+1 {{sl-append-loss: @forward has no input named 'input_ids' (its inputs: 'tokens', '#1'); a training step feeds the token ids of sl-run's --data to that input: export the model with input_names=["input_ids"]}}
func.func @forward(%ids: tensor<2x3xi64> {sl.name = "tokens"}, %x: tensor<2xf32>) -> (tensor<2x3x8xf32> {sl.name = "logits"}) {
  %l = sl.constant dense<0.0> : tensor<2x3x8xf32>
  return %l : tensor<2x3x8xf32>
}

// -----

// expected-error @+1 {{sl-append-loss: input 'input_ids' must be int64 token ids of the logits' shape without the vocabulary dimension (rank 2), got 'tensor<2x3xf32>'}}
func.func @forward(%ids: tensor<2x3xf32> {sl.name = "input_ids"}) -> (tensor<2x3x8xf32> {sl.name = "logits"}) {
  %l = sl.constant dense<0.0> : tensor<2x3x8xf32>
  return %l : tensor<2x3x8xf32>
}
