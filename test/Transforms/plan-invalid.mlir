// RUN: rm -rf %t && split-file %s %t
// RUN: sl-opt %t/device.mlir --sl-plan="device-memory=319" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/host-fixed.mlir --sl-plan="num-sub-batches=2 host-memory=383" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/host-free.mlir --sl-plan="host-memory=351" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/inconsistent-batch.mlir --sl-plan="batch=6 sub-batch-size=2 num-sub-batches=2" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/batch-not-multiple.mlir --sl-plan="batch=5" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bound-elsewhere.mlir --sl-plan="sub-batch-size=4" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-mode.mlir --sl-plan="mode=fast" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-bytes.mlir --sl-plan="device-memory=lots" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/bad-unit.mlir --sl-plan="host-memory=16GiBs" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/too-many-live-blocks.mlir --sl-plan="live-blocks=2" -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/no-stages.mlir --sl-plan -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/unbound.mlir --sl-plan -verify-diagnostics -o /dev/null
// RUN: sl-opt %t/no-backward.mlir --sl-plan -verify-diagnostics -o /dev/null

// Every error sl-plan reports, one file each (split-file), as -verify-diagnostics sees it.
// The model of the budget and option cases: one block (64 parameter bytes) bound at sub-batch
// size 2. Its backward holds parameters and gradients (64 + 64), x and dy for two sub-batches
// (64) and a 128 B workspace: 320 device bytes. The host holds parameters, gradients and AdamW
// state (64 + 64 + 192) and x for every sub-batch (32 each).

//--- device.mlir
// expected-error @+1 {{sl-plan: sub-batch-size=2 with live-blocks=1 needs 320 B (320 bytes) of device memory, more than the budget of 319 B (319 bytes)}}
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

//--- host-fixed.mlir
// expected-error @+1 {{sl-plan: num-sub-batches=2 of sub-batch-size=2 needs 384 B (384 bytes) of host memory, more than the budget of 383 B (383 bytes)}}
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

//--- host-free.mlir
// expected-error @+1 {{sl-plan: num-sub-batches=1 of sub-batch-size=2 needs 352 B (352 bytes) of host memory, more than the budget of 351 B (351 bytes)}}
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
  // expected-error @+1 {{sl-plan: the batch dimension of @forward's input #0 is not bound; run sl-bind-shapes first}}
  func.func @forward(%x: tensor<?x4xf32> {sl.dims = ["batch", ""]}) -> tensor<?x4xf32> {
    return %x : tensor<?x4xf32>
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
