// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=3 live-blocks=2" -cse | grep -E "@train_step|fetch_params|prefetch|offload|optimizer_step" | FileCheck %s --check-prefix=SL
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 mode=canonical" -cse | grep -E "fetch_params|optimizer_step" | FileCheck %s --check-prefix=CANON
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches -cse | FileCheck %s --check-prefix=ONE
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2" -cse | FileCheck %s --check-prefix=WORLD
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=1 live-blocks=2 world=3" -cse | FileCheck %s --check-prefix=PAD
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2" -cse | grep -c -E "sl.all_gather|sl.reduce_scatter" | FileCheck %s --check-prefix=COLL-SL
// RUN: sl-opt %s --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2 mode=canonical" -cse | grep -c -E "sl.all_gather|sl.reduce_scatter" | FileCheck %s --check-prefix=COLL-CANON

// A prologue, three blocks and an epilogue that shares the embedding with the prologue (tied).
// SpeedLoader, N=3, K=2: groups prologue | layers 0-1 | layers 2 | epilogue. Every group's
// parameters are fetched once per pass, while the pass before it runs, in shares between that
// pass's sub-batch prefetches (one share per sub-batch: a sub-batch's input never waits behind a
// whole group's parameters on the host-to-device stream). Each sub-batch's input is prefetched
// one sub-batch ahead and its output offloaded after the next sub-batch started.
// SL: func.func @train_step(%{{.+}}: tensor<6x3xi64> {sl.name = "input_ids"}, %{{.+}}: tensor<6x3xi64> {sl.name = "labels"})
// SL-SAME: live_blocks = 2 : i64, mode = "speedloader", num_sub_batches = 3 : i64
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

// Two ranks (world=2), N=2, K=2. Each group owns the parameters it is the first to read (the
// epilogue owns none: the tied embedding is the prologue's) and is flattened into one shard, of
// which each rank holds half. The step returns the rank's gradient of each shard.
// WORLD-LABEL: func.func @train_step
// WORLD-SAME: -> (tensor<f32> {sl.name = "loss"}, tensor<16xf32> {sl.name = "grad_shard:prologue"}, tensor<16xf32> {sl.name = "grad_shard:layers 0-1"}, tensor<8xf32> {sl.name = "grad_shard:layers 2"})
// WORLD-SAME: world = 2 : i64
// The backward is seeded with 1/(N W) = 0.25; the rank's loss is the mean of its N sub-batches'.
// WORLD-DAG: sl.constant dense<2.500000e-01> : tensor<f32>
// WORLD-DAG: sl.constant dense<5.000000e-01> : tensor<f32>
// WORLD: %[[SP:.+]] = sl.param_shard %{{.+}} {group = "prologue", world = 2 : i64} : tensor<8x4xf32> -> tensor<16xf32>
// WORLD-NEXT: %[[S01:.+]] = sl.param_shard %{{.+}}, %{{.+}} {group = "layers 0-1", world = 2 : i64} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<16xf32>
// WORLD-NEXT: %[[S2:.+]] = sl.param_shard %{{.+}} {group = "layers 2", world = 2 : i64} : tensor<4x4xf32> -> tensor<8xf32>
// Forward: a group's fetch is its shard's prefetch and an all-gather; the parameters are views.
// WORLD: %[[DP:.+]] = sl.prefetch %[[SP]] : tensor<16xf32>
// WORLD-NEXT: %[[GP:.+]] = sl.all_gather %[[DP]] {world = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
// WORLD-NEXT: sl.view %[[GP]] {offset = 0 : i64} : tensor<32xf32> -> tensor<8x4xf32>
// WORLD: %[[D01:.+]] = sl.prefetch %[[S01]] : tensor<16xf32>
// WORLD-NEXT: %[[G01:.+]] = sl.all_gather %[[D01]] {world = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
// WORLD-NEXT: sl.view %[[G01]] {offset = 0 : i64} : tensor<32xf32> -> tensor<4x4xf32>
// WORLD-NEXT: sl.view %[[G01]] {offset = 16 : i64} : tensor<32xf32> -> tensor<4x4xf32>
// WORLD: sl.all_gather %{{.+}} {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// The epilogue gathers the prologue's shard for the tied embedding.
// WORLD: sl.prefetch %[[SP]] : tensor<16xf32>
// WORLD-NEXT: sl.all_gather
// Backward: the epilogue's gradient of the embedding is the prologue shard's layout; it is
// reduce-scattered and the rank's half offloaded (accumulated with the prologue's own below).
// WORLD: %[[RE:.+]] = sl.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<32xf32> -> tensor<16xf32>
// WORLD-NEXT: %[[HE:.+]] = sl.offload %[[RE]] : tensor<16xf32>
// A group's gradients are concatenated in its shard's layout, reduce-scattered once, and its
// shard stepped.
// WORLD: %[[R2:.+]] = sl.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<16xf32> -> tensor<8xf32>
// WORLD-NEXT: %[[H2:.+]] = sl.offload %[[R2]] : tensor<8xf32>
// WORLD-NEXT: sl.optimizer_step %[[LOSS:.+]] grads(%[[H2]]) params(%[[S2]]) : tensor<f32>, (tensor<8xf32>), (tensor<8xf32>)
// WORLD: %[[C01:.+]] = sl.concat %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
// WORLD-NEXT: %[[R01:.+]] = sl.reduce_scatter %[[C01]] {world = 2 : i64} : tensor<32xf32> -> tensor<16xf32>
// WORLD-NEXT: %[[H01:.+]] = sl.offload %[[R01]] : tensor<16xf32>
// WORLD-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[H01]]) params(%[[S01]])
// The prologue's backward reads no embedding (a gather's gradient needs none): no all-gather.
// WORLD-NOT: sl.all_gather
// WORLD: %[[RP:.+]] = sl.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<32xf32> -> tensor<16xf32>
// WORLD-NEXT: %[[HP:.+]] = sl.offload %[[RP]] : tensor<16xf32>
// WORLD-NEXT: %[[GSP:.+]] = sl.accumulate %[[HE]], %[[HP]] : tensor<16xf32>
// WORLD-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[GSP]]) params(%[[SP]])
// WORLD-NEXT: return %[[LOSS]], %[[GSP]], %[[H01]], %[[H2]]

// Three ranks: each shard is padded with zeros to a multiple of 4 x 3 elements, so the gradients
// are concatenated with zeros before the reduce-scatter.
// PAD-DAG: %[[Z4:.+]] = sl.constant dense<0.000000e+00> : tensor<4xf32>
// PAD-DAG: sl.param_shard %{{.+}} {group = "prologue", world = 3 : i64} : tensor<8x4xf32> -> tensor<12xf32>
// PAD-DAG: sl.param_shard %{{.+}} {group = "layers 2", world = 3 : i64} : tensor<4x4xf32> -> tensor<8xf32>
// PAD: %[[C:.+]] = sl.concat %{{.+}}, %{{.+}}, %{{.+}} {axis = 0 : i64} : (tensor<16xf32>, tensor<16xf32>, tensor<4xf32>) -> tensor<36xf32>
// PAD-NEXT: sl.reduce_scatter %[[C]] {world = 3 : i64} : tensor<36xf32> -> tensor<12xf32>

// Collectives per step: SpeedLoader gathers each group once per pass (6: four forward, the
// epilogue's gather of the embedding, two backward) and reduce-scatters each group's gradients
// once (4); canonical does both per sub-batch.
// COLL-SL: {{^}}10{{$}}
// COLL-CANON: {{^}}20{{$}}
