//===- SLOps.td - operations of the sl dialect -------------------------------------------------===//

#ifndef SL_OPS_TD
#define SL_OPS_TD

include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "sl/SLDialect.td"
include "sl/SLAttrs.td"

// Floating-point tensors: what parameters, activations and gradients are.
def SL_FloatTensor : RankedTensorOf<[F32, F16, BF16, F64]>;
// Any tensor a model computes with: floats, the integers of shape arithmetic and token ids, and
// booleans (masks).
def SL_Tensor : RankedTensorOf<[F32, F16, BF16, F64, I64, I32, I1]>;
// Numbers, not booleans.
def SL_NumericTensor : RankedTensorOf<[F32, F16, BF16, F64, I64, I32]>;
// A 1-D tensor of i64: shapes, axes, starts and ends. Usually an sl.constant after sl-bind-shapes.
def SL_IndexVector : RankedTensorOf<[I64]>;
def SL_IndexTensor : RankedTensorOf<[I64, I32]>;

// The ops by level: the model's tensor ops (what the importer and sl-fuse-transformer write), the
// gradients sl-autodiff adds, the stage structure sl-partition-layers gives the model, and the
// explicit training and generation steps the schedulers write.
include "sl/SLTensorOps.td"
include "sl/SLGradientOps.td"
include "sl/SLStageOps.td"
include "sl/SLStepOps.td"

#endif // SL_OPS_TD
