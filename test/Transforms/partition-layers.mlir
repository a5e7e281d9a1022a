// RUN: sl-opt %s -split-input-file --sl-partition-layers | FileCheck %s

// Blocks found from exporter name scopes; identical blocks share one body function, each
// sl.layer passing its own parameters; the embedding and the head become prologue and epilogue.
// CHECK-LABEL: func.func private @prologue
// CHECK-SAME: (%{{.+}}: tensor<2x4xi64>, %{{.+}}: tensor<16x8xf32> {sl.param}) -> tensor<2x4x8xf32>
// CHECK: sl.gather
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%[[H:.+]]: tensor<2x4x8xf32>, %[[W:.+]]: tensor<8x8xf32> {sl.param}) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[M:.+]] = sl.matmul %[[H]], %[[W]]
// CHECK-NEXT: %[[R:.+]] = sl.relu %[[M]]
// CHECK-NEXT: %[[O:.+]] = sl.add %[[H]], %[[R]]
// CHECK-NEXT: return %[[O]]
// CHECK-NOT: func.func private @block_1
// CHECK-LABEL: func.func private @epilogue
// CHECK: sl.matmul
// CHECK-LABEL: func.func @forward
// CHECK: %[[E:.+]] = sl.param "embed"
// CHECK: %[[W0:.+]] = sl.param "layers.0.w"
// CHECK: %[[W1:.+]] = sl.param "layers.1.w"
// CHECK: %[[HEAD:.+]] = sl.param "head"
// CHECK: %[[P:.+]] = sl.layer @prologue(%arg0) params(%[[E]]) {index = 0 : i64, stage = "prologue"}
// CHECK-NEXT: %[[B0:.+]] = sl.layer @block(%[[P]]) params(%[[W0]]) {index = 0 : i64, stage = "block"}
// CHECK-NEXT: %[[B1:.+]] = sl.layer @block(%[[B0]]) params(%[[W1]]) {index = 1 : i64, stage = "block"}
// CHECK-NEXT: %[[Y:.+]] = sl.layer @epilogue(%[[B1]]) params(%[[HEAD]]) {index = 0 : i64, stage = "epilogue"}
// CHECK-NEXT: return %[[Y]]
func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x16xf32> {
  %e = sl.param "embed" : tensor<16x8xf32>
  %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
  %head = sl.param "head" : tensor<8x16xf32>
  %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<2x4xi64> -> tensor<2x4x8xf32> loc("/model/embed_tokens/Gather")
  %m0 = sl.matmul %h, %w0 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("/model/layers.0/mlp/MatMul")
  %r0 = sl.relu %m0 : tensor<2x4x8xf32> loc("/model/layers.0/mlp/Relu")
  %h0 = sl.add %h, %r0 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32> loc("/model/layers.0/Add")
  %m1 = sl.matmul %h0, %w1 : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32> loc("/model/layers.1/mlp/MatMul")
  %r1 = sl.relu %m1 : tensor<2x4x8xf32> loc("/model/layers.1/mlp/Relu")
  %h1 = sl.add %h0, %r1 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32> loc("/model/layers.1/Add")
  %y = sl.matmul %h1, %head : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32> loc("/lm_head/MatMul")
  return %y : tensor<2x4x16xf32>
}

// -----

// Without node names, blocks are found from the parameters' names (GPT-2's "h.N"); an op that
// reads no parameter joins the stage of its operands when a later block reads it.
// CHECK-LABEL: func.func private @block
// CHECK: sl.matmul
// CHECK-NEXT: sl.relu
// CHECK-NEXT: sl.add
// CHECK-LABEL: func.func @forward
// CHECK: sl.layer @block(%arg0) params(%{{.+}}, %{{.+}}) {index = 0 : i64, stage = "block"}
// CHECK-NEXT: sl.layer @block(%{{.+}}) params(%{{.+}}, %{{.+}}) {index = 1 : i64, stage = "block"}
// CHECK-NOT: stage = "prologue"
// CHECK-NOT: stage = "epilogue"
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = sl.param "transformer.h.0.mlp.c_fc.weight" : tensor<8x8xf32>
  %b0 = sl.param "transformer.h.0.mlp.c_fc.bias" : tensor<8xf32>
  %w1 = sl.param "transformer.h.1.mlp.c_fc.weight" : tensor<8x8xf32>
  %b1 = sl.param "transformer.h.1.mlp.c_fc.bias" : tensor<8xf32>
  %m0 = sl.matmul %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %r0 = sl.relu %m0 : tensor<2x8xf32>
  %a0 = sl.add %r0, %b0 : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %m1 = sl.matmul %a0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %r1 = sl.relu %m1 : tensor<2x8xf32>
  %a1 = sl.add %r1, %b1 : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %a1 : tensor<2x8xf32>
}

// -----

// Blocks that differ get body functions of their own.
// CHECK-LABEL: func.func private @block(
// CHECK: sl.relu
// CHECK-LABEL: func.func private @block_1(
// CHECK: sl.sigmoid
// CHECK-LABEL: func.func @forward
// CHECK: sl.layer @block(
// CHECK: sl.layer @block_1(
// CHECK: sl.layer @block(
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
  %w2 = sl.param "layers.2.w" : tensor<8x8xf32>
  %m0 = sl.matmul %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/layers.0/MatMul")
  %a0 = sl.relu %m0 : tensor<2x8xf32> loc("/layers.0/Relu")
  %m1 = sl.matmul %a0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/layers.1/MatMul")
  %a1 = sl.sigmoid %m1 : tensor<2x8xf32> loc("/layers.1/Sigmoid")
  %m2 = sl.matmul %a1, %w2 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/layers.2/MatMul")
  %a2 = sl.relu %m2 : tensor<2x8xf32> loc("/layers.2/Relu")
  return %a2 : tensor<2x8xf32>
}

// -----

// Blocks whose ops are the same but whose constants differ (an attribute's value) differ too;
// locations do not count.
// CHECK-LABEL: func.func private @block(
// CHECK: sl.constant dense<1.000000e+00>
// CHECK-LABEL: func.func private @block_1(
// CHECK: sl.constant dense<2.000000e+00>
// CHECK-LABEL: func.func @forward
// CHECK: sl.layer @block(
// CHECK: sl.layer @block_1(
// CHECK: sl.layer @block(
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
  %w2 = sl.param "layers.2.w" : tensor<8x8xf32>
  %one = sl.constant dense<1.0> : tensor<f32>
  %two = sl.constant dense<2.0> : tensor<f32>
  %m0 = sl.matmul %x, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/layers.0/MatMul")
  %a0 = sl.add %m0, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32> loc("/layers.0/Add")
  %m1 = sl.matmul %a0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/layers.1/MatMul")
  %a1 = sl.add %m1, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32> loc("/layers.1/Add")
  %m2 = sl.matmul %a1, %w2 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/layers.2/MatMul")
  %a2 = sl.add %m2, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32> loc("/layers.2/Add")
  return %a2 : tensor<2x8xf32>
}

// -----

// Values besides the residual stream cross stages too (a mask built once, used by every block):
// they become extra inputs of the blocks.
// CHECK-LABEL: func.func private @prologue
// CHECK-SAME: -> (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%{{.+}}: tensor<2x8xf32>, %{{.+}}: tensor<2x8xf32>, %{{.+}}: tensor<8x8xf32> {sl.param})
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.+]]:2 = sl.layer @prologue
// CHECK-NEXT: %[[B0:.+]] = sl.layer @block(%[[P]]#[[H:[01]]], %[[P]]#[[MASK:[01]]])
// CHECK-NEXT: sl.layer @block(%[[B0]], %[[P]]#[[MASK]])
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
  %mask = sl.sigmoid %x : tensor<2x8xf32> loc("/model/Sigmoid")
  %h = sl.relu %x : tensor<2x8xf32> loc("/model/Relu")
  %m0 = sl.matmul %h, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/model/layers.0/MatMul")
  %a0 = sl.mul %m0, %mask : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32> loc("/model/layers.0/Mul")
  %m1 = sl.matmul %a0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/model/layers.1/MatMul")
  %a1 = sl.mul %m1, %mask : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32> loc("/model/layers.1/Mul")
  return %a1 : tensor<2x8xf32>
}

// -----

// One parameter read by every block and by the final norm (torch.onnx.export in eval mode merges
// a fresh model's all-ones norm weights into the first): a node's scope, not the name of the
// parameter it reads, says where it is, and every stage that reads the parameter gets it.
// CHECK-LABEL: func.func private @block
// CHECK-SAME: (%[[H:.+]]: tensor<2x8xf32>, %[[G:.+]]: tensor<8xf32> {sl.param}, %[[W:.+]]: tensor<8x8xf32> {sl.param})
// CHECK-LABEL: func.func private @epilogue
// CHECK-SAME: (%[[H:.+]]: tensor<2x8xf32>, %[[G:.+]]: tensor<8xf32> {sl.param}) -> tensor<2x8xf32>
// CHECK-NEXT: sl.mul %[[H]], %[[G]]
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.+]] = sl.param "model.layers.0.norm.weight"
// CHECK: %[[W0:.+]] = sl.param "model.layers.0.w"
// CHECK: %[[W1:.+]] = sl.param "model.layers.1.w"
// CHECK: %[[B0:.+]] = sl.layer @block(%arg0) params(%[[G]], %[[W0]]) {index = 0 : i64, stage = "block"}
// CHECK-NEXT: %[[B1:.+]] = sl.layer @block(%[[B0]]) params(%[[G]], %[[W1]]) {index = 1 : i64, stage = "block"}
// CHECK-NEXT: sl.layer @epilogue(%[[B1]]) params(%[[G]]) {index = 0 : i64, stage = "epilogue"}
func.func @forward(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g = sl.param "model.layers.0.norm.weight" : tensor<8xf32>
  %w0 = sl.param "model.layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "model.layers.1.w" : tensor<8x8xf32>
  %a0 = sl.mul %h, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/layers.0/norm/Mul")
  %m0 = sl.matmul %a0, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/model/layers.0/MatMul")
  %a1 = sl.mul %m0, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/layers.1/norm/Mul")
  %m1 = sl.matmul %a1, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32> loc("/model/layers.1/MatMul")
  %y = sl.mul %m1, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32> loc("/model/norm/Mul")
  return %y : tensor<2x8xf32>
}

// -----

// The same without node names: the shared parameter's name would place the final norm's product
// in block 0, reading block 1; data flow overrules a name that merged initializers may carry, and
// what only the output reads joins the epilogue. (Without names, which of the two products after
// block 1's matmul is the final norm cannot be known: both go to the epilogue.)
// CHECK-LABEL: func.func private @epilogue
// CHECK-SAME: (%[[H:.+]]: tensor<2x8xf32>, %[[G:.+]]: tensor<8xf32> {sl.param}) -> tensor<2x8xf32>
// CHECK-NEXT: %[[A:.+]] = sl.mul %[[H]], %[[G]]
// CHECK-NEXT: %[[R:.+]] = sl.relu %[[A]]
// CHECK-NEXT: sl.mul %[[R]], %[[G]]
// CHECK-LABEL: func.func @forward
// CHECK: %[[G:.+]] = sl.param "model.layers.0.norm.weight"
// CHECK: %[[B0:.+]] = sl.layer @block(%arg0) params(%{{.+}}, %[[G]]) {index = 0 : i64, stage = "block"}
// CHECK-NEXT: %[[B1:.+]] = sl.layer @block_1(%[[B0]]) params(%{{.+}}) {index = 1 : i64, stage = "block"}
// CHECK-NEXT: sl.layer @epilogue(%[[B1]]) params(%[[G]]) {index = 0 : i64, stage = "epilogue"}
func.func @forward(%h: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g = sl.param "model.layers.0.norm.weight" : tensor<8xf32>
  %w0 = sl.param "model.layers.0.w" : tensor<8x8xf32>
  %w1 = sl.param "model.layers.1.w" : tensor<8x8xf32>
  %m0 = sl.matmul %h, %w0 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %a0 = sl.mul %m0, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %m1 = sl.matmul %a0, %w1 : tensor<2x8xf32>, tensor<8x8xf32> -> tensor<2x8xf32>
  %a1 = sl.mul %m1, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %r = sl.relu %a1 : tensor<2x8xf32>
  %y = sl.mul %r, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
