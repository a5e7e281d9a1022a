// RUN: sl-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sl-fold-head-transposes))' | FileCheck %s

// A LLaMA attention as the importer and sl-fuse-transformer leave it: q, k, v permuted to
// [B, H, S, D], rotary on q and k, the result permuted back. Attention reads and writes
// [B, S, H, D] (grouped-query: 4 query heads, 2 key/value heads), the rotary runs before the
// permutation that is gone, on tables reshaped (not copied) to [1, S, 1, D], and no transpose is
// left.
// CHECK-LABEL: func.func @llama
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x8x4x16xf32>, %[[K:[^:]+]]: tensor<2x8x2x16xf32>, %[[V:[^:]+]]: tensor<2x8x2x16xf32>, %[[COS:[^:]+]]: tensor<1x1x8x16xf32>, %[[SIN:[^:]+]]: tensor<1x1x8x16xf32>)
// CHECK-NOT: sl.transpose
// CHECK-DAG: %[[C:.+]] = sl.reshape %[[COS]], %{{.+}} : tensor<1x1x8x16xf32>, tensor<4xi64> -> tensor<1x8x1x16xf32>
// CHECK-DAG: %[[S:.+]] = sl.reshape %[[SIN]], %{{.+}} : tensor<1x1x8x16xf32>, tensor<4xi64> -> tensor<1x8x1x16xf32>
// CHECK-DAG: %[[RQ:.+]] = sl.rotary %[[Q]], %[[C]], %[[S]] : (tensor<2x8x4x16xf32>, tensor<1x8x1x16xf32>, tensor<1x8x1x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-DAG: %[[RK:.+]] = sl.rotary %[[K]], %[[C]], %[[S]] : (tensor<2x8x2x16xf32>, tensor<1x8x1x16xf32>, tensor<1x8x1x16xf32>) -> tensor<2x8x2x16xf32>
// CHECK: %[[O:.+]] = sl.attention %[[RQ]], %[[RK]], %[[V]] {causal, layout = #sl.head_layout<bshd>, scale = 2.500000e-01 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) -> tensor<2x8x4x16xf32>
// CHECK-NOT: sl.transpose
// CHECK: return %[[O]]
func.func @llama(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>,
                 %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>) -> tensor<2x8x4x16xf32> {
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kt = sl.transpose %k [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %vt = sl.transpose %v [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %qr = sl.rotary %qt, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %kr = sl.rotary %kt, %cos, %sin : (tensor<2x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x2x8x16xf32>
  %o = sl.attention %qr, %kr, %vt {causal, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}

// -----

// A mask keeps its [B, H, S, T] meaning; a user of the result other than the permutation back
// reads the result permuted (here the function's return), once.
// CHECK-LABEL: func.func @mask_and_other_user
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<1x4x2x8xf32>, %[[K:[^:]+]]: tensor<1x6x2x8xf32>, %[[V:[^:]+]]: tensor<1x6x2x8xf32>, %[[M:[^:]+]]: tensor<4x6xf32>)
// CHECK-NEXT: %[[O:.+]] = sl.attention %[[Q]], %[[K]], %[[V]], mask %[[M]] {layout = #sl.head_layout<bshd>, scale = 5.000000e-01 : f32} : (tensor<1x4x2x8xf32>, tensor<1x6x2x8xf32>, tensor<1x6x2x8xf32>, tensor<4x6xf32>) -> tensor<1x4x2x8xf32>
// CHECK-NEXT: %[[T:.+]] = sl.transpose %[[O]] [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: return %[[O]], %[[T]]
func.func @mask_and_other_user(%q: tensor<1x4x2x8xf32>, %k: tensor<1x6x2x8xf32>, %v: tensor<1x6x2x8xf32>,
                               %m: tensor<4x6xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>) {
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = sl.transpose %k [0, 2, 1, 3] : tensor<1x6x2x8xf32> -> tensor<1x2x6x8xf32>
  %vt = sl.transpose %v [0, 2, 1, 3] : tensor<1x6x2x8xf32> -> tensor<1x2x6x8xf32>
  %o = sl.attention %qt, %kt, %vt, mask %m {scale = 0.5 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<4x6xf32>) -> tensor<1x2x4x8xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  return %y, %o : tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// v is not a permutation: folding would copy it instead, so nothing changes.
// CHECK-LABEL: func.func @operand_not_permuted
// CHECK: sl.transpose
// CHECK: sl.transpose
// CHECK: sl.attention
// CHECK-NOT: layout
// CHECK: sl.transpose
func.func @operand_not_permuted(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32> {
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = sl.transpose %k [0, 2, 1, 3] : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %o = sl.attention %qt, %kt, %v {causal, scale = 0.5 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  return %y : tensor<1x4x2x8xf32>
}

// -----

// The backward of a recomputed block as sl-autodiff writes it: the forward and the gradient share
// the moved rotaries, dy is read unpermuted, dq and dk go through their rotary gradients on the
// reshaped tables and dv is the gradient itself; no transpose is left.
// CHECK-LABEL: func.func @gradient
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<2x8x4x16xf32>, %[[K:[^:]+]]: tensor<2x8x2x16xf32>, %[[V:[^:]+]]: tensor<2x8x2x16xf32>, %[[COS:[^:]+]]: tensor<1x1x8x16xf32>, %[[SIN:[^:]+]]: tensor<1x1x8x16xf32>, %[[DY:[^:]+]]: tensor<2x8x4x16xf32>)
// CHECK-NOT: sl.transpose
// CHECK-DAG: %[[C:.+]] = sl.reshape %[[COS]]
// CHECK-DAG: %[[S:.+]] = sl.reshape %[[SIN]]
// CHECK-DAG: %[[RQ:.+]] = sl.rotary %[[Q]], %[[C]], %[[S]]
// CHECK-DAG: %[[RK:.+]] = sl.rotary %[[K]], %[[C]], %[[S]]
// CHECK: %[[O:.+]] = sl.attention %[[RQ]], %[[RK]], %[[V]] {causal, layout = #sl.head_layout<bshd>, scale = 2.500000e-01 : f32}
// CHECK: %[[GQ:[^ ]+]], %[[GK:[^ ]+]], %[[GV:[^ ]+]] = sl.attention_grad %[[RQ]], %[[RK]], %[[V]], %[[DY]] {causal, layout = #sl.head_layout<bshd>, scale = 2.500000e-01 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>)
// CHECK-DAG: %[[DK:.+]] = sl.rotary_grad %[[GK]], %[[C]], %[[S]] : (tensor<2x8x2x16xf32>, tensor<1x8x1x16xf32>, tensor<1x8x1x16xf32>) -> tensor<2x8x2x16xf32>
// CHECK-DAG: %[[DQ:.+]] = sl.rotary_grad %[[GQ]], %[[C]], %[[S]]
// CHECK-NOT: sl.transpose
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[GV]]
func.func @gradient(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x2x16xf32>, %v: tensor<2x8x2x16xf32>,
                    %cos: tensor<1x1x8x16xf32>, %sin: tensor<1x1x8x16xf32>, %dy: tensor<2x8x4x16xf32>)
    -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>) {
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %kt = sl.transpose %k [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %vt = sl.transpose %v [0, 2, 1, 3] : tensor<2x8x2x16xf32> -> tensor<2x2x8x16xf32>
  %qr = sl.rotary %qt, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %kr = sl.rotary %kt, %cos, %sin : (tensor<2x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x2x8x16xf32>
  %o = sl.attention %qr, %kr, %vt {causal, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %dyt = sl.transpose %dy [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %g:3 = sl.attention_grad %qr, %kr, %vt, %dyt {causal, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  %dkr = sl.rotary_grad %g#1, %cos, %sin : (tensor<2x2x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x2x8x16xf32>
  %dqr = sl.rotary_grad %g#0, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32>) -> tensor<2x4x8x16xf32>
  %dv = sl.transpose %g#2 [0, 2, 1, 3] : tensor<2x2x8x16xf32> -> tensor<2x8x2x16xf32>
  %dk = sl.transpose %dkr [0, 2, 1, 3] : tensor<2x2x8x16xf32> -> tensor<2x8x2x16xf32>
  %dq = sl.transpose %dqr [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y, %dq, %dk, %dv : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x2x16xf32>, tensor<2x8x2x16xf32>
}

// -----

// A decoding step's single position: the attention stays [B, H, 1, D] (sl-split-generation
// reads it so) and each permutation, which moves no element, becomes a reshape.
// CHECK-LABEL: func.func @one_position
// CHECK-NOT: sl.transpose
// CHECK: sl.reshape %{{.+}} : tensor<2x1x4x16xf32>, tensor<4xi64> -> tensor<2x4x1x16xf32>
// CHECK: %[[O:.+]] = sl.attention
// CHECK-NOT: layout
// CHECK: %[[Y:.+]] = sl.reshape %[[O]], %{{.+}} : tensor<2x4x1x16xf32>, tensor<4xi64> -> tensor<2x1x4x16xf32>
// CHECK-NOT: sl.transpose
// CHECK: return %[[Y]]
func.func @one_position(%q: tensor<2x1x4x16xf32>, %k: tensor<2x1x4x16xf32>, %v: tensor<2x1x4x16xf32>) -> tensor<2x1x4x16xf32> {
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<2x1x4x16xf32> -> tensor<2x4x1x16xf32>
  %kt = sl.transpose %k [0, 2, 1, 3] : tensor<2x1x4x16xf32> -> tensor<2x4x1x16xf32>
  %vt = sl.transpose %v [0, 2, 1, 3] : tensor<2x1x4x16xf32> -> tensor<2x4x1x16xf32>
  %o = sl.attention %qt, %kt, %vt {causal, scale = 0.25 : f32} : (tensor<2x4x1x16xf32>, tensor<2x4x1x16xf32>, tensor<2x4x1x16xf32>) -> tensor<2x4x1x16xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<2x4x1x16xf32> -> tensor<2x1x4x16xf32>
  return %y : tensor<2x1x4x16xf32>
}

// -----

// A constant table becomes the same constant in the exchanged shape, not a reshape of it.
// CHECK-LABEL: func.func @constant_table
// CHECK-DAG: %[[C:.+]] = sl.constant dense<{{\[\[\[\[}}1.000000e+00, 2.000000e+00]], {{\[\[}}3.000000e+00, 4.000000e+00]]]]> : tensor<1x2x1x2xf32>
// CHECK-DAG: %[[S:.+]] = sl.constant dense<{{.+}}> : tensor<1x2x1x2xf32>
// CHECK: sl.rotary %{{.+}}, %[[C]], %[[S]] : (tensor<1x2x2x2xf32>, tensor<1x2x1x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x2x2xf32>
// CHECK-NOT: sl.transpose
func.func @constant_table(%q: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %cos = sl.constant dense<[[[[1.0, 2.0], [3.0, 4.0]]]]> : tensor<1x1x2x2xf32>
  %sin = sl.constant dense<[[[[0.5, 0.25], [0.125, 0.0]]]]> : tensor<1x1x2x2xf32>
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32>
  %qr = sl.rotary %qt, %cos, %sin : (tensor<1x2x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32>
  %o = sl.attention %qr, %qt, %qt {causal, scale = 0.5 : f32} : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32>
  return %y : tensor<1x2x2x2xf32>
}

// -----

// A rotary table of rank below 4 ([S, D], sliced from a cache) would have to grow to [S, 1, D];
// sl-split-generation reads a decoding step's rows at the table's own rank, so the rotary does
// not move, q has no [B, S, H, D] form and the attention stays as it is.
// CHECK-LABEL: func.func @rank2_table
// CHECK: sl.rotary %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK: sl.attention
// CHECK-NOT: layout
// CHECK: sl.transpose
func.func @rank2_table(%q: tensor<2x8x4x16xf32>, %cos: tensor<8x16xf32>, %sin: tensor<8x16xf32>) -> tensor<2x8x4x16xf32> {
  %qt = sl.transpose %q [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %qr = sl.rotary %qt, %cos, %sin : (tensor<2x4x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = sl.attention %qr, %qt, %qt {causal, scale = 0.25 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %y = sl.transpose %o [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  return %y : tensor<2x8x4x16xf32>
}
