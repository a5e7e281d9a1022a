//===- SLAttrs.td - typed attributes of the sl dialect -----------------------------------------===//
//
// Attributes whose values are a closed set the verifier, the passes and the schedule emitter
// switch over: enums, never string keys.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_ATTRS_TD
#define SL_ATTRS_TD

include "mlir/IR/EnumAttr.td"
include "sl/SLDialect.td"

// The order of the dimensions of the attention kernels' per-head tensors (q, k, v, the result and
// their gradients). Exporters permute the projections' [batch, seq, heads, dim] to
// [batch, heads, seq, dim] before attention and back after it; with `bshd` the kernels read and
// write the projections' order and those permutations are never copied (sl-fold-head-transposes).
def SL_HeadLayout : I32EnumAttr<"HeadLayout", "order of the dimensions of per-head tensors", [
    I32EnumAttrCase<"bhsd", 0>,
    I32EnumAttrCase<"bshd", 1>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sl";
}

def SL_HeadLayoutAttr : EnumAttr<SL_Dialect, SL_HeadLayout, "head_layout"> {
  let summary = "[batch, heads, seq, dim] (bhsd, the default) or [batch, seq, heads, dim] (bshd)";
  let assemblyFormat = "`<` $value `>`";
}

// The stream of an explicit step a kernel runs on (sl.stream, written by sl-assign-streams): the
// device's compute stream, the copies to and from the device, the host's own kernels (optimizer
// steps, host accumulations and concatenations, KV writes into host caches) and the collectives.
def SL_StreamKind : I32EnumAttr<"StreamKind", "the stream a kernel of an explicit step runs on", [
    I32EnumAttrCase<"compute", 0>,
    I32EnumAttrCase<"h2d", 1>,
    I32EnumAttrCase<"d2h", 2>,
    I32EnumAttrCase<"host", 3>,
    I32EnumAttrCase<"collective", 4>]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::sl";
}

def SL_StreamKindAttr : EnumAttr<SL_Dialect, SL_StreamKind, "stream"> {
  let summary = "the stream a kernel runs on: compute, h2d, d2h, host or collective";
  let assemblyFormat = "`<` $value `>`";
}

#endif // SL_ATTRS_TD
