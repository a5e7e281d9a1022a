// RUN: sl-opt %s | sl-opt | FileCheck %s

// The ops of an explicit step round-trip.
// CHECK-LABEL: func.func @step
func.func @step(%ids: tensor<6x16xi64>, %g: tensor<4x4xf32>, %loss: tensor<f32>) -> tensor<4x4xf32> {
  // CHECK: %[[W:.+]] = sl.param "w" : tensor<4x4xf32>
  %w = sl.param "w" : tensor<4x4xf32>
  // CHECK: sl.sub_batch %{{.+}} {count = 3 : i64, index = 1 : i64} : tensor<6x16xi64> -> tensor<2x16xi64>
  %s = sl.sub_batch %ids {index = 1 : i64, count = 3 : i64} : tensor<6x16xi64> -> tensor<2x16xi64>
  // CHECK: sl.fetch_params %[[W]] {group = "layers 0"} : tensor<4x4xf32>
  %wd = sl.fetch_params %w {group = "layers 0"} : tensor<4x4xf32>
  // CHECK: sl.prefetch %{{.+}} : tensor<2x16xi64>
  %d = sl.prefetch %s : tensor<2x16xi64>
  // CHECK: sl.accumulate %{{.+}}, %{{.+}} : tensor<4x4xf32>
  %acc = sl.accumulate %wd, %wd : tensor<4x4xf32>
  // CHECK: sl.offload %{{.+}} : tensor<4x4xf32>
  %h = sl.offload %acc : tensor<4x4xf32>
  // CHECK: sl.optimizer_step %{{.+}} grads(%{{.+}}) params(%[[W]]) : tensor<f32>, (tensor<4x4xf32>), (tensor<4x4xf32>)
  sl.optimizer_step %loss grads(%h) params(%w) : tensor<f32>, (tensor<4x4xf32>), (tensor<4x4xf32>)
  // CHECK: sl.all_gather %{{.+}} {world = 2 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
  %shard = sl.reduce_scatter %g {world = 2 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
  %whole = sl.all_gather %shard {world = 2 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
  return %whole : tensor<4x4xf32>
}

// The ops of a sharded step: a group's shard (16 + 4 elements, padded to 24 for 2 ranks), its
// gathered vector's views and an optimizer step on the shard.
// CHECK-LABEL: func.func @sharded
func.func @sharded(%loss: tensor<f32>, %flat: tensor<24xf32>, %g: tensor<12xf32>) -> tensor<4x4xf32> {
  %w = sl.param "w" : tensor<4x4xf32>
  %b = sl.param "b" : tensor<4xf32>
  // CHECK: %[[S:.+]] = sl.param_shard %{{.+}}, %{{.+}} {group = "layers 0", world = 2 : i64} : tensor<4x4xf32>, tensor<4xf32> -> tensor<12xf32>
  %s = sl.param_shard %w, %b {group = "layers 0", world = 2 : i64} : tensor<4x4xf32>, tensor<4xf32> -> tensor<12xf32>
  // CHECK: sl.view %{{.+}} {offset = 16 : i64} : tensor<24xf32> -> tensor<2x2xf32>
  %v = sl.view %flat {offset = 16 : i64} : tensor<24xf32> -> tensor<2x2xf32>
  // CHECK: sl.view %{{.+}} {offset = 0 : i64} : tensor<24xf32> -> tensor<4x4xf32>
  %wv = sl.view %flat {offset = 0 : i64} : tensor<24xf32> -> tensor<4x4xf32>
  // CHECK: sl.optimizer_step %{{.+}} grads(%{{.+}}) params(%[[S]]) : tensor<f32>, (tensor<12xf32>), (tensor<12xf32>)
  sl.optimizer_step %loss grads(%g) params(%s) : tensor<f32>, (tensor<12xf32>), (tensor<12xf32>)
  return %wv : tensor<4x4xf32>
}
