// RUN: sl-opt %S/schedule-subbatches-infer.mlir --sl-schedule-subbatches="forward-only num-sub-batches=2 world=2" | sl-opt --sl-shard-parameters -cse | FileCheck %s
// RUN: sl-opt %S/schedule-subbatches-infer.mlir --sl-schedule-subbatches="forward-only num-sub-batches=2 world=2 mode=canonical" | sl-opt --sl-shard-parameters | grep -c sl.all_gather | FileCheck %s --check-prefix=CANON
// RUN: sl-opt %S/schedule-subbatches-infer.mlir --sl-schedule-subbatches="forward-only num-sub-batches=2" | sl-opt --sl-shard-parameters | FileCheck %s --check-prefix=ONE
// RUN: sl-opt %S/schedule-subbatches-infer.mlir --sl-plan="live-blocks=1 forward-only num-sub-batches=2 world=2 report" -o /dev/null | FileCheck %s --check-prefix=REPORT

// ZeRO-Inference: the planned inference step of schedule-subbatches-infer.mlir's model for two
// ranks, sharded by sl-shard-parameters. Each group's weights become the rank's f32 shard
// (sl.param_shard, 1/2 of the padded group), and each fetch a prefetch of the shard, an all-gather
// and a view per parameter; nothing else changes: no gradients, no optimizer steps, the outputs
// are the rank's own logits.

// CHECK-LABEL: func.func @infer_step
// CHECK-SAME: (%{{.+}}: tensor<4x3xi64> {sl.name = "input_ids"}) -> (tensor<4x3x8xf32> {sl.name = "logits"})
// CHECK-SAME: world = 2
// CHECK-DAG: %[[E:.+]] = sl.param "embed" : tensor<8x4xf32>
// CHECK-DAG: %[[W0:.+]] = sl.param "layers.0.w" : tensor<4x4xf32>
// CHECK-DAG: %[[ES:.+]] = sl.param_shard %[[E]] {group = "prologue", world = 2 : i64} : tensor<8x4xf32> -> tensor<16xf32>
// CHECK-DAG: %[[WS:.+]] = sl.param_shard %[[W0]] {group = "layers 0", world = 2 : i64} : tensor<4x4xf32> -> tensor<8xf32>
// CHECK-NOT: sl.fetch_params
// CHECK: %[[EP:.+]] = sl.prefetch %[[ES]] : tensor<16xf32>
// CHECK-NEXT: %[[EG:.+]] = sl.all_gather %[[EP]] {world = 2 : i64} : tensor<16xf32> -> tensor<32xf32>
// CHECK-NEXT: %{{.+}} = sl.view %[[EG]] {offset = 0 : i64} : tensor<32xf32> -> tensor<8x4xf32>
// CHECK: %[[WP:.+]] = sl.prefetch %[[WS]] : tensor<8xf32>
// CHECK-NEXT: %[[WG:.+]] = sl.all_gather %[[WP]] {world = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %{{.+}} = sl.view %[[WG]] {offset = 0 : i64} : tensor<16xf32> -> tensor<4x4xf32>
// CHECK-NOT: sl.fetch_params
// CHECK-NOT: sl.reduce_scatter
// CHECK-NOT: sl.optimizer_step
// CHECK: return %{{.+}} : tensor<4x3x8xf32>

// Canonical: each group gathered once per sub-batch (4 groups x 2 sub-batches).
// CANON: 8

// One rank: nothing to shard.
// ONE-LABEL: func.func @infer_step
// ONE-NOT: sl.param_shard
// ONE: sl.fetch_params

// REPORT: sl-plan: inference, speedloader, 2 sub-batches of 2 (batch 4), live-blocks 1, world 2
