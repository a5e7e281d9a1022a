// RUN: sl-opt %s --sl-shard-parameters | FileCheck %s
// RUN: sed 's/mode = speedloader/mode = canonical/' %s | sl-opt --sl-shard-parameters | FileCheck %s --check-prefix=CANON
// RUN: sed 's/world = 2>/world = 1>/' %s | sl-opt --sl-shard-parameters | FileCheck %s --check-prefix=ONE
// The step sl-schedule-subbatches writes for schedule-subbatches.mlir's model, sharded:
// RUN: sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2" | sl-opt --sl-shard-parameters -cse | FileCheck %s --check-prefix=WORLD
// RUN: sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="num-sub-batches=1 live-blocks=2 world=3" | sl-opt --sl-shard-parameters -cse | FileCheck %s --check-prefix=PAD
// RUN: sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2" | sl-opt --sl-shard-parameters | grep -c -E "sl.all_gather|sl.reduce_scatter" | FileCheck %s --check-prefix=COLL-SL
// RUN: sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 live-blocks=2 world=2 mode=canonical" | sl-opt --sl-shard-parameters | grep -c -E "sl.all_gather|sl.reduce_scatter" | FileCheck %s --check-prefix=COLL-CANON

// An unsharded two-rank step, as sl-schedule-subbatches writes it (N=1; the kernels stand in for
// the stages): a prologue that owns `embed`, a block with `w` (computed in bf16, f32 in its model
// file) and `b`, an epilogue that reads `embed` too (tied). Every pass fetches all its group's
// parameters in one sl.fetch_params; the prologue's backward reads none of them.
func.func @train_step(%x: tensor<8x4xf32> {sl.name = "x"}) -> (tensor<f32> {sl.name = "loss"}, tensor<8x4xf32> {sl.name = "grad:embed"}, tensor<4x4xf32> {sl.name = "grad:w"}, tensor<6xf32> {sl.name = "grad:b"})
    attributes {sl.plan = #sl.plan<live_blocks = 1, mode = speedloader, num_sub_batches = 1, world = 2>} {
  %e = sl.param "embed" : tensor<8x4xf32>
  %w = sl.param "w" from "model.onnx" at 0 stored_as f32 : tensor<4x4xbf16>
  %b = sl.param "b" : tensor<6xf32>
  %e0 = sl.fetch_params %e {group = "prologue"} : tensor<8x4xf32>
  %xd = sl.prefetch %x : tensor<8x4xf32>
  %wb:2 = sl.fetch_params %w, %b {group = "block"} : tensor<4x4xbf16>, tensor<6xf32>
  %h = sl.add %e0, %xd : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %hb = sl.cast %h to bf16 : tensor<8x4xf32> -> tensor<8x4xbf16>
  %hwb = sl.matmul %hb, %wb#0 : tensor<8x4xbf16>, tensor<4x4xbf16> -> tensor<8x4xbf16>
  %hw = sl.cast %hwb to f32 : tensor<8x4xbf16> -> tensor<8x4xf32>
  %e1 = sl.fetch_params %e {group = "epilogue"} : tensor<8x4xf32>
  %ld = sl.reduce_sum %e1 : (tensor<8x4xf32>) -> tensor<f32>
  %loss = sl.offload %ld : tensor<f32>
  %ge1 = sl.add %e1, %hw : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %ge1h = sl.offload %ge1 : tensor<8x4xf32>
  %wb2:2 = sl.fetch_params %w, %b {group = "block"} : tensor<4x4xbf16>, tensor<6xf32>
  %gwb = sl.add %wb2#0, %wb2#0 : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
  %gw = sl.cast %gwb to f32 : tensor<4x4xbf16> -> tensor<4x4xf32>
  %gb = sl.add %wb2#1, %wb2#1 : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
  %gwh = sl.offload %gw : tensor<4x4xf32>
  %gbh = sl.offload %gb : tensor<6xf32>
  sl.optimizer_step %loss grads(%gwh, %gbh) params(%w, %b) : tensor<f32>, (tensor<4x4xf32>, tensor<6xf32>), (tensor<4x4xbf16>, tensor<6xf32>)
  %e2 = sl.fetch_params %e {group = "prologue"} : tensor<8x4xf32>
  %ge2 = sl.add %ge1, %xd : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  %ge2h = sl.offload %ge2 : tensor<8x4xf32>
  %ge = sl.accumulate %ge1h, %ge2h : tensor<8x4xf32>
  sl.optimizer_step %loss grads(%ge) params(%e) : tensor<f32>, (tensor<8x4xf32>), (tensor<8x4xf32>)
  return %loss, %ge, %gwh, %gbh : tensor<f32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<6xf32>
}

// Each group owns what it is the first to fetch (the epilogue owns nothing), flattened into f32
// (`w` now f32, its master) and padded to a multiple of 4 W elements (b's 6 to 8): 32 and 24
// elements, of which the rank holds half. The step returns the rank's gradient of each shard.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {sl.name = "loss"}, tensor<16xf32> {sl.name = "grad_shard:prologue"}, tensor<12xf32> {sl.name = "grad_shard:block"})
// The zeros that pad the block's gradients, hoisted and copied to the device as kernels read them.
// CHECK: %[[Z:.+]] = sl.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK-NEXT: %[[DZ:.+]] = sl.prefetch %[[Z]] : tensor<2xf32>
// CHECK-NEXT: %[[E:.+]] = sl.param "embed" : tensor<8x4xf32>
// CHECK-NEXT: %[[W:.+]] = sl.param "w" from "model.onnx" at 0 : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.+]] = sl.param "b" : tensor<6xf32>
// CHECK-NEXT: %[[SP:.+]] = sl.param_shard %[[E]] {group = "prologue", world = 2 : i64} : tensor<8x4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[SB:.+]] = sl.param_shard %[[W]], %[[B]] {group = "block", world = 2 : i64} : tensor<4x4xf32>, tensor<6xf32> -> tensor<12xf32>
// A fetch is the rank's shard prefetched and all-gathered; the parameters are views of it, a bf16
// one cast after the gather. What a pass does not read (the forward's `b`) gets no view.
// CHECK-NEXT: %[[DP:.+]] = sl.prefetch %[[SP]] : tensor<16xf32>
// CHECK-NEXT: %[[GP:.+]] = sl.all_gather %[[DP]] {world = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
// CHECK-NEXT: sl.view %[[GP]] {offset = 0 : i64} : tensor<32xf32> -> tensor<8x4xf32>
// CHECK-NEXT: sl.prefetch %{{.+}} : tensor<8x4xf32>
// CHECK-NEXT: %[[DB:.+]] = sl.prefetch %[[SB]] : tensor<12xf32>
// CHECK-NEXT: %[[GB:.+]] = sl.all_gather %[[DB]] {world = 2 : i64} : tensor<12xf32> -> tensor<24xf32>
// CHECK-NEXT: %[[VW:.+]] = sl.view %[[GB]] {offset = 0 : i64} : tensor<24xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[CW:.+]] = sl.cast %[[VW]] to bf16 : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NEXT: sl.add
// CHECK-NEXT: sl.cast
// CHECK-NEXT: sl.matmul %{{.+}}, %[[CW]]
// CHECK-NEXT: sl.cast
// The epilogue gathers the prologue's shard for the tied embedding.
// CHECK-NEXT: sl.prefetch %[[SP]] : tensor<16xf32>
// CHECK-NEXT: sl.all_gather
// CHECK-NEXT: sl.view
// CHECK-NEXT: sl.reduce_sum
// CHECK-NEXT: %[[LOSS:.+]] = sl.offload %{{.+}} : tensor<f32>
// The epilogue's gradient of the embedding is the whole prologue shard's layout: no concatenation.
// CHECK-NEXT: %[[GE1:.+]] = sl.add
// CHECK-NEXT: %[[FE1:.+]] = sl.view %[[GE1]] {offset = 0 : i64} : tensor<8x4xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[RE1:.+]] = sl.reduce_scatter %[[FE1]] {world = 2 : i64} : tensor<32xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[HE1:.+]] = sl.offload %[[RE1]] : tensor<16xf32>
// The block's gradients, concatenated with the padding in its shard's layout, reduce-scattered and
// offloaded once; its shard is final and stepped.
// CHECK:      %[[FW:.+]] = sl.view %{{.+}} {offset = 0 : i64} : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[FB:.+]] = sl.view %{{.+}} {offset = 0 : i64} : tensor<6xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[CB:.+]] = sl.concat %[[FW]], %[[FB]], %[[DZ]] {axis = 0 : i64} : (tensor<16xf32>, tensor<6xf32>, tensor<2xf32>) -> tensor<24xf32>
// CHECK-NEXT: %[[RB:.+]] = sl.reduce_scatter %[[CB]] {world = 2 : i64} : tensor<24xf32> -> tensor<12xf32>
// CHECK-NEXT: %[[HB:.+]] = sl.offload %[[RB]] : tensor<12xf32>
// CHECK-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[HB]]) params(%[[SB]]) : tensor<f32>, (tensor<12xf32>), (tensor<12xf32>)
// The prologue's backward reads no embedding: nothing gathered. Its gradient shard adds to the
// epilogue's; the shard is stepped once both groups that read it are done.
// CHECK-NOT: sl.all_gather
// CHECK:      %[[RE2:.+]] = sl.reduce_scatter %{{.+}} {world = 2 : i64} : tensor<32xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[HE2:.+]] = sl.offload %[[RE2]] : tensor<16xf32>
// CHECK-NEXT: %[[GE:.+]] = sl.accumulate %[[HE1]], %[[HE2]] : tensor<16xf32>
// CHECK-NEXT: sl.optimizer_step %[[LOSS]] grads(%[[GE]]) params(%[[SP]])
// CHECK-NEXT: return %[[LOSS]], %[[GE]], %[[HB]]

// Canonical: every shard is stepped after the last pass, groups in reverse (the block's shard,
// then the prologue's, whose last reader is the prologue).
// CANON-NOT: sl.optimizer_step
// CANON:      %[[GE:.+]] = sl.accumulate
// CANON-NEXT: sl.optimizer_step %{{.+}} grads(%{{.+}}) params(%{{.+}}) : tensor<f32>, (tensor<12xf32>), (tensor<12xf32>)
// CANON-NEXT: sl.optimizer_step %{{.+}} grads(%[[GE]]) params(%{{.+}}) : tensor<f32>, (tensor<16xf32>), (tensor<16xf32>)
// CANON-NEXT: return

// One rank: nothing to shard.
// ONE-NOT: sl.param_shard
// ONE: sl.param "w" from "model.onnx" at 0 stored_as f32 : tensor<4x4xbf16>
// ONE: sl.fetch_params
// ONE: return %{{.+}} : tensor<f32>, tensor<8x4xf32>, tensor<4x4xf32>, tensor<6xf32>

// schedule-subbatches.mlir's model (a prologue, three blocks, an epilogue tied to the prologue's
// embedding) on two ranks (world=2), N=2, K=2. Each group owns the parameters it is the first to read (the
// epilogue owns none: the tied embedding is the prologue's) and is flattened into one shard, of
// which each rank holds half. The step returns the rank's gradient of each shard.
// WORLD-LABEL: func.func @train_step
// WORLD-SAME: -> (tensor<f32> {sl.name = "loss"}, tensor<16xf32> {sl.name = "grad_shard:prologue"}, tensor<16xf32> {sl.name = "grad_shard:layers 0-1"}, tensor<8xf32> {sl.name = "grad_shard:layers 2"})
// WORLD-SAME: world = 2
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
