// RUN: sl-opt %s -split-input-file --sl-append-loss | FileCheck %s
// RUN: sl-opt %s -split-input-file --sl-append-loss="keep-logits=true" | FileCheck %s --check-prefix=KEEP

// The logits output becomes the mean cross-entropy against a new labels input, whose dimensions
// carry the token input's names.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IDS:.+]]: tensor<?x?xi64> {sl.dims = ["batch", "seq"], sl.name = "input_ids"}, %[[LABELS:.+]]: tensor<?x?xi64> {sl.dims = ["batch", "seq"], sl.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {sl.name = "loss"})
// CHECK: %[[LOGITS:.+]] = sl.gather
// CHECK: %[[LOSS:.+]] = sl.cross_entropy %[[LOGITS]], %[[LABELS]] : tensor<?x?x16xf32>, tensor<?x?xi64> -> tensor<f32>
// CHECK: return %[[LOSS]] : tensor<f32>

// KEEP-LABEL: func.func @forward
// KEEP-SAME: -> (tensor<f32> {sl.name = "loss"}, tensor<?x?x16xf32> {sl.name = "logits"})
// KEEP: return %{{.+}}, %{{.+}} : tensor<f32>, tensor<?x?x16xf32>
func.func @forward(%ids: tensor<?x?xi64> {sl.dims = ["batch", "seq"], sl.name = "input_ids"}) -> (tensor<?x?x16xf32> {sl.name = "logits"}) {
  %table = sl.param "embed" : tensor<32x16xf32>
  %logits = sl.gather %table, %ids : tensor<32x16xf32>, tensor<?x?xi64> -> tensor<?x?x16xf32>
  return %logits : tensor<?x?x16xf32>
}
