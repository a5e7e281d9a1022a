// RUN: sl-opt %s -split-input-file -verify-diagnostics --pass-pipeline="builtin.module(func.func(sl-fuse-transformer))" -o /dev/null

// An attention that does not fuse still runs op by op; the remark on its softmax says which
// check failed, so a user can report the exporter's form.

func.func @not_constant(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>, %mask: tensor<1x1x3x3xf32>) -> tensor<1x2x3x2xf32> {
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.add %qk, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  // expected-remark @+1 {{attention not fused: a term added to the scores is not a constant (a causal mask, zeros or a position bias)}}
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

func.func @not_causal(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %mask = sl.constant dense<[[[[0.0, 0.0, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.add %qk, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  // expected-remark @+1 {{attention not fused: the scores have no causal mask}}
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

func.func @unmasked(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  // expected-remark @+1 {{attention not fused: the scores have no causal mask}}
  %p = sl.softmax %qk : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

func.func @negative_scale(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %c = sl.constant dense<-4.0> : tensor<f32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.where %tril, %qk, %min : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %s = sl.div %m, %c : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  // expected-remark @+1 {{attention not fused: the scores are divided by something other than a positive scalar constant}}
  %p = sl.softmax %s : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// A softmax whose probabilities do not multiply values is not an attention: no remark.
func.func @plain_softmax(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %p = sl.softmax %x : tensor<2x8xf32>
  return %p : tensor<2x8xf32>
}
