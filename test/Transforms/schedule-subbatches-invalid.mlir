// Two ranks: the errors are the same for one rank or several (sharding, sl-shard-parameters,
// checks the parameters: shard-parameters-invalid.mlir).
// RUN: sl-opt %s -split-input-file --sl-schedule-subbatches="world=2" -verify-diagnostics
// Option errors, on the valid module of schedule-subbatches.mlir:
// RUN: not sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="mode=zero3" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="num-sub-batches=2 batch=5" 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="live-blocks=-1" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not sl-opt %S/schedule-subbatches.mlir --sl-autodiff --sl-schedule-subbatches="world=-2" 2>&1 | FileCheck %s --check-prefix=WORLD

// MODE: sl-schedule-subbatches: mode must be 'speedloader' or 'canonical', got 'zero3'
// BATCH: sl-schedule-subbatches: batch=5 is not num-sub-batches x sub-batch size = 2 x 2; give a batch that splits into equal sub-batches
// COUNT: sl-schedule-subbatches: num-sub-batches and live-blocks must be at least 1, got 0 and -1
// WORLD: sl-schedule-subbatches: world must be at least 1, got -2

// expected-error @+1 {{sl-schedule-subbatches: @forward must return exactly the 'loss' (run sl-append-loss without keep-logits)}}
func.func @forward(%x: tensor<4xf32>) -> (tensor<4xf32> {sl.name = "logits"}) {
  return %x : tensor<4xf32>
}

// -----

func.func private @block(%x: tensor<2xf32>) -> tensor<f32> {
  %c = sl.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}
func.func @forward(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}) {
  // expected-error @+1 {{sl-schedule-subbatches: no @block_backward; run sl-autodiff first}}
  %y = sl.layer @block(%x) params() {index = 0 : i64, stage = "block"} : (tensor<2xf32>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

// expected-error @+1 {{sl-schedule-subbatches: @forward calls no stages; run sl-partition-layers first}}
func.func @forward(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}) {
  %c = sl.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

func.func @forward(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}) {
  // expected-error @+1 {{sl-schedule-subbatches: @forward must hold only sl.param and sl.layer (run sl-partition-layers first), found 'sl.reduce_sum'}}
  %s = sl.reduce_sum %x : (tensor<2xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

