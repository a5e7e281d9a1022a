// RUN: sl-opt %s --sl-bind-shapes="batch=2 seq=1 past=5" | FileCheck %s

// The past length is the dynamic dimension of past_key_values.* that is not the batch; the mask
// covers the past and the new tokens.
// CHECK-LABEL: func.func @with_past
// CHECK-SAME: tensor<2x1xi64>
// CHECK-SAME: tensor<2x6xi64>
// CHECK-SAME: tensor<2x2x5x8xf32>
// CHECK: sl.concat {{.+}} -> tensor<2x2x6x8xf32>
func.func @with_past(%ids: tensor<?x?xi64> {sl.dims = ["batch_size", "sequence_length"], sl.name = "input_ids"},
                     %mask: tensor<?x?xi64> {sl.dims = ["batch_size", "past_sequence_length + 1"], sl.name = "attention_mask"},
                     %k: tensor<?x2x?x8xf32> {sl.dims = ["batch_size", "", "p", ""], sl.name = "past_key_values.0.key"},
                     %new: tensor<2x2x1x8xf32>) -> tensor<?x2x?x8xf32> {
  %c = sl.concat %k, %new {axis = 2} : (tensor<?x2x?x8xf32>, tensor<2x2x1x8xf32>) -> tensor<?x2x?x8xf32>
  return %c : tensor<?x2x?x8xf32>
}
