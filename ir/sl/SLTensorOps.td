//===- SLTensorOps.td - the model: parameters, constants and tensor kernels -------------------===//
//
// Included by SLOps.td, after the dialect, its attributes and the tensor type constraints.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_TENSOR_OPS_TD
#define SL_TENSOR_OPS_TD

//===--------------------------------------------------------------------------------------------===//
// Parameters
//===--------------------------------------------------------------------------------------------===//

def SL_ParamOp : SL_Op<"param", [Pure],
    ["isKernel", "isPreloaded"]> {
  let summary = "a model parameter, by name and by where its bytes are";
  let description = [{
    Names one model parameter (an ONNX initializer) and the place its bytes live: `file` is the
    model file (or its external-data file) and `offset` the byte offset of the first element, in
    the storage type given by the result's element type, row-major. The bytes are never copied into
    the IR. At run time the runtime reads them from the file into the host pool once and brings
    them to the device when a kernel needs them.

    A parameter without a location (imported from ONNX text or written by hand) is valid IR, but it
    cannot be emitted into a schedule: there are no bytes to point at.

    `stored_as` is the element type of the bytes in the file when it differs from the result's:
    `sl-convert-precision` turns an f32 model's parameters into bf16 ones whose bytes stay f32 in
    the file, and the runtime rounds them to bf16 while loading. f32 bytes for a bf16 result is the
    one conversion allowed.

    Example:

    ```mlir
    %w = sl.param "fc1.weight" from "/models/mlp.onnx" at 1024 : tensor<64x32xf32>
    %b = sl.param "fc1.bias" : tensor<64xf32>
    %v = sl.param "fc2.weight" from "/models/mlp.onnx" at 9216 stored_as f32 : tensor<64x64xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrAttr>:$file,
                       OptionalAttr<I64Attr>:$offset, OptionalAttr<TypeAttr>:$stored_as);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $name (`from` $file^ `at` $offset)? (`stored_as` $stored_as^)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def SL_ConstantOp : SL_Op<"constant", [ConstantLike, Pure, AllTypesMatch<["value", "result"]>],
    ["isKernel", "isPreloaded"]> {
  let summary = "a tensor known at compile time";
  let description = [{
    A small tensor whose value the compiler knows: the exporter's `Constant` nodes, integer
    initializers, and everything folding computes from them (shapes, axes, masks). Model weights
    are `sl.param`, never constants. A schedule stores a constant's bytes and writes them into the
    host pool at start-up (a splat as one element).

    Example:

    ```mlir
    %shape = sl.constant dense<[4, 16, 2, 32]> : tensor<4xi64>
    %ninf = sl.constant dense<0xFF800000> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Linear algebra
//===--------------------------------------------------------------------------------------------===//

def SL_MatmulOp : SL_InferredOp<"matmul", [Pure],
    ["getFlops"]> {
  let summary = "matrix product with broadcast batch dimensions (ONNX MatMul)";
  let description = [{
    NumPy `matmul`: the last two dimensions of `lhs` ([..., M, K]) and `rhs` ([..., K, N]) are
    multiplied, leading dimensions broadcast. A rank-1 `lhs` is a row vector and a rank-1 `rhs` a
    column vector; the added dimension is removed from the result. The contracting dimensions must
    agree. Operands and result share the element type; accumulation is at least fp32.

    `trans_a` / `trans_b` say that the operand is stored with its last two dimensions swapped:
    `lhs` is then [..., K, M] and `rhs` [..., N, K], and the product reads them transposed, as a
    GEMM's transpose flags do, so that no transposed copy is ever written. A product with a flag
    set has operands of rank 2 or more. `sl-fold-matmul-transposes` sets them; importers and
    `sl-autodiff` write transposes as `sl.transpose`.

    Example:

    ```mlir
    %y = sl.matmul %x, %w : tensor<4x8x32xf32>, tensor<32x64xf32> -> tensor<4x8x64xf32>
    // x @ w^T with w stored [64, 32], as a linear layer keeps its weight.
    %z = sl.matmul %x, %v {trans_b = true} : tensor<4x8x32xf32>, tensor<64x32xf32> -> tensor<4x8x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$lhs, SL_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_b);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  // Constant operands fold (rotary angles: inv_freq @ position_ids once positions are bound).
  let hasFolder = 1;
}

def SL_GemmOp : SL_InferredOp<"gemm", [Pure],
    ["getFlops"]> {
  let summary = "general matrix multiply with optional bias (ONNX Gemm)";
  let description = [{
    `result = alpha * op(a) * op(b) + beta * c`, where `op` transposes its argument when
    `trans_a` / `trans_b` is set. `a` and `b` are rank 2; after the optional transposes `a` is
    [M, K] and `b` is [K, N]. The optional `c` is broadcast to [M, N] in one direction (ONNX
    unidirectional broadcasting). This is what exporters write for a linear layer applied to a
    2-D input.

    Example:

    ```mlir
    %y = sl.gemm %x, %w, %b {trans_b = true}
        : (tensor<4x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<4x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$a, SL_FloatTensor:$b, Optional<SL_FloatTensor>:$c,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                       DefaultValuedAttr<BoolAttr, "false">:$trans_b,
                       DefaultValuedAttr<F32Attr, "1.0f">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0f">:$beta);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)
  }];
}

def SL_TransposeOp : SL_InferredOp<"transpose", [Pure],
    ["getFlops"]> {
  let summary = "permute the dimensions of a tensor (ONNX Transpose)";
  let description = [{
    Result dimension `i` is input dimension `perm[i]`; `perm` is a permutation of
    `0 .. rank-1`. Exporters write it for a linear layer's weight when constant folding is off.

    Example:

    ```mlir
    %wt = sl.transpose %w [1, 0] : tensor<64x32xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $input $perm attr-dict `:` type($input) `->` type($result)
  }];
  let hasFolder = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Elementwise
//===--------------------------------------------------------------------------------------------===//

class SL_BroadcastBinaryOp<string mnemonic, string what, string example, list<Trait> traits = [],
                           Type operandType = SL_NumericTensor, Type resultType = SL_NumericTensor>
    : SL_InferredOp<mnemonic, !listconcat(traits, [Pure])> {
  let summary = "elementwise " # what # " with NumPy broadcasting";
  let description = [{
    Elementwise }] # what # [{ of `lhs` and `rhs`, broadcast against each other by NumPy's (and
    ONNX's multidirectional) rules: shapes are aligned at their last dimension, and each pair of
    dimensions must be equal or one of them 1. Operands share the element type; so does the result
    unless it is a comparison (`i1`). Constant operands fold.

    Example:

    ```mlir
    }] # example # [{
    ```
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let hasFolder = 1;
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def SL_AddOp : SL_BroadcastBinaryOp<"add", "sum",
    "%y = sl.add %x, %bias : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xf32>", [Commutative]>;
def SL_SubOp : SL_BroadcastBinaryOp<"sub", "difference",
    "%y = sl.sub %x, %m : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>">;
def SL_MulOp : SL_BroadcastBinaryOp<"mul", "product",
    "%y = sl.mul %x, %s : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>", [Commutative]> {
  let hasCanonicalizer = 1;
}
def SL_DivOp : SL_BroadcastBinaryOp<"div", "quotient (integer division truncates toward zero)",
    "%y = sl.div %x, %n : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>">;
def SL_PowOp : SL_BroadcastBinaryOp<"pow", "power",
    "%y = sl.pow %x, %two : tensor<4x64xf32>, tensor<f32> -> tensor<4x64xf32>", [],
    SL_FloatTensor, SL_FloatTensor>;
def SL_EqualOp : SL_BroadcastBinaryOp<"equal", "equality test",
    "%y = sl.equal %a, %b : tensor<4xi64>, tensor<4xi64> -> tensor<4xi1>", [Commutative],
    SL_Tensor, RankedTensorOf<[I1]>>;
def SL_LessOp : SL_BroadcastBinaryOp<"less", "less-than test",
    "%y = sl.less %a, %b : tensor<16xi64>, tensor<16x1xi64> -> tensor<16x16xi1>", [],
    SL_NumericTensor, RankedTensorOf<[I1]>>;

def SL_WhereOp : SL_InferredOp<"where", [Pure]> {
  let summary = "elementwise selection with NumPy broadcasting (ONNX Where)";
  let description = [{
    `result = condition ? x : y`, the three operands broadcast together. `x`, `y` and the result
    share the element type. Exporters use it to build attention masks.

    Example:

    ```mlir
    %m = sl.where %c, %zero, %ninf : tensor<16x16xi1>, tensor<f32>, tensor<f32> -> tensor<16x16xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I1]>:$condition, SL_Tensor:$x, SL_Tensor:$y);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $x `,` $y attr-dict `:` type($condition) `,` type($x) `,` type($y) `->`
    type($result)
  }];
  let hasFolder = 1;
}

class SL_UnaryOp<string mnemonic, string what, string formula>
    : SL_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what # ", elementwise";
  let description = [{
    `result = }] # formula # [{` for every element of `input`; the shape and element type are
    unchanged.

    Example:

    ```mlir
    %y = sl.}] # mnemonic # [{ %x : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def SL_ReluOp : SL_UnaryOp<"relu", "rectified linear unit", "max(x, 0)">;
def SL_SigmoidOp : SL_UnaryOp<"sigmoid", "logistic sigmoid", "1 / (1 + exp(-x))">;
def SL_SiluOp : SL_UnaryOp<"silu", "sigmoid-weighted linear unit (swish)", "x * sigmoid(x)">;
def SL_SqrtOp : SL_UnaryOp<"sqrt", "square root", "sqrt(x)">;
def SL_ReciprocalOp : SL_UnaryOp<"reciprocal", "reciprocal", "1 / x">;
def SL_ExpOp : SL_UnaryOp<"exp", "exponential", "exp(x)">;
def SL_ErfOp : SL_UnaryOp<"erf", "Gauss error function", "erf(x)">;
def SL_TanhOp : SL_UnaryOp<"tanh", "hyperbolic tangent", "tanh(x)">;
// Rotary tables computed at run time (HF LLaMA since transformers 4.38: cos and sin of
// inv_freq @ position_ids); a constant input folds, as the tables do once positions are bound.
def SL_CosOp : SL_UnaryOp<"cos", "cosine", "cos(x)"> { let hasFolder = 1; }
def SL_SinOp : SL_UnaryOp<"sin", "sine", "sin(x)"> { let hasFolder = 1; }

def SL_NegOp : SL_Op<"neg", [Pure, SameOperandsAndResultType]> {
  let summary = "negation, elementwise";
  let description = [{
    `result = -x` for every element; floats and integers. Constants fold.

    Example:

    ```mlir
    %y = sl.neg %x : tensor<4x32xf32>
    ```
  }];
  let arguments = (ins SL_NumericTensor:$input);
  let results = (outs SL_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasFolder = 1;
}

def SL_CastOp : SL_InferredOp<"cast", [Pure]> {
  let summary = "element type conversion (ONNX Cast)";
  let description = [{
    Converts every element to the result's element type: float to integer truncates toward
    zero, anything to `i1` is `x != 0`. Constants fold.

    Example:

    ```mlir
    %f = sl.cast %mask to f32 : tensor<16x16xi1> -> tensor<16x16xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, TypeAttr:$to);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$input `to` $to attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def SL_GeluOp : SL_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit, exact or tanh-approximated";
  let description = [{
    `result = x * 0.5 * (1 + erf(x / sqrt(2)))`, or with `tanh` the approximation
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))` (GPT-2's `gelu_new`).
    `sl-fuse-transformer` forms it from the exporter's decomposition.

    Example:

    ```mlir
    %y = sl.gelu %x {tanh} : tensor<4x8x128xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input, UnitAttr:$tanh);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def SL_SwigluOp : SL_Op<"swiglu", [Pure, SameOperandsAndResultType]> {
  let summary = "gated SiLU: silu(gate) * up";
  let description = [{
    The gate of a SwiGLU MLP (LLaMA): `result = silu(gate) * up`, elementwise, one shape. Formed by
    `sl-fuse-transformer`; reads each input once.

    Example:

    ```mlir
    %h = sl.swiglu %gate, %up : tensor<4x8x128xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$gate, SL_FloatTensor:$up);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

//===--------------------------------------------------------------------------------------------===//
// Shapes and data movement
//
// Operands that give shapes, axes or bounds are tensors, as in ONNX, so that an imported graph
// keeps its shape arithmetic. Once sl-bind-shapes has folded them into sl.constant, every result
// type is static and the schedule turns them into attributes.
//===--------------------------------------------------------------------------------------------===//

def SL_ShapeOp : SL_InferredOp<"shape", [Pure],
    ["isKernel"]> {
  let summary = "the shape of a tensor, as i64 (ONNX Shape)";
  let description = [{
    The dimensions `start` to `end` (exclusive; negative values count from the end) of `input`'s
    shape. Folds to a constant once those dimensions are static.

    Example:

    ```mlir
    %s = sl.shape %x : tensor<?x?x64xf32> -> tensor<3xi64>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, DefaultValuedAttr<I64Attr, "0">:$start,
                       OptionalAttr<I64Attr>:$end);
  let results = (outs RankedTensorOf<[I64]>:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

def SL_GatherOp : SL_InferredOp<"gather", [Pure]> {
  let summary = "select slices along an axis by index (ONNX Gather)";
  let description = [{
    `result[i..., j..., k...] = data[i..., indices[j...], k...]` with `i` running over the
    dimensions before `axis` and `k` after it; negative indices count from the end. With token ids
    as indices and the embedding table as data it is the embedding lookup. Constants fold.

    Example:

    ```mlir
    %h = sl.gather %table, %ids {axis = 0} : tensor<256x64xf32>, tensor<4x16xi64> -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$data, SL_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` type($data) `,` type($indices) `->` type($result)
  }];
  let hasFolder = 1;
}

def SL_ReshapeOp : SL_InferredOp<"reshape", [Pure],
    ["isKernel", "getDataOperandIndices"]> {
  let summary = "the same elements in a new shape (ONNX Reshape)";
  let description = [{
    `shape` gives the new dimensions: `0` copies the input's dimension at that position (unless
    `allowzero`), `-1` takes what is left. At run time a reshape moves no data: its result is the
    same buffer. Reshape, Squeeze, Unsqueeze and Flatten of exporters all become this op.

    Example:

    ```mlir
    %y = sl.reshape %x, %shape : tensor<4x16x64xf32>, tensor<4xi64> -> tensor<4x16x4x16xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, SL_IndexVector:$shape, UnitAttr:$allowzero);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $shape attr-dict `:` type($input) `,` type($shape) `->` type($result)
  }];
  let hasFolder = 1;
}

def SL_ConcatOp : SL_InferredOp<"concat", [Pure],
    ["getStreamKind"]> {
  let summary = "join tensors along an axis (ONNX Concat)";
  let description = [{
    All inputs have one element type and equal dimensions except along `axis` (negative counts
    from the end). Constants fold, which is how exporters' shape vectors become constants.

    Example:

    ```mlir
    %s = sl.concat %a, %b {axis = 0} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
    ```
  }];
  let arguments = (ins Variadic<SL_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, results)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def SL_SliceOp : SL_InferredOp<"slice", [Pure, AttrSizedOperandSegments],
    ["getDataOperandIndices"]> {
  let summary = "a strided window of a tensor (ONNX Slice)";
  let description = [{
    For each listed axis (all axes, in order, when `axes` is absent), elements `starts` up to
    `ends` (exclusive) in steps of `steps` (1 when absent), with ONNX's clamping of out-of-range
    bounds and negative values counting from the end. Exporters write `x[:, :n]` and cache slicing
    as Slice with bounds computed from shapes; sl-bind-shapes makes them constants.

    Example:

    ```mlir
    %c = sl.slice %cos, %zero, %s axes %axis : (tensor<128x16xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<16x16xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$data, SL_IndexVector:$starts, SL_IndexVector:$ends,
                       Optional<SL_IndexVector>:$axes, Optional<SL_IndexVector>:$steps);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $starts `,` $ends (`axes` $axes^)? (`steps` $steps^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasFolder = 1;
}

def SL_ExpandOp : SL_InferredOp<"expand", [Pure],
    ["getDataOperandIndices"]> {
  let summary = "broadcast a tensor to a shape (ONNX Expand)";
  let description = [{
    Broadcasts `input` together with `shape` by NumPy's rules (a `1` in `shape` keeps the input's
    dimension). GQA's `repeat_kv` and mask construction use it.

    Example:

    ```mlir
    %k2 = sl.expand %k, %s : tensor<4x2x1x16x8xf32>, tensor<5xi64> -> tensor<4x2x2x16x8xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, SL_IndexVector:$shape);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $shape attr-dict `:` type($input) `,` type($shape) `->` type($result)
  }];
  let hasFolder = 1;
}

def SL_TriluOp : SL_InferredOp<"trilu", [Pure],
    ["getDataOperandIndices"]> {
  let summary = "keep the upper or lower triangle of matrices (ONNX Trilu)";
  let description = [{
    Over the last two dimensions, keeps elements on and above (`upper`) or on and below the
    diagonal shifted by `k` (a 0-D or 1-element i64 operand, 0 when absent) and zeroes the rest.
    Exporters build causal masks with it. Constants fold.

    Example:

    ```mlir
    %m = sl.trilu %full, %one {upper} : (tensor<16x16xf32>, tensor<i64>) -> tensor<16x16xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, Optional<SL_IndexTensor>:$k, UnitAttr:$upper);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$input (`,` $k^)? attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def SL_TileOp : SL_InferredOp<"tile", [Pure]> {
  let summary = "repeat a tensor along each dimension (ONNX Tile)";
  let description = [{
    Dimension `d` of the result is `repeats[d]` copies of dimension `d` of `input` (`repeats` is
    a 1-D i64 of the input's rank). GPT-J repeats its sinusoidal position table per sequence with
    it. Folds when its operands are constant; it has no kernel, so one that does not fold is
    refused.

    Example:

    ```mlir
    %t = sl.tile %table, %reps : (tensor<1x32x8xf32>, tensor<3xi64>) -> tensor<2x32x8xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$input, SL_IndexVector:$repeats);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$input `,` $repeats attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def SL_GatherElementsOp : SL_InferredOp<"gather_elements", [Pure]> {
  let summary = "select elements along an axis by a same-rank index tensor (ONNX GatherElements)";
  let description = [{
    `result[i][j][k] = data[indices[i][j][k]][j][k]` for `axis` 0, and likewise for other axes:
    the result has the shape of `indices`; negative indices count from the end. GPT-J gathers its
    rotary table rows by position with it (torch.gather). Folds when its operands are constant;
    it has no kernel, so one that does not fold is refused.

    Example:

    ```mlir
    %g = sl.gather_elements %data, %idx {axis = 1} : (tensor<2x32x8xf32>, tensor<2x5x8xi64>) -> tensor<2x5x8xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$data, SL_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$data `,` $indices attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def SL_ScatterNDOp : SL_InferredOp<"scatter_nd", [Pure]> {
  let summary = "write slices of a tensor at index tuples (ONNX ScatterND)";
  let description = [{
    A copy of `data` where, for each index tuple `indices[i_0, ..., i_{q-2}, :]` (k integers, k at
    most the rank of `data`; negative ones count from the end), the slice of `data` it names is
    replaced by `updates[i_0, ..., i_{q-2}, ...]`, or combined with it by `reduction` (`add`,
    `mul`, `max`, `min`), in index order. `updates` has the shape
    `indices.shape[:-1] + data.shape[k:]`. Exporters write it for an assignment into a slice
    (`x[..., :n] = y`). Folds when its operands are constant; it has no kernel, so one that does
    not fold is refused.

    Example:

    ```mlir
    %y = sl.scatter_nd %data, %idx, %upd : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins SL_Tensor:$data, SL_IndexTensor:$indices, SL_Tensor:$updates,
                       DefaultValuedAttr<StrAttr, "\"none\"">:$reduction);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$data `,` $indices `,` $updates attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def SL_CumSumOp : SL_InferredOp<"cumsum", [Pure],
    ["getDataOperandIndices"]> {
  let summary = "running sum along one axis (ONNX CumSum)";
  let description = [{
    `result[..., i, ...] = sum of input[..., j, ...]` over `j <= i` along `axis` (a 0-D or
    1-element integer operand); with `exclusive`, over `j < i`; with `reverse`, from the end.
    OPT and BLOOM compute position ids as the running sum of the all-ones attention mask, and
    Hugging Face exports with an attention mask as the running sum of that mask. Folds when its
    operands are constant; otherwise it runs as the schedule's CUMSUM kernel (f32 or i64), whose
    axis must be constant by then.

    Example:

    ```mlir
    %pos = sl.cumsum %mask, %one : (tensor<2x16xi64>, tensor<i64>) -> tensor<2x16xi64>
    ```
  }];
  let arguments = (ins SL_NumericTensor:$input, SL_IndexTensor:$axis, UnitAttr:$exclusive,
                       UnitAttr:$reverse);
  let results = (outs SL_NumericTensor:$result);
  let assemblyFormat = "$input `,` $axis attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def SL_ConstantOfShapeOp : SL_InferredOp<"constant_of_shape", [Pure]> {
  let summary = "a tensor of one repeated value, of a computed shape (ONNX ConstantOfShape)";
  let description = [{
    A tensor of shape `shape` whose every element is `value` (a one-element tensor attribute).
    Folds to a splat constant once `shape` is constant.

    Example:

    ```mlir
    %z = sl.constant_of_shape %s {value = dense<0.0> : tensor<1xf32>} : tensor<2xi64> -> tensor<?x?xf32>
    ```
  }];
  let arguments = (ins SL_IndexVector:$shape, ElementsAttr:$value);
  let results = (outs SL_Tensor:$result);
  let assemblyFormat = "$shape attr-dict `:` type($shape) `->` type($result)";
  let hasFolder = 1;
}

def SL_RangeOp : SL_InferredOp<"range", [Pure]> {
  let summary = "evenly spaced values (ONNX Range)";
  let description = [{
    `start, start + delta, ...` up to `limit` (exclusive), from three scalars of one type. Position
    ids (`arange(seq)`) come from it. Folds when its operands are constant.

    Example:

    ```mlir
    %pos = sl.range %zero, %seq, %one : tensor<i64>, tensor<i64>, tensor<i64> -> tensor<?xi64>
    ```
  }];
  let arguments = (ins SL_NumericTensor:$start, SL_NumericTensor:$limit, SL_NumericTensor:$delta);
  let results = (outs SL_NumericTensor:$result);
  let assemblyFormat = [{
    $start `,` $limit `,` $delta attr-dict `:` type($start) `,` type($limit) `,` type($delta) `->`
    type($result)
  }];
  let hasFolder = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Reductions and normalisation
//===--------------------------------------------------------------------------------------------===//

def SL_SoftmaxOp : SL_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax along one axis (ONNX Softmax, opset 13)";
  let description = [{
    `exp(x - max) / sum(exp(x - max))` along `axis` (negative counts from the end).

    Example:

    ```mlir
    %p = sl.softmax %scores {axis = -1} : tensor<4x4x16x16xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input, DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class SL_ReduceOp<string mnemonic, string what>
    : SL_InferredOp<mnemonic, [Pure], ["getDataOperandIndices"]> {
  let summary = what # " over axes (ONNX Reduce" # what # ")";
  let description = [{
    Reduces `input` over `axes` (a constant i64 vector; negative values count from the end; all
    axes when absent, unless `noop_with_empty_axes`). With `keepdims` (the ONNX default) reduced
    axes stay as size 1.

    Example:

    ```mlir
    %m = sl.}] # mnemonic # [{ %x, %axes {keepdims} : (tensor<4x16x64xf32>, tensor<1xi64>) -> tensor<4x16x1xf32>
    ```
  }];
  let arguments = (ins SL_NumericTensor:$input, Optional<SL_IndexVector>:$axes, UnitAttr:$keepdims,
                       UnitAttr:$noop_with_empty_axes);
  let results = (outs SL_NumericTensor:$result);
  let assemblyFormat = "$input (`,` $axes^)? attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def SL_ReduceMeanOp : SL_ReduceOp<"reduce_mean", "Mean">;
def SL_ReduceSumOp : SL_ReduceOp<"reduce_sum", "Sum">;

def SL_LayerNormOp : SL_InferredOp<"layer_norm", [Pure]> {
  let summary = "layer normalisation with scale and optional bias (ONNX LayerNormalization)";
  let description = [{
    Normalises `input` over the dimensions from `axis` to the last to zero mean and unit variance
    (`epsilon` added to the variance), then multiplies by `scale` and adds `bias`, both broadcast to
    those dimensions. Imported from LayerNormalization (opset 17) or formed by
    `sl-fuse-transformer` from the exporter's decomposition.

    Example:

    ```mlir
    %y = sl.layer_norm %x, %g, %b {axis = -1, epsilon = 1.0e-05 : f32} : (tensor<4x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input, SL_FloatTensor:$scale,
                       Optional<SL_FloatTensor>:$bias,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5f">:$epsilon);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Fused transformer operations (sl-fuse-transformer)
//===--------------------------------------------------------------------------------------------===//

def SL_RmsNormOp : SL_InferredOp<"rms_norm", [Pure]> {
  let summary = "RMS normalisation over the last dimension (LLaMA's RMSNorm)";
  let description = [{
    `x / sqrt(mean(x^2 over the last dimension) + epsilon) * scale`, `scale` of the last
    dimension's size. Formed by `sl-fuse-transformer` from the exporter's Pow, ReduceMean, Add,
    Sqrt, Reciprocal/Div and Mul.

    Example:

    ```mlir
    %y = sl.rms_norm %x, %w {epsilon = 1.0e-06 : f32} : tensor<4x16x64xf32>, tensor<64xf32> -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input, SL_FloatTensor:$scale, F32Attr:$epsilon);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` type($input) `,` type($scale) `->` type($result)
  }];
  let hasVerifier = 1;
}

def SL_RotaryOp : SL_InferredOp<"rotary", [Pure]> {
  let summary = "rotary position embedding";
  let description = [{
    `result = x * cos + rotate(x) * sin`, `cos` and `sin` broadcast to `x` ([..., S, D], D even).
    `rotate` is rotate-half, `(-x[D/2:], x[:D/2])` (HF LLaMA), or with `interleaved` pairwise,
    `(-x[2j+1], x[2j])` (GPT-J, Meta's LLaMA). Formed by `sl-fuse-transformer`.

    Example:

    ```mlir
    %q2 = sl.rotary %q, %cos, %sin : (tensor<4x4x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<4x4x16x16xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$input, SL_FloatTensor:$cos, SL_FloatTensor:$sin,
                       UnitAttr:$interleaved);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = "$input `,` $cos `,` $sin attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def SL_AttentionOp : SL_InferredOp<"attention", [Pure, AttrSizedOperandSegments],
    ["getFlops"]> {
  let summary = "scaled dot-product attention, causal, multi-head or grouped-query";
  let description = [{
    `softmax(q k^T * scale + mask + alibi) v` per batch and head, with `q` [B, Hq, S, D], `k`
    [B, Hkv, T, D], `v` [B, Hkv, T, Dv] and the result [B, Hq, S, Dv]. `Hq` is a multiple of `Hkv`:
    query head `h` reads key/value head `h / (Hq / Hkv)` (grouped-query attention), so the
    exporter's `repeat_kv` copies are never made. With `causal`, query `s` sees keys
    `t <= s + T - S`; `mask`, when given, is added to the scores (broadcast to [B, Hq, S, T]).
    `alibi_slopes` [Hq], when given, is ALiBi's position bias: score (s, t) of head `h` gets
    `alibi_slopes[h] * (t - (s + T - S))`, the slope times the key's offset from the query's own
    position. As softmax ignores a shift of a whole row, this is the same attention as BLOOM's
    `slope * t`, and a decoding step can compute it from the key's position in its cache
    (sl.decode_attention). The S x T scores are never stored whole. Formed by
    `sl-fuse-transformer` from MatMul, Div/Mul, Add of the causal mask and of a position bias,
    Softmax, MatMul.

    `layout` orders the dimensions of `q`, `k`, `v` and the result: `bhsd` (the default) as
    above, or `bshd`: [B, S, Hq, D], [B, T, Hkv, D], [B, T, Hkv, Dv] and [B, S, Hq, Dv], the
    order the projections produce, so that no head permutation is copied
    (`sl-fold-head-transposes`). `mask` and `alibi_slopes` keep their meaning (the scores are
    [B, Hq, S, T] in either layout).

    Example:

    ```mlir
    %o = sl.attention %q, %k, %v {causal, scale = 0.25 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>) -> tensor<4x8x16x16xf32>
    %a = sl.attention %q, %k, %v alibi_slopes %slopes {causal, scale = 0.25 : f32} : (tensor<4x8x16x16xf32>, tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
    %b = sl.attention %qs, %ks, %vs {causal, layout = #sl.head_layout<bshd>, scale = 0.25 : f32} : (tensor<4x16x8x16xf32>, tensor<4x16x2x16xf32>, tensor<4x16x2x16xf32>) -> tensor<4x16x8x16xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$q, SL_FloatTensor:$k, SL_FloatTensor:$v,
                       Optional<SL_FloatTensor>:$mask, Optional<SL_FloatTensor>:$alibi_slopes,
                       UnitAttr:$causal, F32Attr:$scale,
                       DefaultValuedAttr<SL_HeadLayoutAttr, "::sl::HeadLayout::bhsd">:$layout);
  let results = (outs SL_FloatTensor:$result);
  // An attention in the default layout, as sl-fuse-transformer forms it.
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$q, "::mlir::Value":$k,
                   "::mlir::Value":$v, "::mlir::Value":$mask, "::mlir::Value":$alibi_slopes,
                   "::mlir::UnitAttr":$causal, "::mlir::FloatAttr":$scale), [{
      build($_builder, $_state, result, q, k, v, mask, alibi_slopes, causal, scale,
            ::sl::HeadLayoutAttr::get($_builder.getContext(), ::sl::HeadLayout::bhsd));
    }]>];
  let assemblyFormat = [{
    $q `,` $k `,` $v (`,` `mask` $mask^)? (`alibi_slopes` $alibi_slopes^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Training
//===--------------------------------------------------------------------------------------------===//

def SL_CrossEntropyOp : SL_Op<"cross_entropy", [Pure]> {
  let summary = "mean softmax cross-entropy of logits against integer labels";
  let description = [{
    `mean over positions p with labels[p] != ignore_index of
    (logsumexp(logits[p, :]) - logits[p, labels[p]])`: the softmax and the log-likelihood in one
    op, as PyTorch's `cross_entropy` with its default `ignore_index = -100` and mean reduction.
    `labels` has the logits' shape without the last (vocabulary) dimension. Appended by
    `sl-append-loss`; its gradient is `(softmax(logits) - onehot(labels)) / count`. The result
    has the logits' element type (bf16 logits give a bf16 loss, computed in f32 and rounded once,
    as every bf16 kernel; sl-schedule-subbatches casts it to f32 before averaging sub-batches).

    Example:

    ```mlir
    %loss = sl.cross_entropy %logits, %labels : tensor<4x16x256xf32>, tensor<4x16xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$logits, RankedTensorOf<[I64]>:$labels,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs 0DTensorOf<[F32, BF16, F64]>:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` type($logits) `,` type($labels) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // SL_TENSOR_OPS_TD
