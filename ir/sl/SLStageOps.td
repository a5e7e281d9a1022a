//===- SLStageOps.td - stages: the partitioned model ------------------------------------------===//
//
// Included by SLOps.td, after the dialect, its attributes and the tensor type constraints.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_STAGE_OPS_TD
#define SL_STAGE_OPS_TD

//===--------------------------------------------------------------------------------------------===//
// Stages
//===--------------------------------------------------------------------------------------------===//

def SL_LayerOp : SL_Op<"layer", [AttrSizedOperandSegments,
                                DeclareOpInterfaceMethods<SymbolUserOpInterface>],
    ["isKernel"]> {
  let summary = "one stage of a model: a layer applied with its own parameters";
  let description = [{
    Applies the stage function `callee` to the stage's boundary `inputs` (the activations that
    flow in from the previous stage, and model inputs it reads) and to `params`, the parameters
    of this one instance. `sl-partition-layers` outlines every transformer block into a body
    function (one per distinct block: identical layers share it) and the embedding prologue and
    the norm/head epilogue into functions of their own, and calls each once from the model
    function with this op, in order. `stage` is `prologue`, `block` or `epilogue`; `index` is the
    block's layer number (0 for the prologue and the epilogue).

    These are the units the SpeedLoader schedule moves: a stage's parameters are brought to the
    device once per pass and applied to every sub-batch; its boundary activations are what is
    offloaded and prefetched between stages, and where backward recomputes from.

    Example:

    ```mlir
    %h1 = sl.layer @block(%h0) params(%wq, %wk, %wv, %wo) {stage = "block", index = 0 : i64}
        : (tensor<4x16x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>,
           tensor<64x64xf32>) -> tensor<4x16x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<AnyType>:$inputs,
                       Variadic<AnyType>:$params, StrAttr:$stage, I64Attr:$index);
  let results = (outs Variadic<AnyType>:$results);
  let assemblyFormat = [{
    $callee `(` $inputs `)` `params` `(` $params `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // SL_STAGE_OPS_TD
