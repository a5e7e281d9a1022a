// RUN: sl-opt %s -split-input-file --sl-bind-shapes="batch=4" -verify-diagnostics

// expected-error @+1 {{input 'x' dimension 1 ('seq') is dynamic: give its size with seq=N}}
func.func @missing_seq(%x: tensor<?x?xf32> {sl.dims = ["batch", "seq"], sl.name = "x"}) -> tensor<?x?xf32> {
  return %x : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{input 'x' dimension 2 ('heads') is dynamic and is neither a batch nor a sequence dimension; export the model with it static}}
func.func @unknown_name(%x: tensor<4x8x?xf32> {sl.dims = ["", "", "heads"], sl.name = "x"}) -> tensor<4x8x?xf32> {
  return %x : tensor<4x8x?xf32>
}

// -----

// Binding can expose a mismatch that dynamic shapes hid.
func.func @conflict(%x: tensor<?x8xf32>, %y: tensor<3x8xf32>) -> tensor<?x8xf32> {
  // expected-error @+1 {{sl.add: shapes 'tensor<4x8xf32>' and 'tensor<3x8xf32>' cannot be broadcast together}}
  %z = sl.add %x, %y : tensor<?x8xf32>, tensor<3x8xf32> -> tensor<?x8xf32>
  return %z : tensor<?x8xf32>
}
