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
