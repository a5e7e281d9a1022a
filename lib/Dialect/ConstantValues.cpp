//===- ConstantValues.cpp - reading the values of sl.constant operands --------------------------===//

#include "sl/Dialect/ConstantValues.h"

#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/BuiltinTypes.h"

#include <algorithm>

using namespace mlir;

namespace sl {

namespace {
thread_local int64_t foldLimit = kMaxFoldedElements;
} // namespace

int64_t maxFoldedElements() { return foldLimit; }

ScopedFoldLimit::ScopedFoldLimit(int64_t limit) : previous(foldLimit) { foldLimit = limit; }
ScopedFoldLimit::~ScopedFoldLimit() { foldLimit = previous; }

std::optional<SmallVector<int64_t>> constantInts(Attribute attr) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !llvm::isa<IntegerType>(dense.getElementType()))
    return std::nullopt;
  SmallVector<int64_t> values;
  bool isBool = dense.getElementType().isInteger(1);
  for (const APInt &v : dense.getValues<APInt>())
    values.push_back(isBool ? int64_t(v.getBoolValue()) : v.getSExtValue());
  return values;
}

std::optional<SmallVector<int64_t>> constantInts(Value value) {
  if (!value)
    return std::nullopt;
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  return constantInts(constant.getValue());
}

std::optional<SmallVector<int64_t>> knownInts(Value value) {
  auto type = value ? llvm::dyn_cast<RankedTensorType>(value.getType()) : RankedTensorType();
  if (!type || type.getRank() > 1 || !type.hasStaticShape() ||
      !llvm::isa<IntegerType>(type.getElementType()))
    return std::nullopt;
  if (auto values = constantInts(value))
    return values;
  SmallVector<int64_t> unknown(type.getNumElements(), ShapedType::kDynamic);
  if (auto shape = value.getDefiningOp<ShapeOp>()) {
    auto input = llvm::cast<RankedTensorType>(shape.getInput().getType());
    int64_t rank = input.getRank();
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t(0), rank); };
    int64_t start = clamp(shape.getStart()), end = clamp(shape.getEnd().value_or(rank));
    if (end - start != type.getNumElements())
      return unknown;
    return SmallVector<int64_t>(input.getShape().slice(start, end - start));
  }
  // A scalar made a 1-element vector (how the importer writes Unsqueeze).
  if (auto reshape = value.getDefiningOp<ReshapeOp>())
    if (auto input = llvm::cast<RankedTensorType>(reshape.getInput().getType());
        input.hasStaticShape() && input.getNumElements() == type.getNumElements())
      if (auto values = knownInts(reshape.getInput()))
        return values;
  if (auto concat = value.getDefiningOp<ConcatOp>(); concat && type.getRank() == 1) {
    SmallVector<int64_t> values;
    for (Value input : concat.getInputs()) {
      auto piece = knownInts(input);
      if (!piece)
        return unknown;
      values.append(*piece);
    }
    if (int64_t(values.size()) == type.getNumElements())
      return values;
  }
  return unknown;
}

std::optional<SmallVector<double>> constantFloats(Attribute attr) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !llvm::isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  SmallVector<double> values;
  for (const APFloat &v : dense.getValues<APFloat>()) {
    bool lost;
    APFloat d = v;
    d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
    values.push_back(d.convertToDouble());
  }
  return values;
}

DenseElementsAttr makeDense(RankedTensorType type, ArrayRef<int64_t> values) {
  Type element = type.getElementType();
  if (auto intType = llvm::dyn_cast<IntegerType>(element)) {
    SmallVector<APInt> ints;
    for (int64_t v : values)
      ints.push_back(intType.getWidth() == 1 ? APInt(1, v != 0)
                                             : APInt(intType.getWidth(), v, /*isSigned=*/true));
    return DenseElementsAttr::get(type, ints);
  }
  SmallVector<double> doubles(values.begin(), values.end());
  return makeDense(type, ArrayRef<double>(doubles));
}

DenseElementsAttr makeDense(RankedTensorType type, ArrayRef<double> values) {
  Type element = type.getElementType();
  if (auto floatType = llvm::dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> floats;
    for (double v : values) {
      APFloat f(v);
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      floats.push_back(f);
    }
    return DenseElementsAttr::get(type, floats);
  }
  SmallVector<int64_t> ints;
  for (double v : values)
    ints.push_back(element.isInteger(1) ? int64_t(v != 0) : int64_t(v));
  return makeDense(type, ArrayRef<int64_t>(ints));
}

} // namespace sl
