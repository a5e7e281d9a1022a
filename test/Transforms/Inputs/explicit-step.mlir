// A hand-written explicit step (what sl-schedule-subbatches writes): two sub-batches of one
// input, one parameter fetched once, gradients accumulated on the device, offloaded once,
// accumulated on the host, and an optimizer step. The assign-streams, allocate and insert-events
// tests run on it.
func.func @step(%x: tensor<2x4xf32> {sl.name = "x"}) -> (tensor<4x4xf32> {sl.name = "grad:w"}) attributes {sl.plan = #sl.plan<mode = speedloader>} {
  %w = sl.param "w" : tensor<4x4xf32>
  %x0 = sl.sub_batch %x {index = 0 : i64, count = 2 : i64} : tensor<2x4xf32> -> tensor<1x4xf32>
  %x1 = sl.sub_batch %x {index = 1 : i64, count = 2 : i64} : tensor<2x4xf32> -> tensor<1x4xf32>
  %wd = sl.fetch_params %w {group = "g"} : tensor<4x4xf32>
  %d0 = sl.prefetch %x0 : tensor<1x4xf32>
  %d1 = sl.prefetch %x1 : tensor<1x4xf32>
  %y0 = sl.matmul %d0, %wd : tensor<1x4xf32>, tensor<4x4xf32> -> tensor<1x4xf32>
  %t0 = sl.transpose %y0 [1, 0] : tensor<1x4xf32> -> tensor<4x1xf32>
  %g0 = sl.matmul %t0, %y0 : tensor<4x1xf32>, tensor<1x4xf32> -> tensor<4x4xf32>
  %y1 = sl.matmul %d1, %wd : tensor<1x4xf32>, tensor<4x4xf32> -> tensor<1x4xf32>
  %t1 = sl.transpose %y1 [1, 0] : tensor<1x4xf32> -> tensor<4x1xf32>
  %g1 = sl.matmul %t1, %y1 : tensor<4x1xf32>, tensor<1x4xf32> -> tensor<4x4xf32>
  %acc = sl.accumulate %g0, %g1 : tensor<4x4xf32>
  %h = sl.offload %acc : tensor<4x4xf32>
  %h2 = sl.accumulate %h, %h : tensor<4x4xf32>
  %loss = sl.constant dense<0.0> : tensor<f32>
  sl.optimizer_step %loss grads(%h2) params(%w) : tensor<f32>, (tensor<4x4xf32>), (tensor<4x4xf32>)
  return %h2 : tensor<4x4xf32>
}

// Not an explicit step (no sl.plan): left alone.
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sl.relu %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
