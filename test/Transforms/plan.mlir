// RUN: sl-opt %s --sl-plan="num-sub-batches=3 link-gbps=0.000001 tflops=0.000000001 report" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: sl-opt %s --sl-plan="num-sub-batches=3 link-gbps=0.000001 tflops=0.000000001" | FileCheck %s
// RUN: sl-opt %s --sl-plan="num-sub-batches=3 mode=canonical link-gbps=0.000001 tflops=0.000000001 report" -o /dev/null | FileCheck %s --check-prefix=CANONICAL
// RUN: sl-opt %s --sl-plan="num-sub-batches=3 live-blocks=2 report" -o /dev/null | FileCheck %s --check-prefix=LIVE2
// RUN: sl-opt %s --sl-plan="batch=6" | FileCheck %s --check-prefix=BATCH
// RUN: sl-opt %s --sl-plan="host-memory=10848" | FileCheck %s --check-prefix=HOST3
// RUN: sl-opt %s --sl-plan="host-memory=10847" | FileCheck %s --check-prefix=HOST2
// RUN: sl-opt %s --sl-plan="device-memory=3232B host-memory=1GiB num-sub-batches=1" | FileCheck %s --check-prefix=EXACT

// A model bound at sub-batch size 2 (3 tokens, width 8, vocabulary 16) whose every figure is
// worked out by hand below. Link and compute rates of 1000 bytes/s and 1000 FLOP/s make seconds
// thousandths of the byte and FLOP counts.
//
// Parameters: embed 16x8 (512 B), two 8x8 block weights (256 B each), head 8x16 (512 B):
// P = 1536 B. Boundary values per sub-batch: ids and labels 2x3 i64 (48 B each), hidden states
// 2x3x8 f32 (192 B): A = 192.
//
// Workspace (live bytes after an op, arguments excluded, a reshape sharing its operand's bytes):
// - @prologue: the 192 B gather; @prologue_backward: the 512 B table gradient.
// - @block: m (192) and y (192) both live after the add: 384.
// - @block_backward: after %dw: dx (192), xt (192), dw (256) = 640.
// - @epilogue: logits (384) and loss (4) = 388.
// - @epilogue_backward: after %dhead: dlogits (384, kept alive by its reshape), dh (192), h2t
//   (192), dhead (512) = 1280.
// FLOPs: a product 2*M*N*K, anything else one per result element: block forward
// 2*6*8*8 + 48 = 816, backward 768 + 48 + 768 = 1584; epilogue forward 2*6*16*8 + 1 = 1537,
// backward 1536 + 96 + 1536 + 1536 = 4704; prologue forward 48, backward 128.
//
// REPORT: sl-plan: speedloader, 3 sub-batches of 2 (batch 6), live-blocks 1, world 1
// REPORT: stage index params inputs outputs forward FLOPs backward FLOPs fwd work bwd work
// REPORT-NEXT: prologue 0 512 48 192 48 128 192 512
// REPORT-NEXT: block 0 256 192 192 816 1584 384 640
// REPORT-NEXT: block 1 256 192 192 816 1584 384 640
// REPORT-NEXT: epilogue 0 512 240 4 1537 4704 388 1280
// REPORT-NEXT: parameters (P): 1.50 KiB (1536 bytes)
// REPORT-NEXT: boundary activation (A): 192 B (192 bytes) per sub-batch
//
// The device peaks in the epilogue: its parameters and gradient accumulator (512 each), block
// 1's parameters fetched for the backward (256), two sub-batches of inputs (2 x 240), the
// previous sub-batch's input gradient on its way out (192) and the workspace (1280).
// REPORT-NEXT: device memory: 3.16 KiB (3232 bytes) at its peak, epilogue (forward and backward)
// REPORT-NEXT: parameters of the group 512 B (512 bytes)
// REPORT-NEXT: parameters of the next group (prefetched) 256 B (256 bytes)
// REPORT-NEXT: gradient accumulators 512 B (512 bytes)
// REPORT-NEXT: inputs (2 sub-batches) 480 B (480 bytes)
// REPORT-NEXT: input gradient of the previous sub-batch (offloading) 192 B (192 bytes)
// REPORT-NEXT: workspace 1.25 KiB (1280 bytes)
//
// Host: P, gradients P, AdamW 3 x 1536; the pool keeps ids, labels and three hidden states per
// sub-batch (672 x 3) and two groups of input gradients (2 x 3 x 192).
// REPORT-NEXT: host memory: 10.59 KiB (10848 bytes)
// REPORT-NEXT: parameters 1.50 KiB (1536 bytes)
// REPORT-NEXT: gradients 1.50 KiB (1536 bytes)
// REPORT-NEXT: optimizer state (fp32 master weights, 2 moments) 4.50 KiB (4608 bytes)
// REPORT-NEXT: boundary activations (every group's inputs, N sub-batches) 1.97 KiB (2016 bytes)
// REPORT-NEXT: activation gradients (2 groups x N sub-batches) 1.12 KiB (1152 bytes)
//
// Host to device, SpeedLoader: forward 512+3*48, 256+3*192 (twice); epilogue 512+3*240;
// backward 256+3*(192+192) (twice), 512+3*(48+192): 7600. Device to host: forward 3*192
// (three times); epilogue 3*192+512; backward 3*192+256 (twice), 512: 4992.
// Canonical: every fetch per sub-batch, 3 x (1024 forward + 512 epilogue + 1024 backward) plus
// 3 x 96 of ids and labels = 7968; gradients 3 x 1536 = 4608.
// REPORT-NEXT: bytes moved per step:
// REPORT-NEXT: speedloader host->device 7.42 KiB (7600 bytes), device->host 4.88 KiB (4992 bytes)
// REPORT-NEXT: canonical host->device 7.78 KiB (7968 bytes), device->host 4.50 KiB (4608 bytes)
//
// Step: the larger of compute and each link direction per phase, 656 + 2448 + 2448 + 18723 +
// 4752 + 4752 + 1232 = 35011, plus the first fetch and the last offload (512 each); compute
// 3 x (48 + 2 x 816 + 1537 + 4704 + 2 x 1584 + 128) = 33651.
// REPORT-NEXT: step time: 3.6035e+01 s predicted (3.3651e+01 s of compute)

// CHECK: module attributes {sl.plan = {boundary_activation_bytes = 192 : i64, live_blocks = 1 : i64, mode = "speedloader", num_sub_batches = 3 : i64, parameter_bytes = 1536 : i64, predicted_device_bytes = 3232 : i64, predicted_host_bytes = 10848 : i64, predicted_step_seconds = {{.+}} : f64, sub_batch_size = 2 : i64}}

// Canonical keeps a sub-batch's boundaries on the device from its forward to its backward:
// the epilogue holds every boundary value (48 + 3 x 192 + 48 + 4 = 676), the next sub-batch's
// ids and labels (96), and no activation pool on the host.
// CANONICAL: sl-plan: canonical, 3 sub-batches of 2 (batch 6)
// CANONICAL: device memory: 3.25 KiB (3332 bytes) at its peak, epilogue (forward and backward)
// CANONICAL: boundaries of the sub-batch (every stage) 676 B (676 bytes)
// CANONICAL: inputs of the next sub-batch 96 B (96 bytes)
// CANONICAL: host memory: 7.78 KiB (7968 bytes)
// CANONICAL: model inputs (N sub-batches) 288 B (288 bytes)

// Two live blocks: the blocks are one group whose parameters (512) are fetched while the
// epilogue runs, so its peak grows by 256 to 3488; the boundary between the two blocks is never
// offloaded or prefetched (3 x 192 less to the device in the forward, 3 x 384 less in the
// backward, 3 x 192 less back), nor pooled on the host (3 x 192 less).
// LIVE2: sl-plan: speedloader, 3 sub-batches of 2 (batch 6), live-blocks 2, world 1
// LIVE2: device memory: 3.41 KiB (3488 bytes) at its peak, epilogue (forward and backward)
// LIVE2: parameters of the next group (prefetched) 512 B (512 bytes)
// LIVE2: host memory: 10.03 KiB (10272 bytes)
// LIVE2: boundary activations (every group's inputs, N sub-batches) 1.41 KiB (1440 bytes)
// LIVE2: speedloader host->device 5.73 KiB (5872 bytes), device->host 3.75 KiB (3840 bytes)

// batch = sub-batch size (the bound 2) x num-sub-batches.
// BATCH: mode = "speedloader", num_sub_batches = 3 : i64, {{.*}} sub_batch_size = 2 : i64

// Host memory grows by 672 + 384 = 1056 bytes a sub-batch from 7680: 3 fit in 10848, 2 in one
// byte less.
// HOST3: num_sub_batches = 3 : i64
// HOST2: num_sub_batches = 2 : i64

// A device budget of exactly the prediction fits.
// EXACT: predicted_device_bytes = 3232 : i64, {{.*}} sub_batch_size = 2 : i64

module {
  func.func private @prologue(%ids: tensor<2x3xi64>, %e: tensor<16x8xf32> {sl.param}) -> tensor<2x3x8xf32> {
    %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<2x3xi64> -> tensor<2x3x8xf32>
    return %h : tensor<2x3x8xf32>
  }
  func.func private @prologue_backward(%ids: tensor<2x3xi64>, %e: tensor<16x8xf32> {sl.param}, %dh: tensor<2x3x8xf32>) -> tensor<16x8xf32> attributes {sl.backward_of = @prologue} {
    %de = sl.gather_grad %ids, %dh {axis = 0 : i64} : (tensor<2x3xi64>, tensor<2x3x8xf32>) -> tensor<16x8xf32>
    return %de : tensor<16x8xf32>
  }
  func.func private @block(%x: tensor<2x3x8xf32>, %w: tensor<8x8xf32> {sl.param}) -> tensor<2x3x8xf32> {
    %m = sl.matmul %x, %w : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
    %y = sl.add %x, %m : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
    return %y : tensor<2x3x8xf32>
  }
  func.func private @block_backward(%x: tensor<2x3x8xf32>, %w: tensor<8x8xf32> {sl.param}, %dy: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8x8xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
    %dm = sl.matmul %dy, %wt : tensor<2x3x8xf32>, tensor<8x8xf32> -> tensor<2x3x8xf32>
    %dx = sl.add %dy, %dm : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
    %shape = sl.constant dense<[6, 8]> : tensor<2xi64>
    %x2 = sl.reshape %x, %shape : tensor<2x3x8xf32>, tensor<2xi64> -> tensor<6x8xf32>
    %dy2 = sl.reshape %dy, %shape : tensor<2x3x8xf32>, tensor<2xi64> -> tensor<6x8xf32>
    %xt = sl.transpose %x2 [1, 0] : tensor<6x8xf32> -> tensor<8x6xf32>
    %dw = sl.matmul %xt, %dy2 : tensor<8x6xf32>, tensor<6x8xf32> -> tensor<8x8xf32>
    return %dx, %dw : tensor<2x3x8xf32>, tensor<8x8xf32>
  }
  func.func private @epilogue(%h: tensor<2x3x8xf32>, %labels: tensor<2x3xi64>, %head: tensor<8x16xf32> {sl.param}) -> tensor<f32> {
    %logits = sl.matmul %h, %head : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
    %loss = sl.cross_entropy %logits, %labels : tensor<2x3x16xf32>, tensor<2x3xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func private @epilogue_backward(%h: tensor<2x3x8xf32>, %labels: tensor<2x3xi64>, %head: tensor<8x16xf32> {sl.param}, %dloss: tensor<f32>) -> (tensor<2x3x8xf32>, tensor<8x16xf32>) attributes {sl.backward_of = @epilogue} {
    %logits = sl.matmul %h, %head : tensor<2x3x8xf32>, tensor<8x16xf32> -> tensor<2x3x16xf32>
    %dlogits = sl.cross_entropy_grad %labels, %dloss, %logits : (tensor<2x3xi64>, tensor<f32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
    %headt = sl.transpose %head [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
    %dh = sl.matmul %dlogits, %headt : tensor<2x3x16xf32>, tensor<16x8xf32> -> tensor<2x3x8xf32>
    %shape_h = sl.constant dense<[6, 8]> : tensor<2xi64>
    %h2 = sl.reshape %h, %shape_h : tensor<2x3x8xf32>, tensor<2xi64> -> tensor<6x8xf32>
    %shape_l = sl.constant dense<[6, 16]> : tensor<2xi64>
    %dl2 = sl.reshape %dlogits, %shape_l : tensor<2x3x16xf32>, tensor<2xi64> -> tensor<6x16xf32>
    %h2t = sl.transpose %h2 [1, 0] : tensor<6x8xf32> -> tensor<8x6xf32>
    %dhead = sl.matmul %h2t, %dl2 : tensor<8x6xf32>, tensor<6x16xf32> -> tensor<8x16xf32>
    return %dh, %dhead : tensor<2x3x8xf32>, tensor<8x16xf32>
  }
  func.func @forward(%ids: tensor<2x3xi64> {sl.dims = ["batch", "seq"], sl.name = "input_ids"}, %labels: tensor<2x3xi64> {sl.dims = ["batch", "seq"], sl.name = "labels"}) -> (tensor<f32> {sl.name = "loss"}) {
    %e = sl.param "embed" : tensor<16x8xf32>
    %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
    %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
    %head = sl.param "head" : tensor<8x16xf32>
    %h0 = sl.layer @prologue(%ids) params(%e) {index = 0 : i64, stage = "prologue"} : (tensor<2x3xi64>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
    %h1 = sl.layer @block(%h0) params(%w0) {index = 0 : i64, stage = "block"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %h2 = sl.layer @block(%h1) params(%w1) {index = 1 : i64, stage = "block"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %loss = sl.layer @epilogue(%h2, %labels) params(%head) {index = 0 : i64, stage = "epilogue"} : (tensor<2x3x8xf32>, tensor<2x3xi64>, tensor<8x16xf32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
