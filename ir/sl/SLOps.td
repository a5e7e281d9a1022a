//===- SLOps.td - operations of the sl dialect -------------------------------------------------===//

#ifndef SL_OPS_TD
#define SL_OPS_TD

include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "sl/SLDialect.td"

// Floating-point tensors: what parameters, activations and gradients are.
def SL_FloatTensor : RankedTensorOf<[F32, F16, BF16, F64]>;

//===--------------------------------------------------------------------------------------------===//
// Parameters
//===--------------------------------------------------------------------------------------------===//

def SL_ParamOp : SL_Op<"param", [Pure]> {
  let summary = "a model parameter, by name and by where its bytes are";
  let description = [{
    Names one model parameter (an ONNX initializer) and the place its bytes live: `file` is the
    model file (or its external-data file) and `offset` the byte offset of the first element, in
    the storage type given by the result's element type, row-major. The bytes are never copied into
    the IR. At run time the runtime reads them from the file into the host pool once and brings
    them to the device when a kernel needs them.

    A parameter without a location (imported from ONNX text or written by hand) is valid IR, but it
    cannot be emitted into a schedule: there are no bytes to point at.

    Example:

    ```mlir
    %w = sl.param "fc1.weight" from "/models/mlp.onnx" at 1024 : tensor<64x32xf32>
    %b = sl.param "fc1.bias" : tensor<64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, OptionalAttr<StrAttr>:$file,
                       OptionalAttr<I64Attr>:$offset);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $name (`from` $file^ `at` $offset)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===--------------------------------------------------------------------------------------------===//
// Linear algebra
//===--------------------------------------------------------------------------------------------===//

def SL_MatmulOp : SL_InferredOp<"matmul", [Pure]> {
  let summary = "matrix product with broadcast batch dimensions (ONNX MatMul)";
  let description = [{
    NumPy `matmul`: the last two dimensions of `lhs` ([..., M, K]) and `rhs` ([..., K, N]) are
    multiplied, leading dimensions broadcast. A rank-1 `lhs` is a row vector and a rank-1 `rhs` a
    column vector; the added dimension is removed from the result. The contracting dimensions must
    agree. Operands and result share the element type; accumulation is at least fp32.

    Example:

    ```mlir
    %y = sl.matmul %x, %w : tensor<4x8x32xf32>, tensor<32x64xf32> -> tensor<4x8x64xf32>
    ```
  }];
  let arguments = (ins SL_FloatTensor:$lhs, SL_FloatTensor:$rhs);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def SL_GemmOp : SL_InferredOp<"gemm", [Pure]> {
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

def SL_TransposeOp : SL_InferredOp<"transpose", [Pure]> {
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
}

//===--------------------------------------------------------------------------------------------===//
// Elementwise
//===--------------------------------------------------------------------------------------------===//

class SL_BroadcastBinaryOp<string mnemonic, string what, string example, list<Trait> traits = []>
    : SL_InferredOp<mnemonic, !listconcat(traits, [Pure])> {
  let summary = "elementwise " # what # " with NumPy broadcasting";
  let description = [{
    Elementwise }] # what # [{ of `lhs` and `rhs`, broadcast against each other by NumPy's (and
    ONNX's multidirectional) rules: shapes are aligned at their last dimension, and each pair of
    dimensions must be equal or one of them 1. Operands and result share the element type.

    Example:

    ```mlir
    }] # example # [{
    ```
  }];
  let arguments = (ins SL_FloatTensor:$lhs, SL_FloatTensor:$rhs);
  let results = (outs SL_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def SL_AddOp : SL_BroadcastBinaryOp<"add", "sum",
    "%y = sl.add %x, %bias : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xf32>", [Commutative]>;

def SL_MulOp : SL_BroadcastBinaryOp<"mul", "product",
    "%y = sl.mul %x, %s : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>", [Commutative]> {
  let hasCanonicalizer = 1;
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

#endif // SL_OPS_TD
