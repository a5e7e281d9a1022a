// RUN: sl-opt %s -split-input-file --sl-insert-events -verify-diagnostics

func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<>} {
  // The verifier refuses a stream that is not a #sl.stream before the pass runs.
  // expected-error @+1 {{sl.stream must be a #sl.stream<compute|h2d|d2h|host|collective>, got "pcie"}}
  %d = sl.prefetch %x {sl.stream = "pcie"} : tensor<4xf32>
  %h = sl.offload %d {sl.stream = #sl.stream<d2h>} : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<>} {
  // expected-error @+1 {{sl-insert-events: a value has no offset; run sl-allocate first}}
  %d = sl.prefetch %x {sl.stream = #sl.stream<h2d>} : tensor<4xf32>
  %h = sl.offload %d {sl.stream = #sl.stream<d2h>} : tensor<4xf32>
  return %h : tensor<4xf32>
}
