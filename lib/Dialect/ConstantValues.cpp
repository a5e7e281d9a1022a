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

namespace {

/// `dense`'s elements as T, read through the typed iterator (splats included), widened to U.
template <typename T, typename U> SmallVector<U> widen(DenseElementsAttr dense) {
  auto values = dense.getValues<T>();
  SmallVector<U> out;
  out.reserve(dense.getNumElements());
  for (T v : values)
    out.push_back(U(v));
  return out;
}

/// An attribute of `type` from `values` converted to T, its element type's C++ type.
template <typename T, typename U> DenseElementsAttr narrow(ShapedType type, ArrayRef<U> values) {
  SmallVector<T> out;
  out.reserve(values.size());
  for (U v : values)
    out.push_back(T(v));
  return DenseElementsAttr::get(type, ArrayRef<T>(out));
}

} // namespace

// Typed loops over the attribute's raw storage for the widths models use; APInt and APFloat per
// element only for the others (a mask of a 4k context is 16M elements).
std::optional<SmallVector<int64_t>> constantInts(Attribute attr) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense || !llvm::isa<IntegerType>(dense.getElementType()))
    return std::nullopt;
  // The typed iterators assert that signedness matches: signless integers only.
  switch (dense.getElementType().isSignlessInteger() ? dense.getElementType().getIntOrFloatBitWidth()
                                                      : 0) {
  case 1:
    return widen<bool, int64_t>(dense);
  case 32:
    return widen<int32_t, int64_t>(dense);
  case 64:
    return widen<int64_t, int64_t>(dense);
  default:
    break;
  }
  SmallVector<int64_t> values;
  for (const APInt &v : dense.getValues<APInt>())
    values.push_back(v.getSExtValue());
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
  if (dense.getElementType().isF32())
    return widen<float, double>(dense);
  if (dense.getElementType().isF64())
    return widen<double, double>(dense);
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
    // Truncated to the width, as APInt(width, v) does.
    switch (intType.isSignless() ? intType.getWidth() : 0) {
    case 1:
      return narrow<bool>(type, values);
    case 32:
      return narrow<int32_t>(type, values);
    case 64:
      return DenseElementsAttr::get(type, values);
    default:
      break;
    }
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
    // A double rounds to float to nearest, ties to even, as APFloat's conversion does.
    if (floatType.isF32())
      return narrow<float>(type, values);
    if (floatType.isF64())
      return DenseElementsAttr::get(type, values);
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
