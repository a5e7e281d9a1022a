// RUN: sl-opt %s -split-input-file --sl-autodiff -verify-diagnostics

// expected-error @+1 {{sl-autodiff: no stages to differentiate; run sl-partition-layers first}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

func.func private @block(%x: tensor<4xf32>, %e: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sl-autodiff: pow is differentiated only for a constant scalar exponent}}
  %y = sl.pow %x, %e : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %y : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>, %e: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.layer @block(%x, %e) params() {index = 0 : i64, stage = "block"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
