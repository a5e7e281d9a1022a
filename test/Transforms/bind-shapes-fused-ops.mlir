// sl-bind-shapes re-infers the result types of sl.layer_norm, sl.rms_norm, sl.rotary and
// sl.attention like every other op, so binding makes them static.
// RUN: sl-opt %s -split-input-file --sl-bind-shapes="batch=4 seq=16" | FileCheck %s

// CHECK-LABEL: func.func @norms
// CHECK-SAME: -> (tensor<4x16x64xf32>, tensor<4x16x64xf32>)
// CHECK: sl.layer_norm {{.+}} -> tensor<4x16x64xf32>
// CHECK: sl.rms_norm {{.+}} -> tensor<4x16x64xf32>
func.func @norms(%x: tensor<?x?x64xf32>, %g: tensor<64xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>) {
  %y = sl.layer_norm %x, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %z = sl.rms_norm %x, %g {epsilon = 1.0e-06 : f32} : tensor<?x?x64xf32>, tensor<64xf32> -> tensor<?x?x64xf32>
  return %y, %z : tensor<?x?x64xf32>, tensor<?x?x64xf32>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK-SAME: -> tensor<4x8x16x16xf32>
// CHECK: sl.rotary {{.+}} -> tensor<4x8x16x16xf32>
// CHECK: sl.attention {{.+}} -> tensor<4x8x16x16xf32>
func.func @attention(%q: tensor<?x8x?x16xf32> {sl.dims = ["batch", "", "seq", ""]}, %k: tensor<?x2x?x16xf32> {sl.dims = ["batch", "", "seq", ""]}, %cos: tensor<16x16xf32>) -> tensor<?x8x?x16xf32> {
  %q2 = sl.rotary %q, %cos, %cos : (tensor<?x8x?x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<?x8x?x16xf32>
  %o = sl.attention %q2, %k, %k {causal, scale = 0.25 : f32} : (tensor<?x8x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x8x?x16xf32>
  return %o : tensor<?x8x?x16xf32>
}
