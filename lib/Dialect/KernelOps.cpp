//===- KernelOps.cpp - the kernel interface: each op's role in a schedule ---------------------===//
//
// The overrides SL_Op's `kernelRole` names (SLInterfaces.td has the defaults), and the functions of
// KernelOps.h that ask the interface for any op.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/KernelOps.h"

#include "sl/Dialect/MemorySpaces.h"

#include "llvm/ADT/Sequence.h"

using namespace mlir;

namespace sl {

double elementsOf(Type type) {
  auto ranked = llvm::dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() ? double(ranked.getNumElements()) : 0;
}

namespace {

RankedTensorType rankedOf(Value v) { return llvm::dyn_cast<RankedTensorType>(v.getType()); }

/// Scores are q k^T (S x T per head) and the output scores x v; with a causal mask about half of
/// the scores are computed. `widthsD` and `widthsDv` count the products of width D and Dv.
double attentionFlops(Value q, Value k, Value v, bool causal, HeadLayout layout, double widthsD,
                      double widthsDv) {
  auto qType = rankedOf(q), kType = rankedOf(k), vType = rankedOf(v);
  double d = double(qType.getShape().back());
  double rows = elementsOf(qType) / d; // batch x heads x S
  double t = double(swapHeadsIf(layout, kType.getShape())[2]);
  double dv = double(vType.getShape().back());
  double flops = 2 * rows * t * (widthsD * d + widthsDv * dv);
  return causal ? flops / 2 : flops;
}

/// Kernels that read the host pool and write it run on the host stream; on the device, compute.
StreamKind hostOrCompute(Operation *op) {
  return memorySpaceOf(op->getResult(0)) == MemorySpace::Host ? StreamKind::host
                                                              : StreamKind::compute;
}

} // namespace

SmallVector<unsigned> allOperandIndices(Operation *op) {
  return llvm::to_vector(llvm::seq<unsigned>(0, op->getNumOperands()));
}

double resultElements(Operation *op) {
  double elements = 0;
  for (Type type : op->getResultTypes())
    elements += elementsOf(type);
  return elements;
}

//===--------------------------------------------------------------------------------------------===//
// No kernel: values the runtime holds, views, buffers, boundaries and shapes.
//===--------------------------------------------------------------------------------------------===//

bool ParamOp::isKernel() { return false; }
bool ParamOp::isPreloaded() { return true; }
bool ParamShardOp::isKernel() { return false; }
bool ParamShardOp::isPreloaded() { return true; }
bool ConstantOp::isKernel() { return false; }
bool ConstantOp::isPreloaded() { return true; }
bool SubBatchOp::isKernel() { return false; }
bool ReshapeOp::isKernel() { return false; }
bool ViewOp::isKernel() { return false; }
bool EmptyOp::isKernel() { return false; }
bool ProgramOp::isKernel() { return false; }
bool ShapeOp::isKernel() { return false; }
bool LayerOp::isKernel() { return false; }

//===--------------------------------------------------------------------------------------------===//
// Streams other than compute.
//===--------------------------------------------------------------------------------------------===//

StreamKind FetchParamsOp::getStreamKind() { return StreamKind::h2d; }
StreamKind PrefetchOp::getStreamKind() { return StreamKind::h2d; }
StreamKind OffloadOp::getStreamKind() { return StreamKind::d2h; }
StreamKind AllGatherOp::getStreamKind() { return StreamKind::collective; }
StreamKind ReduceScatterOp::getStreamKind() { return StreamKind::collective; }
StreamKind OptimizerStepOp::getStreamKind() { return StreamKind::host; }
StreamKind AccumulateOp::getStreamKind() { return hostOrCompute(*this); }
StreamKind KvWriteOp::getStreamKind() { return hostOrCompute(*this); }
StreamKind ConcatOp::getStreamKind() { return hostOrCompute(*this); }

//===--------------------------------------------------------------------------------------------===//
// Kernels that read only operand 0 as data: the rest are shapes, axes, bounds or k.
//===--------------------------------------------------------------------------------------------===//

SmallVector<unsigned> ReshapeOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> ExpandOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> SliceOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> TriluOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> CumSumOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> ReduceMeanOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> ReduceSumOp::getDataOperandIndices() { return {0}; }
SmallVector<unsigned> SliceGradOp::getDataOperandIndices() { return {0}; }

/// An optimizer step reads the loss and the gradients; it writes the parameters.
SmallVector<unsigned> OptimizerStepOp::getDataOperandIndices() {
  return llvm::to_vector(llvm::seq<unsigned>(0, 1 + getGrads().size()));
}

//===--------------------------------------------------------------------------------------------===//
// FLOPs other than one per result element.
//===--------------------------------------------------------------------------------------------===//

double TransposeOp::getFlops() { return 0; }

double MatmulOp::getFlops() {
  auto lhs = rankedOf(getLhs());
  int64_t k = getTransA() ? lhs.getDimSize(lhs.getRank() - 2) : lhs.getShape().back();
  return 2 * elementsOf(getType()) * double(k);
}

double GemmOp::getFlops() {
  auto a = rankedOf(getA());
  double k = double(getTransA() ? a.getShape()[0] : a.getShape()[1]);
  return 2 * elementsOf(getType()) * k;
}

double AttentionOp::getFlops() {
  return attentionFlops(getQ(), getK(), getV(), getCausal(), getLayout(), 1, 1);
}

/// The gradient recomputes the scores and forms dV, dP, dQ and dK: 3 products of width D and 2 of
/// width Dv.
double AttentionGradOp::getFlops() {
  return attentionFlops(getOperand(0), getOperand(1), getOperand(2), getCausal(), getLayout(), 3,
                        2);
}

//===--------------------------------------------------------------------------------------------===//
// For any op.
//===--------------------------------------------------------------------------------------------===//

bool isKernel(Operation *op) {
  auto kernel = llvm::dyn_cast<KernelOpInterface>(op);
  return kernel && kernel.isKernel();
}

bool isPreloaded(Operation *op) {
  auto kernel = llvm::dyn_cast<KernelOpInterface>(op);
  return kernel && kernel.isPreloaded();
}

std::optional<StreamKind> streamOf(Operation *op) {
  if (!isKernel(op))
    return std::nullopt;
  return llvm::cast<KernelOpInterface>(op).getStreamKind();
}

SmallVector<unsigned> dataOperandIndices(Operation *op) {
  if (auto kernel = llvm::dyn_cast<KernelOpInterface>(op))
    return kernel.getDataOperandIndices();
  return allOperandIndices(op);
}

SmallVector<Value> dataOperands(Operation *op) {
  SmallVector<Value> values;
  for (unsigned index : dataOperandIndices(op))
    values.push_back(op->getOperand(index));
  return values;
}

double flopsOf(Operation *op) {
  return isKernel(op) ? llvm::cast<KernelOpInterface>(op).getFlops() : 0;
}

} // namespace sl
