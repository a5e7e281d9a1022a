// RUN: sl-opt %s --sl-schedule-subbatches="forward-only num-sub-batches=2" -cse | FileCheck %s --check-prefix=SL
// RUN: sl-opt %s --sl-schedule-subbatches="forward-only" -cse | FileCheck %s --check-prefix=ONE
// RUN: sl-opt %s --sl-schedule-subbatches="forward-only num-sub-batches=2 mode=canonical" -cse | grep -E "fetch_params|sl.concat" | FileCheck %s --check-prefix=CANON
// RUN: sl-opt %s --sl-schedule-subbatches="forward-only num-sub-batches=2" -cse --sl-assign-streams | FileCheck %s --check-prefix=STREAMS
// RUN: sl-opt %s --sl-plan="live-blocks=1 forward-only num-sub-batches=2 report" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: sl-opt %s --sl-plan="live-blocks=1 forward-only device-memory=1536 batch=4" | FileCheck %s --check-prefix=FITS
// RUN: sl-opt %s --sl-plan="live-blocks=1 forward-only device-memory=1535 batch=4" -verify-diagnostics -o /dev/null

// An inference step (sl-schedule-subbatches forward-only) of a prologue, two blocks and an
// epilogue that returns logits: no backward functions, no loss. SpeedLoader, N=2: each group's
// parameters are fetched once, while the group before it runs, and applied to both sub-batches;
// boundaries are offloaded between groups; each sub-batch's logits are offloaded and joined on
// the host.
// SL-LABEL: func.func @infer_step(%{{.+}}: tensor<4x3xi64> {sl.name = "input_ids"}) -> (tensor<4x3x8xf32> {sl.name = "logits"})
// SL-SAME: mode = speedloader, num_sub_batches = 2
// SL-NOT: sl.optimizer_step
// SL: sl.fetch_params %{{.+}} {group = "prologue"}
// SL-NEXT: sl.prefetch %{{.+}} : tensor<2x3xi64>
// SL-NEXT: sl.fetch_params %{{.+}} {group = "layers 0"}
// SL-NEXT: sl.prefetch %{{.+}} : tensor<2x3xi64>
// SL-NEXT: sl.gather
// SL-NEXT: sl.gather
// SL-NEXT: %[[H0_0:.+]] = sl.offload
// SL-NEXT: %[[H0_1:.+]] = sl.offload
// SL-NEXT: sl.prefetch %[[H0_0]]
// SL-NEXT: sl.fetch_params %{{.+}} {group = "layers 1"}
// SL-NEXT: sl.prefetch %[[H0_1]]
// SL: sl.fetch_params %{{.+}} {group = "epilogue"}
// SL: %[[Y0:.+]] = sl.offload %{{.+}} : tensor<2x3x8xf32>
// SL-NEXT: %[[Y1:.+]] = sl.offload %{{.+}} : tensor<2x3x8xf32>
// SL-NEXT: %[[Y:.+]] = sl.concat %[[Y0]], %[[Y1]] {axis = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<4x3x8xf32>
// SL-NEXT: return %[[Y]] : tensor<4x3x8xf32>

// One sub-batch: the offloaded logits are the output, nothing is joined.
// ONE-LABEL: func.func @infer_step(%{{.+}}: tensor<2x3xi64> {sl.name = "input_ids"}) -> (tensor<2x3x8xf32> {sl.name = "logits"})
// ONE-NOT: sl.concat
// ONE: %[[Y:.+]] = sl.offload %{{.+}} : tensor<2x3x8xf32>
// ONE-NEXT: return %[[Y]]

// Canonical: every group's parameters once per sub-batch.
// CANON-COUNT-2: sl.fetch_params %{{.+}} {group = "prologue"}
// CANON-NOT: sl.fetch_params %{{.+}} {group = "prologue"}
// CANON: sl.concat

// The join reads host values only: a host kernel, on the host stream.
// STREAMS: sl.concat %{{.+}}, %{{.+}} {axis = 0 : i64, sl.stream = #sl.stream<host>}

// sl-plan measures the forward-only stages: no backward FLOPs, no optimizer state; the host
// pool holds the inputs, the parameters and the outputs.
// REPORT: sl-plan: inference, speedloader, 2 sub-batches of 2 (batch 4), live-blocks 1, world 1
// REPORT: epilogue 0 128 96 192 384 0 192 0
// REPORT: device arena: 1.50 KiB (1536 bytes)
// REPORT: host pool 1.25 KiB (1280 bytes) at its peak, op 38 of the step (sl.concat)
// REPORT: outputs (per sub-batch, and joined) 768 B (768 bytes)
// REPORT-NOT: optimizer state
// REPORT: bytes moved per step:

// FITS: sl.plan = #sl.plan<{{.*}}num_sub_batches = 2{{.*}}predicted_device_bytes = 1536{{.*}}sub_batch_size = 2
// One byte less than the arena the plan lays out:
// expected-error @+1 {{sl-plan: sub-batch-size=2 with live-blocks=1 needs 1.50 KiB (1536 bytes) of device memory, more than the budget of 1.50 KiB (1535 bytes)}}
module {
  func.func private @prologue(%ids: tensor<2x3xi64>, %e: tensor<8x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
    %h = sl.gather %e, %ids : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
    return %h : tensor<2x3x4xf32>
  }
  func.func private @block(%h: tensor<2x3x4xf32>, %w: tensor<4x4xf32> {sl.param}) -> tensor<2x3x4xf32> {
    %m = sl.matmul %h, %w : tensor<2x3x4xf32>, tensor<4x4xf32> -> tensor<2x3x4xf32>
    %r = sl.add %h, %m : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32>
  }
  func.func private @epilogue(%h: tensor<2x3x4xf32>, %head: tensor<4x8xf32> {sl.param}) -> tensor<2x3x8xf32> {
    %y = sl.matmul %h, %head : tensor<2x3x4xf32>, tensor<4x8xf32> -> tensor<2x3x8xf32>
    return %y : tensor<2x3x8xf32>
  }
  func.func @forward(%ids: tensor<2x3xi64> {sl.name = "input_ids"}) -> (tensor<2x3x8xf32> {sl.name = "logits"}) {
    %e = sl.param "embed" : tensor<8x4xf32>
    %w0 = sl.param "layers.0.w" : tensor<4x4xf32>
    %w1 = sl.param "layers.1.w" : tensor<4x4xf32>
    %head = sl.param "head" : tensor<4x8xf32>
    %h0 = sl.layer @prologue(%ids) params(%e) {index = 0 : i64, stage = "prologue"} : (tensor<2x3xi64>, tensor<8x4xf32>) -> tensor<2x3x4xf32>
    %h1 = sl.layer @block(%h0) params(%w0) {index = 0 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %h2 = sl.layer @block(%h1) params(%w1) {index = 1 : i64, stage = "block"} : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
    %y = sl.layer @epilogue(%h2) params(%head) {index = 0 : i64, stage = "epilogue"} : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
    return %y : tensor<2x3x8xf32>
  }
}
