// sl-plan on a module not yet partitioned into stages: it compiles copies of it to stages with
// its stage-pipeline (by default --sl-train's), each bound at a probe size by the copy's
// sl.bind_shapes, and schedules the step of each candidate on them with its step-pipeline. Both
// run as pass pipelines of sl-plan, so sl-opt's IR printing shows them. The default step-pipeline
// is sl-schedule-subbatches (forward-only as sl-plan is), then cse.
//
// RUN: rm -rf %t && split-file %s %t
// Alone, sl-plan plans what --sl-train plans for the same model (plan-train.mlir: DEV8, HOST16),
// and leaves the module as it was but for sl.plan.
// RUN: sl-opt %t/train.mlir --sl-plan="live-blocks=1 device-memory=8KiB" | FileCheck %s --check-prefix=DEV8
// RUN: sl-opt %t/train.mlir --sl-plan="live-blocks=1 sub-batch-size=2 host-memory=16KiB" | FileCheck %s --check-prefix=HOST16
// RUN: sl-opt %t/train.mlir --sl-plan="batch=4" --mlir-print-ir-after=sl-bind-shapes -o /dev/null 2>&1 | FileCheck %s --check-prefix=PRINT
// An inference plan, with a stage-pipeline like --sl-infer's (here without fusion) and the default
// step-pipeline, forward-only as sl-plan is: the same plan as `--sl-infer="batch=4
// num-sub-batches=2"` writes.
// RUN: sl-opt %t/infer.mlir --sl-plan="forward-only batch=4 num-sub-batches=2 stage-pipeline=builtin.module(sl-bind-shapes,canonicalize,sl-partition-layers)" | FileCheck %s --check-prefix=INFER
// RUN: sl-opt %t/infer.mlir --sl-infer="batch=4 num-sub-batches=2" | FileCheck %s --check-prefix=INFER
// Pipelines that are not pipelines on a module, or do not write the step.
// RUN: not sl-opt %t/train.mlir --sl-plan="stage-pipeline=sl-bind-shapes" 2>&1 | FileCheck %s --check-prefix=ANCHOR
// RUN: not sl-opt %t/train.mlir --sl-plan="step-pipeline=func.func(cse)" 2>&1 | FileCheck %s --check-prefix=FUNC
// RUN: not sl-opt %t/train.mlir --sl-plan="stage-pipeline=builtin.module(sl-no-such-pass)" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not sl-opt %t/infer.mlir --sl-plan="forward-only batch=4 stage-pipeline=builtin.module(sl-bind-shapes,canonicalize,sl-partition-layers) step-pipeline=builtin.module(cse)" 2>&1 | FileCheck %s --check-prefix=NOSTEP

// DEV8: sl.plan = #sl.plan<{{.*}}predicted_device_bytes = 7936, {{.*}}sub_batch_size = 9>
// DEV8: func.func @forward(%{{.+}}: tensor<?x3xi64> {{.*}}, %{{.+}}: tensor<?x3xi64> {{.*}}) -> (tensor<f32> {sl.name = "loss"})
// DEV8-NOT: sl.layer
// DEV8-NOT: func.func

// HOST16: num_sub_batches = 10, {{.*}}predicted_host_bytes = 15616, predicted_host_pool_bytes = 11008, {{.*}}sub_batch_size = 2

// The two copies, bound at the probe sizes 2 and 4; sl-bind-shapes consumed their sl.bind_shapes.
// PRINT: IR Dump After BindShapesPass (sl-bind-shapes)
// PRINT-NEXT: module {
// PRINT-NEXT: func.func @forward(%{{.+}}: tensor<2x3xi64>
// PRINT: IR Dump After BindShapesPass (sl-bind-shapes)
// PRINT-NEXT: module {
// PRINT-NEXT: func.func @forward(%{{.+}}: tensor<4x3xi64>
// PRINT-NOT: IR Dump After

// INFER: sl.plan = #sl.plan<boundary_activation_bytes = 192, live_blocks = 2, mode = speedloader, num_sub_batches = 2, parameter_bytes = 1536, predicted_device_bytes = 2048, predicted_host_bytes = 3200, predicted_host_pool_bytes = 3200, {{.*}}sub_batch_size = 2>

// ANCHOR: sl-plan: stage-pipeline='sl-bind-shapes' is not a pipeline on builtin.module (e.g. 'builtin.module(canonicalize, cse)'): expected pass pipeline to be wrapped with the anchor operation type
// FUNC: sl-plan: step-pipeline='func.func(cse)' is not a pipeline on builtin.module (e.g. 'builtin.module(canonicalize, cse)'): it runs on func.func, not on a copy of the module
// UNKNOWN: sl-plan: stage-pipeline='builtin.module(sl-no-such-pass)' is not a pipeline on builtin.module {{.*}}'sl-no-such-pass' does not refer to a registered pass
// NOSTEP: error: sl-plan: step-pipeline='builtin.module(cse)' wrote no @infer_step (an inference plan needs sl-schedule-subbatches{forward-only=true})
// NOSTEP: error: sl-plan: scheduling a copy of the model (speedloader, 1 sub-batches, live-blocks={{[0-9]+}}) to predict its memory failed (see the errors above)

// The model of plan-train.mlir, its sequence length static, with the loss --sl-train appends.
//--- train.mlir
module {
  func.func @forward(%ids: tensor<?x3xi64> {sl.dims = ["batch", ""], sl.name = "input_ids"}, %labels: tensor<?x3xi64> {sl.dims = ["batch", ""], sl.name = "labels"}) -> (tensor<f32> {sl.name = "loss"}) {
    %e = sl.param "embed" : tensor<16x8xf32>
    %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
    %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
    %head = sl.param "head" : tensor<8x16xf32>
    %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<?x3xi64> -> tensor<?x3x8xf32>
    %m0 = sl.matmul %h, %w0 : tensor<?x3x8xf32>, tensor<8x8xf32> -> tensor<?x3x8xf32>
    %h0 = sl.add %h, %m0 : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %m1 = sl.matmul %h0, %w1 : tensor<?x3x8xf32>, tensor<8x8xf32> -> tensor<?x3x8xf32>
    %h1 = sl.add %h0, %m1 : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %logits = sl.matmul %h1, %head : tensor<?x3x8xf32>, tensor<8x16xf32> -> tensor<?x3x16xf32>
    %loss = sl.cross_entropy %logits, %labels : tensor<?x3x16xf32>, tensor<?x3xi64> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// The same model without the loss, for inference.
//--- infer.mlir
module {
  func.func @forward(%ids: tensor<?x3xi64> {sl.dims = ["batch", ""], sl.name = "input_ids"}) -> (tensor<?x3x16xf32> {sl.name = "logits"}) {
    %e = sl.param "embed" : tensor<16x8xf32>
    %w0 = sl.param "layers.0.w" : tensor<8x8xf32>
    %w1 = sl.param "layers.1.w" : tensor<8x8xf32>
    %head = sl.param "head" : tensor<8x16xf32>
    %h = sl.gather %e, %ids : tensor<16x8xf32>, tensor<?x3xi64> -> tensor<?x3x8xf32>
    %m0 = sl.matmul %h, %w0 : tensor<?x3x8xf32>, tensor<8x8xf32> -> tensor<?x3x8xf32>
    %h0 = sl.add %h, %m0 : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %m1 = sl.matmul %h0, %w1 : tensor<?x3x8xf32>, tensor<8x8xf32> -> tensor<?x3x8xf32>
    %h1 = sl.add %h0, %m1 : tensor<?x3x8xf32>, tensor<?x3x8xf32> -> tensor<?x3x8xf32>
    %logits = sl.matmul %h1, %head : tensor<?x3x8xf32>, tensor<8x16xf32> -> tensor<?x3x16xf32>
    return %logits : tensor<?x3x16xf32>
  }
}
