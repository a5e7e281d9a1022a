// precision=bf16 across ranks: parameters whose model file stores f32 are sharded as f32 (the
// shards hold the AdamW masters, read from the file's f32 bytes), the all-gathered group is viewed
// as f32 and cast to bf16 on the device for the stages, and the f32 gradients are reduce-scattered.
//
// RUN: sl-opt %s --sl-train="batch=4 seq=3 num-sub-batches=2 world=2 precision=bf16" | FileCheck %s

// The step's parameters are f32 with their file's bytes (no stored_as): what the shards hold.
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: sl.param "embed" from "m.onnx" at 0 : tensor<16x8xf32>
// CHECK-DAG: sl.param "head" from "m.onnx" at 1536 : tensor<8x16xf32>
// CHECK: %[[SHARD:.+]] = sl.param_shard {{.*}} -> tensor<{{[0-9]+}}xf32>
// CHECK: %[[LOCAL:.+]] = sl.prefetch %[[SHARD]]
// CHECK-NEXT: %[[WHOLE:.+]] = sl.all_gather %[[LOCAL]] {{.*}} -> tensor<{{[0-9]+}}xf32>
// CHECK-NEXT: %[[E32:.+]] = sl.view %[[WHOLE]] {{.*}} -> tensor<16x8xf32>
// CHECK-NEXT: sl.cast %[[E32]] to bf16 {{.*}} : tensor<16x8xf32> -> tensor<16x8xbf16>
// The gradients leave the device in f32: reduce-scattered, offloaded, stepped.
// CHECK: sl.reduce_scatter %{{.+}} {{.*}} -> tensor<{{[0-9]+}}xf32>
// CHECK: sl.optimizer_step
// CHECK-NOT: stored_as

module {
  func.func @forward(%ids: tensor<?x?xi64> {sl.dims = ["batch", "seq"], sl.name = "input_ids"}) -> (tensor<?x?x16xf32> {sl.name = "logits"}) {
    %e = sl.param "embed" from "m.onnx" at 0 : tensor<16x8xf32>
    %w0 = sl.param "layers.0.w" from "m.onnx" at 512 : tensor<8x8xf32>
    %w1 = sl.param "layers.1.w" from "m.onnx" at 768 : tensor<8x8xf32>
    %head = sl.param "head" from "m.onnx" at 1536 : tensor<8x16xf32>
    %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    %m0 = sl.matmul %h, %w0 : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %h0 = sl.add %h, %m0 : tensor<?x?x8xf32>, tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %m1 = sl.matmul %h0, %w1 : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %h1 = sl.add %h0, %m1 : tensor<?x?x8xf32>, tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %logits = sl.matmul %h1, %head : tensor<?x?x8xf32>, tensor<8x16xf32> -> tensor<?x?x16xf32>
    return %logits : tensor<?x?x16xf32>
  }
}
