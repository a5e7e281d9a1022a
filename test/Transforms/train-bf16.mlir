// --sl-train with precision=bf16: the stages are converted to bf16 before sl-autodiff, so the
// forward and the backward store bf16; @train_step returns an f32 loss and f32 gradients: each
// sub-batch's bf16 loss and parameter gradients are cast to f32 and accumulated in f32. The
// activation gradients between stages stay bf16. Sharding keeps f32 masters read from the model
// file: these parameters are inline, so world > 1 is refused (train-bf16-world.mlir shards them).
//
// RUN: sl-opt %s --sl-train="batch=4 seq=3 num-sub-batches=2 precision=bf16" | FileCheck %s
// RUN: sl-opt %s --sl-train="batch=4 seq=3 num-sub-batches=2" | FileCheck %s --check-prefix=F32
// RUN: not sl-opt %s --sl-train="batch=4 seq=3 num-sub-batches=2 world=2 precision=bf16" 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not sl-opt %s --sl-train="batch=4 seq=3 precision=fp8" 2>&1 | FileCheck %s --check-prefix=PRECISION

// CHECK: func.func private @prologue(%{{.+}}: tensor<2x3xi64>, %{{.+}}: tensor<16x8xbf16> {sl.param}) -> tensor<2x3x8xbf16>
// CHECK: func.func private @block_backward(%{{.+}}: tensor<2x3x8xbf16>, %{{.+}}: tensor<8x8xbf16> {sl.param}, %{{.+}}: tensor<2x3x8xbf16>) -> (tensor<2x3x8xbf16>, tensor<8x8xbf16>)
// CHECK: func.func private @epilogue({{.*}}) -> tensor<bf16>
// CHECK: sl.cross_entropy %{{.+}}, %{{.+}} : tensor<2x3x16xbf16>, tensor<2x3xi64> -> tensor<bf16>
// CHECK: func.func private @epilogue_backward(
// CHECK: sl.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3xi64>, tensor<bf16>, tensor<2x3x16xbf16>) -> tensor<2x3x16xbf16>
// CHECK: func.func @train_step({{.*}}) -> (tensor<f32> {sl.name = "loss"}, tensor<16x8xf32> {sl.name = "grad:embed"}, tensor<8x8xf32> {sl.name = "grad:layers.0.w"}, tensor<8x8xf32> {sl.name = "grad:layers.1.w"}, tensor<8x16xf32> {sl.name = "grad:head"})
// The parameters are bf16 in the host pool (their file keeps f32).
// CHECK-DAG: sl.param "head" {{.*}}: tensor<8x16xbf16>
// Sub-batch 0: the loss and the head's gradient cast to f32 ...
// CHECK: %[[L0:.+]] = sl.cross_entropy {{.*}} -> tensor<bf16>
// CHECK-NEXT: %[[L0F:.+]] = sl.cast %[[L0]] to f32 {{.*}} : tensor<bf16> -> tensor<f32>
// CHECK: %[[G0:.+]] = sl.cast %{{.+}} to f32 {{.*}} : tensor<8x16xbf16> -> tensor<8x16xf32>
// ... sub-batch 1's too, and both summed in f32.
// CHECK: %[[L1:.+]] = sl.cross_entropy {{.*}} -> tensor<bf16>
// CHECK-NEXT: sl.cast %[[L1]] to f32 {{.*}} : tensor<bf16> -> tensor<f32>
// CHECK: sl.accumulate %{{.+}}, %{{.+}} {{.*}} : tensor<f32>
// CHECK: %[[G1:.+]] = sl.cast %{{.+}} to f32 {{.*}} : tensor<8x16xbf16> -> tensor<8x16xf32>
// CHECK-NEXT: %[[ACC:.+]] = sl.accumulate %[[G0]], %[[G1]] {{.*}} : tensor<8x16xf32>
// CHECK: %[[HOST:.+]] = sl.offload %[[ACC]] {{.*}} : tensor<8x16xf32>
// CHECK: sl.optimizer_step %{{.+}} grads(%[[HOST]]) params(%{{.+}}) {{.*}} : tensor<f32>, (tensor<8x16xf32>), (tensor<8x16xbf16>)
// The gradient of an activation between stages stays bf16.
// CHECK: sl.accumulate %{{.+}}, %{{.+}} {{.*}} : tensor<2x3x8xbf16>
// CHECK: return {{.*}} : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>

// An f32 step has no casts.
// F32-NOT: sl.cast
// F32: func.func @train_step({{.*}}) -> (tensor<f32> {sl.name = "loss"}, tensor<16x8xf32> {sl.name = "grad:embed"}
// F32-NOT: sl.cast

// WORLD: error: sl-shard-parameters: parameter 'embed' is 'tensor<16x8xbf16>' with no f32 values behind it (its model file stores it so, or it is inline in the module); sharding (world > 1) keeps f32 master weights in the shards, read from an f32 model file (export the model in f32: precision=bf16 then computes in bf16)

// PRECISION: error: sl-convert-precision: precision must be f32 or bf16, got 'fp8'

module {
  func.func @forward(%ids: tensor<?x?xi64> {sl.dims = ["batch", "seq"], sl.name = "input_ids"}) -> (tensor<?x?x16xf32> {sl.name = "logits"}) {
    %e = sl.param "embed" : tensor<16x8xf32>
    %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
    %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
    %head = sl.param "head" : tensor<8x16xf32>
    %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    %m0 = sl.matmul %h, %w0 : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %h0 = sl.add %h, %m0 : tensor<?x?x8xf32>, tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %m1 = sl.matmul %h0, %w1 : tensor<?x?x8xf32>, tensor<8x8xf32> -> tensor<?x?x8xf32>
    %h1 = sl.add %h0, %m1 : tensor<?x?x8xf32>, tensor<?x?x8xf32> -> tensor<?x?x8xf32>
    %logits = sl.matmul %h1, %head : tensor<?x?x8xf32>, tensor<8x16xf32> -> tensor<?x?x16xf32>
    return %logits : tensor<?x?x16xf32>
  }
}
