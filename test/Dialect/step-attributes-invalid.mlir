// RUN: sl-opt %s -split-input-file -verify-diagnostics
// RUN: sl-opt %s -split-input-file -verify-diagnostics 2>&1 | FileCheck %s --check-prefix=VALID
// The scheduling passes' attributes are checked wherever they appear (StepAttributes.cpp): the
// plans' types and the ops they sit on, each field's range (the attributes' verifiers), the
// stream enum, offsets per result, events.

// VALID: func.func @planned
// VALID-SAME: sl.plan = #sl.plan<boundary_activation_bytes = 0, live_blocks = 2, mode = canonical, num_sub_batches = 3, predicted_step_seconds = 1.500000e+00, sub_batch_size = 2, world = 4>
func.func @planned(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<mode = canonical, num_sub_batches = 3, sub_batch_size = 2, live_blocks = 2, world = 4, boundary_activation_bytes = 0, predicted_step_seconds = 1.5>, sl.device_arena_bytes = 64 : i64} {
  %d = sl.prefetch %x {sl.stream = #sl.stream<h2d>, sl.offsets = array<i64: 0>, sl.record = 0 : i64} : tensor<4xf32>
  %h = sl.offload %d {sl.stream = #sl.stream<d2h>, sl.offsets = array<i64: 16>, sl.wait = array<i64: 0>} : tensor<4xf32>
  return %h : tensor<4xf32>
}

// -----

// VALID: module attributes {sl.bind_shapes = #sl.bind_shapes<batch = 2, seq = 7>, sl.generation = #sl.generation_plan<cache_len = 5, kv_cache_on_device = false, max_new_tokens = 2, max_prompt_len = 3, sub_batch_size = 2, vocab = 32>}
// VALID: func.func @generate
// VALID-SAME: sl.plan = #sl.generation_plan<batch = 4, cache_len = 5, max_new_tokens = 2, max_prompt_len = 3, num_sub_batches = 2, sub_batch_size = 2, vocab = 32, weights_on_device = true>
module attributes {sl.generation = #sl.generation_plan<sub_batch_size = 2, max_prompt_len = 3, max_new_tokens = 2, cache_len = 5, vocab = 32, kv_cache_on_device = false>, sl.bind_shapes = #sl.bind_shapes<batch = 2, seq = 7>} {
  func.func @generate(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.generation_plan<batch = 4, num_sub_batches = 2, sub_batch_size = 2, max_prompt_len = 3, max_new_tokens = 2, cache_len = 5, vocab = 32, weights_on_device = true>} {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{duplicate or unknown struct parameter name: num_subbatches}}
func.func @typo(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<num_subbatches = 3>} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{#sl.plan's num_sub_batches must be at least 1, got 0}}
func.func @zero(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<num_sub_batches = 0>} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{#sl.plan's predicted_host_bytes must be at least 0, got -1}}
module attributes {sl.plan = #sl.plan<predicted_host_bytes = -1>} {
}

// -----

// expected-error @+1 {{#sl.plan's predicted_step_seconds must be at least 0, got -2.5}}
module attributes {sl.plan = #sl.plan<predicted_step_seconds = -2.5>} {
}

// -----

// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse SL_PlanAttr parameter 'live_blocks'}}
func.func @text(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<live_blocks = "2">} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+2 {{mode must be speedloader or canonical, got 'fast'}}
// expected-error @+1 {{failed to parse SL_PlanAttr parameter 'mode'}}
func.func @mode(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<mode = fast>} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+2 {{expected true or false}}
// expected-error @+1 {{failed to parse SL_GenerationPlanAttr parameter 'kv_cache_on_device'}}
module attributes {sl.generation = #sl.generation_plan<cache_len = 5, kv_cache_on_device = 1, max_new_tokens = 2, max_prompt_len = 3, sub_batch_size = 2, vocab = 32>} {
}

// -----

// expected-error @+1 {{struct is missing required parameter: vocab}}
module attributes {sl.generation = #sl.generation_plan<cache_len = 5, max_new_tokens = 2, max_prompt_len = 3, sub_batch_size = 2>} {
}

// -----

// expected-error @+1 {{#sl.generation_plan's max_new_tokens must be at least 1, got 0}}
module attributes {sl.generation = #sl.generation_plan<cache_len = 5, max_new_tokens = 0, max_prompt_len = 3, sub_batch_size = 2, vocab = 32>} {
}

// -----

// expected-error @+1 {{sl.plan must be a #sl.plan, got "speedloader"}}
module attributes {sl.plan = "speedloader"} {
}

// -----

// expected-error @+1 {{sl.plan must be a #sl.plan, got {mode = "speedloader"}}
func.func @dictionary(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = {mode = "speedloader"}} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.plan of @generate must be a #sl.generation_plan, got #sl.plan<num_sub_batches = 1>}}
func.func @generate(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.plan = #sl.plan<num_sub_batches = 1>} {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.generation must be a #sl.generation_plan, got #sl.plan<num_sub_batches = 1>}}
module attributes {sl.generation = #sl.plan<num_sub_batches = 1>} {
}

// -----

func.func @not_a_step(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{sl.plan belongs on a builtin.module or a step function}}
  %d = sl.prefetch %x {sl.plan = #sl.plan<num_sub_batches = 1>} : tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// expected-error @+1 {{sl.generation belongs on a builtin.module}}
func.func @generation(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.generation = #sl.generation_plan<cache_len = 5, max_new_tokens = 2, max_prompt_len = 3, sub_batch_size = 2, vocab = 32>} {
  return %x : tensor<4xf32>
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

// expected-error @+1 {{duplicate or unknown struct parameter name: sequence}}
module attributes {sl.bind_shapes = #sl.bind_shapes<batch = 2, sequence = 8>} {
}

// -----

// expected-error @+1 {{#sl.bind_shapes's batch must be at least 1, got 0}}
module attributes {sl.bind_shapes = #sl.bind_shapes<batch = 0>} {
}

// -----

// expected-error @+1 {{sl.bind_shapes must be a #sl.bind_shapes, got {batch = 2 : i64}}
module attributes {sl.bind_shapes = {batch = 2 : i64}} {
}

// -----

// expected-error @+1 {{sl.bind_shapes belongs on a builtin.module}}
func.func @bound(%x: tensor<4xf32>) -> tensor<4xf32> attributes {sl.bind_shapes = #sl.bind_shapes<batch = 2>} {
  return %x : tensor<4xf32>
}
