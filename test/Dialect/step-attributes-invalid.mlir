// RUN: sl-opt %s -split-input-file -verify-diagnostics
// RUN: sl-opt %s -split-input-file -verify-diagnostics 2>&1 | FileCheck %s --check-prefix=VALID
// The scheduling passes' attributes are checked wherever they appear (StepAttributes.cpp): the
// plan's keys and their types, the stream enum, offsets per result, events.

// VALID: func.func @planned
// VALID-SAME: sl.plan = {boundary_activation_bytes = 0 : i64, live_blocks = 2 : i64, mode = "canonical", num_sub_batches = 3 : i64, predicted_step_seconds = 1.500000e+00 : f64, sub_batch_size = 2 : i64, world = 4 : i64}
func.func @planned(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = {mode = "canonical", num_sub_batches = 3 : i64, sub_batch_size = 2 : i64, live_blocks = 2 : i64, world = 4 : i64, boundary_activation_bytes = 0 : i64, predicted_step_seconds = 1.5 : f64}, sl.device_arena_bytes = 64 : i64} {
  %d = sl.prefetch %x {sl.stream = #sl.stream<h2d>, sl.offsets = array<i64: 0>, sl.record = 0 : i64} : tensor<4xf32>
  %h = sl.offload %d {sl.stream = #sl.stream<d2h>, sl.offsets = array<i64: 16>, sl.wait = array<i64: 0>} : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.plan has no key 'num_subbatches' (StepAttributes.h lists the keys)}}
func.func @typo(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = {num_subbatches = 3 : i64}} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.plan's num_sub_batches must be at least 1, got 0 : i64}}
func.func @zero(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = {num_sub_batches = 0 : i64}} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.plan's live_blocks must be an i64, got "2"}}
func.func @text(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = {live_blocks = "2"}} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.plan's mode must be "speedloader", "canonical" or "generate", got "fast"}}
func.func @mode(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = {mode = "fast"}} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.generation's kv_cache_on_device must be a bool, got 1 : i64}}
module attributes {sl.generation = {kv_cache_on_device = 1 : i64}} {
}

// -----

// expected-error @+1 {{sl.plan must be a dictionary, got "speedloader"}}
module attributes {sl.plan = "speedloader"} {
}

// -----

func.func @offsets(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sl.offsets holds 2 offsets for 1 results}}
  %d = sl.prefetch %x {sl.offsets = array<i64: 0, 16>} : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

func.func @wait(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sl.wait holds -1; offsets and events are at least 0}}
  %d = sl.prefetch %x {sl.wait = array<i64: -1>} : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

func.func @record(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sl.record must be a non-negative integer, got "e0"}}
  %d = sl.prefetch %x {sl.record = "e0"} : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.bind_shapes has no key 'sequence' (it has batch and seq)}}
module attributes {sl.bind_shapes = {batch = 2 : i64, sequence = 8 : i64}} {
}

// -----

// expected-error @+1 {{sl.bind_shapes's batch must be an i64 of at least 1, got 0 : i64}}
module attributes {sl.bind_shapes = {batch = 0 : i64}} {
}

// -----

// expected-error @+1 {{sl.bind_shapes belongs on a builtin.module}}
func.func @bound(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.bind_shapes = {batch = 2 : i64}} {
  return %x : tensor<4xf32>
}
