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
