// RUN: sl-opt %s -split-input-file --sl-bind-inputs="inputs=attention_mask,position_ids,past_key_values" --sl-bind-shapes="batch=2 seq=3" | FileCheck %s

// The mask is all ones, the positions 0..seq-1 in every row, the past empty (so joining it with
// the new keys folds away), and the new cache output is dropped: only input_ids is left.
// CHECK-LABEL: func.func @optimum
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x3xi64> {{.+}}, %[[NEW:.+]]: tensor<2x2x3x8xf32> {{.+}}) -> (tensor<2x3xi64> {sl.name = "mask"}, tensor<2x3xi64> {sl.name = "positions"}, tensor<2x2x3x8xf32> {sl.name = "keys"})
// CHECK-DAG: %[[ONES:.+]] = sl.constant dense<1> : tensor<2x3xi64>
// CHECK-DAG: %[[POS:.+]] = sl.constant dense<{{\[}}[0, 1, 2], [0, 1, 2]]> : tensor<2x3xi64>
// CHECK-NOT: sl.concat
// CHECK: return %[[ONES]], %[[POS]], %[[NEW]] :
func.func @optimum(%ids: tensor<?x?xi64> {sl.dims = ["b", "s"], sl.name = "input_ids"},
                   %mask: tensor<?x?xi64> {sl.dims = ["b", "past_sequence_length + 1"], sl.name = "attention_mask"},
                   %pos: tensor<?x?xi64> {sl.dims = ["b", "s"], sl.name = "position_ids"},
                   %k: tensor<?x2x?x8xf32> {sl.dims = ["b", "", "past_sequence_length", ""], sl.name = "past_key_values.0.key"},
                   %new: tensor<?x2x?x8xf32> {sl.dims = ["b", "", "s", ""], sl.name = "new"})
    -> (tensor<?x?xi64> {sl.name = "mask"}, tensor<?x?xi64> {sl.name = "positions"}, tensor<?x2x?x8xf32> {sl.name = "keys"}, tensor<?x2x?x8xf32> {sl.name = "present.0.key"}) {
  %c = sl.concat %k, %new {axis = 2} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x8xf32>
  return %mask, %pos, %c, %c : tensor<?x?xi64>, tensor<?x?xi64>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>
}
