//===- SLGradientOps.td - the gradients sl-autodiff writes ------------------------------------===//
//
// Included by SLOps.td, after the dialect, its attributes and the tensor type constraints.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_GRADIENT_OPS_TD
#define SL_GRADIENT_OPS_TD

//===--------------------------------------------------------------------------------------------===//
// Gradients (sl-autodiff). Each takes the forward op's inputs and the result's gradient and
// returns the gradients of the inputs that are trained, each of its input's type.
//===--------------------------------------------------------------------------------------------===//

class SL_GradOp<string mnemonic, string forward, string example, list<Trait> traits = [],
                list<string> kernelRole = []>
    : SL_Op<mnemonic, !listconcat([Pure], traits), kernelRole> {
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
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def SL_CrossEntropyGradOp : SL_GradOp<"cross_entropy_grad", "cross_entropy",
    "%dlogits = sl.cross_entropy_grad %labels, %dloss, %logits : (tensor<4x16xi64>, tensor<f32>, tensor<4x16x256xf32>) -> tensor<4x16x256xf32>",
    [AllTypesMatch<["logits", "dlogits"]>]> {
  let arguments = (ins RankedTensorOf<[I64]>:$labels, 0DTensorOf<[F32, BF16, F64]>:$dloss,
                       SL_FloatTensor:$logits, DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs SL_FloatTensor:$dlogits);
}
def SL_RmsNormGradOp : SL_GradOp<"rms_norm_grad", "rms_norm",
    "%dx, %dw = sl.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-06 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>)",
    [AllTypesMatch<["input", "dy", "dinput"]>, AllTypesMatch<["scale", "dscale"]>]> {
  let arguments = (ins SL_FloatTensor:$input, SL_FloatTensor:$scale, SL_FloatTensor:$dy,
                       F32Attr:$epsilon);
  let results = (outs SL_FloatTensor:$dinput, SL_FloatTensor:$dscale);
}
def SL_LayerNormGradOp : SL_GradOp<"layer_norm_grad", "layer_norm",
    "%dx, %dw, %db = sl.layer_norm_grad %x, %w, %dy {axis = 1 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x64xf32>, tensor<64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<64xf32>, tensor<64xf32>)",
    [AllTypesMatch<["input", "dy", "dinput"]>]> {
  // The scale and bias gradients have the normalized shape (dimensions `axis` on), which a
  // broadcast scale need not have.
  let arguments = (ins SL_FloatTensor:$input, SL_FloatTensor:$scale, SL_FloatTensor:$dy,
                       I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs SL_FloatTensor:$dinput, SL_FloatTensor:$dscale, SL_FloatTensor:$dbias);
}
def SL_RotaryGradOp : SL_GradOp<"rotary_grad", "rotary",
    "%dx = sl.rotary_grad %dy, %cos, %sin : (tensor<4x4x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<4x4x16x16xf32>",
    [AllTypesMatch<["dy", "dinput"]>]> {
  let arguments = (ins SL_FloatTensor:$dy, SL_FloatTensor:$cos, SL_FloatTensor:$sin,
                       UnitAttr:$interleaved);
  let results = (outs SL_FloatTensor:$dinput);
}
// Operands (q, k, v, dy [, mask] [, alibi_slopes]); with `alibi`, the last one is the slopes.
// `layout` is the forward's: with `bshd`, q, k, v, dy and the results are [B, S, H, D].
def SL_AttentionGradOp : SL_GradOp<"attention_grad", "attention",
    "%dq, %dk, %dv = sl.attention_grad %q, %k, %v, %do {causal, scale = 0.25 : f32} : (...) -> (...)",
    [], ["getFlops"]> {
  // The operands stay a list: the mask and the slopes are each optional, and the custom form has
  // no keywords to tell them apart.
  let arguments = (ins Variadic<SL_Tensor>:$operands, UnitAttr:$causal, F32Attr:$scale,
                       UnitAttr:$alibi,
                       DefaultValuedAttr<SL_HeadLayoutAttr, "::sl::HeadLayout::bhsd">:$layout);
  let results = (outs SL_FloatTensor:$dq, SL_FloatTensor:$dk, SL_FloatTensor:$dv);
}
def SL_GeluGradOp : SL_GradOp<"gelu_grad", "gelu",
    "%dx = sl.gelu_grad %x, %dy : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>",
    [AllTypesMatch<["input", "dy", "dinput"]>]> {
  let arguments = (ins SL_FloatTensor:$input, SL_FloatTensor:$dy, UnitAttr:$tanh);
  let results = (outs SL_FloatTensor:$dinput);
}
def SL_SwigluGradOp : SL_GradOp<"swiglu_grad", "swiglu",
    "%dg, %du = sl.swiglu_grad %g, %u, %dy : (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)",
    [AllTypesMatch<["gate", "up", "dy", "dgate", "dup"]>]> {
  let arguments = (ins SL_FloatTensor:$gate, SL_FloatTensor:$up, SL_FloatTensor:$dy);
  let results = (outs SL_FloatTensor:$dgate, SL_FloatTensor:$dup);
}
def SL_SliceGradOp : SL_GradOp<"slice_grad", "slice",
    "%dx = sl.slice_grad %dy, %starts, %ends, %axes, %steps : (tensor<2x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x8xf32>",
    [AllElementTypesMatch<["dy", "ddata"]>], ["getDataOperandIndices"]> {
  // Unlike sl.slice, axes and steps are always given: sl-autodiff writes the defaults out.
  let arguments = (ins SL_FloatTensor:$dy, SL_IndexVector:$starts, SL_IndexVector:$ends,
                       SL_IndexVector:$axes, SL_IndexVector:$steps);
  let results = (outs SL_FloatTensor:$ddata);
}
def SL_GatherGradOp : SL_GradOp<"gather_grad", "gather",
    "%dtable = sl.gather_grad %ids, %dy {axis = 0 : i64} : (tensor<4x16xi64>, tensor<4x16x64xf32>) -> tensor<256x64xf32>",
    [AllElementTypesMatch<["dy", "ddata"]>]> {
  let arguments = (ins SL_IndexTensor:$indices, SL_FloatTensor:$dy, I64Attr:$axis);
  let results = (outs SL_FloatTensor:$ddata);
}

#endif // SL_GRADIENT_OPS_TD
