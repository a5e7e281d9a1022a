// RUN: sl-opt %s --sl-autodiff --sl-assemble-train-step -canonicalize | FileCheck %s

// The step: stages forward in order, backward functions in reverse (recomputing from the saved
// boundary inputs), the loss and every parameter's gradient as outputs. The tied weight %e is
// read by the prologue and the epilogue: its gradient is the sum of both.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[IDS:.+]]: tensor<2x3xi64> {sl.name = "input_ids"}, %[[LABELS:.+]]: tensor<2x3xi64> {sl.name = "labels"})
// CHECK-SAME: -> (tensor<f32> {sl.name = "loss"}, tensor<8x4xf32> {sl.name = "grad:embed"}, tensor<4x4xf32> {sl.name = "grad:layers.0.w"})
// CHECK: %[[E:.+]] = sl.param "embed"
// CHECK: %[[W:.+]] = sl.param "layers.0.w"
// CHECK: %[[H0:.+]] = sl.gather %[[E]], %[[IDS]]
// CHECK: %[[H1:.+]] = sl.matmul %[[H0]], %[[W]]
// CHECK: %[[ET:.+]] = sl.transpose %[[E]] [1, 0]
// CHECK: %[[LOGITS:.+]] = sl.matmul %[[H1]], %[[ET]]
// CHECK: %[[LOSS:.+]] = sl.cross_entropy %[[LOGITS]], %[[LABELS]]
// CHECK: sl.cross_entropy_grad %[[LABELS]], %{{.+}}, %{{.+}}
// CHECK: %[[DE_EMBED:.+]] = sl.gather_grad %[[IDS]], %{{.+}} {axis = 0 : i64}
// CHECK: %[[DE:.+]] = sl.add %{{.+}}, %[[DE_EMBED]] : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: return %[[LOSS]], %[[DE]], %{{.+}} : tensor<f32>, tensor<8x4xf32>, tensor<4x4xf32>
func.func private @prologue(%ids: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %h = sl.gather %e, %ids : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func private @block(%h: tensor<2x3x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %m = sl.matmul %h, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  return %m : tensor<2x3x4xf32>
}
func.func private @epilogue(%h: tensor<2x3x4xf32>, %labels: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<f32> {
  %et = sl.transpose %e [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %logits = sl.matmul %h, %et : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %loss = sl.cross_entropy %logits, %labels : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @forward(%ids: tensor<2x3xi64> {sl.name = "input_ids"}, %labels: tensor<2x3xi64> {sl.name = "labels"}) -> (tensor<f32> {sl.name = "loss"}) {
  %e = sl.param "embed" : tensor<8x4xf32>
  %w = sl.param "layers.0.w" : tensor<4x4xf32>
  %h0 = sl.layer @prologue(%ids) params(%e) {index = 0 : i64, stage = "prologue"} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %h1 = sl.layer @block(%h0) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %loss = sl.layer @epilogue(%h1, %labels) params(%e) {index = 0 : i64, stage = "epilogue"} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
