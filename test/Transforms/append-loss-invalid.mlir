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
