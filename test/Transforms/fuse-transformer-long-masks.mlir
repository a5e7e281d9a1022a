// RUN: sl-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(sl-fuse-transformer),canonicalize)" | FileCheck %s
// RUN: sl-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(sl-fuse-transformer{check-masks=true}))" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CHECKED

// Causal masks at a context of 131072 positions: 2^34 values each, which no evaluation could
// hold. sl-fuse-transformer reads them row by row from the ops that build them
// (sl/Analysis/AttentionMasks.h): an arange compared with positions, a triangle of a filled
// matrix times a comparison, and a near miss that must stay unfused.

// Our exporter's LLaMA: where(arange(T) < arange(1, S + 1)[:, None], 0, min), reshaped to
// [1, 1, S, T] and added to the scaled scores.
// CHECK-LABEL: func.func @arange_compared_with_positions
// CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 3.535530e-01 : f32}
// CHECK-NOT: sl.softmax
// CHECKED: check-masks: 0 terms read row by row and evaluated, alike; 1 read row by row only (too big to evaluate); 0 masks evaluated only
func.func @arange_compared_with_positions(%q: tensor<1x1x131072x8xf32>, %k: tensor<1x1x131072x8xf32>, %v: tensor<1x1x131072x8xf32>) -> tensor<1x1x131072x8xf32> {
  %zero = sl.constant dense<0> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  %n = sl.constant dense<131072> : tensor<i64>
  %n1 = sl.constant dense<131073> : tensor<i64>
  %column = sl.constant dense<[131072, 1]> : tensor<2xi64>
  %four = sl.constant dense<[1, 1, 131072, 131072]> : tensor<4xi64>
  %fzero = sl.constant dense<0.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<131072x131072xf32>
  %scale = sl.constant dense<0.353553> : tensor<f32>
  %keys = sl.range %zero, %n, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<131072xi64>
  %next = sl.range %one, %n1, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<131072xi64>
  %rows = sl.reshape %next, %column : tensor<131072xi64>, tensor<2xi64> -> tensor<131072x1xi64>
  %keep = sl.less %keys, %rows : tensor<131072xi64>, tensor<131072x1xi64> -> tensor<131072x131072xi1>
  %mask2 = sl.where %keep, %fzero, %min : tensor<131072x131072xi1>, tensor<f32>, tensor<131072x131072xf32> -> tensor<131072x131072xf32>
  %mask = sl.reshape %mask2, %four : tensor<131072x131072xf32>, tensor<4xi64> -> tensor<1x1x131072x131072xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x1x131072x8xf32> -> tensor<1x1x8x131072xf32>
  %qk = sl.matmul %q, %kt : tensor<1x1x131072x8xf32>, tensor<1x1x8x131072xf32> -> tensor<1x1x131072x131072xf32>
  %s = sl.mul %qk, %scale : tensor<1x1x131072x131072xf32>, tensor<f32> -> tensor<1x1x131072x131072xf32>
  %m = sl.add %s, %mask : tensor<1x1x131072x131072xf32>, tensor<1x1x131072x131072xf32> -> tensor<1x1x131072x131072xf32>
  %p = sl.softmax %m : tensor<1x1x131072x131072xf32>
  %o = sl.matmul %p, %v : tensor<1x1x131072x131072xf32>, tensor<1x1x131072x8xf32> -> tensor<1x1x131072x8xf32>
  return %o : tensor<1x1x131072x8xf32>
}

// -----

// HF LLaMA (transformers 4.41): triu(full(min), 1) * (arange(T) > cache_position[:, None]),
// expanded over the batch.
// CHECK-LABEL: func.func @triangle_times_comparison
// CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.250000e-01 : f32}
// CHECK-NOT: sl.softmax
// CHECKED: check-masks: 0 terms read row by row and evaluated, alike; 1 read row by row only (too big to evaluate); 0 masks evaluated only
func.func @triangle_times_comparison(%q: tensor<2x1x131072x8xf32>, %k: tensor<2x1x131072x8xf32>, %v: tensor<2x1x131072x8xf32>) -> tensor<2x1x131072x8xf32> {
  %zero = sl.constant dense<0> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  %k1 = sl.constant dense<1> : tensor<i64>
  %n = sl.constant dense<131072> : tensor<i64>
  %square = sl.constant dense<[131072, 131072]> : tensor<2xi64>
  %column = sl.constant dense<[131072, 1]> : tensor<2xi64>
  %batch = sl.constant dense<[2, 1, 131072, 131072]> : tensor<4xi64>
  %eight = sl.constant dense<8.0> : tensor<f32>
  %full = sl.constant_of_shape %square {value = dense<-3.40282347E+38> : tensor<1xf32>} : tensor<2xi64> -> tensor<131072x131072xf32>
  %upper = sl.trilu %full, %k1 {upper} : (tensor<131072x131072xf32>, tensor<i64>) -> tensor<131072x131072xf32>
  %keys = sl.range %zero, %n, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<131072xi64>
  %positions = sl.range %zero, %n, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<131072xi64>
  %rows = sl.reshape %positions, %column : tensor<131072xi64>, tensor<2xi64> -> tensor<131072x1xi64>
  %later = sl.less %rows, %keys : tensor<131072x1xi64>, tensor<131072xi64> -> tensor<131072x131072xi1>
  %laterf = sl.cast %later to f32 : tensor<131072x131072xi1> -> tensor<131072x131072xf32>
  %mask2 = sl.mul %upper, %laterf : tensor<131072x131072xf32>, tensor<131072x131072xf32> -> tensor<131072x131072xf32>
  %mask = sl.expand %mask2, %batch : tensor<131072x131072xf32>, tensor<4xi64> -> tensor<2x1x131072x131072xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<2x1x131072x8xf32> -> tensor<2x1x8x131072xf32>
  %qk = sl.matmul %q, %kt : tensor<2x1x131072x8xf32>, tensor<2x1x8x131072xf32> -> tensor<2x1x131072x131072xf32>
  %s = sl.div %qk, %eight : tensor<2x1x131072x131072xf32>, tensor<f32> -> tensor<2x1x131072x131072xf32>
  %m = sl.add %s, %mask : tensor<2x1x131072x131072xf32>, tensor<2x1x131072x131072xf32> -> tensor<2x1x131072x131072xf32>
  %p = sl.softmax %m : tensor<2x1x131072x131072xf32>
  %o = sl.matmul %p, %v : tensor<2x1x131072x131072xf32>, tensor<2x1x131072x8xf32> -> tensor<2x1x131072x8xf32>
  return %o : tensor<2x1x131072x8xf32>
}

// -----

// A near miss: arange(T) < arange(2, S + 2)[:, None] lets query i see key i + 1. Read row by
// row, it is not causal; the attention stays as it is.
// CHECK-LABEL: func.func @one_key_too_many
// CHECK: sl.softmax
// CHECK-NOT: sl.attention
// CHECKED: check-masks: 0 terms read row by row and evaluated, alike; 1 read row by row only (too big to evaluate); 0 masks evaluated only
func.func @one_key_too_many(%q: tensor<1x1x131072x8xf32>, %k: tensor<1x1x131072x8xf32>, %v: tensor<1x1x131072x8xf32>) -> tensor<1x1x131072x8xf32> {
  %zero = sl.constant dense<0> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  %two = sl.constant dense<2> : tensor<i64>
  %n = sl.constant dense<131072> : tensor<i64>
  %n2 = sl.constant dense<131074> : tensor<i64>
  %column = sl.constant dense<[131072, 1]> : tensor<2xi64>
  %four = sl.constant dense<[1, 1, 131072, 131072]> : tensor<4xi64>
  %fzero = sl.constant dense<0.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<131072x131072xf32>
  %keys = sl.range %zero, %n, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<131072xi64>
  %next = sl.range %two, %n2, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<131072xi64>
  %rows = sl.reshape %next, %column : tensor<131072xi64>, tensor<2xi64> -> tensor<131072x1xi64>
  %keep = sl.less %keys, %rows : tensor<131072xi64>, tensor<131072x1xi64> -> tensor<131072x131072xi1>
  %mask2 = sl.where %keep, %fzero, %min : tensor<131072x131072xi1>, tensor<f32>, tensor<131072x131072xf32> -> tensor<131072x131072xf32>
  %mask = sl.reshape %mask2, %four : tensor<131072x131072xf32>, tensor<4xi64> -> tensor<1x1x131072x131072xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x1x131072x8xf32> -> tensor<1x1x8x131072xf32>
  %qk = sl.matmul %q, %kt : tensor<1x1x131072x8xf32>, tensor<1x1x8x131072xf32> -> tensor<1x1x131072x131072xf32>
  %m = sl.add %qk, %mask : tensor<1x1x131072x131072xf32>, tensor<1x1x131072x131072xf32> -> tensor<1x1x131072x131072xf32>
  %p = sl.softmax %m : tensor<1x1x131072x131072xf32>
  %o = sl.matmul %p, %v : tensor<1x1x131072x131072xf32>, tensor<1x1x131072x8xf32> -> tensor<1x1x131072x8xf32>
  return %o : tensor<1x1x131072x8xf32>
}

// -----

// A mask small enough to evaluate (300 x 300, built from folded vectors): check-masks judges it
// both ways, and the verdicts agree.
// CHECK-LABEL: func.func @both_ways
// CHECK: sl.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.000000e+00 : f32}
// CHECKED: check-masks: 1 terms read row by row and evaluated, alike; 0 read row by row only (too big to evaluate); 0 masks evaluated only
func.func @both_ways(%q: tensor<1x1x300x8xf32>, %k: tensor<1x1x300x8xf32>, %v: tensor<1x1x300x8xf32>) -> tensor<1x1x300x8xf32> {
  %zero = sl.constant dense<0> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  %n = sl.constant dense<300> : tensor<i64>
  %n1 = sl.constant dense<301> : tensor<i64>
  %column = sl.constant dense<[300, 1]> : tensor<2xi64>
  %four = sl.constant dense<[1, 1, 300, 300]> : tensor<4xi64>
  %fzero = sl.constant dense<0.0> : tensor<f32>
  %min = sl.constant dense<-3.40282347E+38> : tensor<300x300xf32>
  %keys = sl.range %zero, %n, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<300xi64>
  %next = sl.range %one, %n1, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<300xi64>
  %rows = sl.reshape %next, %column : tensor<300xi64>, tensor<2xi64> -> tensor<300x1xi64>
  %keep = sl.less %keys, %rows : tensor<300xi64>, tensor<300x1xi64> -> tensor<300x300xi1>
  %mask2 = sl.where %keep, %fzero, %min : tensor<300x300xi1>, tensor<f32>, tensor<300x300xf32> -> tensor<300x300xf32>
  %mask = sl.reshape %mask2, %four : tensor<300x300xf32>, tensor<4xi64> -> tensor<1x1x300x300xf32>
  %kt = sl.transpose %k [0, 1, 3, 2] : tensor<1x1x300x8xf32> -> tensor<1x1x8x300xf32>
  %qk = sl.matmul %q, %kt : tensor<1x1x300x8xf32>, tensor<1x1x8x300xf32> -> tensor<1x1x300x300xf32>
  %m = sl.add %qk, %mask : tensor<1x1x300x300xf32>, tensor<1x1x300x300xf32> -> tensor<1x1x300x300xf32>
  %p = sl.softmax %m : tensor<1x1x300x300xf32>
  %o = sl.matmul %p, %v : tensor<1x1x300x300xf32>, tensor<1x1x300x8xf32> -> tensor<1x1x300x8xf32>
  return %o : tensor<1x1x300x8xf32>
}
