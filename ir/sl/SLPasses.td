//===- SLPasses.td - passes of the sl dialect --------------------------------------------------===//

#ifndef SL_PASSES_TD
#define SL_PASSES_TD

include "mlir/Pass/PassBase.td"

def BindShapesPass : Pass<"sl-bind-shapes", "mlir::ModuleOp"> {
  let summary = "bind the symbolic batch and sequence dimensions to sizes";
  let description = [{
    Replaces the dynamic dimensions of every function's inputs with static sizes and propagates
    the new types through the body, so that the program is fully static and can be scheduled.

    Which size a dimension takes comes from how the inputs use its ONNX name, recorded by the
    importer in each input's `sl.dims` attribute: the names of `input_ids`' dimensions (of the
    first input when there is no `input_ids`) are the batch (axis 0, size `batch`) and the
    sequence (axis 1, size `seq`), whatever they are called (`batch_size`, `b`, torch's
    `input_ids_dynamic_axes_1`); a dynamic dimension of a `past_key_values.*` input that is not
    the batch is the past length (size `past`); `attention_mask`'s axis 1, when its name is none
    of these, covers the past and the new tokens (`seq + past`). Every input's dimension of one of
    these names takes that size. Names not given by use keep a fixed meaning: `batch`,
    `batch_size` and `N` take `batch`; `seq`, `sequence`, `seq_len`, `sequence_length` and `S`
    take `seq`; `past_sequence_length` takes `past`. An unnamed dynamic dimension takes `batch` on
    axis 0 and `seq` on axis 1 (the model contract `[batch, seq, ...]`). Any other dynamic
    dimension is an error that names the input and the dimension.

    Options left 0 take the sizes the module gives: its `sl.bind_shapes = {batch = B : i64,
    seq = S : i64}` (either key optional), which `sl-plan` and `sl-split-generation` put on the
    copies of a model they compile at several sizes with one pipeline, and which the pass then
    removes; else, for `batch`, the `sub_batch_size` of an `sl.plan` attribute (written by
    `sl-plan`): a sub-batched step runs sub-batch-shaped kernels.

    Example: with `batch=4`, `%x: tensor<?x32xf32> {sl.dims = ["batch", ""]}` becomes
    `tensor<4x32xf32>`, and an `sl.gemm` of it with a `tensor<64x32xf32>` weight now yields
    `tensor<4x64xf32>`.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "Size bound to batch dimensions (0: sl.bind_shapes' batch, else sl.plan's "
           "sub_batch_size, if any)">,
    Option<"seq", "seq", "int64_t", /*default=*/"0",
           "Size bound to sequence dimensions (0: sl.bind_shapes' seq, if any)">,
    Option<"past", "past", "int64_t", /*default=*/"0",
           "Size bound to the past length of past_key_values inputs (0: none given; "
           "sl-bind-inputs binds an empty past instead)">,
  ];
}

def BindInputsPass : Pass<"sl-bind-inputs", "mlir::ModuleOp"> {
  let summary = "compute the inputs a pipeline owns (mask, positions, empty past) from input_ids";
  let description = [{
    Hugging Face exports (Optimum's) take, beside `input_ids` [batch, seq], an `attention_mask`
    [batch, past + seq], `position_ids` [batch or 1, seq] and, with a cache, `past_key_values.*`
    [batch, heads, past, head size]. Where the pipeline feeds the model itself (training,
    generation; inference without padding), they have one value: an all-ones mask, positions
    `0 .. seq-1` in every row, and an empty past. For each input named in `inputs`, this pass
    replaces the function argument with that value, computed from `input_ids`' shape, so that
    sl-bind-shapes folds it to a constant and sl-fuse-transformer sees the causal mask
    HF builds from it. Binding the past also drops the `present.*` outputs (the new cache, which
    the pipeline keeps itself), so the model's outputs are its logits.

    `inputs` takes `attention_mask`, `position_ids` and `past_key_values` (every
    `past_key_values.*` input). With `only-input-ids`, any other input left is an error naming
    it: training and generation feed only `input_ids`. A function without `input_ids` is left
    as it is.

    Example: `%mask: tensor<?x?xi64> {sl.name = "attention_mask"}` becomes
    `sl.constant_of_shape (sl.shape %input_ids) {value = dense<1>}`.
  }];
  let options = [
    ListOption<"inputs", "inputs", "std::string",
               "Inputs to bind: attention_mask, position_ids, past_key_values">,
    Option<"onlyInputIds", "only-input-ids", "bool", /*default=*/"false",
           "Refuse a model left with an input other than input_ids">,
  ];
}

def FuseTransformerPass : Pass<"sl-fuse-transformer", "mlir::func::FuncOp"> {
  let summary = "rewrite exported transformer blocks into fused sl ops";
  let description = [{
    Recognises, on static IR (after sl-bind-shapes), the decompositions exporters write for
    RMSNorm, LayerNorm, GELU (exact and tanh), SwiGLU, rotary embeddings (rotate-half and
    interleaved) and causal scaled-dot-product attention (multi-head and grouped-query, with the
    exporter's mask construction and HF's repeat_kv and clamp), and rewrites each into one fused
    op: `sl.rms_norm`, `sl.layer_norm`, `sl.gelu`, `sl.swiglu`, `sl.rotary`, `sl.attention`.

    Attention is matched by meaning rather than by one exporter's spelling: positive scales,
    the causal mask (added, or selected with where in either polarity), additions of zero and
    HF's clamp are peeled off the softmax's input in any order, on 3-D [B * H, S, T] or 4-D
    scores, down to q @ k^T. A constant added to the scores that is a slope per head times the
    key's position, up to a constant per query row (ALiBi, as BLOOM builds it), becomes the
    fused op's `alibi_slopes`; any other constant becomes its additive mask.

    Every match checks the constants it depends on (the exponent 2, the 1/2 of GELU, the
    epsilon, each value of the causal mask), so a graph that only looks similar is left as it is
    and runs op by op. A softmax whose probabilities still multiply values afterwards gets a
    remark (`sl-fuse-transformer: attention not fused: ...`) naming the check that failed.
    Canonicalisation and CSE clean up what the rewrites leave dead.

    Example: `sl.mul %w, (sl.mul %x, (sl.div 1, (sl.sqrt (sl.add (sl.reduce_mean (sl.pow %x, 2)),
    1e-6))))` becomes `sl.rms_norm %x, %w {epsilon = 1.0e-06}`.

    A mask is judged from the ops that compute it, one row at a time as runs of columns
    (sl/Analysis/AttentionMasks.h), so a causal mask of any context length is recognised without
    its S x T values; a mask built in a way that model does not cover is evaluated by folding
    instead (up to 2^26 elements).
  }];
  let options = [
    Option<"checkMasks", "check-masks", "bool", /*default=*/"false",
           "Also evaluate every mask judged row by row (up to 2^26 elements) and fail where the "
           "two verdicts differ: a test of the row model on real exporters' masks">
  ];
  let dependentDialects = ["::sl::SLDialect"];
}

def AppendLossPass : Pass<"sl-append-loss", "mlir::ModuleOp"> {
  let summary = "add the training loss: mean cross-entropy of the logits against labels";
  let description = [{
    Turns a language model's forward function into the function a training step differentiates:
    it adds an input `labels` (int64, the logits' shape without the vocabulary dimension, with
    the same symbolic dimension names as `input_ids`) and replaces the `logits` output with
    `loss`, the mean softmax cross-entropy (`sl.cross_entropy`) over every position. The labels
    are the next tokens of each input window, which the training data supplies already shifted;
    the loss of a step is the mean over all of its tokens, never a mean of per-sub-batch means.

    With `keep-logits`, `logits` stays as a second output. A function without an int64 input
    named `input_ids` (the token ids a training step reads from `sl-run --data`) is an error.
  }];
  let options = [
    Option<"logitsName", "logits", "std::string", /*default=*/"\"logits\"",
           "Name of the output holding the logits">,
    Option<"keepLogits", "keep-logits", "bool", /*default=*/"false",
           "Keep the logits as an output after the loss">,
  ];
  let dependentDialects = ["::sl::SLDialect"];
}

def ConvertPrecisionPass : Pass<"sl-convert-precision", "mlir::ModuleOp"> {
  let summary = "store every f32 tensor in bf16 (computation stays f32 in the kernels)";
  let description = [{
    With `precision=bf16`, rewrites every f32 tensor type in the module to bf16: function
    signatures, block arguments and op results, constants (rounded to nearest, ties to even; a
    finite value beyond bf16's range becomes the largest finite bf16 of its sign rather than an
    infinity, so that a mask's "most negative float" stays finite) and cast targets. Parameters
    keep their f32 bytes in the model file: each gets `stored_as f32`, and the runtime rounds it
    to bf16 while loading. f64, f16 and integer tensors are left as they are. `precision=f32`
    changes nothing.

    Kernels over bf16 buffers compute in f32 and round each result once to bf16 (the runtime's
    contract), so a bf16 program halves the bytes of weights, activations and KV caches, on the
    device and on the link, at bf16 accuracy. Run it after shapes are bound and folded, so that
    what folding computes (rotary tables, masks) is computed in f32 and only stored in bf16.

    Example: `%w = sl.param "w" from "m.onnx" at 0 : tensor<8x4xf32>` becomes
    `%w = sl.param "w" from "m.onnx" at 0 stored_as f32 : tensor<8x4xbf16>`, and an
    `sl.gemm` of it yields `tensor<2x8xbf16>`.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"bf16\"",
           "The storage type of floating-point tensors: f32 (unchanged) or bf16">,
  ];
  let dependentDialects = ["::sl::SLDialect"];
}

def CheckSharedParamsPass : Pass<"sl-check-shared-params", "mlir::ModuleOp"> {
  let summary = "warn about parameters that look like merged equal initializers, not ties";
  let description = [{
    A parameter read in several places is trained as one weight: the gradients of every use are
    summed and it is stepped once. That is what a tied weight needs (an embedding reused as the
    output head), and wrong where the exporter merged distinct weights that were equal:
    `torch.onnx.export` in eval mode keeps one initializer per set of equal values, so every
    all-ones norm weight of a freshly initialised model becomes one parameter read by every
    layer and the final norm.

    Models do not tie weights across their blocks, so this pass warns (once per parameter, and
    changes nothing) when a parameter is read by operations of two blocks (`/layers.0/`,
    `/layers.1/` in their node names), or when its name places it in one block
    (`model.layers.0.input_layernorm.weight`) and it is read outside it. The warning names the
    places and says how to export for training: the model in train mode with
    `training=torch.onnx.TrainingMode.PRESERVE`, which merges only truly shared tensors.
    `--sl-train` runs it first.
  }];
}

def PartitionLayersPass : Pass<"sl-partition-layers", "mlir::ModuleOp"> {
  let summary = "outline a model into a prologue, one sl.layer per block, and an epilogue";
  let description = [{
    Finds the transformer blocks of the model function and outlines it into stages, the units
    the SpeedLoader schedule moves: the prologue (embeddings), one `sl.layer` per block, and the
    epilogue (final norm, head, loss). Each block's body becomes a private function whose
    parameters are arguments (marked `sl.param`); identical blocks
    share one body function (`@block`, `@block_1`, ... for blocks that differ), and each
    `sl.layer` passes its own parameters. The model function keeps the `sl.param` references and
    calls the stages in order; constants are copied into the stages that read them.

    A block is found from its exporter name scope (`/layers.3/`, `/h.3/`, `/blocks.3/`) or, for
    an operation whose node name has no scope path (exporters that drop node names), from the
    names of the parameters it reads (`model.layers.3.mlp.weight`). A scoped name outside every
    block (`/model/norm/Mul_1`) wins over the name of the parameter it reads: an eval-mode export
    merges equal initializers, so a final norm may read `model.layers.0.input_layernorm.weight`.
    Operations with neither join the stage of their latest operand, or the prologue or epilogue.
    A parameter read by several stages (a tied embedding, merged norm weights) is a parameter
    operand of each. A model with no block, or whose blocks read values of later blocks, is an
    error.
  }];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

def AutodiffPass : Pass<"sl-autodiff", "mlir::ModuleOp"> {
  let summary = "a backward function for every stage";
  let description = [{
    For every stage function that an `sl.layer` calls (after `sl-partition-layers`), creates
    `@<stage>_backward(inputs..., params..., d_outputs...) -> (d_float_inputs..., d_params...)`.
    The backward function recomputes the stage's forward from its boundary inputs (nothing but
    the boundary is kept between forward and backward) and then applies the gradient rule of
    every op in reverse, summing the gradients of values used more than once. Integer inputs
    (token ids, labels) get no gradient; an input or parameter the outputs do not depend on gets
    zeros.

    Rules exist for every op a stage of an imported, fused language model contains; elementwise
    ops, matmuls and data movement use forward ops (a broadcast operand's gradient is summed
    over its broadcast dimensions), the fused ops and the loss have gradient ops of their own
    (`sl.attention_grad`, `sl.rms_norm_grad`, ...). An op without a rule is an error naming it.
  }];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

def FoldMatmulTransposesPass : Pass<"sl-fold-matmul-transposes", "mlir::func::FuncOp"> {
  let summary = "read transposed matrix operands through GEMM transpose flags, never copied";
  let description = [{
    A transpose that only swaps the last two dimensions of a matrix product's operand becomes the
    product's transpose flag: `sl.matmul %x, (sl.transpose %w [1, 0])` is
    `sl.matmul %x, %w {trans_b = true}`, and a batched `[0, 1, 3, 2]` operand of a batched
    product likewise; a flag already set is cleared (the transposes cancel). `sl.gemm` operands
    fold the same way (rank 2, `[1, 0]`). A transpose of a product's result that swaps its last
    two dimensions, where the transpose is the product's only user, becomes the product with its
    operands exchanged: `(A B)^T = B^T A^T`. Transposes of transposes that restore the order
    disappear (the transpose folder). The backends pass the flags to the BLAS (cblas, cuBLAS), so
    the transposed matrices are never written.

    The pipelines run it after `sl-fuse-transformer` (which recognises q @ k^T by its transpose)
    and, for training, again after `sl-autodiff`, whose gradient rules spell every transpose
    out: the weights read transposed in the forward, the recomputation and the input gradients,
    and the activations and output gradients of the weight gradients all fold. A transpose with another user (an
    elementwise op, a permutation of other dimensions) stays for that user, and a permutation
    that moves any dimension other than the last two (`[0, 2, 1, 3]`, the attention heads') is
    not a flag and stays.

    Example: `%t = sl.transpose %w [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>` and
    `%y = sl.matmul %x, %t : tensor<4x8x32xf32>, tensor<32x64xf32> -> tensor<4x8x64xf32>` become
    `%y = sl.matmul %x, %w {trans_b = true} : tensor<4x8x32xf32>, tensor<64x32xf32> -> ...`.
  }];
  let dependentDialects = ["::sl::SLDialect"];
}

def FoldHeadTransposesPass : Pass<"sl-fold-head-transposes", "mlir::func::FuncOp"> {
  let summary = "attention reads and writes the projections' [B, S, H, D] order; head permutations never copied";
  let description = [{
    Exporters permute each projection's [batch, seq, heads, dim] to [batch, heads, seq, dim]
    before attention (`sl.transpose [0, 2, 1, 3]`, for q, k and v, through `sl.rotary` for q
    and k) and the attention result back; sl-autodiff does the same to their gradients. This
    pass gives `sl.attention` and `sl.attention_grad` the layout `bshd` instead, which the
    kernels read and write directly, so those permutations are never copied:

    - `sl.attention` whose q, k and v are each a `[0, 2, 1, 3]` transpose, or `sl.rotary` of
      one, reads the transposes' inputs; a rotary in between moves after the permutation, its
      `cos` and `sin` reshaped to the exchanged order (a reshape, not a copy, as their heads
      dimension is 1). A `[0, 2, 1, 3]` transpose of the result is the new result itself;
      another user of the result reads it through a new transpose.
    - `sl.attention_grad` likewise for q, k, v and dy, and for the gradients: a transpose of
      one, or of `sl.rotary_grad` of one, is the new gradient (through a rotary gradient with
      reshaped tables).

    An attention that is already `bshd`, or where an operand is no such transpose, stays, and
    so does one with a single position or head (a decoding step's, which `sl-split-generation`
    reads in the [B, H, S, D] order). Instead, a `[0, 2, 1, 3]` permutation of a tensor whose
    dimension 1 or 2 is 1 moves no element and becomes an `sl.reshape` (a view in the schedule,
    no copy). The pipelines run it after `sl-fold-matmul-transposes`, wherever that runs.

    Example: `%q = sl.transpose %x [0, 2, 1, 3]` (and likewise `%k`, `%v`),
    `%o = sl.attention %q, %k, %v {causal, scale = 0.125 : f32}`,
    `%y = sl.transpose %o [0, 2, 1, 3]` become
    `%y = sl.attention %x, %xk, %xv {causal, layout = #sl.head_layout<bshd>, scale = 0.125 : f32}`.
  }];
  let dependentDialects = ["::sl::SLDialect"];
}

def ExplicitForwardPass : Pass<"sl-explicit-forward", "mlir::ModuleOp"> {
  let summary = "a bound @forward (or another function) as one explicit inference step, every "
                "parameter resident";
  let description = [{
    Writes `@infer_step` from a `@forward` whose shapes are bound, and erases `@forward`: every
    parameter fetched to the device once (one `sl.fetch_params`, group "model", of the parameters
    something computes with), every input prefetched, the body unchanged, every output offloaded
    to a host-pool slot of its own (a constant output is prefetched first), constants read by
    device kernels prefetched (`sl.prefetch`). The step's `sl.plan` is one sub-batch of the
    whole batch (`sub_batch_size`, `num_sub_batches = 1`, `parameter_bytes`).

    It is the step of `--sl-infer` without a memory budget: `sl-assign-streams`, `sl-allocate`
    (device buffers reused as values die) and `sl-insert-events` lower it like any explicit
    step. Unlike `sl-schedule-subbatches forward-only` it needs no stages, so any model has one;
    a `@forward` that calls stage functions (`sl.layer`) is refused.

    With `entry=NAME` the step is written from another function instead, e.g. a stage or its
    backward function, whose arguments (parameters included) all become the step's inputs:
    `sl-opt -o FILE.slsched --schedule-entry=NAME` schedules a function that is not a step this
    way. The function is erased only if nothing refers to it. An input without an `sl.name` is
    named `arg<N>`, as `sl-run --input` expects it.

    Example:

    ```mlir
    func.func @infer_step(%x: tensor<2x4xf32> {sl.name = "x"}) -> (tensor<2x4xf32> {sl.name = "y"})
        attributes {sl.plan = #sl.plan<num_sub_batches = 1, parameter_bytes = 64,
                                       sub_batch_size = 2>} {
      %w = sl.param "w" : tensor<4x4xf32>
      %wd = sl.fetch_params %w {group = "model"} : tensor<4x4xf32>
      %xd = sl.prefetch %x : tensor<2x4xf32>
      %yd = sl.matmul %xd, %wd : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
      %y = sl.offload %yd : tensor<2x4xf32>
      return %y : tensor<2x4xf32>
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"forward\"",
           "the function the step is written from">,
  ];
  let dependentDialects = ["::sl::SLDialect", "mlir::func::FuncDialect"];
}

def ScheduleSubBatchesPass : Pass<"sl-schedule-subbatches", "mlir::ModuleOp"> {
  let summary = "the training step as SpeedLoader (or canonical) sub-batch loops with explicit transfers";
  let description = [{
    After `sl-partition-layers` and `sl-autodiff`, writes `@train_step(input_ids, labels) ->
    (loss, grad:<param>...)` for a batch of `num-sub-batches` (N) sub-batches of the size
    @forward is bound at, with every transfer explicit. Stages are grouped: the prologue alone,
    blocks `live-blocks` (K) at a time, the epilogue alone. Fully unrolled, in issue order:

    - `mode=speedloader`: for each group, its parameters are fetched once (`sl.fetch_params`;
      the next group's fetch is issued while this group computes) and applied to all N
      sub-batches: each sub-batch's boundary input is prefetched from the host pool
      (`sl.prefetch`, one sub-batch ahead), the group runs, its output is offloaded
      (`sl.offload`). The epilogue runs forward and backward per sub-batch. Backward, groups in
      reverse: fetch once, per sub-batch prefetch the boundary input and the output gradient,
      recompute and back-propagate, accumulate parameter gradients on the device
      (`sl.accumulate`), offload the input gradient; then offload the group's gradients once and
      mark them final (`sl.optimizer_step`).
    - `mode=canonical`: the ZeRO-style baseline on the same machinery: each sub-batch runs the
      whole forward and backward with a parameter fetch per group and pass, and every group's
      gradients are offloaded per sub-batch and accumulated on the host.

    The loss is the mean over the N sub-batch losses (each a mean over its tokens, all equal in
    size: the mean over every token of the batch); each sub-batch's backward is seeded with 1/N.
    Constants that kernels read are prefetched once at the start. Options left at 0 (or empty)
    come from the module's `sl.plan` (written by `sl-plan`), else N = 1, K = 1, speedloader,
    world 1. The step carries `sl.plan` with the values used.

    With `world` = W > 1 ranks (data parallel, ZeRO-3) the step is written for
    `sl-shard-parameters`, which shards it: each pass's parameters are fetched by one
    `sl.fetch_params` holding all its group's parameters (no shares: a shard arrives as one copy
    and one all-gather), and the backward is seeded with 1/(N W), so that the sum the
    reduce-scatter takes over ranks is the gradient of the mean over the W ranks' tokens (all
    ranks have the same number of tokens). `sl.plan` carries `world`.

    With `forward-only` the pass writes an inference step instead, `@infer_step(inputs...) ->
    (outputs...)`, from stages that need no backward functions: each group's forward pass in
    order (SpeedLoader: a group's parameters fetched once for all N sub-batches; canonical: per
    sub-batch), each sub-batch's outputs of @forward offloaded and, for N > 1, joined along
    axis 0 by a `sl.concat` of host values (a host kernel). With `world` > 1 each rank runs it
    on its own batch, and `sl-shard-parameters` shards its weights.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"\"",
           "speedloader or canonical (empty: from sl.plan, else speedloader)">,
    Option<"numSubBatches", "num-sub-batches", "int64_t", /*default=*/"0",
           "Sub-batches per step, N (0: from sl.plan, else 1)">,
    Option<"liveBlocks", "live-blocks", "int64_t", /*default=*/"0",
           "Blocks per group whose parameters are on the device together, K (0: from sl.plan, "
           "else 1)">,
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "The step's batch the user asked for, checked to be N x the sub-batch size "
           "(0: unchecked)">,
    Option<"world", "world", "int64_t", /*default=*/"0",
           "Ranks the step is written for, W (0: from sl.plan, else 1); sl-shard-parameters "
           "then shards parameters, gradients and optimizer state over them">,
    Option<"forwardOnly", "forward-only", "bool", /*default=*/"false",
           "Write the inference step @infer_step instead: every group's forward pass over the "
           "sub-batches (stages need no backward functions), @forward's outputs offloaded per "
           "sub-batch and joined on the host; one rank">,
  ];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

def ShardParametersPass : Pass<"sl-shard-parameters", "mlir::ModuleOp"> {
  let summary = "ZeRO-3: parameters, gradients and optimizer state of a step sharded over ranks";
  let description = [{
    Rewrites the `@train_step` that `sl-schedule-subbatches` writes for `world` = W > 1 ranks
    (`sl.plan`'s `world`; with one rank the pass changes nothing) into the data-parallel,
    ZeRO-3 step, keeping its order of issue. Each rank runs the step on its own batch.

    - The first group to fetch a parameter owns it (a tied weight belongs to the first group that
      reads it). A group's parameters are flattened into one f32 vector (the layout
      `sl.param_shard` describes: each parameter padded to a multiple of 4 elements, the whole
      to a multiple of 4 W), of which each rank holds 1/W in the host pool.
    - Each `sl.fetch_params` becomes, per shard its parameters are in, a prefetch of the rank's
      shard and an all-gather on the collective stream (`sl.all_gather`); the parameters are
      `sl.view`s of the gathered vector. What the pass does not read is not gathered.
    - The offloads that end a backward pass (each parameter's device gradient, summed over the
      sub-batches) become, per shard, a concatenation into the shard's layout (zeros for a tied
      weight's other user and for the padding), a reduce-scatter (`sl.reduce_scatter`) and an
      offload of the rank's part, summed on the host over the passes that read the shard.
    - Optimizer steps run on shards: with `mode=speedloader` as soon as the last group that
      reads a shard has done its backward pass, with `mode=canonical` after the last sub-batch.
      The step returns `loss` and `grad_shard:<group>` per shard instead of `grad:<param>`.

    A planned inference step (`@infer_step` with `sl.plan`, `sl-schedule-subbatches
    {forward-only=true}`'s) is sharded the same way, fetches only: each rank keeps 1/W of every
    group's weights and all-gathers a group before its pass (ZeRO-Inference); its outputs are
    those of the rank's own batch.

    A parameter computed in bf16 whose model file stores f32 (`stored_as f32`) is sharded as f32:
    the step's `sl.param` becomes f32 (the shard holds the optimizer's master), and after the
    all-gather its f32 view is cast to bf16 (`sl.cast`) for the stages. A parameter with no f32
    values behind it is an error.
  }];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

def AssignStreamsPass : Pass<"sl-assign-streams", "mlir::func::FuncOp"> {
  let summary = "put every kernel of an explicit step on a stream";
  let description = [{
    On a step written by `sl-schedule-subbatches` (a function carrying `sl.plan`), sets
    `sl.stream` on every op that becomes a kernel: `"h2d"` for `sl.fetch_params` and
    `sl.prefetch`, `"d2h"` for `sl.offload`, `"host"` for accumulations, KV cache writes and concatenations of host values and
    `sl.optimizer_step`, `"collective"` for `sl.all_gather` and `sl.reduce_scatter`, and
    `"compute"` for every other op that computes. Parameters, constants, sub-batch views and
    reshapes are no kernels and get none. Functions without `sl.plan` are left alone.

    Copies on their own streams are what lets the runtime overlap them with compute; the waits
    between streams come from `sl-insert-events`.
  }];
}

def AllocatePass : Pass<"sl-allocate", "mlir::func::FuncOp"> {
  let summary = "static offsets in the device arena and the host pool";
  let description = [{
    On a step written by `sl-schedule-subbatches`, gives every value a byte offset in its memory
    space (`sl.offsets` on each op, one per result; `sl.offset` on each argument) and sets the
    function's `sl.device_arena_bytes` and `sl.host_pool_bytes`.

    Both spaces are reused: values are placed in issue order, each at the best-fitting free
    range (256-byte aligned on the device, 64 on the host), and a value's range is free again
    after its last reader. Inputs, parameters and constants keep their host slots for the whole
    step (the runtime writes them before it starts). An accumulation whose accumulator dies there
    is placed over it (in place), so accumulating over sub-batches needs one buffer, on the
    device or on the host. Views (reshapes, sub-batches) share their source's bytes. Every slot
    is one contiguous range, so each (stage, sub-batch) activation moves in one copy.

    Reuse makes later kernels write bytes that earlier kernels on other streams read:
    `sl-insert-events` orders them.
  }];
}

def InsertEventsPass : Pass<"sl-insert-events", "mlir::func::FuncOp"> {
  let summary = "the waits between streams: data dependences and reuse of memory";
  let description = [{
    After `sl-assign-streams` and `sl-allocate`, orders every pair of kernels on different
    streams that touch overlapping bytes of one memory space, at least one of them writing:
    a value read after it was computed or copied, and a buffer written after an earlier value
    in the same bytes was read (reuse). A kernel that must wait gets `sl.wait` (the events it
    waits for) and the kernel it waits for `sl.record` (its event); the function gets
    `sl.num_events`.

    The set of waits is minimal in the sense of vector clocks: a wait is added only when the
    kernel is not already ordered after the other one through earlier waits and stream order.
    An `sl.optimizer_step` writes the host buffers of its parameters.
  }];
}

def PlanPass : Pass<"sl-plan", "mlir::ModuleOp"> {
  let summary = "choose sub-batch size, sub-batch count and live blocks from a memory cost model";
  let description = [{
    Measures the stages of a model after `sl-partition-layers` and `sl-autodiff` (parameter
    bytes, boundary activations, FLOPs, and the peak live bytes inside every stage function and
    its backward function) as linear functions of the sub-batch size b, predicts device memory,
    host memory, host<->device bytes and step time of the SpeedLoader schedule (or the canonical,
    ZeRO-3-offload one with `mode=canonical`), and chooses the configuration. Memory is predicted
    by writing the step of the configuration on the measured copies (`step-pipeline`, below) and
    laying it out as `sl-allocate` does, every value's bytes fitted as a line in b:
    the step is laid out at min(N, 16) sub-batches, which gives the device arena (it stops
    growing after a few sub-batches) and, up to 16, the host pool exactly as `sl-allocate` will;
    beyond 16 the pool is bounded from the step at 16 (the offloaded boundaries live at each op
    grown in proportion to N, the inputs for N, plus the free ranges best fit left and the
    largest parameter-gradient slot).

    - live blocks: `live-blocks`, else 1 (device memory goes to the sub-batch first; more live
      blocks save the transfers of the boundaries inside a group but hold more parameters);
    - sub-batch size: `sub-batch-size`, or `batch / num-sub-batches`, else the largest that fits
      `device-memory` (a divisor of `batch` when `batch` is given), else `batch`; the arena is
      checked at the number of sub-batches the step will have, at 16 when `host-memory` is to
      choose it;
    - number of sub-batches: `num-sub-batches`, or `batch / sub-batch-size`, else the most that
      fit `host-memory` (the pool and AdamW's fp32 state), else 1;
    - then, where `live-blocks` was not given (any K up to the number of blocks), and where the
      sub-batch size was chosen for a given `batch` on a machine whose cost per kernel is
      modelled (`kernel_overhead_us`; any divisor of `batch` up to the one above), the
      configuration with the shortest predicted step that fits both budgets, if it is predicted
      at least 5% faster.

    A module already partitioned into stages is measured as it is, its sub-batch size fixed by
    its bound shapes. A module not yet partitioned (inside `--sl-train` and planned
    `--sl-infer`, sl-plan runs before the shapes are bound) is measured on copies compiled to
    stages by `stage-pipeline` (by default `--sl-train`'s stage passes; the pipelines give theirs),
    each bound by the copy's `sl.bind_shapes` at sub-batch size 2 or 4 (a model exported with
    static shapes: one copy, as it is bound): every figure is fitted exactly from the two, the
    plan is made, and `sl-bind-shapes` then binds the module at the planned sub-batch size. The
    step of each candidate is written on the copies by `step-pipeline` (by default what
    `--sl-train` runs: `sl-schedule-subbatches`, `sl-shard-parameters`, `cse`; with
    `forward-only`, what `--sl-infer` runs: `sl-schedule-subbatches{forward-only=true}`,
    `sl-shard-parameters`, `cse`), the candidate in the copy's `sl.plan`. Both pipelines run as this pass's own pipelines (`Pass::runPipeline`):
    IR printing, timing and crash reproducers show every pass they run.

    The result is the module attribute `sl.plan`, read by `sl-bind-shapes`,
    `sl-schedule-subbatches` and the schedule emitter:

    ```mlir
    module attributes {sl.plan = {mode = "speedloader", sub_batch_size = 4 : i64,
        num_sub_batches = 8 : i64, live_blocks = 1 : i64, predicted_device_bytes = ... : i64,
        predicted_host_bytes = ... : i64, predicted_host_pool_bytes = ... : i64,
        predicted_step_seconds = ... : f64, parameter_bytes = ... : i64,
        boundary_activation_bytes = ... : i64}}
    ```

    A budget nothing fits is an error giving the bytes needed and available. Byte options take a
    plain number or one with a unit: `B`, `KB`, `MB`, `GB`, `TB` (powers of 1000), `KiB`, `MiB`,
    `GiB`, `TiB` (powers of 1024), e.g. `device-memory=80GB host-memory=512GiB`. With `report`,
    sl-plan prints the figures of every stage, the device arena at its peak (what it holds then,
    by kind, and the free ranges between them), the host pool the same way, bytes moved per step
    for both modes, and the
    predicted step time, to standard output.
  }];
  let options = [
    Option<"deviceMemory", "device-memory", "std::string", /*default=*/"\"\"",
           "Device memory budget in bytes, with an optional unit (none: unlimited)">,
    Option<"hostMemory", "host-memory", "std::string", /*default=*/"\"\"",
           "Host memory budget per rank in bytes, with an optional unit (none: unlimited)">,
    Option<"world", "world", "int64_t", /*default=*/"1",
           "Ranks sharing parameters, gradients and optimizer state (ZeRO-3; inference: "
           "parameters)">,
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "Sequences per step, sub-batch-size x num-sub-batches (0: not fixed)">,
    Option<"subBatchSize", "sub-batch-size", "int64_t", /*default=*/"0",
           "Sequences per sub-batch (0: choose)">,
    Option<"numSubBatches", "num-sub-batches", "int64_t", /*default=*/"0",
           "Sub-batches per step (0: choose)">,
    Option<"liveBlocks", "live-blocks", "int64_t", /*default=*/"0",
           "Blocks whose parameters are on the device together (0: choose)">,
    Option<"mode", "mode", "std::string", /*default=*/"\"speedloader\"",
           "Schedule to plan: speedloader or canonical (ZeRO-3 offload)">,
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "The machine to plan for, whose rates are the defaults of link-gbps, tflops and "
           "optimizer-gparams: cpu or h200 (measured), h100-sxm, h100-pcie or a100 (datasheet "
           "peaks scaled by the H200's measured fractions), or FILE.json, a profile that "
           "`sl-run --calibrate FILE.json` measured (none: cpu)">,
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "The stages' storage type: bf16 takes the target's bf16 compute rate, anything else its "
           "f32 rate">,
    Option<"linkGBps", "link-gbps", "double", /*default=*/"0",
           "Host<->device bandwidth per direction in GB/s (10^9 bytes per second; 0: the "
           "target's; cpu's is 25, PCIe 4 x16)">,
    Option<"tflops", "tflops", "double", /*default=*/"0",
           "Sustained compute rate in TFLOP/s (0: the target's; cpu's is 0.2, fp32 GEMM on a few "
           "CPU cores)">,
    Option<"optimizerGParams", "optimizer-gparams", "double", /*default=*/"0",
           "The host's AdamW rate in 10^9 parameters per second (0: the target's; cpu does not "
           "model it)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the plan and its predictions to standard output">,
    Option<"forwardOnly", "forward-only", "bool", /*default=*/"false",
           "Plan an inference step (sl-schedule-subbatches forward-only): stages without "
           "backward functions, no loss, no optimizer state">,
    Option<"stagePipeline", "stage-pipeline", "std::string",
           /*default=*/"\"builtin.module(sl-bind-inputs{inputs=past_key_values},sl-bind-shapes,"
           "canonicalize,func.func(sl-fuse-transformer),canonicalize,cse,"
           "func.func(sl-fold-matmul-transposes,sl-fold-head-transposes),sl-partition-layers,"
           "sl-autodiff,func.func(sl-fold-matmul-transposes,sl-fold-head-transposes))\"",
           "The passes that compile a copy of a module not yet partitioned into stages to "
           "stages, its batch bound by the copy's sl.bind_shapes (default: --sl-train's, fused, "
           "f32, seq bound by the model)">,
    Option<"stepPipeline", "step-pipeline", "std::string", /*default=*/"\"\"",
           "The passes that write the step of a configuration (the copy's sl.plan) on a "
           "measured copy (none: builtin.module(sl-schedule-subbatches,sl-shard-parameters,cse), "
           "or with forward-only builtin.module(sl-schedule-subbatches{forward-only=true},"
           "sl-shard-parameters,cse))">,
  ];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

def SplitGenerationPass : Pass<"sl-split-generation", "mlir::ModuleOp"> {
  let summary = "compile a language model into the prefill and decode stages of generation";
  let description = [{
    From an imported model whose `@forward` maps `input_ids` [batch, seq] to logits (shapes not
    yet bound), writes two partitioned functions at the sub-batch size `b`, compiling copies of
    the module with `stage-pipeline` (bind, fold, fuse, partition; by default `--sl-generate`'s),
    each bound by the copy's `sl.bind_shapes` at [b, P], [b, 1] or [1, C], as this pass's own
    pipeline (`Pass::runPipeline`, so IR printing shows it):

    - `@prefill(input_ids [b, P], last_index [b]) -> logits [b, 1, V]`: every block also returns
      the keys and values of each of its attentions (what the KV cache keeps); the epilogue
      applies the head to each prompt's last position only (`sl.take_rows`).
    - `@decode(input_ids [b, 1], position [b], one KV cache per block) -> logits [b, 1, V]`:
      every attention becomes `sl.decode_attention` over its block's cache
      [b, 2, kv_heads, C, head_dim] and the new token, and blocks return the new keys and values.
      Rotary cos/sin (taken from a copy bound at all C = P + max-new-tokens positions) and
      learned position embeddings read each sequence's `position`; ALiBi slopes come from that
      copy too (bound at one token, the position bias folds to zero). An attention with any
      other additive mask is an error naming it: its bias cannot follow the new token. In that
      copy too, every
      attention must be fused and causal, with no mask but ALiBi slopes: a sliding-window mask, causal at P but not
      at C, is refused (the decode kernels attend to the whole cache).

    `P` is `max-prompt-len`. `batch`, `sub-batch-size` and `num-sub-batches` give the batch of
    prompts as N sub-batches of b (any two, or one with N = 1). With `device-memory`, the pass
    plans (the generation planner, `sl/Analysis/GenerationPlanner.h`; budgets read as
    `sl-plan` reads them): it compiles the whole step on copies of the module with
    `step-pipeline` (sl-schedule-generation through sl-allocate, the candidate in the copy's
    `sl.generation`, so the figures are the real arena and pool) and takes the largest
    sub-batch size that fits (a divisor of `batch` when given), keeping the weights and the KV
    caches on the device when they fit too (both, else the weights, else the caches); with `host-memory`, the most sub-batches whose host pool (weights, KV
    caches, activations) fits. A budget nothing fits is an error giving the bytes needed and
    available. `weights-on-device` and `kv-cache-on-device` force a placement (`true`: on the
    device, `false`: streamed from the host pool; `auto`, the default, leaves it to the plan):
    the planner only tries the placements they allow (with both given, it chooses only the
    sub-batch size), and a device budget that no sub-batch size fits with them is an error
    naming them. Without `device-memory`, what they do not force is streamed.
    The module attribute `sl.generation` records the sizes, the placement
    (`weights_on_device`, `kv_cache_on_device`, forced or planned) and, when planned, the
    predicted arena and pool, for `sl-schedule-generation`. Attention must be fused, causal and unmasked (prompts are
    right-padded, so padding is never attended by a real token).
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "Sequences per batch of prompts, sub-batch-size x num-sub-batches (0: not fixed)">,
    Option<"subBatchSize", "sub-batch-size", "int64_t", /*default=*/"0",
           "Sequences per sub-batch (0: batch / num-sub-batches)">,
    Option<"numSubBatches", "num-sub-batches", "int64_t", /*default=*/"0",
           "Sub-batches per batch (0: batch / sub-batch-size, or 1)">,
    Option<"maxPromptLen", "max-prompt-len", "int64_t", /*default=*/"0",
           "Longest prompt, in tokens">,
    Option<"maxNewTokens", "max-new-tokens", "int64_t", /*default=*/"0",
           "Most tokens generated per prompt">,
    Option<"deviceMemory", "device-memory", "std::string", /*default=*/"\"\"",
           "Device memory budget, e.g. 80GB (none: unlimited); chooses the sub-batch size">,
    Option<"hostMemory", "host-memory", "std::string", /*default=*/"\"\"",
           "Host memory budget, e.g. 512GiB (none: unlimited); chooses the sub-batch count">,
    Option<"weightsOnDevice", "weights-on-device", "::sl::Placement",
           /*default=*/"::sl::Placement::kAuto",
           "Keep the parameters on the device between prefill and decode (true), stream them "
           "every program run (false), or let device-memory choose (auto: the device when they "
           "fit, else streamed)", "::sl::placementValues()">,
    Option<"kvCacheOnDevice", "kv-cache-on-device", "::sl::Placement",
           /*default=*/"::sl::Placement::kAuto",
           "Keep the KV caches on the device (true), stream each chunk every program run "
           "(false), or let device-memory choose (auto: the device when they fit, else "
           "streamed)", "::sl::placementValues()">,
    Option<"stagePipeline", "stage-pipeline", "std::string",
           /*default=*/"\"builtin.module(sl-bind-inputs{inputs=past_key_values},sl-bind-shapes,"
           "canonicalize,func.func(sl-fuse-transformer),canonicalize,cse,"
           "func.func(sl-fold-matmul-transposes,sl-fold-head-transposes),sl-partition-layers)\"",
           "The passes that compile a copy of the module, bound at the sizes of its "
           "sl.bind_shapes, to stages (default: --sl-generate's, fused, f32)">,
    Option<"stepPipeline", "step-pipeline", "std::string",
           /*default=*/"\"builtin.module(sl-schedule-generation,cse,"
           "func.func(sl-assign-streams,sl-allocate))\"",
           "The passes that write and lay out the generation step of a candidate plan (the "
           "copy's sl.generation) to measure its arena and pool">,
  ];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

def ScheduleGenerationPass : Pass<"sl-schedule-generation", "mlir::ModuleOp"> {
  let summary = "the explicit generation step: prefill and decode programs over N sub-batches";
  let description = [{
    From `@prefill` and `@decode` (sl-split-generation), writes `@generate`, a step of two
    programs (`sl.program "prefill"`, `sl.program "decode"`) over a batch of N sub-batches, in
    the SpeedLoader order: each stage's parameters are fetched once per program run and applied
    to every sub-batch before the next stage's; sub-batch j+1's inputs are prefetched while j
    computes. Each block instance has one host KV cache [N * b, 2, kv_heads, C, head_dim]
    (arguments marked `sl.kv_cache`), so one (sub-batch, layer) chunk is one contiguous copy:
    decode prefetches it, and only the new keys and values go back (offloaded, then written in
    place on the host by `sl.kv_write` at each sequence's position). Prefill offloads the hidden
    states between stages; decode keeps its one-token states on the device. The logits of the
    sub-batches are joined on the device and offloaded once. With `weights-on-device` (chosen by
    sl-split-generation when they fit the device budget), the parameters prefill fetched stay on
    the device and decode fetches none: they move once per batch of prompts instead of once per
    new token. With `kv-cache-on-device`, each (sub-batch, layer) cache chunk is an `sl.empty`
    device buffer that prefill and every decoding step write in place with `sl.kv_write` on the
    compute stream: no cache bytes cross the link at all.
  }];
  let options = [
    Option<"numSubBatches", "num-sub-batches", "int64_t", /*default=*/"0",
           "Sub-batches per batch of prompts (0: sl.generation's, else 1)">,
    Option<"weightsOnDevice", "weights-on-device", "bool", /*default=*/"false",
           "Keep the parameters prefill fetched on the device for decode (also when "
           "sl.generation says so)">,
    Option<"kvCacheOnDevice", "kv-cache-on-device", "bool", /*default=*/"false",
           "Keep every KV cache chunk on the device, written in place (also when sl.generation "
           "says so)">,
  ];
  let dependentDialects = ["::sl::SLDialect", "::mlir::func::FuncDialect"];
}

#endif // SL_PASSES_TD
