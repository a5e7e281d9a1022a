// RUN: sl-opt %s -split-input-file --sl-bind-shapes | FileCheck %s
// RUN: sl-opt %s -split-input-file --sl-bind-shapes="batch=3 seq=5" | FileCheck %s --check-prefix=OPTIONS
// Without options, sl-bind-shapes binds at the sizes the module gives: its sl.bind_shapes (what
// sl-plan and sl-split-generation put on the copies they compile), which it then removes, else
// for the batch sl.plan's sub_batch_size. Options given win over both.

// CHECK-LABEL: module {
// CHECK: func.func @copy(%{{.+}}: tensor<2x7xi64> {{.*}}) -> tensor<2x7x8xf32>
// OPTIONS-LABEL: module {
// OPTIONS: func.func @copy(%{{.+}}: tensor<3x5xi64> {{.*}}) -> tensor<3x5x8xf32>
module attributes {sl.bind_shapes = #sl.bind_shapes<batch = 2, seq = 7>} {
  func.func @copy(%ids: tensor<?x?xi64> {sl.dims = ["batch", "seq"], sl.name = "input_ids"}) -> tensor<?x?x8xf32> {
    %e = sl.param "embed" : tensor<16x8xf32>
    %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<?x?xi64> -> tensor<?x?x8xf32>
    return %h : tensor<?x?x8xf32>
  }
}

// -----

// sl.bind_shapes gives the batch, sl.plan's sub-batch size is not used.
// CHECK-LABEL: module attributes {sl.plan = #sl.plan<sub_batch_size = 4>} {
// CHECK: func.func @both(%{{.+}}: tensor<2x6xi64>
// OPTIONS-LABEL: module attributes {sl.plan = #sl.plan<sub_batch_size = 4>} {
// OPTIONS: func.func @both(%{{.+}}: tensor<3x6xi64>
module attributes {sl.bind_shapes = #sl.bind_shapes<batch = 2>, sl.plan = #sl.plan<sub_batch_size = 4>} {
  func.func @both(%ids: tensor<?x6xi64> {sl.dims = ["batch", ""], sl.name = "input_ids"}) -> tensor<?x6xi64> {
    return %ids : tensor<?x6xi64>
  }
}

// -----

// CHECK-LABEL: module attributes {sl.plan = #sl.plan<sub_batch_size = 4>} {
// CHECK: func.func @planned(%{{.+}}: tensor<4x6xi64>
// OPTIONS-LABEL: module attributes {sl.plan = #sl.plan<sub_batch_size = 4>} {
// OPTIONS: func.func @planned(%{{.+}}: tensor<3x6xi64>
module attributes {sl.plan = #sl.plan<sub_batch_size = 4>} {
  func.func @planned(%ids: tensor<?x6xi64> {sl.dims = ["batch", ""], sl.name = "input_ids"}) -> tensor<?x6xi64> {
    return %ids : tensor<?x6xi64>
  }
}
