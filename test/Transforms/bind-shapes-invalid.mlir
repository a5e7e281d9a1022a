// RUN: sl-opt %s -split-input-file --sl-bind-shapes="batch=4" -verify-diagnostics

// expected-error @+1 {{input 'x' dimension 1 ('seq') is dynamic: give its size with seq=N}}
func.func @missing_seq(%x: tensor<?x?xf32> {sl.dims = ["batch", "seq"], sl.name = "x"}) -> tensor<?x?xf32> {
  return %x : tensor<?x?xf32>
}

// -----

// expected-error @+1 {{input 'x' dimension 2 ('heads') is dynamic and is none of input_ids' batch and sequence dimensions or the past length of past_key_values; export the model with it static}}
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

// -----

// A shape that comes from the model's input values cannot be made static.
func.func @runtime_shape(%x: tensor<?x8xf32>, %s: tensor<2xi64>) -> tensor<?x?xf32> {
  // expected-error @+1 {{result 'tensor<?x?xf32>' is still dynamic after binding batch=4 seq=0: its shape depends on values known only at run time}}
  %y = sl.reshape %x, %s : tensor<?x8xf32>, tensor<2xi64> -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// Shape arithmetic that folds to an impossible shape once the sizes are known.
func.func @bad_reshape(%x: tensor<?x6xf32>) -> tensor<?x4xf32> {
  %s = sl.shape %x {end = 1} : tensor<?x6xf32> -> tensor<1xi64>
  %four = sl.constant dense<4> : tensor<1xi64>
  %t = sl.concat %s, %four {axis = 0} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  // expected-error @+1 {{sl.reshape: cannot reshape 'tensor<4x6xf32>' (24 elements) into 'tensor<4x4xf32>'}}
  %y = sl.reshape %x, %t : tensor<?x6xf32>, tensor<2xi64> -> tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}

// -----

// A past given at run time needs its length.
// expected-error @+1 {{input 'past_key_values.0.key' dimension 2 ('past_sequence_length') is the past length: bind the past (the sl-bind-inputs pass, bind-inputs=past_key_values in --sl-infer) or give its length with past=N}}
func.func @past_length(%ids: tensor<?x3xi64> {sl.dims = ["batch_size", ""], sl.name = "input_ids"}, %k: tensor<?x2x?x8xf32> {sl.dims = ["batch_size", "", "past_sequence_length", ""], sl.name = "past_key_values.0.key"}) -> tensor<?x3xi64> {
  return %ids : tensor<?x3xi64>
}
