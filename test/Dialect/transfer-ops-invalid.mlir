// RUN: sl-opt %s -split-input-file -verify-diagnostics

func.func @sub_batch_index(%x: tensor<6x2xf32>) {
  // expected-error @+1 {{index 3 must be in [0, count) with count >= 1, got count 3}}
  %s = sl.sub_batch %x {index = 3 : i64, count = 3 : i64} : tensor<6x2xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @sub_batch_shape(%x: tensor<6x2xf32>) {
  // expected-error @+1 {{result 'tensor<3x2xf32>' must be 'tensor<6x2xf32>' with dimension 0 divided by 3}}
  %s = sl.sub_batch %x {index = 0 : i64, count = 3 : i64} : tensor<6x2xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @fetch_not_a_param(%x: tensor<4xf32>) {
  // expected-error @+1 {{operands must be sl.param values (parameters live in the host pool)}}
  %d = sl.fetch_params %x {group = "g"} : tensor<4xf32>
  return
}

// -----

func.func @optimizer_counts(%loss: tensor<f32>, %g: tensor<4xf32>) {
  %w = sl.param "w" : tensor<4xf32>
  // expected-error @+1 {{needs one gradient per parameter and at least one, got 2 gradients for 1 parameters}}
  sl.optimizer_step %loss grads(%g, %g) params(%w) : tensor<f32>, (tensor<4xf32>, tensor<4xf32>), (tensor<4xf32>)
  return
}

// -----

func.func @optimizer_loss(%loss: tensor<2xf32>, %g: tensor<4xf32>) {
  %w = sl.param "w" : tensor<4xf32>
  // expected-error @+1 {{loss must be a scalar, got 'tensor<2xf32>'}}
  sl.optimizer_step %loss grads(%g) params(%w) : tensor<2xf32>, (tensor<4xf32>), (tensor<4xf32>)
  return
}

// -----

func.func @optimizer_types(%loss: tensor<f32>, %g: tensor<2xf32>) {
  %w = sl.param "w" : tensor<4xf32>
  // expected-error @+1 {{gradient 'tensor<2xf32>' does not match its parameter 'tensor<4xf32>'}}
  sl.optimizer_step %loss grads(%g) params(%w) : tensor<f32>, (tensor<2xf32>), (tensor<4xf32>)
  return
}

// -----

func.func @gather_world(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{shard 'tensor<2x4xf32>' must be 'tensor<6x4xf32>' with dimension 0 divided by the world size 2}}
  %y = sl.all_gather %x {world = 2 : i64} : tensor<2x4xf32> -> tensor<6x4xf32>
  return
}

// -----

func.func @scatter_world(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{world must be at least 1, got 0}}
  %y = sl.reduce_scatter %x {world = 0 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @shard_size() {
  %w = sl.param "w" : tensor<4x4xf32>
  %b = sl.param "b" : tensor<3xf32>
  // w takes elements 0-15, b 16-18; padded to 24 (a multiple of 4 x 2): 12 per rank.
  // expected-error @+1 {{result 'tensor<10xf32>' must be tensor<12xf32>: the flattened group has 24 elements, split over 2 ranks}}
  %s = sl.param_shard %w, %b {group = "g", world = 2 : i64} : tensor<4x4xf32>, tensor<3xf32> -> tensor<10xf32>
  return
}

// -----

func.func @shard_world() {
  %w = sl.param "w" : tensor<4xf32>
  // expected-error @+1 {{world must be at least 2, got 1}}
  %s = sl.param_shard %w {group = "g", world = 1 : i64} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @shard_of_a_value(%w: tensor<4xf32>) {
  // expected-error @+1 {{operands must be sl.param values}}
  %s = sl.param_shard %w {group = "g", world = 2 : i64} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @view_outside(%x: tensor<8xf32>) {
  // expected-error @+1 {{elements [4, 10) are outside the source's 8}}
  %v = sl.view %x {offset = 4 : i64} : tensor<8xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @view_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{result element type 'i64' must be the source's, 'f32'}}
  %v = sl.view %x {offset = 0 : i64} : tensor<8xf32> -> tensor<8xi64>
  return
}

// -----

func.func @step_of_a_value(%loss: tensor<f32>, %g: tensor<4xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{params must be sl.param or sl.param_shard values}}
  sl.optimizer_step %loss grads(%g) params(%w) : tensor<f32>, (tensor<4xf32>), (tensor<4xf32>)
  return
}
