//===- SLStepOps.td - the explicit steps: transfers, collectives, generation ------------------===//
//
// Included by SLOps.td, after the dialect, its attributes and the tensor type constraints.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_STEP_OPS_TD
#define SL_STEP_OPS_TD

//===--------------------------------------------------------------------------------------------===//
// The explicit step: memory spaces, transfers, accumulation, optimizer steps
//
// After sl-schedule-subbatches, a training step says where every value lives. Function arguments,
// `sl.param`, `sl.constant`, `sl.sub_batch` views of host values, `sl.offload` results and
// `sl.accumulate`s of host values are in the host pool; everything else is in the device arena.
// Transfers are not Pure: two prefetches of one host slot are two device buffers, never merged.
//===--------------------------------------------------------------------------------------------===//

def SL_SubBatchOp : SL_Op<"sub_batch", [Pure],
    ["isKernel"]> {
  let summary = "sub-batch `index` of `count` of a batch-major host tensor (a view, no copy)";
  let description = [{
    Rows `[index * n, (index + 1) * n)` of dimension 0 of `batch`, where `n` is the result's
    dimension 0 and `count * n` the batch's: the bytes of one sub-batch of a row-major tensor are
    contiguous, so the result is a view of the host buffer at an offset. The result has the
    batch's shape with dimension 0 divided by `count`.

    Example:

    ```mlir
    %ids1 = sl.sub_batch %ids {index = 1 : i64, count = 3 : i64} : tensor<6x16xi64> -> tensor<2x16xi64>
    ```
  }];
  let arguments = (ins SL_Tensor:$batch, I64Attr:$index, I64Attr:$count);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $batch attr-dict `:` type($batch) `->` type($result)
  }];
  let hasVerifier = 1;
}

def SL_FetchParamsOp : SL_Op<"fetch_params", [DeclareOpInterfaceMethods<InferTypeOpInterface>],
    ["getStreamKind"]> {
  let summary = "bring a group's parameters from the host pool to the device (one copy each)";
  let description = [{
    Copies every parameter of one group from its host buffer into a device buffer of its own, on
    the host-to-device stream. SpeedLoader fetches a group once per pass and applies it to every
    sub-batch; the canonical baseline fetches it once per sub-batch. With several ranks the
    schedule all-gathers the group's shards instead (`sl.all_gather`). `group` names the group in
    traces.

    Example:

    ```mlir
    %wq_d, %wk_d = sl.fetch_params %wq, %wk {group = "layers 0-1"} : tensor<64x64xf32>, tensor<64x16xf32>
    ```
  }];
  let arguments = (ins Variadic<SL_FloatTensor>:$params, StrAttr:$group);
  let results = (outs Variadic<SL_FloatTensor>:$results);
  let assemblyFormat = [{
    $params attr-dict `:` type($params)
  }];
  let hasVerifier = 1;
}

def SL_PrefetchOp : SL_Op<"prefetch", [AllTypesMatch<["source", "result"]>],
    ["getStreamKind"]> {
  let summary = "copy a host value to the device";
  let description = [{
    A host-to-device copy of a host-pool value (a sub-batch of the inputs, a boundary activation
    or an activation gradient that an earlier stage offloaded, a constant) into a device buffer.

    Example:

    ```mlir
    %x = sl.prefetch %h : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$source);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($result)";
}

def SL_OffloadOp : SL_Op<"offload", [AllTypesMatch<["source", "result"]>],
    ["getStreamKind"]> {
  let summary = "copy a device value to the host pool";
  let description = [{
    A device-to-host copy into a host-pool slot of its own: a stage's output for a later stage
    (or for the backward pass), an activation gradient, a group's accumulated parameter gradients,
    the loss.

    Example:

    ```mlir
    %h = sl.offload %x : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$source);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$source attr-dict `:` type($result)";
}

def SL_AccumulateOp : SL_Op<"accumulate", [Pure, AllTypesMatch<["accumulator", "value", "result"]>],
    ["getStreamKind"]> {
  let summary = "accumulator + value, in the accumulator's memory space (gradient accumulation)";
  let description = [{
    The elementwise sum of two float tensors of one type (f32 for parameter gradients and the
    loss; bf16 for the activation gradients of a precision=bf16 step); `sl-allocate` places the result in the
    accumulator's buffer when this is the accumulator's last use, so accumulating over sub-batches
    needs one buffer. Device accumulators run on the compute stream; host ones (canonical mode,
    and parameters read by several groups) on the host stream.

    Example:

    ```mlir
    %g2 = sl.accumulate %g1, %dw : tensor<64x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$accumulator, SL_FloatTensor:$value);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "$accumulator `,` $value attr-dict `:` type($result)";
}

def SL_OptimizerStepOp : SL_Op<"optimizer_step", [AttrSizedOperandSegments],
    ["getStreamKind", "getDataOperandIndices"]> {
  let summary = "the gradients of these parameters are final: the optimizer may update them";
  let description = [{
    Marks the point of the step after which the host gradients `grads` of `params` (one each, in
    order) are final, so the host optimizer may update those parameters while the rest of the
    backward runs. `params` are `sl.param` values, or with several ranks `sl.param_shard` values
    (each gradient then that of the rank's shard). A gradient has its parameter's type, or is f32
    for a bf16 parameter (mixed precision: gradients accumulated in f32, f32 master weights in the
    optimizer). `loss` is the step's loss in the host pool (a runtime checks it before
    updating anything). The optimizer writes the parameters' host buffers: nothing may read them
    later in the step.

    Example:

    ```mlir
    sl.optimizer_step %loss grads(%gw, %gb) params(%w, %b)
        : tensor<f32>, (tensor<64x64xf32>, tensor<64xf32>), (tensor<64x64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins F32Tensor:$loss, Variadic<SL_FloatTensor>:$grads,
                       Variadic<SL_FloatTensor>:$params);
  let assemblyFormat = [{
    $loss `grads` `(` $grads `)` `params` `(` $params `)` attr-dict `:` type($loss) `,`
    `(` type($grads) `)` `,` `(` type($params) `)`
  }];
  let hasVerifier = 1;
}

def SL_AllGatherOp : SL_Op<"all_gather", [], ["getStreamKind"]> {
  let summary = "gather the shards of a group's parameters from every rank (distributed)";
  let description = [{
    With `world` ranks, each holding `1/world` of a tensor, assembles the whole tensor on every
    rank's device, on the collective stream: result `i` is the shards `i` of ranks 0, 1, ...,
    `world - 1`, one after another along dimension 0. Every rank runs the same collectives in the
    same order. This is the sharded counterpart of `sl.fetch_params`: with `world > 1`,
    `sl-schedule-subbatches` prefetches the rank's shard of a group's flattened parameters
    (`sl.param_shard`) to the device and all-gathers it once per pass (once per sub-batch in
    canonical mode); the parameters are `sl.view`s of the result.

    Example:

    ```mlir
    %w = sl.all_gather %shard {world = 2 : i64} : tensor<32x64xf32> -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Variadic<SL_FloatTensor>:$shards, I64Attr:$world);
  let results = (outs Variadic<SL_FloatTensor>:$results);
  let assemblyFormat = [{
    $shards attr-dict `:` type($shards) `->` type($results)
  }];
  let hasVerifier = 1;
}

def SL_ReduceScatterOp : SL_Op<"reduce_scatter", [], ["getStreamKind"]> {
  let summary = "sum gradients over every rank, leaving each rank its shard (distributed)";
  let description = [{
    With `world` ranks, sums each operand elementwise over the ranks and leaves rank r the r-th
    of `world` equal slices of dimension 0, on the collective stream. With `world > 1`,
    `sl-schedule-subbatches` concatenates a group's accumulated parameter gradients into the
    layout of its `sl.param_shard` and reduce-scatters them once per step (once per sub-batch in
    canonical mode); each rank offloads its slice, the gradient of its shard, for the optimizer.

    Example:

    ```mlir
    %gs = sl.reduce_scatter %g {world = 2 : i64} : tensor<64x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins Variadic<SL_FloatTensor>:$values, I64Attr:$world);
  let results = (outs Variadic<SL_FloatTensor>:$results);
  let assemblyFormat = [{
    $values attr-dict `:` type($values) `->` type($results)
  }];
  let hasVerifier = 1;
}

def SL_ParamShardOp : SL_Op<"param_shard", [Pure],
    ["isKernel", "isPreloaded"]> {
  let summary = "this rank's 1/world of a group's parameters, flattened (distributed)";
  let description = [{
    The parameters `params` (`sl.param` values, f32) of group `group`, flattened into one f32
    vector one after another, each starting at a multiple of 4 elements, zeros between them and
    at the end up to a multiple of `4 * world` elements; the result is this rank's `1/world` of
    that vector (rank r: elements `[r * S, (r + 1) * S)` for a result of S elements), in the host
    pool for the whole step. The runtime reads each rank's part from the model file; the
    parameters themselves then have no host slot (they are declarations of what is in the
    shard). The optimizer updates the shard; `sl.all_gather` assembles the whole vector on the
    device.

    Example:

    ```mlir
    %s = sl.param_shard %wq, %norm {group = "layers 0", world = 2 : i64}
        : tensor<16x16xf32>, tensor<16xf32> -> tensor<136xf32>
    ```
  }];
  let arguments = (ins Variadic<F32Tensor>:$params, StrAttr:$group, I64Attr:$world);
  let results = (outs F32Tensor:$result);
  let assemblyFormat = [{
    $params attr-dict `:` type($params) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Where each parameter starts in the flattened group, in elements.
    llvm::SmallVector<int64_t> getElementOffsets();
    /// Elements of the whole flattened group: `world` times the result's.
    int64_t getFlatElements();
  }];
}

def SL_ViewOp : SL_Op<"view", [Pure],
    ["isKernel"]> {
  let summary = "elements of a tensor from `offset` on, in another shape (a view, no copy)";
  let description = [{
    The `numel(result)` elements of `source` (row-major) that start at element `offset`, as a
    tensor of the result's shape and the source's element type: the bytes of the source's buffer
    from `offset * element size` on, so no kernel runs and no buffer is allocated. A parameter of
    an all-gathered group is a view of the gathered vector; a gradient is flattened into a group's
    layout through one.

    Example:

    ```mlir
    %w = sl.view %group {offset = 256 : i64} : tensor<1024xf32> -> tensor<16x16xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$source, I64Attr:$offset);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $source attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Generation
//===--------------------------------------------------------------------------------------------===//

def SL_DecodeAttentionOp : SL_Op<"decode_attention", [Pure]> {
  let summary = "attention of one new token per sequence over its KV cache and itself";
  let description = [{
    `q` [B, Hq, 1, D] is each sequence's newest token's queries, `k` and `v` [B, Hkv, 1, D] its
    keys and values, `cache` [B, 2, Hkv, C, D] the keys (`cache[:, 0]`) and values (`cache[:, 1]`)
    of the positions before it, of which sequence `b` has `length[b]`. Query head `h` attends to
    cache positions `[0, length[b])` of key/value head `h / (Hq / Hkv)` and to its own `k` and
    `v`: `softmax(scores * scale)`. With `alibi_slopes` [Hq], the score of position `t` (the
    new token is at position `length[b]`) gets `alibi_slopes[h] * (t - length[b])`, as
    sl.attention's. Cache positions at or past `length[b]` are never read, so sequences of
    different lengths share one cache shape. Written by `sl-split-generation` in place of a
    decode step's causal `sl.attention`.

    Example:

    ```mlir
    %o = sl.decode_attention %q, %k, %v, %cache, %length {scale = 0.25 : f32}
        : (tensor<2x4x1x16xf32>, tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>,
           tensor<2x2x2x24x16xf32>, tensor<2xi64>) -> tensor<2x4x1x16xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$q, SL_FloatTensor:$k, SL_FloatTensor:$v,
                       SL_FloatTensor:$cache, SL_IndexVector:$length,
                       Optional<SL_FloatTensor>:$alibi_slopes, F32Attr:$scale);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $cache `,` $length (`alibi_slopes` $alibi_slopes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def SL_KvWriteOp : SL_Op<"kv_write", [AllTypesMatch<["cache", "result"]>,
                                      MemoryEffects<[MemWrite]>],
    ["getStreamKind"]> {
  let summary = "write new keys and values into a host KV cache, in place";
  let description = [{
    `cache` [B, 2, Hkv, C, D] gets `k` at `cache[b, 0, :, s + t]` and `v` at `cache[b, 1, :, s + t]`
    for `t` < T, where `k` and `v` are [B, Hkv, T, D] and `s` is `start[b]` (0 without `start`).
    The result is the cache itself: the kernel writes the cache's buffer, on the host, and every
    other element keeps its value. A prefill writes the prompt's positions from 0; a decoding
    step writes one position per sequence, at its length. With `layout = #sl.head_layout<bshd>`
    `k` and `v` are [B, T, Hkv, D], the order attention's projections produce (the cache keeps its
    own order).

    Example:

    ```mlir
    %c1 = sl.kv_write %c0, %k, %v, %start
        : (tensor<2x2x2x24x16xf32>, tensor<2x2x1x16xf32>, tensor<2x2x1x16xf32>, tensor<2xi64>)
        -> tensor<2x2x2x24x16xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$cache, SL_FloatTensor:$k, SL_FloatTensor:$v,
                       Optional<SL_IndexVector>:$start,
                       DefaultValuedAttr<SL_HeadLayoutAttr, "::sl::HeadLayout::bhsd">:$layout);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `,` $k `,` $v (`,` $start^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def SL_TakeRowsOp : SL_Op<"take_rows", [Pure]> {
  let summary = "one row of dimension 1 per sequence: result[b, 0] = input[b, index[b]]";
  let description = [{
    Picks, for every sequence `b` of `input` [B, S, ...], the row `index[b]` of dimension 1:
    the result is [B, 1, ...]. A prefill uses it to take each prompt's last position (prompts
    of different lengths are right-padded) before the head computes its next-token logits.

    Example:

    ```mlir
    %last = sl.take_rows %h, %index : (tensor<2x8x64xf32>, tensor<2xi64>) -> tensor<2x1x64xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, SL_IndexVector:$index);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$input `,` $index attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def SL_EmptyOp : SL_Op<"empty", [MemoryEffects<[MemAlloc]>],
    ["isKernel"]> {
  let summary = "a device buffer with no value yet, for kernels that write it in place";
  let description = [{
    Reserves a device buffer of the result's type and computes nothing: its elements are whatever
    the arena held. A generation step whose KV cache fits on the device keeps each (sub-batch,
    layer) chunk in one, written in place by `sl.kv_write` (prefill, then each decoding step) and
    read by `sl.decode_attention`, which never reads a position before it is written.

    Example:

    ```mlir
    %chunk = sl.empty : tensor<2x2x2x24x16xf32>
    ```
  }];
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def SL_ProgramOp : SL_Op<"program", [], ["isKernel"]> {
  let summary = "the start of a program: a part of an explicit step the runtime runs on its own";
  let description = [{
    Kernels from here to the next `sl.program` (or the end) form the program `name`. A
    generation step has two, `prefill` and `decode`; the runtime runs prefill once per batch of
    prompts and decode once per new token. Every stream is idle between two programs' runs, so
    no event crosses a program boundary (`sl-insert-events` starts afresh at each), and what one
    program leaves in the host pool (the KV cache) the next reads.

    Example:

    ```mlir
    sl.program "decode"
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let assemblyFormat = "$name attr-dict";
}

#endif // SL_STEP_OPS_TD
