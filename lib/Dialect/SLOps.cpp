//===- SLOps.cpp - verifiers, type inference and canonicalisation of sl operations --------------===//
//
// Every shape rule lives in an op's inferReturnTypes, so the verifier, the importer (which builds
// an op and then asks it for its type) and sl-bind-shapes (which re-infers after binding) agree.
// Rules read the values of shape, axis and bound operands when they are constants and leave the
// affected dimensions dynamic otherwise.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"
#include "sl/Support/CheckedArith.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;

#define GET_OP_CLASSES
#include "sl/SLOps.cpp.inc"

namespace sl {

bool compatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [a, b] : llvm::zip(inferred, actual))
    if (getElementTypeOrSelf(a) != getElementTypeOrSelf(b) || failed(verifyCompatibleShape(a, b)))
      return false;
  return true;
}

Operation *SLDialect::materializeConstant(OpBuilder &builder, Attribute value, Type type,
                                          Location loc) {
  auto elements = llvm::dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, type, elements);
}

namespace {

constexpr int64_t kDynamic = ShapedType::kDynamic;

LogicalResult pushType(SmallVectorImpl<Type> &types, ArrayRef<int64_t> shape, Type element) {
  types.push_back(RankedTensorType::get(shape, element));
  return success();
}

LogicalResult pushInferred(FailureOr<RankedTensorType> type, SmallVectorImpl<Type> &types) {
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

RankedTensorType rankedType(Value value) {
  return llvm::dyn_cast<RankedTensorType>(value.getType());
}

// Normalises an ONNX axis in [-rank, rank) to [0, rank).
FailureOr<int64_t> normalizeAxis(std::optional<Location> loc, llvm::StringRef op, int64_t axis,
                                 int64_t rank) {
  if (axis < -rank || axis >= rank)
    return emitOptionalError(loc, op, ": axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

} // namespace

//===--------------------------------------------------------------------------------------------===//
// Verifiers
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
  if (std::optional<Type> stored = getStoredAs()) {
    Type element = getType().getElementType();
    if (!getFile())
      return emitOpError("parameter '") << getName()
                                        << "' has stored_as but no file to read the bytes from";
    if (*stored != element && !(stored->isF32() && element.isBF16()))
      return emitOpError("parameter '")
             << getName() << "' is " << element << " stored as " << *stored
             << ": the runtime converts only f32 bytes to bf16";
  }
  return success();
}

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value of type ") << getValue().getType() << " does not match result type "
                                         << getType();
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return normalizeAxis(getLoc(), "sl.softmax", getAxis(), getType().getRank());
}

LogicalResult LayerNormOp::verify() {
  auto type = getType();
  FailureOr<int64_t> axis = normalizeAxis(getLoc(), "sl.layer_norm", getAxis(), type.getRank());
  if (failed(axis))
    return failure();
  if (getInput().getType() != type)
    return emitOpError("result type ") << type << " differs from the input's "
                                       << getInput().getType();
  ArrayRef<int64_t> normalized = type.getShape().drop_front(*axis);
  for (Value operand : {getScale(), getBias()}) {
    if (!operand)
      continue;
    auto shape = broadcastShapes(rankedType(operand).getShape(), normalized);
    if (!shape || failed(verifyCompatibleShape(*shape, normalized)))
      return emitOpError("scale and bias must broadcast to the normalised dimensions ")
             << quoted(RankedTensorType::get(normalized, type.getElementType())) << ", got "
             << operand.getType();
  }
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto type = getType();
  if (getInput().getType() != type)
    return emitOpError("result type ") << type << " differs from the input's "
                                       << getInput().getType();
  auto scale = getScale().getType();
  if (type.getRank() == 0 || scale.getRank() != 1 ||
      failed(verifyCompatibleShape(ArrayRef<int64_t>{scale.getDimSize(0)},
                                   ArrayRef<int64_t>{type.getShape().back()})))
    return emitOpError("scale must be a vector of the last dimension's size, got ")
           << scale << " for " << type;
  return success();
}

LogicalResult RotaryOp::verify() {
  auto type = getType();
  if (getInput().getType() != type)
    return emitOpError("result type ") << type << " differs from the input's "
                                       << getInput().getType();
  if (type.getRank() < 2)
    return emitOpError("input must have rank >= 2, got ") << type;
  int64_t d = type.getShape().back();
  if (!ShapedType::isDynamic(d) && d % 2 != 0)
    return emitOpError("the rotated dimension must be even, got ") << d;
  for (Value table : {getCos(), getSin()}) {
    auto shape = broadcastShapes(rankedType(table).getShape(), type.getShape());
    if (!shape || failed(verifyCompatibleShape(*shape, type.getShape())))
      return emitOpError("cos and sin must broadcast to the input ") << type << ", got "
                                                                      << table.getType();
  }
  return success();
}

/// ALiBi slopes: one per query head, in the queries' element type.
static LogicalResult verifyAlibiSlopes(Operation *op, Value slopes, RankedTensorType q) {
  auto type = rankedType(slopes);
  if (type.getRank() != 1 || type.getElementType() != q.getElementType() ||
      (!ShapedType::isDynamic(q.getDimSize(1)) && !ShapedType::isDynamic(type.getDimSize(0)) &&
       type.getDimSize(0) != q.getDimSize(1)))
    return op->emitOpError("alibi_slopes must be one ")
           << q.getElementType() << " per query head ([" << q.getDimSize(1) << "]), got " << type;
  return success();
}

Value headPermutationInput(Value v) {
  auto transpose = v.getDefiningOp<TransposeOp>();
  if (!transpose || transpose.getPerm() != ArrayRef<int64_t>{0, 2, 1, 3})
    return {};
  return transpose.getInput();
}

SmallVector<int64_t, 4> swapHeadsIf(HeadLayout layout, ArrayRef<int64_t> shape) {
  SmallVector<int64_t, 4> swapped(shape);
  if (layout == HeadLayout::bshd && swapped.size() == 4)
    std::swap(swapped[1], swapped[2]);
  return swapped;
}

LogicalResult AttentionOp::verify() {
  auto written = [&](Value value) { return rankedType(value); };
  if (written(getQ()).getRank() != 4 || written(getK()).getRank() != 4 ||
      written(getV()).getRank() != 4 || getType().getRank() != 4)
    return emitOpError("q, k, v and the result must have rank 4 ([batch, heads, seq, dim], or "
                       "[batch, seq, heads, dim] with layout bshd), got ")
           << getQ().getType() << ", " << getK().getType() << ", " << getV().getType() << " and "
           << getType();
  // The checks below read every shape as [B, H, S, D], whichever layout stores it.
  HeadLayout layout = getLayout();
  auto logical = [&](RankedTensorType type) {
    return RankedTensorType::get(swapHeadsIf(layout, type.getShape()), type.getElementType());
  };
  auto q = logical(written(getQ())), k = logical(written(getK())), v = logical(written(getV()));
  auto out = logical(getType());
  auto conflict = [](int64_t a, int64_t b) {
    return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
  };
  if (conflict(q.getDimSize(0), k.getDimSize(0)) || conflict(k.getDimSize(0), v.getDimSize(0)))
    return emitOpError("q, k and v must have one batch size");
  if (conflict(k.getDimSize(1), v.getDimSize(1)) || conflict(k.getDimSize(2), v.getDimSize(2)))
    return emitOpError("k and v must have the same heads and length, got ")
           << getK().getType() << " and " << getV().getType();
  if (conflict(q.getDimSize(3), k.getDimSize(3)))
    return emitOpError("q and k must have one head dimension, got ")
           << getQ().getType() << " and " << getK().getType();
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) && (hkv == 0 || hq % hkv != 0))
    return emitOpError("query heads (") << hq << ") must be a multiple of key/value heads ("
                                        << hkv << ")";
  SmallVector<int64_t> expected = {q.getDimSize(0), hq, q.getDimSize(2), v.getDimSize(3)};
  if (failed(verifyCompatibleShape(expected, out.getShape())) ||
      out.getElementType() != q.getElementType())
    return emitOpError("result must be ")
           << quoted(RankedTensorType::get(swapHeadsIf(layout, expected), q.getElementType()))
           << ", got " << getType();
  if (getMask()) {
    SmallVector<int64_t> scores = {q.getDimSize(0), hq, q.getDimSize(2), k.getDimSize(2)};
    auto shape = broadcastShapes(rankedType(getMask()).getShape(), scores);
    if (!shape || failed(verifyCompatibleShape(*shape, scores)))
      return emitOpError("mask ") << getMask().getType() << " must broadcast to the scores "
                                  << quoted(RankedTensorType::get(scores, q.getElementType()));
  }
  if (getAlibiSlopes())
    return verifyAlibiSlopes(*this, getAlibiSlopes(), q);
  return success();
}

namespace {
/// Checks a generation KV cache [B, 2, Hkv, C, D] against keys [B, Hkv, T, D] (and their values).
LogicalResult verifyKvCache(Operation *op, RankedTensorType cache, RankedTensorType k,
                            RankedTensorType v) {
  if (cache.getRank() != 5 || cache.getDimSize(1) != 2)
    return op->emitOpError("cache must be [batch, 2, kv_heads, cache_len, head_dim], got ")
           << cache;
  if (k.getRank() != 4 || k != v)
    return op->emitOpError("k and v must be one type [batch, kv_heads, tokens, head_dim], got ")
           << k << " and " << v;
  if (k.getElementType() != cache.getElementType() || k.getDimSize(0) != cache.getDimSize(0) ||
      k.getDimSize(1) != cache.getDimSize(2) || k.getDimSize(3) != cache.getDimSize(4) ||
      k.getDimSize(2) > cache.getDimSize(3))
    return op->emitOpError("k ") << k << " does not fit the cache " << cache;
  return success();
}

LogicalResult verifyPerSequence(Operation *op, Value vector, int64_t batch, llvm::StringRef what) {
  auto type = rankedType(vector);
  if (type.getRank() != 1 || type.getDimSize(0) != batch)
    return op->emitOpError() << what << " must have one element per sequence (" << batch
                             << "), got " << type;
  return success();
}
} // namespace

LogicalResult DecodeAttentionOp::verify() {
  auto q = rankedType(getQ()), k = rankedType(getK()), v = rankedType(getV());
  auto cache = rankedType(getCache());
  if (failed(verifyKvCache(*this, cache, k, v)))
    return failure();
  if (q.getRank() != 4 || q.getDimSize(2) != 1 || k.getDimSize(2) != 1)
    return emitOpError("q and k must hold one token per sequence ([batch, heads, 1, dim]), got ")
           << q << " and " << k;
  if (q.getDimSize(0) != k.getDimSize(0) || q.getDimSize(3) != k.getDimSize(3) ||
      q.getElementType() != k.getElementType())
    return emitOpError("q ") << q << " and k " << k << " must share batch, head size and type";
  int64_t hq = q.getDimSize(1), hkv = k.getDimSize(1);
  if (hkv == 0 || hq % hkv != 0)
    return emitOpError("query heads (") << hq << ") must be a multiple of key/value heads ("
                                        << hkv << ")";
  if (getType() != q)
    return emitOpError("result must be ") << quoted(q) << ", got " << getType();
  if (getScale().isZero())
    return emitOpError("scale must not be 0");
  if (getAlibiSlopes() && failed(verifyAlibiSlopes(*this, getAlibiSlopes(), q)))
    return failure();
  return verifyPerSequence(*this, getLength(), q.getDimSize(0), "length");
}

LogicalResult KvWriteOp::verify() {
  auto cache = rankedType(getCache());
  // k and v in [B, Hkv, T, D] order, as the cache's positions are.
  auto logical = [&](Value value) {
    auto type = rankedType(value);
    return RankedTensorType::get(swapHeadsIf(getLayout(), type.getShape()), type.getElementType());
  };
  if (failed(verifyKvCache(*this, cache, logical(getK()), logical(getV()))))
    return failure();
  if (getStart())
    return verifyPerSequence(*this, getStart(), cache.getDimSize(0), "start");
  return success();
}

LogicalResult TakeRowsOp::verify() {
  auto input = rankedType(getInput()), result = rankedType(getResult());
  if (input.getRank() < 2)
    return emitOpError("input must be [batch, rows, ...], got ") << input;
  SmallVector<int64_t> expected(input.getShape());
  expected[1] = 1;
  if (result.getShape() != ArrayRef<int64_t>(expected) ||
      result.getElementType() != input.getElementType())
    return emitOpError("result must be ")
           << quoted(RankedTensorType::get(expected, input.getElementType())) << ", got " << result;
  return verifyPerSequence(*this, getIndex(), input.getDimSize(0), "index");
}

LogicalResult SubBatchOp::verify() {
  auto batch = rankedType(getBatch()), result = rankedType(getResult());
  int64_t index = static_cast<int64_t>(getIndex()), count = static_cast<int64_t>(getCount());
  if (count < 1 || index < 0 || index >= count)
    return emitOpError("index ") << index << " must be in [0, count) with count >= 1, got count "
                                 << count;
  if (batch.getRank() == 0 || result.getRank() != batch.getRank() ||
      batch.getElementType() != result.getElementType() || !batch.hasStaticShape() ||
      !result.hasStaticShape() || batch.getShape().drop_front() != result.getShape().drop_front() ||
      result.getDimSize(0) * count != batch.getDimSize(0))
    return emitOpError("result ") << result << " must be " << batch
                                  << " with dimension 0 divided by " << count;
  return success();
}

LogicalResult FetchParamsOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                              ValueRange operands, DictionaryAttr,
                                              OpaqueProperties, RegionRange,
                                              SmallVectorImpl<Type> &inferred) {
  llvm::append_range(inferred, operands.getTypes());
  return success();
}

LogicalResult FetchParamsOp::verify() {
  if (TypeRange(getParams().getTypes()) != TypeRange(getResults().getTypes()))
    return emitOpError("results must have the parameters' types, one each");
  for (Value param : getParams())
    if (!param.getDefiningOp<ParamOp>())
      return emitOpError("operands must be sl.param values (parameters live in the host pool)");
  return success();
}

LogicalResult OptimizerStepOp::verify() {
  if (rankedType(getLoss()).getRank() != 0)
    return emitOpError("loss must be a scalar, got ") << getLoss().getType();
  if (getGrads().size() != getParams().size() || getParams().empty())
    return emitOpError("needs one gradient per parameter and at least one, got ")
           << getGrads().size() << " gradients for " << getParams().size() << " parameters";
  for (auto [grad, param] : llvm::zip(getGrads(), getParams())) {
    // A bf16 parameter's gradient may be accumulated in f32 (mixed precision).
    auto gradType = rankedType(grad), paramType = rankedType(param);
    bool widened = paramType.getElementType().isBF16() && gradType.getElementType().isF32() &&
                   gradType.getShape() == paramType.getShape();
    if (grad.getType() != param.getType() && !widened)
      return emitOpError("gradient ") << grad.getType() << " does not match its parameter "
                                      << param.getType() << " (nor is it the f32 gradient of a "
                                      << "bf16 parameter)";
    if (!param.getDefiningOp<ParamOp>() && !param.getDefiningOp<ParamShardOp>())
      return emitOpError("params must be sl.param or sl.param_shard values");
  }
  return success();
}

/// all_gather and reduce_scatter: one result per operand, dimension 0 multiplied (gather) or
/// divided (scatter) by `world`.
static LogicalResult verifyCollective(Operation *op, ValueRange operands, ValueRange results,
                                      int64_t world, bool gather) {
  if (world < 1)
    return op->emitOpError("world must be at least 1, got ") << world;
  if (operands.size() != results.size() || operands.empty())
    return op->emitOpError("needs one result per operand and at least one operand");
  for (auto [operand, result] : llvm::zip(operands, results)) {
    auto in = rankedType(operand), out = rankedType(result);
    auto [whole, shard] = gather ? std::pair(out, in) : std::pair(in, out);
    if (whole.getRank() == 0 || shard.getRank() != whole.getRank() ||
        whole.getElementType() != shard.getElementType() ||
        whole.getShape().drop_front() != shard.getShape().drop_front() ||
        shard.getDimSize(0) * world != whole.getDimSize(0))
      return op->emitOpError("shard ") << shard << " must be " << whole
                                       << " with dimension 0 divided by the world size " << world;
  }
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyCollective(*this, getShards(), getResults(), static_cast<int64_t>(getWorld()),
                          /*gather=*/true);
}

LogicalResult ReduceScatterOp::verify() {
  return verifyCollective(*this, getValues(), getResults(), static_cast<int64_t>(getWorld()),
                          /*gather=*/false);
}

ShardLayout shardLayout(TypeRange params, int64_t world) {
  ShardLayout layout;
  int64_t at = 0;
  for (Type type : params) {
    layout.offsets.push_back(at);
    at += llvm::cast<RankedTensorType>(type).getNumElements();
    at = llvm::alignTo(at, kShardElementAlignment);
  }
  layout.flatElements = llvm::alignTo(at, kShardElementAlignment * std::max<int64_t>(1, world));
  return layout;
}

SmallVector<int64_t> ParamShardOp::getElementOffsets() {
  return shardLayout(getParams().getTypes(), static_cast<int64_t>(getWorld())).offsets;
}

int64_t ParamShardOp::getFlatElements() {
  return shardLayout(getParams().getTypes(), static_cast<int64_t>(getWorld())).flatElements;
}

LogicalResult ParamShardOp::verify() {
  int64_t world = static_cast<int64_t>(getWorld());
  if (world < 2)
    return emitOpError("world must be at least 2, got ") << world;
  if (getParams().empty())
    return emitOpError("needs at least one parameter");
  for (Value param : getParams()) {
    if (!param.getDefiningOp<ParamOp>())
      return emitOpError("operands must be sl.param values");
    if (!rankedType(param).hasStaticShape())
      return emitOpError("parameter type ") << param.getType() << " must be static";
  }
  auto result = rankedType(getResult());
  int64_t shard = getFlatElements() / world;
  if (result.getRank() != 1 || result.getDimSize(0) != shard)
    return emitOpError("result ") << result << " must be tensor<" << shard
                                  << "xf32>: the flattened group has " << getFlatElements()
                                  << " elements, split over " << world << " ranks";
  return success();
}

LogicalResult ViewOp::verify() {
  auto source = rankedType(getSource()), result = rankedType(getResult());
  int64_t offset = static_cast<int64_t>(getOffset());
  if (source.getElementType() != result.getElementType())
    return emitOpError("result element type ")
           << result.getElementType() << " must be the source's, " << source.getElementType();
  if (!source.hasStaticShape() || !result.hasStaticShape())
    return emitOpError("source and result must be static");
  if (offset < 0 || offset + result.getNumElements() > source.getNumElements())
    return emitOpError("elements [")
           << offset << ", " << offset + result.getNumElements() << ") are outside the source's "
           << source.getNumElements();
  return success();
}

LogicalResult LayerOp::verify() {
  if (getStage() != "prologue" && getStage() != "block" && getStage() != "epilogue")
    return emitOpError("stage must be prologue, block or epilogue, got '") << getStage() << "'";
  return success();
}

LogicalResult LayerOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(*this, getCalleeAttr());
  if (!callee)
    return emitOpError("stage function '") << getCallee() << "' does not exist";
  FunctionType type = callee.getFunctionType();
  SmallVector<Type> operandTypes(getOperandTypes());
  if (TypeRange(type.getInputs()) != TypeRange(operandTypes) ||
      TypeRange(type.getResults()) != TypeRange(getResultTypes()))
    return emitOpError("operands and results ")
           << FunctionType::get(getContext(), operandTypes, getResultTypes())
           << " do not match stage function '" << getCallee() << "' of type " << type;
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  auto logits = getLogits().getType(), labels = getLabels().getType();
  if (logits.getRank() == 0 ||
      failed(verifyCompatibleShape(logits.getShape().drop_back(), labels.getShape())))
    return emitOpError("labels ") << labels << " must have the logits' shape " << logits
                                  << " without its last (vocabulary) dimension";
  if (getType().getElementType() != logits.getElementType())
    return emitOpError("the loss ") << getType() << " must have the element type of the logits "
                                    << logits;
  return success();
}

//===--------------------------------------------------------------------------------------------===//
// Type inference
//===--------------------------------------------------------------------------------------------===//

// Every result type a rule infers is checked to fit in memory at all (fewer than 2^63 bytes):
// a shape built from a model's numbers ([3, 2^62] for ConstantOfShape) would otherwise wrap
// every later element count and byte size (getNumElements, the fold limit, the memory plan).
LogicalResult checkInferredSizes(std::optional<Location> loc, llvm::StringRef op,
                                 ArrayRef<Type> types) {
  for (Type type : types) {
    auto ranked = llvm::dyn_cast<RankedTensorType>(type);
    if (!ranked || !ranked.getElementType().isIntOrFloat())
      continue;
    if (!checkedByteSize(ranked.getShape(), ranked.getElementType().getIntOrFloatBitWidth()))
      return emitOptionalError(loc, op, ": the result shape ", shapeText(ranked.getShape()),
                               " of ", ranked.getElementType(),
                               " is too large (2^63 bytes or more)");
  }
  return success();
}

// Each rule is Op::inferReturnTypes with Op's adaptor (SL_InferTypeOpAdaptor, SLDialect.td);
// the generated inferReturnTypes around it checks the sizes of what it inferred.
LogicalResult MatmulOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return pushInferred(inferMatmulType(loc, adaptor.getLhs().getType(), adaptor.getRhs().getType(),
                                      adaptor.getTransA(), adaptor.getTransB()),
                      types);
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  Type cType = adaptor.getC() ? adaptor.getC().getType() : Type();
  return pushInferred(inferGemmType(loc, adaptor.getA().getType(), adaptor.getB().getType(), cType,
                                    adaptor.getTransA(), adaptor.getTransB()),
                      types);
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return pushInferred(inferTransposeType(loc, adaptor.getInput().getType(), adaptor.getPerm()),
                      types);
}

static LogicalResult inferBroadcastOp(std::optional<Location> loc, llvm::StringRef name, Value lhs,
                                      Value rhs, SmallVectorImpl<Type> &types) {
  return pushInferred(inferBroadcastType(loc, name, lhs.getType(), rhs.getType()), types);
}

static LogicalResult inferComparisonOp(MLIRContext *context, std::optional<Location> loc,
                                       llvm::StringRef name, Value lhs, Value rhs,
                                       SmallVectorImpl<Type> &types) {
  auto type = inferBroadcastType(loc, name, lhs.getType(), rhs.getType());
  if (failed(type))
    return failure();
  return pushType(types, type->getShape(), IntegerType::get(context, 1));
}

LogicalResult AddOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcastOp(loc, "sl.add", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult SubOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcastOp(loc, "sl.sub", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult MulOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcastOp(loc, "sl.mul", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult DivOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcastOp(loc, "sl.div", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult PowOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferBroadcastOp(loc, "sl.pow", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult EqualOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferComparisonOp(context, loc, "sl.equal", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult LessOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferComparisonOp(context, loc, "sl.less", adaptor.getLhs(), adaptor.getRhs(), types);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto x = rankedType(adaptor.getX()), y = rankedType(adaptor.getY());
  auto c = rankedType(adaptor.getCondition());
  if (x.getElementType() != y.getElementType())
    return emitOptionalError(loc, "sl.where: x and y element types differ: ", x.getElementType(),
                             " and ", y.getElementType());
  auto shape = broadcastShapes(c.getShape(), x.getShape());
  if (shape)
    shape = broadcastShapes(*shape, y.getShape());
  if (!shape)
    return emitOptionalError(loc, "sl.where: shapes ", quoted(c), ", ", quoted(x), " and ",
                             quoted(y), " cannot be broadcast together");
  return pushType(types, *shape, x.getElementType());
}

LogicalResult CastOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return pushType(types, rankedType(adaptor.getInput()).getShape(), adaptor.getTo());
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  int64_t rank = rankedType(adaptor.getInput()).getRank();
  // ONNX clamps start and end into [0, rank] after adding rank to negative values.
  auto clampIndex = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t(0), rank); };
  int64_t start = clampIndex(adaptor.getStart());
  int64_t end = clampIndex(adaptor.getEnd().value_or(rank));
  return pushType(types, {std::max<int64_t>(end - start, 0)}, IntegerType::get(context, 64));
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  if (data.getRank() == 0)
    return emitOptionalError(loc, "sl.gather: data must have rank >= 1");
  FailureOr<int64_t> axis = normalizeAxis(loc, "sl.gather", adaptor.getAxis(), data.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(data.getShape().take_front(*axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, data.getShape().drop_front(*axis + 1));
  return pushType(types, shape, data.getElementType());
}

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = rankedType(adaptor.getInput());
  auto shapeType = rankedType(adaptor.getShape());
  if (shapeType.getRank() != 1 || shapeType.isDynamicDim(0))
    return emitOptionalError(loc, "sl.reshape: the target shape must be a 1-D tensor of static "
                                  "length, got ", quoted(shapeType));
  int64_t rank = shapeType.getDimSize(0);
  // Elements not known yet (a dimension bound later) are dynamic dimensions of the result.
  std::optional<SmallVector<int64_t>> target = knownInts(adaptor.getShape());
  if (!target)
    return pushType(types, SmallVector<int64_t>(rank, kDynamic), input.getElementType());
  SmallVector<int64_t> shape;
  int64_t inferred = -1;
  for (auto [i, dim] : llvm::enumerate(*target)) {
    if (ShapedType::isDynamic(dim)) {
      shape.push_back(kDynamic);
    } else if (dim == 0 && !adaptor.getAllowzero()) {
      if (int64_t(i) >= input.getRank())
        return emitOptionalError(loc, "sl.reshape: target dimension ", i,
                                 " is 0 (copy) but the input has rank ", input.getRank());
      shape.push_back(input.getDimSize(i));
    } else if (dim == -1) {
      if (inferred >= 0)
        return emitOptionalError(loc, "sl.reshape: the target shape has more than one -1");
      inferred = i;
      shape.push_back(kDynamic);
    } else if (dim < -1) {
      return emitOptionalError(loc, "sl.reshape: invalid target dimension ", dim);
    } else {
      shape.push_back(dim);
    }
  }
  if (input.hasStaticShape()) {
    int64_t rest = 1;
    bool restStatic = true;
    for (auto [i, d] : llvm::enumerate(shape))
      if (int64_t(i) != inferred) {
        restStatic &= !ShapedType::isDynamic(d);
        std::optional<int64_t> product = checkedMul(rest, ShapedType::isDynamic(d) ? 1 : d);
        if (!product)
          return emitOptionalError(loc, "sl.reshape: the target shape ", shapeText(*target),
                                   " has more than 2^63 elements");
        rest = *product;
      }
    int64_t total = input.getNumElements();
    if (restStatic && inferred >= 0) {
      if (rest == 0 || total % rest != 0)
        return emitOptionalError(loc, "sl.reshape: cannot reshape ", quoted(input),
                                 " with -1 into ", rest, "-element pieces");
      shape[inferred] = total / rest;
    } else if (restStatic && inferred < 0 && rest != total) {
      return emitOptionalError(loc, "sl.reshape: cannot reshape ", quoted(input), " (", total,
                               " elements) into ",
                               quoted(RankedTensorType::get(shape, input.getElementType())));
    }
  }
  return pushType(types, shape, input.getElementType());
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "sl.concat: needs at least one input");
  auto first = rankedType(adaptor.getInputs().front());
  FailureOr<int64_t> axis = normalizeAxis(loc, "sl.concat", adaptor.getAxis(), first.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  for (Value input : adaptor.getInputs()) {
    auto type = rankedType(input);
    if (type.getRank() != first.getRank() || type.getElementType() != first.getElementType())
      return emitOptionalError(loc, "sl.concat: inputs ", quoted(first), " and ", quoted(type),
                               " differ in rank or element type");
    for (int64_t d = 0; d < first.getRank(); ++d) {
      int64_t dim = type.getDimSize(d);
      if (d == *axis) {
        shape[d] = ShapedType::isDynamic(shape[d]) || ShapedType::isDynamic(dim) ? kDynamic
                                                                                 : shape[d] + dim;
      } else if (ShapedType::isDynamic(shape[d])) {
        shape[d] = dim;
      } else if (!ShapedType::isDynamic(dim) && dim != shape[d]) {
        return emitOptionalError(loc, "sl.concat: inputs ", quoted(first), " and ", quoted(type),
                                 " differ in dimension ", d, ", which is not the axis ", *axis);
      }
    }
  }
  return pushType(types, shape, first.getElementType());
}

std::pair<int64_t, int64_t> sliceBounds(int64_t dim, int64_t start, int64_t end,
                                               int64_t step) {
  auto norm = [&](int64_t v) { return v < 0 ? (v < -dim ? -dim - 1 : v) + dim : v; };
  start = norm(start);
  end = norm(end);
  // Counted in unsigned arithmetic: a step of INT64_MIN, or near INT64_MAX, must not overflow.
  uint64_t stride = step > 0 ? uint64_t(step) : uint64_t(-(step + 1)) + 1;
  uint64_t span;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    span = end > start ? uint64_t(end - start) : 0;
  } else {
    start = std::clamp<int64_t>(start, -1, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    span = start > end ? uint64_t(start - end) : 0;
  }
  int64_t count = span == 0 ? 0 : int64_t(1 + (span - 1) / stride);
  return {start, count};
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto data = rankedType(adaptor.getData());
  int64_t rank = data.getRank();
  auto starts = constantInts(adaptor.getStarts()), ends = constantInts(adaptor.getEnds());
  std::optional<SmallVector<int64_t>> axes, steps;
  if (adaptor.getAxes())
    axes = constantInts(adaptor.getAxes());
  else if (starts)
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
  if (adaptor.getSteps())
    steps = constantInts(adaptor.getSteps());
  else if (starts)
    steps = SmallVector<int64_t>(starts->size(), 1);

  SmallVector<int64_t> shape(data.getShape());
  if (!axes) {
    // Which axes are sliced is unknown: every dimension may change.
    return pushType(types, SmallVector<int64_t>(rank, kDynamic), data.getElementType());
  }
  for (auto [i, rawAxis] : llvm::enumerate(*axes)) {
    FailureOr<int64_t> axis = normalizeAxis(loc, "sl.slice", rawAxis, rank);
    if (failed(axis))
      return failure();
    if (!starts || !ends || !steps || starts->size() != axes->size() ||
        ends->size() != axes->size() || steps->size() != axes->size()) {
      if (starts && ends && steps &&
          (starts->size() != ends->size() || starts->size() != steps->size()))
        return emitOptionalError(loc, "sl.slice: starts, ends, axes and steps differ in length");
      shape[*axis] = kDynamic;
      continue;
    }
    int64_t step = (*steps)[i];
    if (step == 0)
      return emitOptionalError(loc, "sl.slice: step 0 on axis ", *axis);
    if (ShapedType::isDynamic(data.getDimSize(*axis))) {
      shape[*axis] = kDynamic;
      continue;
    }
    shape[*axis] = sliceBounds(data.getDimSize(*axis), (*starts)[i], (*ends)[i], step).second;
  }
  return pushType(types, shape, data.getElementType());
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = rankedType(adaptor.getInput());
  auto shapeType = rankedType(adaptor.getShape());
  if (shapeType.getRank() != 1 || shapeType.isDynamicDim(0))
    return emitOptionalError(loc, "sl.expand: the shape must be a 1-D tensor of static length");
  std::optional<SmallVector<int64_t>> target = constantInts(adaptor.getShape());
  if (!target) {
    int64_t rank = std::max(input.getRank(), shapeType.getDimSize(0));
    return pushType(types, SmallVector<int64_t>(rank, kDynamic), input.getElementType());
  }
  auto shape = broadcastShapes(input.getShape(), *target);
  if (!shape)
    return emitOptionalError(loc, "sl.expand: ", quoted(input), " cannot be broadcast to ",
                             quoted(RankedTensorType::get(*target, input.getElementType())));
  return pushType(types, *shape, input.getElementType());
}

LogicalResult TriluOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = rankedType(adaptor.getInput());
  if (input.getRank() < 2)
    return emitOptionalError(loc, "sl.trilu: input must have rank >= 2, got ", quoted(input));
  if (adaptor.getK() && rankedType(adaptor.getK()).getNumElements() > 1)
    return emitOptionalError(loc, "sl.trilu: k must be a single value");
  types.push_back(input);
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                       Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = rankedType(adaptor.getInput());
  auto repeatsType = rankedType(adaptor.getRepeats());
  if (repeatsType.getRank() != 1 || repeatsType.getDimSize(0) != input.getRank())
    return emitOptionalError(loc, "sl.tile: repeats must be a 1-D tensor of the input's rank ",
                             input.getRank(), ", got ", quoted(repeatsType));
  SmallVector<int64_t> shape(input.getRank(), kDynamic);
  if (std::optional<SmallVector<int64_t>> repeats = constantInts(adaptor.getRepeats()))
    for (int64_t d = 0; d < input.getRank(); ++d) {
      if ((*repeats)[d] < 0)
        return emitOptionalError(loc, "sl.tile: repeats must not be negative, got ",
                                 (*repeats)[d]);
      if (!input.isDynamicDim(d))
        shape[d] = input.getDimSize(d) * (*repeats)[d];
    }
  return pushType(types, shape, input.getElementType());
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                                 Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  if (data.getRank() == 0 || indices.getRank() != data.getRank())
    return emitOptionalError(loc, "sl.gather_elements: data and indices must have one rank >= 1, "
                                  "got ", quoted(data), " and ", quoted(indices));
  FailureOr<int64_t> axis =
      normalizeAxis(loc, "sl.gather_elements", adaptor.getAxis(), data.getRank());
  if (failed(axis))
    return failure();
  return pushType(types, indices.getShape(), data.getElementType());
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  auto updates = rankedType(adaptor.getUpdates());
  llvm::StringRef reduction = adaptor.getReduction();
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    return emitOptionalError(loc, "sl.scatter_nd: reduction '", reduction,
                             "' is not one of none, add, mul, max, min");
  if (updates.getElementType() != data.getElementType())
    return emitOptionalError(loc, "sl.scatter_nd: updates ", quoted(updates),
                             " and data ", quoted(data), " differ in element type");
  if (data.getRank() == 0 || indices.getRank() == 0 || indices.isDynamicDim(indices.getRank() - 1))
    return emitOptionalError(loc, "sl.scatter_nd: data and indices need rank >= 1 and the last "
                                  "dimension of indices must be static, got ",
                             quoted(data), " and ", quoted(indices));
  int64_t k = indices.getShape().back();
  if (k > data.getRank())
    return emitOptionalError(loc, "sl.scatter_nd: index tuples of ", k,
                             " elements for data of rank ", data.getRank());
  // updates: indices.shape[:-1] + data.shape[k:]
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  llvm::append_range(expected, data.getShape().drop_front(k));
  bool matches = updates.getRank() == int64_t(expected.size());
  for (int64_t d = 0; matches && d < updates.getRank(); ++d)
    matches = ShapedType::isDynamic(expected[d]) || updates.isDynamicDim(d) ||
              expected[d] == updates.getDimSize(d);
  if (!matches)
    return emitOptionalError(loc, "sl.scatter_nd: updates ", quoted(updates),
                             " do not have the shape indices[:-1] + data[", k, ":], ",
                             shapeText(expected));
  types.push_back(data);
  return success();
}

LogicalResult CumSumOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto input = rankedType(adaptor.getInput());
  if (rankedType(adaptor.getAxis()).getNumElements() > 1)
    return emitOptionalError(loc, "sl.cumsum: axis must be a single value");
  if (input.getRank() < 1)
    return emitOptionalError(loc, "sl.cumsum: input must have rank >= 1, got ", quoted(input));
  if (std::optional<SmallVector<int64_t>> axis = constantInts(adaptor.getAxis())) {
    int64_t a = (*axis)[0];
    if (a < -input.getRank() || a >= input.getRank())
      return emitOptionalError(loc, "sl.cumsum: axis ", a, " is out of range for ",
                               quoted(input));
  }
  types.push_back(input);
  return success();
}

LogicalResult ConstantOfShapeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                                  Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto value = llvm::cast<ElementsAttr>(adaptor.getValue());
  if (value.getNumElements() != 1)
    return emitOptionalError(loc, "sl.constant_of_shape: value must have one element");
  auto shapeType = rankedType(adaptor.getShape());
  if (shapeType.getRank() != 1 || shapeType.isDynamicDim(0))
    return emitOptionalError(loc, "sl.constant_of_shape: the shape must be a 1-D tensor of static "
                                  "length");
  Type element = value.getElementType();
  if (auto target = constantInts(adaptor.getShape())) {
    for (int64_t d : *target)
      if (d < 0)
        return emitOptionalError(loc, "sl.constant_of_shape: negative dimension ", d);
    return pushType(types, *target, element);
  }
  return pushType(types, SmallVector<int64_t>(shapeType.getDimSize(0), kDynamic), element);
}

LogicalResult RangeOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto type = rankedType(adaptor.getStart());
  for (Value v : {adaptor.getStart(), adaptor.getLimit(), adaptor.getDelta()})
    if (rankedType(v).getNumElements() != 1 || rankedType(v).getElementType() != type.getElementType())
      return emitOptionalError(loc, "sl.range: start, limit and delta must be scalars of one type");
  int64_t count = kDynamic;
  // Integers exactly: int64 bounds need more than a double's 53 bits, and a count past int64
  // (a Range over the whole int64 span) is an error, not a count cast into nonsense.
  if (auto bounds = [&]() -> std::optional<SmallVector<int64_t>> {
        SmallVector<int64_t> v;
        for (Value x : {adaptor.getStart(), adaptor.getLimit(), adaptor.getDelta()}) {
          auto i = constantInts(x);
          if (!i)
            return std::nullopt;
          v.push_back((*i)[0]);
        }
        return v;
      }()) {
    __int128 start = (*bounds)[0], limit = (*bounds)[1], delta = (*bounds)[2];
    if (delta == 0)
      return emitOptionalError(loc, "sl.range: delta is 0");
    __int128 span = limit - start;
    // ceil(span / delta) for either sign; C++ division truncates toward zero.
    __int128 n = span / delta + ((span % delta != 0) && ((span > 0) == (delta > 0)) ? 1 : 0);
    if (n > std::numeric_limits<int64_t>::max())
      return emitOptionalError(loc, "sl.range: start ", (*bounds)[0], ", limit ", (*bounds)[1],
                               " and delta ", (*bounds)[2],
                               " make more than 2^63 - 1 elements");
    return pushType(types, {std::max<int64_t>(int64_t(n), 0)}, type.getElementType());
  }
  if (auto ints = [&]() -> std::optional<SmallVector<double>> {
        SmallVector<double> v;
        for (Value x : {adaptor.getStart(), adaptor.getLimit(), adaptor.getDelta()}) {
          auto c = x.getDefiningOp<ConstantOp>();
          if (!c)
            return std::nullopt;
          if (auto i = constantInts(c.getValue()))
            v.push_back(double((*i)[0]));
          else if (auto f = constantFloats(c.getValue()))
            v.push_back((*f)[0]);
          else
            return std::nullopt;
        }
        return v;
      }()) {
    double start = (*ints)[0], limit = (*ints)[1], delta = (*ints)[2];
    if (delta == 0)
      return emitOptionalError(loc, "sl.range: delta is 0");
    double n = std::ceil((limit - start) / delta);
    if (!(n < 0x1p63))
      return emitOptionalError(loc, "sl.range: start ", start, ", limit ", limit, " and delta ",
                               delta, " make ", n, " elements, more than 2^63 - 1");
    count = std::max<int64_t>(int64_t(n), 0);
  }
  return pushType(types, {count}, type.getElementType());
}

static LogicalResult inferReduce(std::optional<Location> loc, llvm::StringRef op, Value inputValue,
                                 Value axesValue, bool keepdims, bool noopWithEmptyAxes,
                                 SmallVectorImpl<Type> &types) {
  auto input = rankedType(inputValue);
  int64_t rank = input.getRank();
  SmallVector<int64_t> axes;
  if (axesValue) {
    auto values = constantInts(axesValue);
    if (!values)
      return emitOptionalError(loc, op, ": axes must be constant");
    for (int64_t a : *values) {
      FailureOr<int64_t> axis = normalizeAxis(loc, op, a, rank);
      if (failed(axis))
        return failure();
      axes.push_back(*axis);
    }
  }
  if (axes.empty()) {
    if (noopWithEmptyAxes) {
      types.push_back(input);
      return success();
    }
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    if (!reduced)
      shape.push_back(input.getDimSize(d));
    else if (keepdims)
      shape.push_back(1);
  }
  return pushType(types, shape, input.getElementType());
}

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                             Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferReduce(loc, "sl.reduce_mean", adaptor.getInput(), adaptor.getAxes(),
                     adaptor.getKeepdims(), adaptor.getNoopWithEmptyAxes(), types);
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferReduce(loc, "sl.reduce_sum", adaptor.getInput(), adaptor.getAxes(),
                     adaptor.getKeepdims(), adaptor.getNoopWithEmptyAxes(), types);
}

// The normalisations and the rotary embedding keep their input's type; attention's result is
// [B, Hq, S, Dv]. Their verifiers check the rest.
LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult RotaryOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &types) {
  auto q = rankedType(adaptor.getQ()), v = rankedType(adaptor.getV());
  if (q.getRank() != 4 || v.getRank() != 4)
    return emitOptionalError(loc, "sl.attention: q, k and v must have rank 4, got ", quoted(q),
                             " and ", quoted(v));
  // Batch and the two middle dimensions are q's in either layout; only the width is v's.
  return pushType(types, {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), v.getDimSize(3)},
                  q.getElementType());
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
