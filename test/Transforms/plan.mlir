// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 link-gbps=0.000001 tflops=0.000000001 report" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 link-gbps=0.000001 tflops=0.000000001" | FileCheck %s
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 mode=canonical link-gbps=0.000001 tflops=0.000000001 report" -o /dev/null | FileCheck %s --check-prefix=CANONICAL
// RUN: sl-opt %s --sl-plan="num-sub-batches=3 live-blocks=2 report" -o /dev/null | FileCheck %s --check-prefix=LIVE2
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 target=h200 precision=bf16 report" -o /dev/null | FileCheck %s --check-prefix=H200
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 target=h200 link-gbps=0.000001 tflops=0.000000001 optimizer-gparams=0.000000001 report" -o /dev/null | FileCheck %s --check-prefix=SLOWHOST
// RUN: echo '{"name": "calibrated-cpu", "source": "a test", "link_gbps": 2, "bf16_tflops": 3, "f32_tflops": 0.5, "host_optimizer_gparams": 0.25, "kernel_overhead_us": 2}' > %t.json
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 target=%t.json report" -o /dev/null | FileCheck %s --check-prefix=PROFILE
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 target=h100-sxm precision=bf16 report" -o /dev/null | FileCheck %s --check-prefix=H100
// RUN: sl-run --calibrate %t-measured.json --calibrate-seconds 0.01 | FileCheck %s --check-prefix=MEASURED
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 target=%t-measured.json report" -o /dev/null | FileCheck %s --check-prefix=CALIBRATED
// RUN: echo '{"name": "two-gpus", "source": "a test", "link_gbps": 0.000001, "bf16_tflops": 0.000000001, "f32_tflops": 0.000000001, "host_optimizer_gparams": 0.000000001, "collective_gbps": 0.000002}' > %t-world.json
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 world=2 target=%t-world.json report" -o /dev/null | FileCheck %s --check-prefix=WORLD2
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=3 world=2 link-gbps=0.000001 tflops=0.000000001 report" -o /dev/null | FileCheck %s --check-prefix=WORLD2FREE
// RUN: sl-opt %s --sl-plan="live-blocks=1 batch=6" | FileCheck %s --check-prefix=BATCH
// RUN: sl-opt %s --sl-plan="live-blocks=1 host-memory=9599" | FileCheck %s --check-prefix=HOST3
// RUN: sl-opt %s --sl-plan="live-blocks=1 host-memory=9023" | FileCheck %s --check-prefix=HOST2
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=20" | FileCheck %s --check-prefix=BOUND
// RUN: sl-opt %s --sl-plan="live-blocks=1 num-sub-batches=20" --sl-schedule-subbatches --cse --sl-allocate | FileCheck %s --check-prefix=ALLOCATED
// RUN: sl-opt %s --sl-plan="live-blocks=1 device-memory=2816B host-memory=1GiB num-sub-batches=1" | FileCheck %s --check-prefix=EXACT

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
// Memory is the step sl-schedule-subbatches writes, laid out as sl-allocate lays it out: device
// buffers rounded up to 256 bytes (every buffer here takes one or two such units), host slots to
// 64. The arena peaks in the epilogue's pass (forward and backward fused), at the weight gradient
// of sub-batch 1, while sub-batch 2 has arrived and sub-batch 0's input gradient waits to leave:
// - the 1/N constant (256);
// - the head (512) and block 1's weights, fetched for the next pass (256): 768;
// - sub-batch 2's hidden state and labels (256 each): 512;
// - computed: head^T (512), sub-batch 0's dh (256, being offloaded) and head gradient (512,
//   about to be accumulated), the loss so far (256), sub-batch 1's dlogits (384: 512), dh (256),
//   h^T (256) and head gradient (512): 3072;
// - two 256-byte ranges best fit left free between them: 512. In all 5120.
// REPORT-NEXT: device arena: 5.00 KiB (5120 bytes) at its peak, op 77 of the step (sl.matmul); parameters of epilogue, layers 1 on the device
// REPORT-NEXT: constants (prefetched once) 256 B (256 bytes)
// REPORT-NEXT: parameters (this group's, the next one's) 768 B (768 bytes)
// REPORT-NEXT: computed values (activations, gradients) 3.00 KiB (3072 bytes)
// REPORT-NEXT: prefetched boundary values and gradients 512 B (512 bytes)
// REPORT-NEXT: free ranges between them (fragmentation) 512 B (512 bytes)
//
// The host pool is laid out like the arena (best fit, 64-byte slots; inputs, parameters and
// constants keep theirs all step, every other slot is free after its last reader) and peaks in
// the epilogue's pass, at op 94, when it offloads the head's gradient: the ids and labels of the
// whole batch (144 B each: 192 + 192 at 0), the three host constants (two reshape shapes and
// 1/N, 64 each, at 384), the parameters (512 + 256 + 256 + 512 = 1536, at 576, up to 2112),
// per sub-batch the outputs of the prologue and of block 0, still to be prefetched in the
// backward, and the epilogue's input gradients (3 x 3 x 192 = 1728: the epilogue's three took
// the slots of block 1's outputs, free after the epilogue prefetched them), the loss (64) and
// the head's gradient (512): 4416, nothing free between them. The backward never goes higher:
// each block's input gradients take the slots of the outputs it has just prefetched, and each
// gradient fits in a free range. AdamW's fp32 master weights and moments (3 x 1536) are kept
// beside the pool.
// REPORT-NEXT: host memory: 8.81 KiB (9024 bytes)
// REPORT-NEXT: host pool 4.31 KiB (4416 bytes) at its peak, op 94 of the step (sl.offload)
// REPORT-NEXT: inputs (the whole batch) 384 B (384 bytes)
// REPORT-NEXT: constants 192 B (192 bytes)
// REPORT-NEXT: parameters 1.50 KiB (1536 bytes)
// REPORT-NEXT: offloaded boundaries and gradients (per group, sub-batch) 1.69 KiB (1728 bytes)
// REPORT-NEXT: loss 64 B (64 bytes)
// REPORT-NEXT: parameter gradients 512 B (512 bytes)
// REPORT-NEXT: free ranges between them (fragmentation) 0 B (0 bytes)
// REPORT-NEXT: optimizer state (fp32 master weights, 2 moments) 4.50 KiB (4608 bytes)
//
// Host to device, SpeedLoader: forward 512+3*48, 256+3*192 (twice); epilogue 512+3*240;
// backward 256+3*(192+192) (twice), 512+3*(48+192): 7600. Device to host: forward 3*192
// (three times); epilogue 3*192+512; backward 3*192+256 (twice), 512: 4992.
// Canonical moves the same boundaries and gradients but fetches and offloads every group's
// parameters once per sub-batch: 7600 + 2 x 2560 = 12720 and 4992 + 2 x 1536 = 8064.
// REPORT-NEXT: bytes moved per step:
// REPORT-NEXT: speedloader host->device 7.42 KiB (7600 bytes), device->host 4.88 KiB (4992 bytes)
// REPORT-NEXT: canonical host->device 12.42 KiB (12720 bytes), device->host 7.88 KiB (8064 bytes)
//
// Step: per phase the largest of compute, each link direction, where a phase's link carries
// its sub-batches' boundaries, the next phase's parameters and the previous phase's parameter
// gradients, and the pipeline of its sub-batches: one sub-batch's prefetch p, compute c and
// offload o, then N - 1 = 2 times the largest of them (link and compute are both 1000 per
// second here). Forward prologue: p, c, o = 48, 48, 192: 288 + 2 x 192 = 672 (the link: 576
// back, 3*48+256 in); blocks 192, 816, 192: 1200 + 2 x 816 = 2832 each (compute: 2448);
// epilogue 240, 6241, 192: 19155 (compute 18723); backward blocks 384, 1584, 192: 5328 each
// (compute 4752); prologue 240, 128, 0: 848 (the link in: 720). 36995, plus the first fetch
// and the last offload (512 each); compute 3 x (48 + 2 x 816 + 1537 + 4704 + 2 x 1584 + 128)
// = 33651.
// REPORT-NEXT: step time: 3.8019e+01 s predicted (3.3651e+01 s of compute)

// CHECK: module attributes {sl.plan = #sl.plan<boundary_activation_bytes = 192, live_blocks = 1, mode = speedloader, num_sub_batches = 3, parameter_bytes = 1536, predicted_device_bytes = 5120, predicted_host_bytes = 9024, predicted_host_pool_bytes = 4416, predicted_step_seconds = {{.+}}, sub_batch_size = 2>}

// Canonical runs one sub-batch at a time through the whole model, so no sub-batch's values
// overlap another's: the arena peaks in the epilogue at the constant, the same parameters
// (768), one sub-batch's hidden state and labels (512) and five computed buffers (1280), with a
// 256-byte hole: 3072. Its pool peaks at op 101, in sub-batch 1's epilogue, when it offloads
// that sub-batch's head gradient: above the inputs, constants and parameters (2112), sub-batch
// 1's prologue and block 0 outputs and its epilogue input gradient (3 x 192), sub-batch 0's
// gradients summed on the host (head 512, block 1 256, block 0 256, embedding 512) and the new
// head gradient (512) that is about to be added to them: 4736, and the 128 bytes left of the
// 192-byte slot sub-batch 0's block-1 input gradient left, after block 0's 256-byte gradient
// (which did not fit in it) took its place and more: 4864.
// CANONICAL: sl-plan: canonical, 3 sub-batches of 2 (batch 6)
// CANONICAL: device arena: 3.00 KiB (3072 bytes) at its peak
// CANONICAL: host pool 4.75 KiB (4864 bytes) at its peak, op 101 of the step (sl.offload)
// CANONICAL: parameter gradients 2.00 KiB (2048 bytes)
// CANONICAL: offloaded boundaries and gradients (per group, sub-batch) 576 B (576 bytes)
// CANONICAL: free ranges between them (fragmentation) 128 B (128 bytes)
// Its step is three passes of one sub-batch, each phase fetching its group's parameters again
// (in the phase before) and offloading its gradients (in the phase after). With one sub-batch a
// phase's prefetch, compute and offload do not overlap: per pass, forward prologue 48 + 48 + 192
// = 288, but the link in carries 48 + block 0's 256 = 304, and in passes 2 and 3 the link out
// carries 192 + the last pass's embedding gradient 512 = 704; blocks 192 + 816 + 192 = 1200
// each; epilogue 240 + 6241 + 192 = 6673; backward blocks 384 + 1584 + 192 = 2160 each; backward
// prologue 240 + 128 = 368, but in passes 1 and 2 the link in carries 240 + the next pass's
// embedding 512 = 752. 304 + 2 x 704 + 6 x 1200 + 3 x 6673 + 6 x 2160 + 2 x 752 + 368 = 43763,
// plus the first fetch and the last offload (512 each): 44787. SpeedLoader's 38019 is 15% less.
// CANONICAL: step time: 4.4787e+01 s predicted (3.3651e+01 s of compute)

// Two live blocks: the blocks are one group whose parameters (512) are fetched while the
// epilogue runs, so its peak grows by 256 to 5376; the boundary between the two blocks is never
// offloaded or prefetched (3 x 192 less to the device in the forward, 3 x 384 less in the
// backward, 3 x 192 less back), nor pooled on the host: at the pool's peak (the head gradient's
// offload again) only the prologue's outputs and the epilogue's input gradients are held
// (6 x 192), 576 less than with one live block: 3840.
// LIVE2: sl-plan: speedloader, 3 sub-batches of 2 (batch 6), live-blocks 2, world 1
// LIVE2: device arena: 5.25 KiB (5376 bytes) at its peak, {{.*}} parameters of epilogue, layers 0-1 on the device
// LIVE2: parameters (this group's, the next one's) 1.00 KiB (1024 bytes)
// LIVE2: host memory: 8.25 KiB (8448 bytes)
// LIVE2: host pool 3.75 KiB (3840 bytes) at its peak
// LIVE2: offloaded boundaries and gradients (per group, sub-batch) 1.12 KiB (1152 bytes)
// LIVE2: speedloader host->device 5.73 KiB (5872 bytes), device->host 3.75 KiB (3840 bytes)

// batch = sub-batch size (the bound 2) x num-sub-batches.
// BATCH: mode = speedloader, num_sub_batches = 3, {{.*}} sub_batch_size = 2

// Host memory, pool and optimizer state (4608), for N sub-batches: the pool's peak holds three
// 192-byte boundary slots per sub-batch (576) and the inputs (ids and labels, 48 bytes a
// sub-batch each, one slot each rounded up to 64): 8384 for 1, 8832 for 2, 9024 for 3 (the
// inputs of three fill their slots: 2 x 144 in 2 x 192), 9600 for 4. 3 fit in 9024 bytes (or
// 9599), 2 in one byte less.
// HOST3: num_sub_batches = 3
// HOST2: num_sub_batches = 2

// Past 16 sub-batches the pool is bounded, not laid out: from the step laid out at 16, whose
// pool peaks at the same offload, the constants, parameters and head gradient (2240) stay and
// the slots held then that prefetches read back, the boundaries and the loss (16 x 580), grow
// with N: 2240 + 20 x 580 = 13840; best fit left nothing free at 16, and the largest slot that
// may find no free range when the step grows (a 512-byte gradient) is added: 14352, rounded up
// to 64: 14400; plus the inputs of 20 sub-batches (2 x 960): 16320. sl-allocate lays the step
// out in 15744.
// BOUND: predicted_host_pool_bytes = 16320
// ALLOCATED: sl.host_pool_bytes = 15744 : i64

// A device budget of exactly the prediction fits: one sub-batch needs 2816 bytes.
// EXACT: predicted_device_bytes = 2816, {{.*}} sub_batch_size = 2

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

// A target's measured rates (MachineProfiles.cpp): h200's bf16 GEMM rate, pinned link and host
// AdamW; the host's AdamW over the 384 parameters (1536 fp32 bytes) at 2.9e9 a second.
// H200: link 55 GB/s per direction, 770 TFLOP/s, host AdamW 2.9 G parameters/s
// H200: host optimizer: 1.3241e-07 s
// A profile file (what sl-run --calibrate writes) names the plan's machine and gives its rates.
// PROFILE: machine calibrated-cpu (a test)
// PROFILE: link 2 GB/s per direction, 0.5 TFLOP/s, host AdamW 0.25 G parameters/s, 2 us per kernel
// Its cost per kernel: each sub-batch launches 24 kernels (every op but parameters, constants,
// reshapes and shapes): prologue 1, blocks 2 + 2, epilogue 2 + 6 (forward and backward), blocks'
// backward 5 + 5, prologue's 1; 3 sub-batches, 72 kernels, 144 us, most of this small step.
// PROFILE: step time: {{.*}} s predicted ({{.*}} s of compute, 1.4400e-04 s of it the fixed cost of 72 kernels)
// sl-run --calibrate measures this machine and writes such a file; sl-opt plans with its rates.
// MEASURED: "name": "calibrated-cpu",
// MEASURED: "link_gbps": {{[0-9.e+-]+}},
// MEASURED: "bf16_tflops": {{[0-9.e+-]+}},
// MEASURED: "f32_tflops": {{[0-9.e+-]+}},
// MEASURED: "host_optimizer_gparams": {{[0-9.e+-]+}},
// MEASURED: "kernel_overhead_us": {{[0-9.e+-]+}}
// MEASURED: sl-run: wrote the machine profile
// CALIBRATED: machine calibrated-cpu (sl-run --calibrate on the cpu backend, {{[0-9]+}} host threads: 512^3 f32 and 512^3 bf16 MATMUL
// CALIBRATED: link {{[0-9.e+-]+}} GB/s per direction, {{[0-9.e+-]+}} TFLOP/s, host AdamW {{[0-9.e+-]+}} G parameters/s
// Two ranks (sl-shard-parameters' step): each fetches its half of every group over the link and
// all-gathers the other half; it reduce-scatters the gradients and offloads its half. Of
// REPORT's 7600 bytes in, 2560 are parameter fetches (each group in the forward, all but the
// epilogue again in the backward): 7600 - 1280 = 6320; out, 4992 - 1536 / 2 = 4224; the
// collectives 1280 + 768 = 2048. Canonical fetches 3 x 2560 and offloads 3 x 1536: 12720 - 3840,
// 8064 - 2304, 3840 + 2304. Each rank's AdamW updates 192 of the 384 parameters.
// WORLD2: sl-plan: speedloader, 3 sub-batches of 2 (batch 6), live-blocks 1, world 2
// WORLD2: link 1e-06 GB/s per direction, 1e-09 TFLOP/s, host AdamW 1e-09 G parameters/s, collectives 2e-06 GB/s
// WORLD2: bytes moved per step by each rank:
// WORLD2-NEXT: speedloader host->device 6.17 KiB (6320 bytes), device->host 4.12 KiB (4224 bytes), collectives 2.00 KiB (2048 bytes)
// WORLD2-NEXT: canonical host->device 8.67 KiB (8880 bytes), device->host 5.62 KiB (5760 bytes), collectives 6.00 KiB (6144 bytes)
// WORLD2: host optimizer: 1.9200e+02 s (AdamW over this rank's 1/2 of the parameters, from the backward's start)
// Without a collective rate the collectives take no time: REPORT's step less half of the first
// fetch (512 / 2) and of the last offload (512 / 2).
// WORLD2FREE: link 1e-06 GB/s per direction, 1e-09 TFLOP/s{{$}}
// WORLD2FREE: step time: 3.7507e+01 s predicted (3.3651e+01 s of compute)
// A datasheet-derived preset leaves the host AdamW unmodelled.
// H100: machine h100-sxm (NVIDIA H100 SXM, PCIe 5 host link: datasheet peaks x the H200's measured fractions (not measured))
// H100: link 55 GB/s per direction, 771 TFLOP/s, collectives 387 GB/s{{$}}
// Each rate given overrides the target's: at 1 parameter a second, the optimizer's 384 s after
// the forward is the whole step.
// SLOWHOST: link 1e-06 GB/s per direction, 1e-09 TFLOP/s, host AdamW 1e-09 G parameters/s
// SLOWHOST: step time: {{.*}}e+02 s predicted
// SLOWHOST: host optimizer: 3.8400e+02 s
