// RUN: sl-opt %s --sl-bind-shapes="batch=2 seq=3" | FileCheck %s

// Bounds, positions and masks computed from the sequence length: Slice, Range, Less, Where,
// ConstantOfShape become static, and what depends only on shapes folds: position ids and the
// causal mask (-1e9 above the diagonal) are constants.
// CHECK-LABEL: func.func @positions_and_masks
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x64xf32>, %[[CACHE:.+]]: tensor<128x64xf32>) -> (tensor<3x64xf32>, tensor<3xi64>, tensor<3x3xf32>, tensor<2x3x64xf32>)
// CHECK-DAG: %[[POS:.+]] = sl.constant dense<[0, 1, 2]> : tensor<3xi64>
// CHECK-DAG: %[[MASK:.+]] = sl.constant dense<{{\[}}[0.000000e+00, -1.000000e+09, -1.000000e+09], [0.000000e+00, 0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<3x3xf32>
// CHECK-DAG: %[[ROWS:.+]] = sl.slice %[[CACHE]], {{.+}} -> tensor<3x64xf32>
// CHECK-DAG: %[[Z:.+]] = sl.constant dense<0.000000e+00> : tensor<2x3x64xf32>
// CHECK: return %[[ROWS]], %[[POS]], %[[MASK]], %[[Z]]
func.func @positions_and_masks(%x: tensor<?x?x64xf32>, %cache: tensor<128x64xf32>) -> (tensor<?x64xf32>, tensor<?xi64>, tensor<?x?xf32>, tensor<?x?x64xf32>) {
  %s = sl.shape %x {start = 1, end = 2} : tensor<?x?x64xf32> -> tensor<1xi64>
  %zero = sl.constant dense<0> : tensor<1xi64>
  %rows = sl.slice %cache, %zero, %s axes %zero : (tensor<128x64xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x64xf32>
  %empty = sl.constant dense<> : tensor<0xi64>
  %seq = sl.reshape %s, %empty {allowzero} : tensor<1xi64>, tensor<0xi64> -> tensor<i64>
  %z = sl.constant dense<0> : tensor<i64>
  %one = sl.constant dense<1> : tensor<i64>
  %pos = sl.range %z, %seq, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<?xi64>
  %col = sl.constant dense<[-1, 1]> : tensor<2xi64>
  %posc = sl.reshape %pos, %col : tensor<?xi64>, tensor<2xi64> -> tensor<?x1xi64>
  %future = sl.less %posc, %pos : tensor<?x1xi64>, tensor<?xi64> -> tensor<?x?xi1>
  %ninf = sl.constant dense<-1.0e9> : tensor<f32>
  %zf = sl.constant dense<0.0> : tensor<f32>
  %mask = sl.where %future, %ninf, %zf : tensor<?x?xi1>, tensor<f32>, tensor<f32> -> tensor<?x?xf32>
  %xs = sl.shape %x : tensor<?x?x64xf32> -> tensor<3xi64>
  %zeros = sl.constant_of_shape %xs {value = dense<0.0> : tensor<1xf32>} : tensor<3xi64> -> tensor<?x?x64xf32>
  return %rows, %pos, %mask, %zeros : tensor<?x64xf32>, tensor<?xi64>, tensor<?x?xf32>, tensor<?x?x64xf32>
}

