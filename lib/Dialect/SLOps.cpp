//===- SLOps.cpp - verifiers, type inference and canonicalisation of sl operations --------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

#define GET_OP_CLASSES
#include "sl/SLOps.cpp.inc"

namespace sl {

//===--------------------------------------------------------------------------------------------===//
// ParamOp
//===--------------------------------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("parameter name must not be empty");
  if (getFile().has_value() != getOffset().has_value())
    return emitOpError("parameter '") << getName() << "' needs both a file and an offset, or neither";
  if (getOffset() && int64_t(*getOffset()) < 0)
    return emitOpError("parameter '") << getName() << "' has negative byte offset "
                                      << int64_t(*getOffset());
  if (!getType().hasStaticShape())
    return emitOpError("parameter '") << getName() << "' must have a static shape, got "
                                      << getType();
  return success();
}

//===--------------------------------------------------------------------------------------------===//
// Type inference
//===--------------------------------------------------------------------------------------------===//

static LogicalResult pushInferred(FailureOr<RankedTensorType> type,
                                  SmallVectorImpl<Type> &inferredReturnTypes) {
  if (failed(type))
    return failure();
  inferredReturnTypes.push_back(*type);
  return success();
}

static bool compatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [a, b] : llvm::zip(inferred, actual))
    if (getElementTypeOrSelf(a) != getElementTypeOrSelf(b) ||
        failed(verifyCompatibleShape(a, b)))
      return false;
  return true;
}

bool MatmulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) { return compatibleReturnTypes(l, r); }
bool GemmOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) { return compatibleReturnTypes(l, r); }
bool AddOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) { return compatibleReturnTypes(l, r); }
bool MulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) { return compatibleReturnTypes(l, r); }
bool TransposeOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return compatibleReturnTypes(l, r);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         ValueRange operands, DictionaryAttr attributes,
                                         OpaqueProperties properties, RegionRange regions,
                                         SmallVectorImpl<Type> &inferredReturnTypes) {
  Adaptor adaptor(operands, attributes, properties, regions);
  return pushInferred(
      inferMatmulType(loc, adaptor.getLhs().getType(), adaptor.getRhs().getType()),
      inferredReturnTypes);
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       ValueRange operands, DictionaryAttr attributes,
                                       OpaqueProperties properties, RegionRange regions,
                                       SmallVectorImpl<Type> &inferredReturnTypes) {
  Adaptor adaptor(operands, attributes, properties, regions);
  Type cType = adaptor.getC() ? adaptor.getC().getType() : Type();
  return pushInferred(inferGemmType(loc, adaptor.getA().getType(), adaptor.getB().getType(), cType,
                                    adaptor.getTransA(), adaptor.getTransB()),
                      inferredReturnTypes);
}

LogicalResult AddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      ValueRange operands, DictionaryAttr attributes,
                                      OpaqueProperties properties, RegionRange regions,
                                      SmallVectorImpl<Type> &inferredReturnTypes) {
  Adaptor adaptor(operands, attributes, properties, regions);
  return pushInferred(inferBroadcastType(loc, "sl.add", adaptor.getLhs().getType(),
                                         adaptor.getRhs().getType()),
                      inferredReturnTypes);
}

LogicalResult MulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      ValueRange operands, DictionaryAttr attributes,
                                      OpaqueProperties properties, RegionRange regions,
                                      SmallVectorImpl<Type> &inferredReturnTypes) {
  Adaptor adaptor(operands, attributes, properties, regions);
  return pushInferred(inferBroadcastType(loc, "sl.mul", adaptor.getLhs().getType(),
                                         adaptor.getRhs().getType()),
                      inferredReturnTypes);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            ValueRange operands, DictionaryAttr attributes,
                                            OpaqueProperties properties, RegionRange regions,
                                            SmallVectorImpl<Type> &inferredReturnTypes) {
  Adaptor adaptor(operands, attributes, properties, regions);
  return pushInferred(inferTransposeType(loc, adaptor.getInput().getType(), adaptor.getPerm()),
                      inferredReturnTypes);
}

//===--------------------------------------------------------------------------------------------===//
// Canonicalisation
//===--------------------------------------------------------------------------------------------===//

namespace {

/// Exporters write SiLU as `x * sigmoid(x)` (ONNX has no SiLU operator before opset 24); one
/// fused op reads x once instead of three times.
struct MulOfSigmoidToSilu : public OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    for (auto [x, s] : {std::pair(op.getLhs(), op.getRhs()), std::pair(op.getRhs(), op.getLhs())}) {
      auto sigmoid = s.getDefiningOp<SigmoidOp>();
      if (!sigmoid || sigmoid.getInput() != x)
        continue;
      rewriter.replaceOpWithNewOp<SiluOp>(op, op.getType(), x);
      return success();
    }
    return failure();
  }
};

} // namespace

void MulOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<MulOfSigmoidToSilu>(context);
}

} // namespace sl
