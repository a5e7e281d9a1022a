// RUN: sl-opt %s -split-input-file --sl-shard-parameters -verify-diagnostics

// expected-error @+1 {{sl-shard-parameters: no @train_step or planned @infer_step; run sl-schedule-subbatches first}}
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

// A shard holds AdamW's f32 master weights: a parameter needs f32 values behind it.
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<2xf64> {sl.name = "grad:w"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  // expected-error @+1 {{sl-shard-parameters: parameter 'w' is 'tensor<2xf64>' with no f32 values behind it (its model file stores it so, or it is inline in the module); sharding (world > 1) keeps f32 master weights in the shards, read from an f32 model file (export the model in f32: precision=bf16 then computes in bf16)}}
  %w = sl.param "w" : tensor<2xf64>
  %d = sl.fetch_params %w {group = "epilogue"} : tensor<2xf64>
  %l = sl.reduce_sum %d : (tensor<2xf64>) -> tensor<f64>
  %c = sl.cast %l to f32 : tensor<f64> -> tensor<f32>
  %loss = sl.offload %c : tensor<f32>
  %g = sl.offload %d : tensor<2xf64>
  return %loss, %g : tensor<f32>, tensor<2xf64>
}

// -----

// expected-error @+1 {{sl-shard-parameters: result 1 of @train_step must be 'grad:w', the gradient of its parameter 0}}
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<2xf32> {sl.name = "grad_shard:epilogue"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  %w = sl.param "w" : tensor<2xf32>
  %d = sl.fetch_params %w {group = "epilogue"} : tensor<2xf32>
  %l = sl.reduce_sum %d : (tensor<2xf32>) -> tensor<f32>
  %loss = sl.offload %l : tensor<f32>
  %g = sl.offload %d : tensor<2xf32>
  return %loss, %g : tensor<f32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{sl-shard-parameters: the gradient of parameter 'w' is not a sum of offloaded device gradients}}
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<2xf32> {sl.name = "grad:w"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  %w = sl.param "w" : tensor<2xf32>
  %d = sl.fetch_params %w {group = "epilogue"} : tensor<2xf32>
  %l = sl.reduce_sum %d : (tensor<2xf32>) -> tensor<f32>
  %loss = sl.offload %l : tensor<f32>
  return %loss, %x : tensor<f32>, tensor<2xf32>
}

// -----

// A pass offloads the gradients of the parameters its group fetched, all of them.
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<2xf32> {sl.name = "grad:v"}, tensor<2xf32> {sl.name = "grad:w"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  %v = sl.param "v" : tensor<2xf32>
  %w = sl.param "w" : tensor<2xf32>
  %d:2 = sl.fetch_params %v, %w {group = "epilogue"} : tensor<2xf32>, tensor<2xf32>
  %l = sl.reduce_sum %d#0 : (tensor<2xf32>) -> tensor<f32>
  %loss = sl.offload %l : tensor<f32>
  // expected-error @+1 {{sl-shard-parameters: these gradients are of no group's parameters: no earlier sl.fetch_params fetches exactly the parameters whose gradients the pass offloads}}
  %gv = sl.offload %d#0 : tensor<2xf32>
  %p = sl.prefetch %x : tensor<2xf32>
  %gw = sl.offload %d#1 : tensor<2xf32>
  return %loss, %gv, %gw : tensor<f32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{sl-shard-parameters: @train_step is already sharded}}
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<4xf32> {sl.name = "grad_shard:epilogue"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  %w = sl.param "w" : tensor<8xf32>
  %s = sl.param_shard %w {group = "epilogue", world = 2 : i64} : tensor<8xf32> -> tensor<4xf32>
  %c = sl.constant dense<1.0> : tensor<f32>
  return %c, %s : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{sl-shard-parameters: sl.plan must name the step's mode, 'speedloader' or 'canonical'}}
func.func @train_step(%x: tensor<2xf32>) -> (tensor<f32> {sl.name = "loss"})
    attributes {sl.plan = #sl.plan<world = 2>} {
  %c = sl.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// A speedloader step does one backward pass per group: a second one means the plan's mode is not
// the step's.
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<4xf32> {sl.name = "grad:w"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  %w = sl.param "w" : tensor<4xf32>
  %d0 = sl.fetch_params %w {group = "epilogue"} : tensor<4xf32>
  %l = sl.reduce_sum %d0 : (tensor<4xf32>) -> tensor<f32>
  %loss = sl.offload %l : tensor<f32>
  %g0 = sl.offload %d0 : tensor<4xf32>
  %d1 = sl.fetch_params %w {group = "epilogue"} : tensor<4xf32>
  // expected-error @+1 {{sl-shard-parameters: more backward passes offload gradients of the shard of 'epilogue' than groups read it (is sl.plan's mode the step's?)}}
  %g1 = sl.offload %d1 : tensor<4xf32>
  %g = sl.accumulate %g0, %g1 : tensor<4xf32>
  return %loss, %g : tensor<f32>, tensor<4xf32>
}

// -----

// Two groups read `e`; only one backward pass offloads its gradient.
// expected-error @+1 {{sl-shard-parameters: the shard of 'prologue' is never stepped: fewer backward passes offload its gradients than groups read it (is sl.plan's mode the step's?)}}
func.func @train_step(%x: tensor<4xf32>) -> (tensor<f32> {sl.name = "loss"}, tensor<4xf32> {sl.name = "grad:e"})
    attributes {sl.plan = #sl.plan<mode = speedloader, world = 2>} {
  %e = sl.param "e" : tensor<4xf32>
  %d0 = sl.fetch_params %e {group = "prologue"} : tensor<4xf32>
  %d1 = sl.fetch_params %e {group = "epilogue"} : tensor<4xf32>
  %l = sl.reduce_sum %d1 : (tensor<4xf32>) -> tensor<f32>
  %loss = sl.offload %l : tensor<f32>
  %g = sl.offload %d1 : tensor<4xf32>
  return %loss, %g : tensor<f32>, tensor<4xf32>
}
