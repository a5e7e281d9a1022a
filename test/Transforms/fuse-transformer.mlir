// RUN: sl-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(sl-fuse-transformer),canonicalize)" | FileCheck %s

// RMSNorm as the LLaMA export writes it: x * (1 / sqrt(mean(x^2) + eps)) * w.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8xf32>, %[[W:.+]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32}
// CHECK-NEXT: return %[[Y]]
func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %eps = sl.constant dense<1.0e-6> : tensor<f32>
  %axes = sl.constant dense<-1> : tensor<1xi64>
  %sq = sl.pow %x, %two : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %mean = sl.reduce_mean %sq, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %a = sl.add %mean, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = sl.sqrt %a : tensor<2x4x1xf32>
  %r = sl.div %one, %s : tensor<f32>, tensor<2x4x1xf32> -> tensor<2x4x1xf32>
  %n = sl.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %y = sl.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Near miss: a cube is not a square.
// CHECK-LABEL: func.func @rms_norm_wrong_exponent
// CHECK-NOT: sl.rms_norm
func.func @rms_norm_wrong_exponent(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %three = sl.constant dense<3.0> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %eps = sl.constant dense<1.0e-6> : tensor<f32>
  %axes = sl.constant dense<-1> : tensor<1xi64>
  %sq = sl.pow %x, %three : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %mean = sl.reduce_mean %sq, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %a = sl.add %mean, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = sl.sqrt %a : tensor<2x4x1xf32>
  %r = sl.div %one, %s : tensor<f32>, tensor<2x4x1xf32> -> tensor<2x4x1xf32>
  %n = sl.mul %x, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %y = sl.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// LayerNorm with bias as torch.onnx.export writes nn.LayerNorm before opset 17.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8xf32>, %[[W:.+]]: tensor<8xf32>, %[[B:.+]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.layer_norm %[[X]], %[[W]], %[[B]] : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %eps = sl.constant dense<1.0e-5> : tensor<f32>
  %axes = sl.constant dense<-1> : tensor<1xi64>
  %mean = sl.reduce_mean %x, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %d = sl.sub %x, %mean : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %sq = sl.pow %d, %two : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %var = sl.reduce_mean %sq, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %a = sl.add %var, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = sl.sqrt %a : tensor<2x4x1xf32>
  %n = sl.div %d, %s : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %m = sl.mul %n, %w : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %y = sl.add %m, %b : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// LayerNorm without bias as Cohere writes it: w * ((x - mean) * (1 / sqrt(var + eps))).
// CHECK-LABEL: func.func @layer_norm_rsqrt
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8xf32>, %[[W:.+]]: tensor<8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.layer_norm %[[X]], %[[W]] {{.*}}: (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @layer_norm_rsqrt(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %eps = sl.constant dense<1.0e-5> : tensor<f32>
  %axes = sl.constant dense<-1> : tensor<1xi64>
  %mean = sl.reduce_mean %x, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %d = sl.sub %x, %mean : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %sq = sl.pow %d, %two : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %var = sl.reduce_mean %sq, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %a = sl.add %var, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = sl.sqrt %a : tensor<2x4x1xf32>
  %r = sl.div %one, %s : tensor<f32>, tensor<2x4x1xf32> -> tensor<2x4x1xf32>
  %n = sl.mul %d, %r : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %y = sl.mul %w, %n : tensor<8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// Near miss: the variance of x rather than of x - mean is not a layer norm (nor an RMSNorm).
// CHECK-LABEL: func.func @layer_norm_wrong_variance
// CHECK-NOT: sl.layer_norm
// CHECK-NOT: sl.rms_norm
func.func @layer_norm_wrong_variance(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %eps = sl.constant dense<1.0e-5> : tensor<f32>
  %axes = sl.constant dense<-1> : tensor<1xi64>
  %mean = sl.reduce_mean %x, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %d = sl.sub %x, %mean : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %sq = sl.pow %x, %two : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %var = sl.reduce_mean %sq, %axes {keepdims} : (tensor<2x4x8xf32>, tensor<1xi64>) -> tensor<2x4x1xf32>
  %a = sl.add %var, %eps : tensor<2x4x1xf32>, tensor<f32> -> tensor<2x4x1xf32>
  %s = sl.sqrt %a : tensor<2x4x1xf32>
  %n = sl.div %d, %s : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
  %m = sl.mul %n, %w : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  return %m : tensor<2x4x8xf32>
}

// -----

// Exact GELU: x * (1 + erf(x / sqrt(2))) * 0.5.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-SAME: (%[[X:.+]]: tensor<2x16xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.gelu %[[X]] : tensor<2x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_erf(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %sqrt2 = sl.constant dense<1.41421354> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %half = sl.constant dense<0.5> : tensor<f32>
  %d = sl.div %x, %sqrt2 : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  %e = sl.erf %d : tensor<2x16xf32>
  %a = sl.add %e, %one : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  %m = sl.mul %x, %a : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %y = sl.mul %m, %half : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// GPT-2's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-SAME: (%[[X:.+]]: tensor<2x16xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.gelu %[[X]] {tanh} : tensor<2x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_tanh(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %half = sl.constant dense<0.5> : tensor<f32>
  %three = sl.constant dense<3.0> : tensor<f32>
  %k = sl.constant dense<0.044715> : tensor<f32>
  %c = sl.constant dense<0.797884583> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %h = sl.mul %half, %x : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %p = sl.pow %x, %three : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  %kp = sl.mul %k, %p : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %s = sl.add %x, %kp : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %cs = sl.mul %c, %s : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %t = sl.tanh %cs : tensor<2x16xf32>
  %a = sl.add %one, %t : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %y = sl.mul %h, %a : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// Gemma's GeGLU as torch.onnx exports gelu(gate, approximate="tanh") * up: the cube as
// x * (x * x), the 0.5 applied last; the gelu fuses and the product with up stays.
// CHECK-LABEL: func.func @geglu_tanh_cube
// CHECK-SAME: (%[[G:.+]]: tensor<2x16xf32>, %[[U:.+]]: tensor<2x16xf32>)
// CHECK-NEXT: %[[A:.+]] = sl.gelu %[[G]] {tanh} : tensor<2x16xf32>
// CHECK-NEXT: %[[Y:.+]] = sl.mul %[[A]], %[[U]]
// CHECK-NEXT: return %[[Y]]
func.func @geglu_tanh_cube(%x: tensor<2x16xf32>, %up: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %half = sl.constant dense<0.5> : tensor<f32>
  %k = sl.constant dense<0.044715> : tensor<f32>
  %c = sl.constant dense<0.797884583> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %xx = sl.mul %x, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %cube = sl.mul %x, %xx : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %kc = sl.mul %k, %cube : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %s = sl.add %x, %kc : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %cs = sl.mul %c, %s : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %t = sl.tanh %cs : tensor<2x16xf32>
  %a = sl.add %one, %t : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %xa = sl.mul %x, %a : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %g = sl.mul %half, %xa : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %y = sl.mul %g, %up : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// Near miss: x * x * x * 0.05 is not GELU's cube term.
// CHECK-LABEL: func.func @gelu_tanh_wrong_kappa
// CHECK-NOT: sl.gelu
func.func @gelu_tanh_wrong_kappa(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %half = sl.constant dense<0.5> : tensor<f32>
  %k = sl.constant dense<0.05> : tensor<f32>
  %c = sl.constant dense<0.797884583> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %xx = sl.mul %x, %x : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %cube = sl.mul %x, %xx : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %kc = sl.mul %k, %cube : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %s = sl.add %x, %kc : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %cs = sl.mul %c, %s : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %t = sl.tanh %cs : tensor<2x16xf32>
  %a = sl.add %one, %t : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %xa = sl.mul %x, %a : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %y = sl.mul %half, %xa : tensor<f32>, tensor<2x16xf32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// Near miss: 0.4 * x * (1 + erf(x / sqrt(2))) is not GELU.
// CHECK-LABEL: func.func @gelu_wrong_half
// CHECK-NOT: sl.gelu
func.func @gelu_wrong_half(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %sqrt2 = sl.constant dense<1.41421354> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %c = sl.constant dense<0.4> : tensor<f32>
  %d = sl.div %x, %sqrt2 : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  %e = sl.erf %d : tensor<2x16xf32>
  %a = sl.add %e, %one : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  %m = sl.mul %x, %a : tensor<2x16xf32>, tensor<2x16xf32> -> tensor<2x16xf32>
  %y = sl.mul %m, %c : tensor<2x16xf32>, tensor<f32> -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

// SwiGLU: silu(gate) * up, with the exporter's x * sigmoid(x) for silu.
// CHECK-LABEL: func.func @swiglu
// CHECK-SAME: (%[[G:.+]]: tensor<2x4x16xf32>, %[[U:.+]]: tensor<2x4x16xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.swiglu %[[G]], %[[U]] : tensor<2x4x16xf32>
// CHECK-NEXT: return %[[Y]]
func.func @swiglu(%g: tensor<2x4x16xf32>, %u: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %s = sl.sigmoid %g : tensor<2x4x16xf32>
  %silu = sl.mul %g, %s : tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %y = sl.mul %silu, %u : tensor<2x4x16xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Near miss: a gate that broadcasts is not an elementwise SwiGLU.
// CHECK-LABEL: func.func @swiglu_broadcast
// CHECK-NOT: sl.swiglu
func.func @swiglu_broadcast(%g: tensor<2x4x1xf32>, %u: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %silu = sl.silu %g : tensor<2x4x1xf32>
  %y = sl.mul %silu, %u : tensor<2x4x1xf32>, tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// -----

// Rotary, rotate-half (HF LLaMA): x * cos + concat(-x[4:], x[:4]) * sin.
// CHECK-LABEL: func.func @rotary_half
// CHECK-SAME: (%[[X:.+]]: tensor<2x2x4x8xf32>, %[[COS:.+]]: tensor<1x1x4x8xf32>, %[[SIN:.+]]: tensor<1x1x4x8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.rotary %[[X]], %[[COS]], %[[SIN]] :
// CHECK-NOT: interleaved
// CHECK-NEXT: return %[[Y]]
func.func @rotary_half(%x: tensor<2x2x4x8xf32>, %cos: tensor<1x1x4x8xf32>, %sin: tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %zero = sl.constant dense<0> : tensor<1xi64>
  %half = sl.constant dense<4> : tensor<1xi64>
  %end = sl.constant dense<9223372036854775807> : tensor<1xi64>
  %axis = sl.constant dense<3> : tensor<1xi64>
  %one = sl.constant dense<1> : tensor<1xi64>
  %a = sl.mul %x, %cos : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<2x2x4x8xf32>
  %x1 = sl.slice %x, %zero, %half axes %axis steps %one : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %x2 = sl.slice %x, %half, %end axes %axis steps %one : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %n = sl.neg %x2 : tensor<2x2x4x4xf32>
  %r = sl.concat %n, %x1 {axis = -1 : i64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x8xf32>
  %b = sl.mul %r, %sin : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<2x2x4x8xf32>
  %y = sl.add %a, %b : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Rotary, interleaved pairs (GPT-J, Meta LLaMA): stack(-x[1::2], x[0::2]) flattened.
// CHECK-LABEL: func.func @rotary_interleaved
// CHECK-SAME: (%[[X:.+]]: tensor<2x2x4x8xf32>, %[[COS:.+]]: tensor<1x1x4x8xf32>, %[[SIN:.+]]: tensor<1x1x4x8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.rotary %[[X]], %[[COS]], %[[SIN]] {interleaved}
// CHECK-NEXT: return %[[Y]]
func.func @rotary_interleaved(%x: tensor<2x2x4x8xf32>, %cos: tensor<1x1x4x8xf32>, %sin: tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %zero = sl.constant dense<0> : tensor<1xi64>
  %one = sl.constant dense<1> : tensor<1xi64>
  %two = sl.constant dense<2> : tensor<1xi64>
  %end = sl.constant dense<9223372036854775807> : tensor<1xi64>
  %axis = sl.constant dense<-1> : tensor<1xi64>
  %pairs = sl.constant dense<[2, 2, 4, 4, 1]> : tensor<5xi64>
  %flat = sl.constant dense<[2, 2, 4, 8]> : tensor<4xi64>
  %a = sl.mul %x, %cos : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<2x2x4x8xf32>
  %even = sl.slice %x, %zero, %end axes %axis steps %two : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %odd = sl.slice %x, %one, %end axes %axis steps %two : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x4xf32>
  %n = sl.neg %odd : tensor<2x2x4x4xf32>
  %n5 = sl.reshape %n, %pairs : tensor<2x2x4x4xf32>, tensor<5xi64> -> tensor<2x2x4x4x1xf32>
  %e5 = sl.reshape %even, %pairs : tensor<2x2x4x4xf32>, tensor<5xi64> -> tensor<2x2x4x4x1xf32>
  %c = sl.concat %n5, %e5 {axis = -1 : i64} : (tensor<2x2x4x4x1xf32>, tensor<2x2x4x4x1xf32>) -> tensor<2x2x4x4x2xf32>
  %r = sl.reshape %c, %flat : tensor<2x2x4x4x2xf32>, tensor<4xi64> -> tensor<2x2x4x8xf32>
  %b = sl.mul %r, %sin : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<2x2x4x8xf32>
  %y = sl.add %a, %b : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Near miss: halves split at 3 of 8 are not a rotation.
// CHECK-LABEL: func.func @rotary_uneven
// CHECK-NOT: sl.rotary
func.func @rotary_uneven(%x: tensor<2x2x4x8xf32>, %cos: tensor<1x1x4x8xf32>, %sin: tensor<1x1x4x8xf32>) -> tensor<2x2x4x8xf32> {
  %zero = sl.constant dense<0> : tensor<1xi64>
  %three = sl.constant dense<3> : tensor<1xi64>
  %end = sl.constant dense<9223372036854775807> : tensor<1xi64>
  %axis = sl.constant dense<3> : tensor<1xi64>
  %a = sl.mul %x, %cos : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<2x2x4x8xf32>
  %x1 = sl.slice %x, %zero, %three axes %axis : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x3xf32>
  %x2 = sl.slice %x, %three, %end axes %axis : (tensor<2x2x4x8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x2x4x5xf32>
  %n = sl.neg %x2 : tensor<2x2x4x5xf32>
  %r = sl.concat %n, %x1 {axis = -1 : i64} : (tensor<2x2x4x5xf32>, tensor<2x2x4x3xf32>) -> tensor<2x2x4x8xf32>
  %b = sl.mul %r, %sin : tensor<2x2x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<2x2x4x8xf32>
  %y = sl.add %a, %b : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32> -> tensor<2x2x4x8xf32>
  return %y : tensor<2x2x4x8xf32>
}

// -----

// Grouped-query attention as HF LLaMA exports it: repeat_kv (reshape, expand, reshape), k^T,
// q k^T / sqrt(d), the additive causal mask (0 / float min), the clamp to float min, softmax, v.
// CHECK-LABEL: func.func @attention_gqa
// CHECK-SAME: (%[[Q:.+]]: tensor<1x4x3x2xf32>, %[[K:.+]]: tensor<1x2x3x2xf32>, %[[V:.+]]: tensor<1x2x3x2xf32>)
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 0.707106769 : f32} : (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_gqa(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x4x3x2xf32> {
  %split = sl.constant dense<[1, 2, 1, 3, 2]> : tensor<5xi64>
  %many = sl.constant dense<[1, 2, 2, 3, 2]> : tensor<5xi64>
  %merged = sl.constant dense<[1, 4, 3, 2]> : tensor<4xi64>
  %sqrtd = sl.constant dense<1.41421354> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = sl.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %k5 = sl.reshape %k, %split {allowzero} : tensor<1x2x3x2xf32>, tensor<5xi64> -> tensor<1x2x1x3x2xf32>
  %ke = sl.expand %k5, %many : tensor<1x2x1x3x2xf32>, tensor<5xi64> -> tensor<1x2x2x3x2xf32>
  %kr = sl.reshape %ke, %merged : tensor<1x2x2x3x2xf32>, tensor<4xi64> -> tensor<1x4x3x2xf32>
  %v5 = sl.reshape %v, %split {allowzero} : tensor<1x2x3x2xf32>, tensor<5xi64> -> tensor<1x2x1x3x2xf32>
  %ve = sl.expand %v5, %many : tensor<1x2x1x3x2xf32>, tensor<5xi64> -> tensor<1x2x2x3x2xf32>
  %vr = sl.reshape %ve, %merged : tensor<1x2x2x3x2xf32>, tensor<4xi64> -> tensor<1x4x3x2xf32>
  %kt = sl.transpose %kr [0, 1, 3, 2] : tensor<1x4x3x2xf32> -> tensor<1x4x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x4x3x2xf32>, tensor<1x4x2x3xf32> -> tensor<1x4x3x3xf32>
  %s = sl.div %qk, %sqrtd : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xf32>
  %m = sl.add %s, %mask : tensor<1x4x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x4x3x3xf32>
  %lt = sl.less %m, %min : tensor<1x4x3x3xf32>, tensor<f32> -> tensor<1x4x3x3xi1>
  %c = sl.where %lt, %min, %m : tensor<1x4x3x3xi1>, tensor<f32>, tensor<1x4x3x3xf32> -> tensor<1x4x3x3xf32>
  %p = sl.softmax %c : tensor<1x4x3x3xf32>
  %o = sl.matmul %p, %vr : tensor<1x4x3x3xf32>, tensor<1x4x3x2xf32> -> tensor<1x4x3x2xf32>
  return %o : tensor<1x4x3x2xf32>
}

// -----

// GPT-2's form: k transposed straight from [B, T, H, D], the mask selected with where, -1e4.
// CHECK-LABEL: func.func @attention_where_mask
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x3x2xf32>, %[[K:.+]]: tensor<1x3x2x2xf32>, %[[V:.+]]: tensor<1x2x3x2xf32>)
// CHECK-NEXT: %[[KT:.+]] = sl.transpose %[[K]] [0, 2, 1, 3] : tensor<1x3x2x2xf32> -> tensor<1x2x3x2xf32>
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[KT]], %[[V]] {causal, scale = 5.000000e-01 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_where_mask(%q: tensor<1x2x3x2xf32>, %k: tensor<1x3x2x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %neg = sl.constant dense<-1.0e4> : tensor<f32>
  %half = sl.constant dense<0.5> : tensor<f32>
  %kt = sl.transpose %k [0, 2, 3, 1] : tensor<1x3x2x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %s = sl.mul %qk, %half : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %m = sl.where %tril, %s, %neg : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// OPT's form: 3-D batched matmuls over B * H, the mask added on [B, H, S, T].
// CHECK-LABEL: func.func @attention_bmm
// CHECK-SAME: (%[[Q:.+]]: tensor<4x3x2xf32>, %[[K:.+]]: tensor<4x3x2xf32>, %[[V:.+]]: tensor<4x3x2xf32>)
// CHECK: %[[O:.+]] = sl.attention {{.+}} {causal, scale = 1.000000e+00 : f32} : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>) -> tensor<2x2x3x2xf32>
// CHECK-NEXT: %[[R:.+]] = sl.reshape %[[O]]
// CHECK-NEXT: return %[[R]] : tensor<4x3x2xf32>
func.func @attention_bmm(%q: tensor<4x3x2xf32>, %k: tensor<4x3x2xf32>, %v: tensor<4x3x2xf32>) -> tensor<4x3x2xf32> {
  %bhst = sl.constant dense<[2, 2, 3, 3]> : tensor<4xi64>
  %flat = sl.constant dense<[4, 3, 3]> : tensor<3xi64>
  %mask = sl.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<2x1x3x3xf32>
  %kt = sl.transpose %k [0, 2, 1] : tensor<4x3x2xf32> -> tensor<4x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<4x3x2xf32>, tensor<4x2x3xf32> -> tensor<4x3x3xf32>
  %s4 = sl.reshape %qk, %bhst : tensor<4x3x3xf32>, tensor<4xi64> -> tensor<2x2x3x3xf32>
  %m = sl.add %s4, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32> -> tensor<2x2x3x3xf32>
  %s3 = sl.reshape %m, %flat : tensor<2x2x3x3xf32>, tensor<3xi64> -> tensor<4x3x3xf32>
  %p = sl.softmax %s3 : tensor<4x3x3xf32>
  %o = sl.matmul %p, %v : tensor<4x3x3xf32>, tensor<4x3x2xf32> -> tensor<4x3x2xf32>
  return %o : tensor<4x3x2xf32>
}

// -----

// One query over one key (a decoding step bound at one token): the causal mask folded away, and
// the attention is still recognised.
// CHECK-LABEL: func.func @attention_one_token
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x1x8xf32>, %[[K:.+]]: tensor<2x1x4x8xf32>, %[[V:.+]]: tensor<2x4x1x8xf32>)
// CHECK: sl.attention %[[Q]], %{{.+}}, %[[V]] {causal, scale = 5.000000e-01 : f32}
// CHECK-NOT: sl.softmax
func.func @attention_one_token(%q: tensor<2x4x1x8xf32>, %k: tensor<2x1x4x8xf32>, %v: tensor<2x4x1x8xf32>) -> tensor<2x4x1x8xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %kt = sl.transpose %k [0, 2, 3, 1] : tensor<2x1x4x8xf32> -> tensor<2x4x8x1xf32>
  %qk = sl.matmul %q, %kt : tensor<2x4x1x8xf32>, tensor<2x4x8x1xf32> -> tensor<2x4x1x1xf32>
  %s = sl.div %qk, %two : tensor<2x4x1x1xf32>, tensor<f32> -> tensor<2x4x1x1xf32>
  %p = sl.softmax %s : tensor<2x4x1x1xf32>
  %o = sl.matmul %p, %v : tensor<2x4x1x1xf32>, tensor<2x4x1x8xf32> -> tensor<2x4x1x8xf32>
  return %o : tensor<2x4x1x8xf32>
}

// -----

// Without a mask, more than one key is not causal attention: no fusion.
// CHECK-LABEL: func.func @attention_unmasked
// CHECK: sl.softmax
// CHECK-NOT: sl.attention
func.func @attention_unmasked(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %qk : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// Near miss: a mask that lets the first query see the second key is not causal.
// CHECK-LABEL: func.func @attention_not_causal
// CHECK-NOT: sl.attention
func.func @attention_not_causal(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %mask = sl.constant dense<[[[[0.0, 0.0, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.add %qk, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// OpenAI GPT's form: w * b + -1e4 * (1 - b) with b the 0/1 causal buffer. The additive term is
// the causal mask; the multiplier then zeroes only scores that mask drops.
// CHECK-LABEL: func.func @attention_causal_multiplier
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x3x2xf32>, %[[K:.+]]: tensor<1x2x3x2xf32>, %[[V:.+]]: tensor<1x2x3x2xf32>)
// CHECK: %[[O:.+]] = sl.attention %[[Q]], %{{.+}}, %[[V]] {causal, scale = 5.000000e-01 : f32}
// CHECK-NOT: sl.softmax
// CHECK: return %[[O]]
func.func @attention_causal_multiplier(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %b = sl.constant dense<[[[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]]]> : tensor<1x1x3x3xf32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %neg = sl.constant dense<-1.0e4> : tensor<f32>
  %two = sl.constant dense<2.0> : tensor<f32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %s = sl.div %qk, %two : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %kept = sl.mul %s, %b : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %dropped = sl.sub %one, %b : tensor<f32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %fill = sl.mul %dropped, %neg : tensor<1x1x3x3xf32>, tensor<f32> -> tensor<1x1x3x3xf32>
  %m = sl.add %kept, %fill : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// Near miss: the causal multiplier alone leaves 0, not a dropped score, where the mask is 0.
// CHECK-LABEL: func.func @attention_causal_multiplier_alone
// CHECK: sl.softmax
// CHECK-NOT: sl.attention
func.func @attention_causal_multiplier_alone(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %b = sl.constant dense<[[[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]]]> : tensor<1x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %kept = sl.mul %qk, %b : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %kept : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// GPT-NeoX's form: baddbmm scales 3-D [B * H, S, T] scores and adds beta * zeros, the reshape to
// [B, H, S, T] comes after the scale, the causal mask is selected there, and the probabilities
// multiply 4-D values.
// CHECK-LABEL: func.func @attention_neox
// CHECK-SAME: (%[[Q:.+]]: tensor<4x3x2xf32>, %[[K:.+]]: tensor<4x3x2xf32>, %[[V:.+]]: tensor<2x2x3x2xf32>)
// CHECK-DAG: %[[Q4:.+]] = sl.reshape %[[Q]]
// CHECK-DAG: %[[K4:.+]] = sl.reshape %[[K]]
// CHECK: %[[O:.+]] = sl.attention %[[Q4]], %[[K4]], %[[V]] {causal, scale = 0.707106769 : f32} : (tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>) -> tensor<2x2x3x2xf32>
// CHECK-NEXT: return %[[O]]
func.func @attention_neox(%q: tensor<4x3x2xf32>, %k: tensor<4x3x2xf32>, %v: tensor<2x2x3x2xf32>) -> tensor<2x2x3x2xf32> {
  %bhst = sl.constant dense<[2, 2, 3, 3]> : tensor<4xi64>
  %shape = sl.constant dense<[4, 3, 3]> : tensor<3xi64>
  %norm = sl.constant dense<0.707106769> : tensor<f32>
  %beta = sl.constant dense<1.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %zeros = sl.constant_of_shape %shape {value = dense<0.0> : tensor<1xf32>} : tensor<3xi64> -> tensor<4x3x3xf32>
  %kt = sl.transpose %k [0, 2, 1] : tensor<4x3x2xf32> -> tensor<4x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<4x3x2xf32>, tensor<4x2x3xf32> -> tensor<4x3x3xf32>
  %scaled = sl.mul %qk, %norm : tensor<4x3x3xf32>, tensor<f32> -> tensor<4x3x3xf32>
  %bz = sl.mul %zeros, %beta : tensor<4x3x3xf32>, tensor<f32> -> tensor<4x3x3xf32>
  %s = sl.add %scaled, %bz : tensor<4x3x3xf32>, tensor<4x3x3xf32> -> tensor<4x3x3xf32>
  %s4 = sl.reshape %s, %bhst : tensor<4x3x3xf32>, tensor<4xi64> -> tensor<2x2x3x3xf32>
  %m = sl.where %tril, %s4, %min : tensor<1x1x3x3xi1>, tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %p = sl.softmax %m : tensor<2x2x3x3xf32>
  %f = sl.cast %p to f32 : tensor<2x2x3x3xf32> -> tensor<2x2x3x3xf32>
  %o = sl.matmul %f, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}

// -----

// GPT-J's form: the causal where comes first and the division by the scale after it; then an
// all-zero padding mask is added.
// CHECK-LABEL: func.func @attention_scale_after_mask
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x3x2xf32>, %[[K:.+]]: tensor<1x2x3x2xf32>, %[[V:.+]]: tensor<1x2x3x2xf32>)
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_scale_after_mask(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %four = sl.constant dense<4.0> : tensor<f32>
  %padding = sl.constant dense<0.0> : tensor<1x1x1x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.where %tril, %qk, %min : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %s = sl.div %m, %four : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %a = sl.add %s, %padding : tensor<1x2x3x3xf32>, tensor<1x1x1x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %a : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// nanoGPT's masked_fill(bias[:, :, :S, :S] == 0, -inf): the condition is the inverted causal
// mask and the fill is the first operand of the where.
// CHECK-LABEL: func.func @attention_masked_fill
// CHECK-SAME: (%[[Q:.+]]: tensor<1x2x3x2xf32>, %[[K:.+]]: tensor<1x2x3x2xf32>, %[[V:.+]]: tensor<1x2x3x2xf32>)
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 5.000000e-01 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_masked_fill(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %bias = sl.constant dense<[[[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]]]> : tensor<1x1x3x3xf32>
  %zero = sl.constant dense<0.0> : tensor<f32>
  %ninf = sl.constant dense<0xFF800000> : tensor<f32>
  %half = sl.constant dense<0.5> : tensor<f32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %s = sl.mul %qk, %half : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %dropped = sl.equal %bias, %zero : tensor<1x1x3x3xf32>, tensor<f32> -> tensor<1x1x3x3xi1>
  %m = sl.where %dropped, %ninf, %s : tensor<1x1x3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// Near miss: a negative scale after a -inf fill would turn the dropped scores into +inf.
// CHECK-LABEL: func.func @attention_negative_scale
// CHECK-NOT: sl.attention
func.func @attention_negative_scale(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %c = sl.constant dense<-4.0> : tensor<f32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.where %tril, %qk, %min : tensor<1x1x3x3xi1>, tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %s = sl.div %m, %c : tensor<1x2x3x3xf32>, tensor<f32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %s : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// BLOOM's form: baddbmm adds the ALiBi bias [B * H, 1, T] to the scaled 3-D scores, the causal
// mask is inverted (masked_fill where it is true), k^T is a 4-D transpose merged to [B * H, D, T].
// The bias is a slope per head times the key's position, scaled by what came after it (here 2:
// bias 1.0 per key step becomes 2.0): the fused op's alibi_slopes, one per head.
// CHECK-LABEL: func.func @attention_alibi
// CHECK: %[[SLOPES:.+]] = sl.constant dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK: %[[K:.+]] = sl.transpose %{{.+}} [0, 2, 1, 3] : tensor<1x3x2x2xf32> -> tensor<1x2x3x2xf32>
// CHECK: sl.attention %{{.+}}, %[[K]], %{{.+}} alibi_slopes %[[SLOPES]] {causal, scale = 1.000000e+00 : f32}
// CHECK-NOT: mask
func.func @attention_alibi(%q: tensor<2x3x2xf32>, %k: tensor<1x3x2x2xf32>, %v: tensor<2x3x2xf32>) -> tensor<2x3x2xf32> {
  %bhst = sl.constant dense<[1, 2, 3, 3]> : tensor<4xi64>
  %flat = sl.constant dense<[2, 3, 3]> : tensor<3xi64>
  %alibi = sl.constant dense<[[[0.0, 1.0, 2.0]], [[0.0, 0.5, 1.0]]]> : tensor<2x1x3xf32>
  %half = sl.constant dense<0.5> : tensor<f32>
  %two = sl.constant dense<2.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %triu = sl.constant dense<[[[[false, true, true], [false, false, true], [false, false, false]]]]> : tensor<1x1x3x3xi1>
  %bhdt = sl.constant dense<[2, 2, 3]> : tensor<3xi64>
  %kt4 = sl.transpose %k [0, 2, 3, 1] : tensor<1x3x2x2xf32> -> tensor<1x2x2x3xf32>
  %kt = sl.reshape %kt4, %bhdt : tensor<1x2x2x3xf32>, tensor<3xi64> -> tensor<2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<2x3x2xf32>, tensor<2x2x3xf32> -> tensor<2x3x3xf32>
  %scaled = sl.mul %qk, %half : tensor<2x3x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
  %biased = sl.add %scaled, %alibi : tensor<2x3x3xf32>, tensor<2x1x3xf32> -> tensor<2x3x3xf32>
  %s = sl.mul %biased, %two : tensor<2x3x3xf32>, tensor<f32> -> tensor<2x3x3xf32>
  %s4 = sl.reshape %s, %bhst : tensor<2x3x3xf32>, tensor<4xi64> -> tensor<1x2x3x3xf32>
  %m = sl.where %triu, %min, %s4 : tensor<1x1x3x3xi1>, tensor<f32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %p3 = sl.reshape %p, %flat : tensor<1x2x3x3xf32>, tensor<3xi64> -> tensor<2x3x3xf32>
  %o = sl.matmul %p3, %v : tensor<2x3x3xf32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>
  return %o : tensor<2x3x2xf32>
}

// -----

// ALiBi up to a constant per query row (softmax ignores it), broadcast over the batch and the
// query rows, slopes shared by every head of a [1, 1, T] bias.
// CHECK-LABEL: func.func @attention_alibi_shifted_rows
// CHECK: %[[SLOPES:.+]] = sl.constant dense<-5.000000e-01> : tensor<2xf32>
// CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} alibi_slopes %[[SLOPES]] {causal, scale = 1.000000e+00 : f32}
func.func @attention_alibi_shifted_rows(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %bias = sl.constant dense<[[[7.0, 6.5, 6.0]]]> : tensor<1x1x3xf32>
  %mask = sl.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %b = sl.add %qk, %bias : tensor<1x2x3x3xf32>, tensor<1x1x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.add %b, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// A position bias that is not a line in the key position (here 0, 1, 3) is no ALiBi: it stays
// the fused op's additive mask.
// CHECK-LABEL: func.func @attention_bias_not_alibi
// CHECK: %[[BIAS:.+]] = sl.constant dense<{{\[\[\[}}0.000000e+00, 1.000000e+00, 3.000000e+00]]]> : tensor<1x1x3xf32>
// CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}}, mask %[[BIAS]] {causal, scale = 1.000000e+00 : f32}
// CHECK-NOT: alibi_slopes
func.func @attention_bias_not_alibi(%q: tensor<1x2x3x2xf32>, %k: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> {
  %bias = sl.constant dense<[[[0.0, 1.0, 3.0]]]> : tensor<1x1x3xf32>
  %mask = sl.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<1x2x3x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x3x3xf32>
  %b = sl.add %qk, %bias : tensor<1x2x3x3xf32>, tensor<1x1x3xf32> -> tensor<1x2x3x3xf32>
  %m = sl.add %b, %mask : tensor<1x2x3x3xf32>, tensor<1x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %p = sl.softmax %m : tensor<1x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<1x2x3x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
  return %o : tensor<1x2x3x2xf32>
}

// -----

// BLOOM's GELU: x * 0.5 * (1 + tanh(0.79788456 * x * (1 + 0.044715 * x * x))).
// CHECK-LABEL: func.func @gelu_bloom
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[Y:.+]] = sl.gelu %[[X]] {tanh} : tensor<2x8xf32>
// CHECK-NEXT: return %[[Y]]
func.func @gelu_bloom(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = sl.constant dense<0.5> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %c = sl.constant dense<0.79788456> : tensor<f32>
  %k = sl.constant dense<0.044715> : tensor<f32>
  %kx = sl.mul %k, %x : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %kxx = sl.mul %kx, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %p = sl.add %one, %kxx : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %cx = sl.mul %c, %x : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %a = sl.mul %cx, %p : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %t = sl.tanh %a : tensor<2x8xf32>
  %u = sl.add %one, %t : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %xh = sl.mul %x, %half : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %y = sl.mul %xh, %u : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A padded batch with the mask given at run time, as LLaMA and Mistral combine it with the
// causal mask: where(padding, min, causal). The fused op applies the causal part itself and adds
// the padding part, where(padding, min, 0), as its mask.
// CHECK-LABEL: func.func @attention_padding_where_causal
// CHECK-SAME: (%[[Q:.+]]: tensor<2x2x3x2xf32>, %[[K:.+]]: tensor<2x2x3x2xf32>, %[[V:.+]]: tensor<2x2x3x2xf32>, %[[PAD:.+]]: tensor<2x1x3x3xi1>)
// CHECK-DAG: %[[MIN:.+]] = sl.constant dense<-3.40282347E+38> : tensor<f32>
// CHECK-DAG: %[[ZERO:.+]] = sl.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[M:.+]] = sl.where %[[PAD]], %[[MIN]], %[[ZERO]] : tensor<2x1x3x3xi1>, tensor<f32>, tensor<f32> -> tensor<2x1x3x3xf32>
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[K]], %[[V]], mask %[[M]] {causal, scale = 5.000000e-01 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_padding_where_causal(%q: tensor<2x2x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x2xf32>, %pad: tensor<2x1x3x3xi1>) -> tensor<2x2x3x2xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %causal = sl.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %mask = sl.where %pad, %min, %causal : tensor<2x1x3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<2x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<2x2x3x2xf32> -> tensor<2x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32> -> tensor<2x2x3x3xf32>
  %s = sl.div %qk, %two : tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %m = sl.add %s, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32> -> tensor<2x2x3x3xf32>
  %p = sl.softmax %m : tensor<2x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}

// -----

// Near miss: the constant the padding is combined with lets the first query see the second key,
// so it is no causal mask, and the run-time mask alone cannot say what is dropped.
// CHECK-LABEL: func.func @attention_padding_where_not_causal
// CHECK-NOT: sl.attention
func.func @attention_padding_where_not_causal(%q: tensor<2x2x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x2xf32>, %pad: tensor<2x1x3x3xi1>) -> tensor<2x2x3x2xf32> {
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %causal = sl.constant dense<[[[[0.0, 0.0, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %mask = sl.where %pad, %min, %causal : tensor<2x1x3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<2x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<2x2x3x2xf32> -> tensor<2x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32> -> tensor<2x2x3x3xf32>
  %m = sl.add %qk, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32> -> tensor<2x2x3x3xf32>
  %p = sl.softmax %m : tensor<2x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}

// -----

// Near miss: a fill of -1 does not drop what the padding drops; such a where is a bias known only
// at run time, not a padding mask.
// CHECK-LABEL: func.func @attention_padding_where_small_fill
// CHECK-NOT: sl.attention
func.func @attention_padding_where_small_fill(%q: tensor<2x2x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x2xf32>, %pad: tensor<2x1x3x3xi1>) -> tensor<2x2x3x2xf32> {
  %fill = sl.constant dense<-1.0> : tensor<f32>
  %causal = sl.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %mask = sl.where %pad, %fill, %causal : tensor<2x1x3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<2x1x3x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<2x2x3x2xf32> -> tensor<2x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32> -> tensor<2x2x3x3xf32>
  %m = sl.add %qk, %mask : tensor<2x2x3x3xf32>, tensor<2x1x3x3xf32> -> tensor<2x2x3x3xf32>
  %p = sl.softmax %m : tensor<2x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}

// -----

// GPT-2's padded batch: the causal mask selected with where, then (1 - mask) * min added, the
// mask known at run time. The added term is the fused op's mask as it is.
// CHECK-LABEL: func.func @attention_padding_added
// CHECK-SAME: (%[[Q:.+]]: tensor<2x2x3x2xf32>, %[[K:.+]]: tensor<2x2x3x2xf32>, %[[V:.+]]: tensor<2x2x3x2xf32>, %[[AM:.+]]: tensor<2x1x1x3xf32>)
// CHECK: %[[SUB:.+]] = sl.sub %{{.+}}, %[[AM]]
// CHECK-NEXT: %[[PM:.+]] = sl.mul %[[SUB]], %{{.+}}
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[K]], %[[V]], mask %[[PM]] {causal, scale = 5.000000e-01 : f32}
// CHECK-NEXT: return %[[O]]
func.func @attention_padding_added(%q: tensor<2x2x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x2xf32>, %am: tensor<2x1x1x3xf32>) -> tensor<2x2x3x2xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %inv = sl.sub %one, %am : tensor<f32>, tensor<2x1x1x3xf32> -> tensor<2x1x1x3xf32>
  %pm = sl.mul %inv, %min : tensor<2x1x1x3xf32>, tensor<f32> -> tensor<2x1x1x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<2x2x3x2xf32> -> tensor<2x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32> -> tensor<2x2x3x3xf32>
  %s = sl.div %qk, %two : tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %c = sl.where %tril, %s, %min : tensor<1x1x3x3xi1>, tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %m = sl.add %c, %pm : tensor<2x2x3x3xf32>, tensor<2x1x1x3xf32> -> tensor<2x2x3x3xf32>
  %p = sl.softmax %m : tensor<2x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}

// -----

// Near miss: the padding mask added before the scale would be scaled with the scores; it is
// left unfused rather than rescaled.
// CHECK-LABEL: func.func @attention_padding_before_scale
// CHECK-NOT: sl.attention
func.func @attention_padding_before_scale(%q: tensor<2x2x3x2xf32>, %k: tensor<2x2x3x2xf32>, %v: tensor<2x2x3x2xf32>, %am: tensor<2x1x1x3xf32>) -> tensor<2x2x3x2xf32> {
  %two = sl.constant dense<2.0> : tensor<f32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  %tril = sl.constant dense<[[[[true, false, false], [true, true, false], [true, true, true]]]]> : tensor<1x1x3x3xi1>
  %inv = sl.sub %one, %am : tensor<f32>, tensor<2x1x1x3xf32> -> tensor<2x1x1x3xf32>
  %pm = sl.mul %inv, %min : tensor<2x1x1x3xf32>, tensor<f32> -> tensor<2x1x1x3xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<2x2x3x2xf32> -> tensor<2x2x2x3xf32>
  %qk = sl.matmul %q, %kt : tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32> -> tensor<2x2x3x3xf32>
  %c = sl.where %tril, %qk, %min : tensor<1x1x3x3xi1>, tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %m = sl.add %c, %pm : tensor<2x2x3x3xf32>, tensor<2x1x1x3xf32> -> tensor<2x2x3x3xf32>
  %s = sl.div %m, %two : tensor<2x2x3x3xf32>, tensor<f32> -> tensor<2x2x3x3xf32>
  %p = sl.softmax %s : tensor<2x2x3x3xf32>
  %o = sl.matmul %p, %v : tensor<2x2x3x3xf32>, tensor<2x2x3x2xf32> -> tensor<2x2x3x2xf32>
  return %o : tensor<2x2x3x2xf32>
}

// -----

// Every layer's attention reads the same causal mask. At 512 positions it has 262144 elements,
// more than folds put into the IR, so it is evaluated on the side, once per run of the pass
// (not once per layer), and never becomes a [512, 512] constant. The same condition selecting
// the other way round (what causal masking drops) is not causal: that attention stays unfused,
// and so does its mask, as ops. The additive mask made from the condition is its own value,
// classified causal on its own.
// CHECK-LABEL: func.func @attention_shared_mask
// CHECK-SAME: (%[[Q:.+]]: tensor<1x1x512x2xf32>, %[[K:.+]]: tensor<1x1x512x2xf32>, %[[V:.+]]: tensor<1x1x512x2xf32>)
// CHECK-NOT: tensor<512x512xf32>
// CHECK: %[[KEEP:.+]] = sl.less {{.+}} -> tensor<512x512xi1>
// CHECK-NOT: tensor<512x512xf32>
// CHECK: %[[O1:.+]] = sl.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 1.000000e+00 : f32}
// CHECK: %[[O2:.+]] = sl.attention %[[O1]], %[[K]], %[[V]] {causal, scale = 1.000000e+00 : f32}
// CHECK: sl.where %[[KEEP]], %{{.+}}, %{{.+}} : tensor<512x512xi1>, tensor<f32>, tensor<1x1x512x512xf32>
// CHECK: %[[P3:.+]] = sl.softmax
// CHECK: %[[O3:.+]] = sl.matmul %[[P3]], %[[V]]
// CHECK: %[[O4:.+]] = sl.attention %[[O3]], %[[K]], %[[V]] {causal, scale = 1.000000e+00 : f32}
// CHECK-NOT: tensor<512x512xf32>
// CHECK: return %[[O4]]
func.func @attention_shared_mask(%q: tensor<1x1x512x2xf32>, %k: tensor<1x1x512x2xf32>, %v: tensor<1x1x512x2xf32>) -> tensor<1x1x512x2xf32> {
  %zero = sl.constant dense<0> : tensor<i64>
  %n = sl.constant dense<512> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  %column = sl.constant dense<[512, 1]> : tensor<2xi64>
  %f0 = sl.constant dense<0.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<f32>
  // LLaMA's mask: column < row + 1.
  %cols = sl.range %zero, %n, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<512xi64>
  %r = sl.reshape %cols, %column : tensor<512xi64>, tensor<2xi64> -> tensor<512x1xi64>
  %rows = sl.add %r, %one : tensor<512x1xi64>, tensor<i64> -> tensor<512x1xi64>
  %keep = sl.less %cols, %rows : tensor<512xi64>, tensor<512x1xi64> -> tensor<512x512xi1>
  %mask = sl.where %keep, %f0, %min : tensor<512x512xi1>, tensor<f32>, tensor<f32> -> tensor<512x512xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x1x512x2xf32> -> tensor<1x1x2x512xf32>
  %qk1 = sl.matmul %q, %kt : tensor<1x1x512x2xf32>, tensor<1x1x2x512xf32> -> tensor<1x1x512x512xf32>
  %m1 = sl.where %keep, %qk1, %min : tensor<512x512xi1>, tensor<1x1x512x512xf32>, tensor<f32> -> tensor<1x1x512x512xf32>
  %p1 = sl.softmax %m1 : tensor<1x1x512x512xf32>
  %o1 = sl.matmul %p1, %v : tensor<1x1x512x512xf32>, tensor<1x1x512x2xf32> -> tensor<1x1x512x2xf32>
  %qk2 = sl.matmul %o1, %kt : tensor<1x1x512x2xf32>, tensor<1x1x2x512xf32> -> tensor<1x1x512x512xf32>
  %m2 = sl.where %keep, %qk2, %min : tensor<512x512xi1>, tensor<1x1x512x512xf32>, tensor<f32> -> tensor<1x1x512x512xf32>
  %p2 = sl.softmax %m2 : tensor<1x1x512x512xf32>
  %o2 = sl.matmul %p2, %v : tensor<1x1x512x512xf32>, tensor<1x1x512x2xf32> -> tensor<1x1x512x2xf32>
  %qk3 = sl.matmul %o2, %kt : tensor<1x1x512x2xf32>, tensor<1x1x2x512xf32> -> tensor<1x1x512x512xf32>
  %m3 = sl.where %keep, %min, %qk3 : tensor<512x512xi1>, tensor<f32>, tensor<1x1x512x512xf32> -> tensor<1x1x512x512xf32>
  %p3 = sl.softmax %m3 : tensor<1x1x512x512xf32>
  %o3 = sl.matmul %p3, %v : tensor<1x1x512x512xf32>, tensor<1x1x512x2xf32> -> tensor<1x1x512x2xf32>
  %qk4 = sl.matmul %o3, %kt : tensor<1x1x512x2xf32>, tensor<1x1x2x512xf32> -> tensor<1x1x512x512xf32>
  %m4 = sl.add %qk4, %mask : tensor<1x1x512x512xf32>, tensor<512x512xf32> -> tensor<1x1x512x512xf32>
  %p4 = sl.softmax %m4 : tensor<1x1x512x512xf32>
  %o4 = sl.matmul %p4, %v : tensor<1x1x512x512xf32>, tensor<1x1x512x2xf32> -> tensor<1x1x512x2xf32>
  return %o4 : tensor<1x1x512x2xf32>
}
