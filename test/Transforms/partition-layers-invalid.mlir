// RUN: sl-opt %s -split-input-file --sl-partition-layers -verify-diagnostics

// expected-error @+1 {{sl-partition-layers: found no transformer blocks (no node scope or parameter name like 'layers.N'); nothing to partition}}
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w = sl.param "fc.weight" : tensor<8x8xf32>
  %m = sl.matmul %x, %w : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  return %m : tensor<2x8xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
  %m1 = sl.matmul %x, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{sl-partition-layers: this operation of stage 0 reads a value of the later stage 1; the layers are not in data-flow order}}
  %m0 = sl.matmul %m1, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  return %m0 : tensor<2x8xf32>
}
