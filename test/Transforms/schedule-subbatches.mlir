// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=3 live-blocks=2" -cse | grep -E "@train_step|fetch_params|prefetch|offload|optimizer_step" | FileCheck %s --check-prefix=SL
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 mode=canonical" -cse | grep -E "fetch_params|optimizer_step" | FileCheck %s --check-prefix=CANON
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches -cse | FileCheck %s --check-prefix=ONE
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2" -cse | FileCheck %s --check-prefix=WORLD

// A prologue, three blocks and an epilogue that shares the embedding with the prologue (tied).
// SpeedLoader, N=3, K=2: groups prologue | layers 0-1 | layers 2 | epilogue. Every group's
// parameters are fetched once per pass, while the pass before it runs, in shares between that
// pass's sub-batch prefetches (one share per sub-batch: a sub-batch's input never waits behind a
// whole group's parameters on the host-to-device stream). Each sub-batch's input is prefetched
// one sub-batch ahead and its output offloaded after the next sub-batch started.
// SL: func.func @train_step(%{{.+}}: tensor<6x3xi64> {sl.name = "input_ids"}, %{{.+}}: tensor<6x3xi64> {sl.name = "labels"})
// SL-SAME: live_blocks = 2, mode = speedloader, num_sub_batches = 3
// The constant 1/3 (loss scale and gradient seed), read by kernels: one device copy.
// SL-NEXT: sl.prefetch %{{.+}} : tensor<f32>
// Forward: the prologue; layers 0-1's two weights arrive in two shares while it runs.
// SL-NEXT: sl.fetch_params %[[E:.+]] {group = "prologue"}
// SL-NEXT: sl.prefetch %[[IDS0:.+]] : tensor<2x3xi64>
// SL-NEXT: sl.fetch_params %[[W0:.+]] {group = "layers 0-1"}
// SL-NEXT: sl.prefetch %[[IDS1:.+]] : tensor<2x3xi64>
// SL-NEXT: sl.fetch_params %[[W1:.+]] {group = "layers 0-1"}
// SL-NEXT: sl.prefetch %[[IDS2:.+]] : tensor<2x3xi64>
// SL-NEXT: %[[H0_0:.+]] = sl.offload
// SL-NEXT: %[[H0_1:.+]] = sl.offload
// SL-NEXT: %[[H0_2:.+]] = sl.offload
// SL-NEXT: sl.prefetch %[[H0_0]]
// SL-NEXT: sl.fetch_params %[[W2:.+]] {group = "layers 2"}
// SL-NEXT: sl.prefetch %[[H0_1]]
// SL-NEXT: sl.prefetch %[[H0_2]]
// SL-NEXT: %[[H2_0:.+]] = sl.offload
// SL-NEXT: %[[H2_1:.+]] = sl.offload
// SL-NEXT: %[[H2_2:.+]] = sl.offload
// SL-NEXT: sl.prefetch %[[H2_0]]
// SL-NEXT: sl.fetch_params %[[E]] {group = "epilogue"}
// SL-NEXT: sl.prefetch %[[H2_1]]
// SL-NEXT: sl.prefetch %[[H2_2]]
// SL-NEXT: %[[H3_0:.+]] = sl.offload
// SL-NEXT: %[[H3_1:.+]] = sl.offload
// SL-NEXT: %[[H3_2:.+]] = sl.offload
// The epilogue: forward and backward per sub-batch (its activation and its labels).
// SL-NEXT: sl.prefetch %[[H3_0]]
// SL-NEXT: sl.prefetch %[[L0:.+]] : tensor<2x3xi64>
// SL-NEXT: sl.fetch_params %[[W2]] {group = "layers 2"}
// SL-NEXT: sl.prefetch %[[H3_1]]
// SL-NEXT: sl.prefetch %[[L1:.+]] : tensor<2x3xi64>
// SL-NEXT: sl.prefetch %[[H3_2]]
// SL-NEXT: sl.prefetch %[[L2:.+]] : tensor<2x3xi64>
// SL-NEXT: %[[DH3_0:.+]] = sl.offload
// SL-NEXT: %[[DH3_1:.+]] = sl.offload
// SL-NEXT: %[[DH3_2:.+]] = sl.offload
// The loss, then the epilogue's share of the embedding gradient: once.
// SL-NEXT: %[[LOSS:.+]] = sl.offload %{{.+}} : tensor<f32>
// SL-NEXT: %[[DE_EPI:.+]] = sl.offload %{{.+}} : tensor<8x4xf32>
// Backward, layers 2: activation and output gradient per sub-batch; its gradient leaves the
// device once and is final.
// SL-NEXT: sl.prefetch %[[H2_0]]
// SL-NEXT: sl.prefetch %[[DH3_0]]
// SL-NEXT: sl.fetch_params %[[W0]] {group = "layers 0-1"}
// SL-NEXT: sl.prefetch %[[H2_1]]
// SL-NEXT: sl.prefetch %[[DH3_1]]
// SL-NEXT: sl.fetch_params %[[W1]] {group = "layers 0-1"}
// SL-NEXT: sl.prefetch %[[H2_2]]
// SL-NEXT: sl.prefetch %[[DH3_2]]
// SL-NEXT: %[[DH2_0:.+]] = sl.offload
// SL-NEXT: %[[DH2_1:.+]] = sl.offload
// SL-NEXT: %[[DH2_2:.+]] = sl.offload
// SL-NEXT: %[[DW2:.+]] = sl.offload %{{.+}} : tensor<4x4xf32>
// SL-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[DW2]]) params(%[[W2]])
// Layers 0-1 (the prologue's backward reads no parameter: no fetch).
// SL-NEXT: sl.prefetch %[[H0_0]]
// SL-NEXT: sl.prefetch %[[DH2_0]]
// SL-NEXT: sl.prefetch %[[H0_1]]
// SL-NEXT: sl.prefetch %[[DH2_1]]
// SL-NEXT: sl.prefetch %[[H0_2]]
// SL-NEXT: sl.prefetch %[[DH2_2]]
// SL-NEXT: %[[DH0_0:.+]] = sl.offload
// SL-NEXT: %[[DH0_1:.+]] = sl.offload
// SL-NEXT: %[[DH0_2:.+]] = sl.offload
// SL-NEXT: %[[DW1:.+]] = sl.offload %{{.+}} : tensor<4x4xf32>
// SL-NEXT: %[[DW0:.+]] = sl.offload %{{.+}} : tensor<4x4xf32>
// SL-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[DW1]], %[[DW0]]) params(%[[W1]], %[[W0]])
// The prologue: ids and output gradient; the embedding's two shares are summed on the host.
// SL-NEXT: sl.prefetch %[[IDS0]]
// SL-NEXT: sl.prefetch %[[DH0_0]]
// SL-NEXT: sl.prefetch %[[IDS1]]
// SL-NEXT: sl.prefetch %[[DH0_1]]
// SL-NEXT: sl.prefetch %[[IDS2]]
// SL-NEXT: sl.prefetch %[[DH0_2]]
// SL-NEXT: %[[DE_PRO:.+]] = sl.offload
// SL-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[DE:.+]]) params(%[[E]])
// SL-NOT: fetch_params

// Canonical, N=2: every group fetched in every pass of every sub-batch (the prologue's backward
// needs none); gradients are final only after the last sub-batch.
// CANON: sl.fetch_params {{.+}} {group = "prologue"}
// CANON-NEXT: {group = "layers 0"}
// CANON-NEXT: {group = "layers 1"}
// CANON-NEXT: {group = "layers 2"}
// CANON-NEXT: {group = "epilogue"}
// CANON-NEXT: {group = "layers 2"}
// CANON-NEXT: {group = "layers 1"}
// CANON-NEXT: {group = "layers 0"}
// CANON-NEXT: {group = "prologue"}
// CANON-NEXT: {group = "layers 0"}
// CANON-NEXT: {group = "layers 1"}
// CANON-NEXT: {group = "layers 2"}
// CANON-NEXT: {group = "epilogue"}
// CANON-NEXT: {group = "layers 2"}
// CANON-NEXT: {group = "layers 1"}
// CANON-NEXT: {group = "layers 0"}
// CANON-NEXT: sl.optimizer_step
// CANON-NEXT: sl.optimizer_step
// CANON-NEXT: sl.optimizer_step
// CANON-NEXT: sl.optimizer_step
// CANON-NOT: sl.

// N=1: no sub-batch views, no loss scaling; the embedding's gradient is the sum of two shares.
// ONE-LABEL: func.func @train_step
// ONE-SAME: (%[[IDS:.+]]: tensor<2x3xi64> {sl.name = "input_ids"}, %[[LABELS:.+]]: tensor<2x3xi64> {sl.name = "labels"})
// ONE-NOT: sl.sub_batch
// ONE-NOT: sl.mul
// ONE: sl.prefetch %[[IDS]]
// ONE: sl.gather
// ONE: sl.prefetch %[[LABELS]]
// ONE: sl.cross_entropy
// ONE: %[[DE_EPI:.+]] = sl.offload %{{.+}} : tensor<8x4xf32>
// ONE: sl.gather_grad
// ONE: %[[DE_PRO:.+]] = sl.offload %{{.+}} : tensor<8x4xf32>
// ONE: %[[DE:.+]] = sl.accumulate %[[DE_EPI]], %[[DE_PRO]] : tensor<8x4xf32>
// ONE: return %{{.+}}, %[[DE]], %{{.+}}, %{{.+}}, %{{.+}} : tensor<f32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
func.func private @prologue(%ids: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %h = sl.gather %e, %ids : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  return %h : tensor<2x3x4xf32>
}
func.func private @block(%h: tensor<2x3x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
  %m = sl.matmul %h, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
  %r = sl.add %m, %h : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %r : tensor<2x3x4xf32>
}
func.func private @epilogue(%h: tensor<2x3x4xf32>, %labels: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<f32> {
  %et = sl.transpose %e [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %logits = sl.matmul %h, %et : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
  %loss = sl.cross_entropy %logits, %labels : tensor<2x3x8xf32>, tensor<2x3xi64> -> tensor<f32>
  return %loss : tensor<f32>
}
func.func @forward(%ids: tensor<2x3xi64> {sl.name = "input_ids"}, %labels: tensor<2x3xi64> {sl.name = "labels"}) -> (tensor<f32> {sl.name = "loss"}) {
  %e = sl.param "embed" : tensor<8x4xf32>
  %w0 = sl.param "layers.0.w" : tensor<4x4xf32>
  %w1 = sl.param "layers.1.w" : tensor<4x4xf32>
  %w2 = sl.param "layers.2.w" : tensor<4x4xf32>
  %h0 = sl.layer @prologue(%ids) params(%e) {index = 0 : i64, stage = "prologue"} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
  %h1 = sl.layer @block(%h0) params(%w0) {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %h2 = sl.layer @block(%h1) params(%w1) {index = 1 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %h3 = sl.layer @block(%h2) params(%w2) {index = 2 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %loss = sl.layer @epilogue(%h3, %labels) params(%e) {index = 0 : i64, stage = "epilogue"} : (tensor<2x3x4xf32>, tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Two ranks (world=2), N=2, K=2: the step sl-shard-parameters shards (shard-parameters.mlir). It
// is the one-rank step but for two things: a pass's parameters arrive in one sl.fetch_params
// holding all its group's parameters (a shard is one copy and one all-gather: no shares; and the
// prologue's backward fetches the embedding it does not read: the shard pass prunes), and the
// backward is seeded with 1/(N W) = 0.25 (the loss is the mean of the rank's N sub-batches').
// WORLD-LABEL: func.func @train_step
// WORLD-SAME: -> (tensor<f32> {sl.name = "loss"}, tensor<8x4xf32> {sl.name = "grad:embed"}, tensor<4x4xf32> {sl.name = "grad:layers.0.w"}, tensor<4x4xf32> {sl.name = "grad:layers.1.w"}, tensor<4x4xf32> {sl.name = "grad:layers.2.w"})
// WORLD-SAME: world = 2
// WORLD-DAG: sl.constant dense<2.500000e-01> : tensor<f32>
// WORLD-DAG: sl.constant dense<5.000000e-01> : tensor<f32>
// WORLD-NOT: sl.all_gather
// WORLD: %[[E:.+]] = sl.param "embed"
// WORLD-NEXT: %[[W0:.+]] = sl.param "layers.0.w"
// WORLD-NEXT: %[[W1:.+]] = sl.param "layers.1.w"
// WORLD-NEXT: %[[W2:.+]] = sl.param "layers.2.w"
// WORLD: sl.fetch_params %[[E]] {group = "prologue"}
// WORLD: sl.fetch_params %[[W0]], %[[W1]] {group = "layers 0-1"}
// WORLD: sl.fetch_params %[[W2]] {group = "layers 2"}
// WORLD: sl.fetch_params %[[E]] {group = "epilogue"}
// WORLD: sl.fetch_params %[[W2]] {group = "layers 2"}
// WORLD: sl.fetch_params %[[W0]], %[[W1]] {group = "layers 0-1"}
// WORLD: %[[PE:.+]] = sl.fetch_params %[[E]] {group = "prologue"}
// WORLD-NOT: %[[PE]]{{[^0-9]}}
// WORLD: return
