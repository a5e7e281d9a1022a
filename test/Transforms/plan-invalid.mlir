// RUN: rm -rf %t && split-file %s %t
// RUN: sl-opt %t/device.mlir --sl-plan="device-memory=1279" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/host-fixed.mlir --sl-plan="num-sub-batches=2 host-memory=639" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/host-free.mlir --sl-plan="host-memory=575" -verify-diagnostics -o /dev/null
// The budgets are exact: one byte more than each of the three above plans, at the need it named.
// RUN: sl-opt %t/device.mlir --sl-plan="device-memory=1280" | FileCheck %s --check-prefix=DEVICE1280
// RUN: sl-opt %t/host-fixed.mlir --sl-plan="num-sub-batches=2 host-memory=640" | FileCheck %s --check-prefix=HOST640
// RUN: sl-opt %t/host-free.mlir --sl-plan="host-memory=576" | FileCheck %s --check-prefix=HOST576
// DEVICE1280: sl.plan = #sl.plan<{{.*}}predicted_device_bytes = 1280
// HOST640: sl.plan = #sl.plan<{{.*}}num_sub_batches = 2{{.*}}predicted_host_bytes = 640
// HOST576: sl.plan = #sl.plan<{{.*}}num_sub_batches = 1{{.*}}predicted_host_bytes = 576
// RUN: sl-opt %t/inconsistent-batch.mlir --sl-plan="batch=6 sub-batch-size=2 num-sub-batches=2" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/batch-not-multiple.mlir --sl-plan="batch=5" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bound-elsewhere.mlir --sl-plan="sub-batch-size=4" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-mode.mlir --sl-plan="mode=fast" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-target.mlir --sl-plan="target=tpu-v9" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-rate.mlir --sl-plan="target=h200 tflops=-1" -verify-diagnostics -o /dev/null
// A profile file (target=FILE.json) that is missing, not JSON, or not a profile.
// RUN: cp %t/bad-target.mlir %t/missing-profile.mlir
// RUN: sed -i 's/^\/\/ expected-error .*$/\/\/ expected-error @+1 {{sl-plan: cannot read the machine profile}}/' %t/missing-profile.mlir
// RUN: sl-opt %t/missing-profile.mlir --sl-plan="target=%t/none.json" -verify-diagnostics -o /dev/null
// RUN: sed -i 's/^\/\/ expected-error .*$/\/\/ expected-error @+1 {{is not JSON}}/' %t/missing-profile.mlir
// RUN: sl-opt %t/missing-profile.mlir --sl-plan="target=%t/not-json.json" -verify-diagnostics -o /dev/null
// RUN: sed -i 's/^\/\/ expected-error .*$/\/\/ expected-error @+1 {{unknown key "tflops" (a profile has name, source, link_gbps, bf16_tflops, f32_tflops, host_optimizer_gparams, kernel_overhead_us and collective_gbps)}}/' %t/missing-profile.mlir
// RUN: sl-opt %t/missing-profile.mlir --sl-plan="target=%t/unknown-key.json" -verify-diagnostics -o /dev/null
// RUN: sed -i 's/^\/\/ expected-error .*$/\/\/ expected-error @+1 {{"f32_tflops" must be a positive number}}/' %t/missing-profile.mlir
// RUN: sl-opt %t/missing-profile.mlir --sl-plan="target=%t/negative.json" -verify-diagnostics -o /dev/null
// RUN: sed -i 's/^\/\/ expected-error .*$/\/\/ expected-error @+1 {{"bf16_tflops" is missing}}/' %t/missing-profile.mlir
// RUN: sl-opt %t/missing-profile.mlir --sl-plan="target=%t/incomplete.json" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-bytes.mlir --sl-plan="device-memory=lots" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-unit.mlir --sl-plan="host-memory=16GiBs" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/too-many-live-blocks.mlir --sl-plan="live-blocks=2" -verify-diagnostics -o /dev/null
// A module without stages is compiled to stages by stage-pipeline (plan-pipelines.mlir); an empty
// one measures the module as it is, which must then have stages. A module with stages is measured
// as it is: its shapes must be bound, its stages have backward functions.
// RUN: sl-opt %t/no-stages.mlir --sl-plan="stage-pipeline=builtin.module()" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/unbound.mlir --sl-plan -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/no-blocks.mlir --sl-plan -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/no-backward.mlir --sl-plan -verify-diagnostics -o /dev/null

// Every error sl-plan reports, one file each (split-file), as -verify-diagnostics sees it.
// The model of the budget cases: one block (64 parameter bytes) and a cross-entropy epilogue,
// bound at sub-batch size 2; of the option cases, the block alone. Memory is the step laid out as
// sl-allocate lays it out (plan.mlir works one through). With one sub-batch the arena peaks in
// the epilogue at five 256-byte buffers (a prefetched constant, the prefetched boundary and
// labels, the loss and its gradient): 1280 bytes. The host pool (laid out like the arena, a
// slot free after its last reader) peaks when the epilogue offloads the loss: a 64-byte slot for
// each input (x 32 B, labels 16 B), the constant, the parameters, the epilogue's input gradient
// (in the slot of the block's output, free once the epilogue prefetched it) and the loss: 384
// bytes, and AdamW's 192 besides: 576 (the parameter gradient comes later, in a free slot). A
// second sub-batch adds one 64-byte slot (the block outputs of both sub-batches, then both
// input gradients, are live at once): 640.

//--- device.mlir
// expected-error @+1 {{sl-plan: sub-batch-size=2 with live-blocks=1 needs 1.25 KiB (1280 bytes) of device memory, more than the budget of 1.25 KiB (1279 bytes)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func private @epilogue(%y: tensor<2x4xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
    %loss = sl.cross_entropy %y, %labels : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func private @epilogue_backward(%y: tensor<2x4xf32>, %labels: tensor<2xi64>, %dloss: tensor<f32>) -> tensor<2x4xf32> attributes {sl.backward_of = @epilogue} {
    %dy = sl.cross_entropy_grad %labels, %dloss, %y : (tensor<2xi64>, tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %dy : tensor<2x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}, %labels: tensor<2xi64> {sl.dims = ["batch"]}) -> (tensor<f32> {sl.name = "loss"}) {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %loss = sl.layer @epilogue(%y, %labels) params() {index = 0 : i64, stage = "epilogue"} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- host-fixed.mlir
// expected-error @+1 {{sl-plan: num-sub-batches=2 of sub-batch-size=2 needs 640 B (640 bytes) of host memory, more than the budget of 639 B (639 bytes)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func private @epilogue(%y: tensor<2x4xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
    %loss = sl.cross_entropy %y, %labels : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func private @epilogue_backward(%y: tensor<2x4xf32>, %labels: tensor<2xi64>, %dloss: tensor<f32>) -> tensor<2x4xf32> attributes {sl.backward_of = @epilogue} {
    %dy = sl.cross_entropy_grad %labels, %dloss, %y : (tensor<2xi64>, tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %dy : tensor<2x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}, %labels: tensor<2xi64> {sl.dims = ["batch"]}) -> (tensor<f32> {sl.name = "loss"}) {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %loss = sl.layer @epilogue(%y, %labels) params() {index = 0 : i64, stage = "epilogue"} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- host-free.mlir
// expected-error @+1 {{sl-plan: num-sub-batches=1 of sub-batch-size=2 needs 576 B (576 bytes) of host memory, more than the budget of 575 B (575 bytes)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func private @epilogue(%y: tensor<2x4xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
    %loss = sl.cross_entropy %y, %labels : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
  func.func private @epilogue_backward(%y: tensor<2x4xf32>, %labels: tensor<2xi64>, %dloss: tensor<f32>) -> tensor<2x4xf32> attributes {sl.backward_of = @epilogue} {
    %dy = sl.cross_entropy_grad %labels, %dloss, %y : (tensor<2xi64>, tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %dy : tensor<2x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}, %labels: tensor<2xi64> {sl.dims = ["batch"]}) -> (tensor<f32> {sl.name = "loss"}) {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %loss = sl.layer @epilogue(%y, %labels) params() {index = 0 : i64, stage = "epilogue"} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

//--- inconsistent-batch.mlir
// expected-error @+1 {{sl-plan: batch=6 is not sub-batch-size=2 x num-sub-batches=2}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- batch-not-multiple.mlir
// expected-error @+1 {{sl-plan: batch=5 is not a multiple of sub-batch-size=2}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- bound-elsewhere.mlir
// expected-error @+1 {{sl-plan: the module is bound at sub-batch size 2, not 4; bind shapes at the sub-batch size}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- bad-mode.mlir
// expected-error @+1 {{sl-plan: mode must be speedloader or canonical, not 'fast'}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- bad-target.mlir
// expected-error @+1 {{sl-plan: target must be one of cpu, h200, h100-sxm, h100-pcie, a100 or a profile file FILE.json (sl-run --calibrate writes one), not 'tpu-v9' (or give link-gbps= and tflops=)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- bad-rate.mlir
// expected-error @+1 {{sl-plan: link-gbps, tflops and optimizer-gparams must be positive (0: the target's)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- bad-bytes.mlir
// expected-error @+1 {{sl-plan: device-memory='lots' is not a byte count (a number, optionally with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- bad-unit.mlir
// expected-error @+1 {{sl-plan: host-memory='16GiBs' is not a byte count (a number, optionally with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- too-many-live-blocks.mlir
// expected-error @+1 {{sl-plan: live-blocks=2 but the model has 1 blocks}}
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func private @block_backward(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}, %dy: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4x4xf32>) attributes {sl.backward_of = @block} {
    %wt = sl.transpose %w [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
    %dx = sl.matmul %dy, %wt : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %xt = sl.transpose %x [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
    %dw = sl.matmul %xt, %dy : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    return %dx, %dw : tensor<2x4xf32>, tensor<4x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- no-stages.mlir
module {
  // expected-error @+1 {{sl-plan: @forward calls no stages; run sl-partition-layers and sl-autodiff first (--sl-train runs sl-plan before binding shapes)}}
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

//--- unbound.mlir
module {
  func.func private @block(%x: tensor<?x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<?x4xf32> {
    %y = sl.matmul %x, %w : tensor<?x4xf32>, tensor<4x4xf32> -> tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
  // expected-error @+1 {{sl-plan: the batch dimension of @forward's input #0 is not bound; run sl-bind-shapes first}}
  func.func @forward(%x: tensor<?x4xf32> {sl.dims = ["batch", ""]}) -> tensor<?x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
    return %y : tensor<?x4xf32>
  }
}

//--- no-blocks.mlir
// The default stage-pipeline (--sl-train's) fails on a model with no blocks to partition.
// expected-error @+1 {{sl-plan: compiling a copy of the model to stages to measure it failed (see the errors above)}}
module {
  // expected-error @+1 {{sl-partition-layers: found no transformer blocks}}
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    return %x : tensor<2x4xf32>
  }
}

//--- no-backward.mlir
module {
  func.func private @block(%x: tensor<2x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x4xf32> {
    %y = sl.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
  func.func @forward(%x: tensor<2x4xf32> {sl.dims = ["batch", ""]}) -> tensor<2x4xf32> {
    %w = sl.param "layers.0.w" : tensor<4x4xf32>
    // expected-error @+1 {{sl-plan: stage @block has no backward function; run sl-autodiff first}}
    %y = sl.layer @block(%x) params(%w) {index = 0 : i64, stage = "block"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

//--- not-json.json
{"link_gbps": 25,
//--- unknown-key.json
{"link_gbps": 25, "bf16_tflops": 1, "f32_tflops": 1, "tflops": 1}
//--- negative.json
{"link_gbps": 25, "bf16_tflops": 1, "f32_tflops": -1}
//--- incomplete.json
{"link_gbps": 25, "f32_tflops": 1}
