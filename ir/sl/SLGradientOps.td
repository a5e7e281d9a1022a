//===- SLGradientOps.td - the gradients sl-autodiff writes ------------------------------------===//
//
// Included by SLOps.td, after the dialect, its attributes and the tensor type constraints.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_GRADIENT_OPS_TD
#define SL_GRADIENT_OPS_TD

//===--------------------------------------------------------------------------------------------===//
// Gradients (sl-autodiff). Each takes the forward op's inputs and the result's gradient and
// returns the inputs' gradients; the result types say which.
//===--------------------------------------------------------------------------------------------===//

class SL_GradOp<string mnemonic, string forward, string example> : SL_Op<mnemonic, [Pure]> {
  let summary = "gradient of sl." # forward;
  let description = [{
    The backward of `sl.}] # forward # [{`, produced by `sl-autodiff`: from the forward op's
    operands and the gradient of its result, the gradients of its differentiable operands, in
    operand order. It recomputes whatever the forward kept to itself (statistics, attention
    scores) instead of storing it.

    Example:

    ```mlir
    }] # example # [{
    ```
  }];
  let arguments = (ins Variadic<SL_Tensor>:$operands);
  let results = (outs Variadic<SL_FloatTensor>:$results);
  let assemblyFormat = "$operands attr-dict `:` functional-type($operands, results)";
}

def SL_CrossEntropyGradOp : SL_GradOp<"cross_entropy_grad", "cross_entropy",
    "%dlogits = sl.cross_entropy_grad %labels, %dloss, %logits : (tensor<4x16xi64>, tensor<f32>, tensor<4x16x256xf32>) -> tensor<4x16x256xf32>"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands,
                       DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
}
def SL_RmsNormGradOp : SL_GradOp<"rms_norm_grad", "rms_norm",
    "%dx, %dw = sl.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-06 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands, F32Attr:$epsilon);
}
def SL_LayerNormGradOp : SL_GradOp<"layer_norm_grad", "layer_norm",
    "%dx, %dw, %db = sl.layer_norm_grad %x, %w, %dy {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands, I64Attr:$axis, F32Attr:$epsilon);
}
def SL_RotaryGradOp : SL_GradOp<"rotary_grad", "rotary",
    "%dx = sl.rotary_grad %dy, %cos, %sin : (tensor<4x4x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<4x4x16x16xf32>"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands, UnitAttr:$interleaved);
}
// Operands (q, k, v, dy [, mask] [, alibi_slopes]); with `alibi`, the last one is the slopes.
// `layout` is the forward's: with `bshd`, q, k, v, dy and the results are [B, S, H, D].
def SL_AttentionGradOp : SL_GradOp<"attention_grad", "attention",
    "%dq, %dk, %dv = sl.attention_grad %q, %k, %v, %do {causal, scale = 0.25 : f32} : (...) -> (...)"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands, UnitAttr:$causal, F32Attr:$scale,
                       UnitAttr:$alibi,
                       DefaultValuedAttr<SL_HeadLayoutAttr, "::sl::HeadLayout::bhsd">:$layout);
}
def SL_GeluGradOp : SL_GradOp<"gelu_grad", "gelu",
    "%dx = sl.gelu_grad %x, %dy : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands, UnitAttr:$tanh);
}
def SL_SwigluGradOp : SL_GradOp<"swiglu_grad", "swiglu",
    "%dg, %du = sl.swiglu_grad %g, %u, %dy : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)">;
def SL_SliceGradOp : SL_GradOp<"slice_grad", "slice",
    "%dx = sl.slice_grad %dy, %starts, %ends, %axes, %steps : (tensor<2x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x8xf32>">;
def SL_GatherGradOp : SL_GradOp<"gather_grad", "gather",
    "%dtable = sl.gather_grad %ids, %dy {axis = 0 : i64} : (tensor<4x16xi64>, tensor<4x16x64xf32>) -> tensor<256x64xf32>"> {
  let arguments = (ins Variadic<SL_Tensor>:$operands, I64Attr:$axis);
}

#endif // SL_GRADIENT_OPS_TD
