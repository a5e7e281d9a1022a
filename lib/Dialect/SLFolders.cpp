//===- SLFolders.cpp - constant folding of sl operations ----------------------------------------===//
//
// Folding turns an exporter's shape arithmetic (Shape, Gather, Concat, Unsqueeze, arithmetic on
// i64, Range, ConstantOfShape, ...) into constants once sl-bind-shapes has made the input shapes
// static. Integers fold exactly in int64; floats in double, rounded to the element type once.
// Folds stop at maxFoldedElements() result elements, except splats, which cost nothing.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/FoldMemo.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"
#include "sl/Support/CheckedArith.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;

namespace sl {

std::pair<int64_t, int64_t> sliceBounds(int64_t dim, int64_t start, int64_t end, int64_t step);

namespace {

/// A folded value: shape, and its elements as int64 (integer and i1 types) or double (floats).
struct Values {
  SmallVector<int64_t> shape;
  bool isFloat = false;
  SmallVector<int64_t> ints;
  SmallVector<double> floats;

  int64_t size() const { return isFloat ? int64_t(floats.size()) : int64_t(ints.size()); }
  double at(int64_t i) const { return isFloat ? floats[i] : double(ints[i]); }
};

/// Folds that select from a constant (Slice, Gather) read inputs up to this many elements: the
/// input is already in the IR, and the result, which the fold limit bounds, is smaller. A real
/// model's rotary cos/sin caches ([max_positions, head_dim], 2048 x 128) are such inputs.
constexpr int64_t kMaxSelectedFromElements = int64_t(1) << 22;

/// Whether `type`'s element count is at most `limit`, counted without wrapping (getNumElements
/// of [3, 2^62] is negative, which is below any limit).
bool fitsFoldLimit(RankedTensorType type, int64_t limit) {
  std::optional<int64_t> count = checkedElementCount(type.getShape());
  return count && *count <= limit;
}

/// `attr`'s values, if it has at most `limit` elements. A splat read by a broadcasting fold
/// (`broadcast`) is one element with every dimension 1, which broadcasts to the same values
/// without spelling out millions of copies (a causal mask's fill).
std::optional<Values> valuesOf(Attribute attr, int64_t limit = maxFoldedElements(),
                               bool broadcast = false) {
  auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = llvm::dyn_cast<RankedTensorType>(dense.getType());
  if (!type || !fitsFoldLimit(type, limit))
    return std::nullopt;
  Values v;
  v.shape.assign(type.getShape().begin(), type.getShape().end());
  if (broadcast && dense.isSplat() && type.getNumElements() > 1) {
    std::fill(v.shape.begin(), v.shape.end(), 1);
    dense = dense.resizeSplat(RankedTensorType::get(v.shape, type.getElementType()));
  }
  if (auto ints = constantInts(dense)) {
    v.ints = std::move(*ints);
  } else if (auto floats = constantFloats(dense)) {
    v.isFloat = true;
    v.floats = std::move(*floats);
  } else {
    return std::nullopt;
  }
  return v;
}

/// The values of `v`'s shape vector when `v` is an sl.shape whose input has static dimensions in
/// some places: dynamic ones are ShapedType::kDynamic. Lets Gather and Slice of a shape fold when
/// they pick only static dimensions, before the other dimensions are bound.
std::optional<Values> partialShapeValues(Value v) {
  auto shape = v.getDefiningOp<ShapeOp>();
  if (!shape)
    return std::nullopt;
  auto input = llvm::cast<RankedTensorType>(shape.getInput().getType());
  int64_t rank = input.getRank();
  auto clampIndex = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t(0), rank); };
  int64_t start = clampIndex(shape.getStart()), end = clampIndex(shape.getEnd().value_or(rank));
  Values values;
  for (int64_t d = start; d < end; ++d)
    values.ints.push_back(input.getDimSize(d));
  values.shape = {int64_t(values.ints.size())};
  return values;
}

bool picksOnlyStatic(const Values &values, ArrayRef<int64_t> picks) {
  return llvm::none_of(picks, [&](int64_t i) { return ShapedType::isDynamic(values.ints[i]); });
}

bool foldable(RankedTensorType type) {
  return type && type.hasStaticShape() && fitsFoldLimit(type, maxFoldedElements());
}

SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Walks the elements of `result` in row-major order, giving for each the index of the element
/// of `operand` that NumPy broadcasting reads: an odometer over the result's coordinates, with no
/// division per element and no index vector as long as the result.
class BroadcastWalk {
public:
  BroadcastWalk(ArrayRef<int64_t> operand, ArrayRef<int64_t> result)
      : result(result), step(result.size(), 0), coord(result.size(), 0) {
    size_t offset = result.size() - operand.size();
    // The operand's stride along each result dimension: 0 where it broadcasts.
    SmallVector<int64_t> operandStrides = stridesOf(operand);
    for (size_t d = offset; d < result.size(); ++d)
      step[d] = operand[d - offset] == 1 ? 0 : operandStrides[d - offset];
  }

  int64_t index() const { return current; }

  void next() {
    for (size_t d = result.size(); d-- > 0;) {
      current += step[d];
      if (++coord[d] < result[d])
        return;
      current -= step[d] * result[d];
      coord[d] = 0;
    }
  }

private:
  ArrayRef<int64_t> result;
  SmallVector<int64_t> step, coord;
  int64_t current = 0;
};

/// For each element of `result` (row-major), the index of the element of `operand` that NumPy
/// broadcasting reads.
SmallVector<int64_t> broadcastIndices(ArrayRef<int64_t> operand, ArrayRef<int64_t> result) {
  int64_t n = 1;
  for (int64_t d : result)
    n *= d;
  SmallVector<int64_t> indices(n);
  BroadcastWalk walk(operand, result);
  for (int64_t i = 0; i < n; ++i, walk.next())
    indices[i] = walk.index();
  return indices;
}

/// Where's common case, in the element types themselves: a boolean condition of the result's
/// shape choosing between two single f32 values (a causal mask's 0 and its fill: 16M elements at
/// 4096, which the general fold would widen to 8 bytes each, three times). Null otherwise.
OpFoldResult selectOneOfTwo(Attribute condAttr, Attribute xAttr, Attribute yAttr,
                            RankedTensorType type) {
  auto cond = llvm::dyn_cast_or_null<DenseElementsAttr>(condAttr);
  auto x = llvm::dyn_cast_or_null<DenseElementsAttr>(xAttr);
  auto y = llvm::dyn_cast_or_null<DenseElementsAttr>(yAttr);
  if (!cond || !x || !y || cond.isSplat() || !x.isSplat() || !y.isSplat() ||
      !cond.getElementType().isSignlessInteger(1) || !x.getElementType().isF32() ||
      !y.getElementType().isF32() || !type.getElementType().isF32() ||
      llvm::cast<ShapedType>(cond.getType()).getShape() != type.getShape())
    return {};
  float ifTrue = x.getSplatValue<float>(), ifFalse = y.getSplatValue<float>();
  SmallVector<float> out;
  out.reserve(type.getNumElements());
  for (bool c : cond.getValues<bool>())
    out.push_back(c ? ifTrue : ifFalse);
  return DenseElementsAttr::get(type, ArrayRef<float>(out));
}

Attribute toAttr(RankedTensorType type, ArrayRef<double> values) {
  return makeDense(type, values);
}

/// `fn` of each of the `n` result elements' broadcast operand pairs, walked by `l` and `r`, as
/// `Out`; nullopt as soon as `fn` declines one.
template <typename Out, typename In, typename Fn>
std::optional<SmallVector<Out>> mapBroadcast(ArrayRef<In> lhs, ArrayRef<In> rhs, BroadcastWalk l,
                                             BroadcastWalk r, int64_t n, Fn fn) {
  SmallVector<Out> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i, l.next(), r.next()) {
    auto v = fn(lhs[l.index()], rhs[r.index()]);
    if (!v)
      return std::nullopt;
    out.push_back(static_cast<Out>(*v));
  }
  return out;
}

/// Folds an elementwise binary op: `intFn` on int64 values (exact: shapes can be near INT64_MAX),
/// `floatFn` on doubles. Either may decline (nullopt), e.g. an integer division by zero, which is
/// left for the kernel to report.
template <typename IntFn, typename FloatFn>
OpFoldResult foldBinary(Attribute lhsAttr, Attribute rhsAttr, RankedTensorType resultType,
                        IntFn intFn, FloatFn floatFn) {
  if (!lhsAttr || !rhsAttr || !foldable(resultType))
    return {};
  auto lhs = valuesOf(lhsAttr, maxFoldedElements(), /*broadcast=*/true),
       rhs = valuesOf(rhsAttr, maxFoldedElements(), /*broadcast=*/true);
  if (!lhs || !rhs || lhs->isFloat != rhs->isFloat)
    return {};
  ArrayRef<int64_t> shape = resultType.getShape();
  int64_t n = resultType.getNumElements();
  BroadcastWalk l(lhs->shape, shape), r(rhs->shape, shape);
  if (!lhs->isFloat && resultType.getElementType().isSignlessInteger(1)) {
    // A comparison's result straight to booleans (a causal mask's condition is 16M of them).
    auto out = mapBroadcast<bool>(ArrayRef(lhs->ints), ArrayRef(rhs->ints), l, r, n, intFn);
    return out ? DenseElementsAttr::get(resultType, ArrayRef<bool>(*out)) : Attribute();
  }
  if (!lhs->isFloat) {
    auto out = mapBroadcast<int64_t>(ArrayRef(lhs->ints), ArrayRef(rhs->ints), l, r, n, intFn);
    return out ? makeDense(resultType, ArrayRef<int64_t>(*out)) : Attribute();
  }
  auto out = mapBroadcast<double>(ArrayRef(lhs->floats), ArrayRef(rhs->floats), l, r, n, floatFn);
  return out ? toAttr(resultType, *out) : Attribute();
}

// Two's-complement wrap-around, as the kernels compute it (and without undefined behaviour).
int64_t wrapAdd(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t wrapSub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
int64_t wrapMul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }

/// Folds an elementwise function of a float constant, computed in double and rounded once.
template <typename Fn>
OpFoldResult foldUnaryFloat(Attribute input, RankedTensorType resultType, Fn fn) {
  if (!foldable(resultType))
    return {};
  auto v = valuesOf(input);
  if (!v || !v->isFloat)
    return {};
  SmallVector<double> out;
  for (double x : v->floats)
    out.push_back(fn(x));
  return toAttr(resultType, out);
}

/// Gathers `source` elements at `indices` into a constant of `type`.
OpFoldResult gatherValues(const Values &source, ArrayRef<int64_t> indices, RankedTensorType type) {
  if (!source.isFloat) {
    SmallVector<int64_t> ints;
    ints.reserve(indices.size());
    for (int64_t i : indices)
      ints.push_back(source.ints[i]);
    return makeDense(type, ArrayRef<int64_t>(ints));
  }
  SmallVector<double> out;
  out.reserve(indices.size());
  for (int64_t i : indices)
    out.push_back(source.floats[i]);
  return toAttr(type, out);
}

} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult TransposeOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    // A constant transposes at compile time (rotary angles [1, D/2, S] -> [1, S, D/2]).
    if (auto v = foldable(getType()) ? valuesOf(a.getInput()) : std::nullopt) {
      ArrayRef<int64_t> perm = getPerm(), shape = getType().getShape();
      SmallVector<int64_t> inStrides = stridesOf(v->shape), outStrides = stridesOf(shape);
      SmallVector<int64_t> indices(getType().getNumElements());
      for (int64_t i = 0; i < int64_t(indices.size()); ++i) {
        int64_t index = 0;
        for (size_t d = 0; d < shape.size(); ++d)
          index += (i / outStrides[d]) % shape[d] * inStrides[perm[d]];
        indices[i] = index;
      }
      return gatherValues(*v, indices, getType());
    }
    // A transpose of a transpose that restores the order (autodiff's transposed weights of
    // transposed weights) is no copy at all.
    auto inner = getInput().getDefiningOp<TransposeOp>();
    if (!inner)
      return {};
    ArrayRef<int64_t> outer = getPerm(), first = inner.getPerm();
    for (auto [i, axis] : llvm::enumerate(outer))
      if (first[axis] != int64_t(i))
        return {};
    return inner.getInput();
  });
}

using OptInt = std::optional<int64_t>;
using OptFloat = std::optional<double>;

OpFoldResult AddOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(),
        [](int64_t x, int64_t y) -> OptInt { return wrapAdd(x, y); },
        [](double x, double y) -> OptFloat { return x + y; });
  });
}

OpFoldResult SubOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(),
        [](int64_t x, int64_t y) -> OptInt { return wrapSub(x, y); },
        [](double x, double y) -> OptFloat { return x - y; });
  });
}

OpFoldResult MulOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(),
        [](int64_t x, int64_t y) -> OptInt { return wrapMul(x, y); },
        [](double x, double y) -> OptFloat { return x * y; });
  });
}

OpFoldResult DivOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(),
        [](int64_t x, int64_t y) -> OptInt {
          if (y == 0)
            return std::nullopt; // leave the run-time error to the kernel
          if (x == INT64_MIN && y == -1)
            return INT64_MIN; // wraps, as the kernel does
          return x / y;      // C++ truncates toward zero, as ONNX's Div
        },
        [](double x, double y) -> OptFloat { return x / y; });
  });
}

OpFoldResult PowOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(), [](int64_t, int64_t) -> OptInt { return std::nullopt; },
        [](double x, double y) -> OptFloat { return std::pow(x, y); });
  });
}

OpFoldResult EqualOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(), [](int64_t x, int64_t y) -> OptInt { return x == y; },
        [](double x, double y) -> OptFloat { return x == y; });
  });
}

OpFoldResult LessOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldBinary(
        a.getLhs(), a.getRhs(), getType(), [](int64_t x, int64_t y) -> OptInt { return x < y; },
        [](double x, double y) -> OptFloat { return x < y; });
  });
}

OpFoldResult CosOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldUnaryFloat(a.getInput(), getType(), [](double x) { return std::cos(x); });
  });
}

OpFoldResult SinOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    return foldUnaryFloat(a.getInput(), getType(), [](double x) { return std::sin(x); });
  });
}

// Operands of rank 2 or more (the rank-1 forms are vector products, which exporters write only
// for weights); batch dimensions broadcast; each dot product is summed in double.
OpFoldResult MatmulOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    RankedTensorType type = getType();
    if (!foldable(type) || type.getRank() < 2)
      return {};
    auto lhs = valuesOf(a.getLhs()), rhs = valuesOf(a.getRhs());
    if (!lhs || !rhs || !lhs->isFloat || !rhs->isFloat || lhs->shape.size() < 2 ||
        rhs->shape.size() < 2)
      return {};
    // Stored [M, K] and [K, N], or [K, M] and [N, K] where transposed.
    bool transA = getTransA(), transB = getTransB();
    int64_t lRows = lhs->shape[lhs->shape.size() - 2], lCols = lhs->shape.back();
    int64_t rRows = rhs->shape[rhs->shape.size() - 2], rCols = rhs->shape.back();
    int64_t m = transA ? lCols : lRows, k = transA ? lRows : lCols;
    int64_t n = transB ? rRows : rCols;
    if ((transB ? rCols : rRows) != k)
      return {};
    ArrayRef<int64_t> batch = type.getShape().drop_back(2);
    SmallVector<int64_t> li = broadcastIndices(ArrayRef<int64_t>(lhs->shape).drop_back(2), batch);
    SmallVector<int64_t> ri = broadcastIndices(ArrayRef<int64_t>(rhs->shape).drop_back(2), batch);
    SmallVector<double> out;
    out.reserve(type.getNumElements());
    for (size_t bi = 0; bi < li.size(); ++bi) {
      const double *l = lhs->floats.data() + li[bi] * m * k;
      const double *r = rhs->floats.data() + ri[bi] * k * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t t = 0; t < k; ++t)
            sum += l[transA ? t * m + i : i * k + t] * r[transB ? j * k + t : t * n + j];
          out.push_back(sum);
        }
    }
    return toAttr(type, out);
  });
}

OpFoldResult NegOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (!foldable(getType()))
      return {};
    auto v = valuesOf(a.getInput());
    if (!v)
      return {};
    if (!v->isFloat) {
      SmallVector<int64_t> out;
      for (int64_t x : v->ints)
        out.push_back(wrapSub(0, x));
      return makeDense(getType(), ArrayRef<int64_t>(out));
    }
    SmallVector<double> out;
    for (double x : v->floats)
      out.push_back(-x);
    return toAttr(getType(), out);
  });
}

OpFoldResult CastOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (getInput().getType() == getType())
      return getInput();
    if (!foldable(getType()))
      return {};
    auto v = valuesOf(a.getInput());
    if (!v)
      return {};
    Type to = getType().getElementType();
    if (!v->isFloat)
      return makeDense(getType(), ArrayRef<int64_t>(v->ints));
    SmallVector<double> out;
    for (double x : v->floats)
      out.push_back(to.isInteger(1)                ? double(x != 0)
                    : llvm::isa<IntegerType>(to) ? std::trunc(x)
                                                 : x);
    return toAttr(getType(), out);
  });
}

OpFoldResult WhereOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    // A condition that is all true (or all false) selects one operand, if no broadcasting by the
    // other operands or the condition changes its type.
    if (auto cond = llvm::dyn_cast_or_null<DenseElementsAttr>(a.getCondition());
        cond && cond.isSplat()) {
      Value chosen = cond.getSplatValue<bool>() ? getX() : getY();
      if (getType().hasStaticShape() && chosen.getType() == getType())
        return chosen;
    }
    if (!foldable(getType()))
      return {};
    if (OpFoldResult mask = selectOneOfTwo(a.getCondition(), a.getX(), a.getY(), getType()))
      return mask;
    int64_t limit = maxFoldedElements();
    auto c = valuesOf(a.getCondition(), limit, /*broadcast=*/true),
         x = valuesOf(a.getX(), limit, /*broadcast=*/true),
         y = valuesOf(a.getY(), limit, /*broadcast=*/true);
    if (!c || !x || !y || x->isFloat != y->isFloat)
      return {};
    ArrayRef<int64_t> shape = getType().getShape();
    int64_t n = getType().getNumElements();
    BroadcastWalk ci(c->shape, shape), xi(x->shape, shape), yi(y->shape, shape);
    auto advance = [&] { ci.next(), xi.next(), yi.next(); };
    if (!x->isFloat) {
      SmallVector<int64_t> out;
      out.reserve(n);
      for (int64_t i = 0; i < n; ++i, advance())
        out.push_back(c->ints[ci.index()] ? x->ints[xi.index()] : y->ints[yi.index()]);
      return makeDense(getType(), ArrayRef<int64_t>(out));
    }
    SmallVector<double> out;
    out.reserve(n);
    for (int64_t i = 0; i < n; ++i, advance())
      out.push_back(c->ints[ci.index()] ? x->floats[xi.index()] : y->floats[yi.index()]);
    return toAttr(getType(), out);
  });
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto input = llvm::cast<RankedTensorType>(getInput().getType());
  int64_t rank = input.getRank();
  auto clampIndex = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t(0), rank); };
  int64_t start = clampIndex(getStart()), end = clampIndex(getEnd().value_or(rank));
  SmallVector<int64_t> dims;
  for (int64_t d = start; d < end; ++d) {
    if (input.isDynamicDim(d))
      return {};
    dims.push_back(input.getDimSize(d));
  }
  return makeDense(getType(), ArrayRef<int64_t>(dims));
}

OpFoldResult GatherOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    // The result's size first: reading a big table only to refuse its result costs the most.
    if (!foldable(getType()) || !a.getIndices())
      return {};
    auto data = valuesOf(a.getData(), std::max(maxFoldedElements(), kMaxSelectedFromElements));
    auto indices = valuesOf(a.getIndices());
    if (!data)
      data = partialShapeValues(getData());
    if (!data || !indices || !foldable(getType()))
      return {};
    int64_t rank = int64_t(data->shape.size());
    // I64Attr's getter is unsigned: read it as the signed axis it is.
    int64_t axis = int64_t(getAxis()) < 0 ? int64_t(getAxis()) + rank : int64_t(getAxis());
    int64_t axisDim = data->shape[axis];
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= data->shape[d];
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= data->shape[d];
    SmallVector<int64_t> picks;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t index : indices->ints) {
        if (index < -axisDim || index >= axisDim)
          return {};
        if (index < 0)
          index += axisDim;
        for (int64_t i = 0; i < inner; ++i)
          picks.push_back((o * axisDim + index) * inner + i);
      }
    if (!data->isFloat && !picksOnlyStatic(*data, picks))
      return {};
    return gatherValues(*data, picks, getType());
  });
}

// What a reshape or expand of `input` to `type` is when it moves no element: `input` itself when
// its type is `type`, or x when `input` is a reshape of x and x's type is `type` (a round trip).
// Only for a static `type`: tensor<?x4> can reshape to another tensor<?x4>.
static Value reshapeIdentity(Value input, RankedTensorType type) {
  if (!type.hasStaticShape())
    return {};
  if (input.getType() == type)
    return input;
  if (auto inner = input.getDefiningOp<ReshapeOp>(); inner && inner.getInput().getType() == type)
    return inner.getInput();
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (Value same = reshapeIdentity(getInput(), getType()))
      return same;
    auto input = llvm::dyn_cast_or_null<DenseElementsAttr>(a.getInput());
    if (!input || !getType().hasStaticShape())
      return {};
    return input.reshape(getType());
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
      return getInputs()[0];
    // An empty past (a KV cache of length 0) joined with the new keys is the new keys.
    Value onlyNonEmpty;
    bool emptiesBesideOne = getType().hasStaticShape();
    for (Value input : getInputs()) {
      auto type = llvm::dyn_cast<RankedTensorType>(input.getType());
      if (!type || !type.hasStaticShape()) {
        emptiesBesideOne = false;
        break;
      }
      if (type.getNumElements() == 0)
        continue;
      if (onlyNonEmpty)
        emptiesBesideOne = false;
      onlyNonEmpty = input;
    }
    if (emptiesBesideOne && onlyNonEmpty && onlyNonEmpty.getType() == getType())
      return onlyNonEmpty;
    if (!foldable(getType()))
      return {};
    SmallVector<Values> inputs;
    for (Attribute attr : a.getInputs()) {
      auto v = valuesOf(attr);
      if (!v || (!inputs.empty() && v->isFloat != inputs[0].isFloat))
        return {};
      inputs.push_back(std::move(*v));
    }
    int64_t rank = getType().getRank();
    int64_t axis = int64_t(getAxis()) < 0 ? int64_t(getAxis()) + rank : int64_t(getAxis());
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= getType().getDimSize(d);
    SmallVector<int64_t> ints;
    SmallVector<double> floats;
    for (int64_t o = 0; o < outer; ++o)
      for (const Values &v : inputs) {
        int64_t chunk = v.size() / std::max<int64_t>(outer, 1);
        for (int64_t i = o * chunk; i < (o + 1) * chunk; ++i) {
          if (v.isFloat)
            floats.push_back(v.floats[i]);
          else
            ints.push_back(v.ints[i]);
        }
      }
    if (inputs[0].isFloat)
      return toAttr(getType(), floats);
    return makeDense(getType(), ArrayRef<int64_t>(ints));
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    // Steps of 1 that keep every dimension's size select everything: the slice is its data, even
    // when that is known only at run time (HF's `mask[:, :, :, :T]` of a T-long padding mask).
    if (getData().getType() == getType() && getType().hasStaticShape()) {
      std::optional<SmallVector<int64_t>> steps =
          getSteps() ? constantInts(a.getSteps()) : SmallVector<int64_t>{};
      if (steps && llvm::all_of(*steps, [](int64_t step) { return step == 1; }))
        return getData();
    }
    if (!foldable(getType()) || !a.getStarts() || !a.getEnds() || (getAxes() && !a.getAxes()) ||
        (getSteps() && !a.getSteps()))
      return {};
    auto data = valuesOf(a.getData(), std::max(maxFoldedElements(), kMaxSelectedFromElements));
    if (!data)
      data = partialShapeValues(getData());
    if (!data)
      return {};
    auto starts = constantInts(a.getStarts()), ends = constantInts(a.getEnds());
    if (!starts || !ends)
      return {};
    int64_t rank = int64_t(data->shape.size());
    SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
    SmallVector<int64_t> steps(starts->size(), 1);
    if (getAxes()) {
      auto v = constantInts(a.getAxes());
      if (!v)
        return {};
      axes = *v;
    }
    if (getSteps()) {
      auto v = constantInts(a.getSteps());
      if (!v)
        return {};
      steps = *v;
    }
    SmallVector<int64_t> first(rank, 0), step(rank, 1);
    for (auto [i, axis] : llvm::enumerate(axes)) {
      int64_t d = axis < 0 ? axis + rank : axis;
      first[d] = sliceBounds(data->shape[d], (*starts)[i], (*ends)[i], steps[i]).first;
      step[d] = steps[i];
    }
    SmallVector<int64_t> sourceStrides = stridesOf(data->shape);
    ArrayRef<int64_t> shape = getType().getShape();
    SmallVector<int64_t> resultStrides = stridesOf(shape);
    SmallVector<int64_t> picks;
    for (int64_t i = 0, n = getType().getNumElements(); i < n; ++i) {
      int64_t index = 0;
      for (int64_t d = 0; d < rank; ++d)
        index += (first[d] + ((i / resultStrides[d]) % shape[d]) * step[d]) * sourceStrides[d];
      picks.push_back(index);
    }
    if (!data->isFloat && !picksOnlyStatic(*data, picks))
      return {};
    return gatherValues(*data, picks, getType());
  });
}

OpFoldResult ExpandOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    // Expanding to the input's own type (or a reshape of x back to x's type) broadcasts nothing.
    if (Value same = reshapeIdentity(getInput(), getType()))
      return same;
    auto input = llvm::dyn_cast_or_null<DenseElementsAttr>(a.getInput());
    if (!input || !getType().hasStaticShape())
      return {};
    if (input.isSplat())
      return SplatElementsAttr::get(getType(), input.getSplatValue<Attribute>());
    if (!foldable(getType()))
      return {};
    auto v = valuesOf(input);
    if (!v)
      return {};
    return gatherValues(*v, broadcastIndices(v->shape, getType().getShape()), getType());
  });
}

OpFoldResult TriluOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (!foldable(getType()))
      return {};
    auto v = valuesOf(a.getInput());
    if (!v)
      return {};
    int64_t k = 0;
    if (getK()) {
      auto kv = constantInts(a.getK());
      if (!kv || kv->size() != 1)
        return {};
      k = (*kv)[0];
    }
    int64_t rows = v->shape[v->shape.size() - 2], cols = v->shape.back();
    SmallVector<double> out;
    SmallVector<int64_t> ints;
    for (int64_t i = 0; i < v->size(); ++i) {
      int64_t r = (i / cols) % rows, c = i % cols;
      bool keep = getUpper() ? c - r >= k : c - r <= k;
      if (v->isFloat)
        out.push_back(keep ? v->floats[i] : 0.0);
      else
        ints.push_back(keep ? v->ints[i] : 0);
    }
    if (v->isFloat)
      return toAttr(getType(), out);
    return makeDense(getType(), ArrayRef<int64_t>(ints));
  });
}

/// ONNX's noop_with_empty_axes: with no axes the reduction is the identity.
static OpFoldResult foldNoopReduction(Value input, Value axes, bool noop, Type resultType) {
  if (!noop || input.getType() != resultType)
    return {};
  if (!axes)
    return input;
  auto values = sl::constantInts(axes);
  return values && values->empty() ? OpFoldResult(input) : OpFoldResult();
}

OpFoldResult ReduceMeanOp::fold(FoldAdaptor) {
  return foldNoopReduction(getInput(), getAxes(), getNoopWithEmptyAxes(), getType());
}

OpFoldResult ReduceSumOp::fold(FoldAdaptor) {
  return foldNoopReduction(getInput(), getAxes(), getNoopWithEmptyAxes(), getType());
}

OpFoldResult TileOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (!foldable(getType()) || !a.getRepeats())
      return {};
    auto v = valuesOf(a.getInput(), std::max(maxFoldedElements(), kMaxSelectedFromElements));
    if (!v || !constantInts(a.getRepeats()))
      return {};
    // Each result element reads the input element at its coordinates modulo the input's shape.
    ArrayRef<int64_t> out = getType().getShape();
    SmallVector<int64_t> outStrides = stridesOf(out), inStrides = stridesOf(v->shape);
    SmallVector<int64_t> indices;
    for (int64_t i = 0, n = getType().getNumElements(); i < n; ++i) {
      int64_t index = 0;
      for (size_t d = 0; d < out.size(); ++d)
        index += ((i / outStrides[d]) % out[d] % v->shape[d]) * inStrides[d];
      indices.push_back(index);
    }
    return gatherValues(*v, indices, getType());
  });
}

OpFoldResult GatherElementsOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (!foldable(getType()) || !a.getIndices())
      return {};
    auto data = valuesOf(a.getData(), std::max(maxFoldedElements(), kMaxSelectedFromElements));
    auto picks = valuesOf(a.getIndices());
    if (!data || !picks || picks->isFloat)
      return {};
    int64_t rank = int64_t(data->shape.size());
    // The attribute's accessor is unsigned: a negative axis reads back as a huge one.
    int64_t axis = static_cast<int64_t>(getAxis());
    if (axis < 0)
      axis += rank;
    ArrayRef<int64_t> out = getType().getShape();
    SmallVector<int64_t> outStrides = stridesOf(out), dataStrides = stridesOf(data->shape);
    SmallVector<int64_t> indices;
    for (int64_t i = 0, n = getType().getNumElements(); i < n; ++i) {
      int64_t index = 0;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t coord = (i / outStrides[d]) % out[d];
        if (d == axis) {
          coord = picks->ints[i] < 0 ? picks->ints[i] + data->shape[d] : picks->ints[i];
          if (coord < 0 || coord >= data->shape[d])
            return {}; // out of range: not folded, and refused where it is scheduled
        } else if (coord >= data->shape[d]) {
          return {};
        }
        index += coord * dataStrides[d];
      }
      indices.push_back(index);
    }
    return gatherValues(*data, indices, getType());
  });
}

/// Whether `picks` (index tuples of k integers) name every slice of `shape` once, in order: tuple
/// t is the coordinates of slice t, counted row-major over the first k dimensions. Negative
/// indices count from the end.
static bool coversInOrder(const Values &picks, ArrayRef<int64_t> shape) {
  if (picks.isFloat || picks.shape.empty())
    return false;
  int64_t k = picks.shape.back();
  if (k < 1 || k > int64_t(shape.size()))
    return false;
  int64_t slices = 1;
  for (int64_t d = 0; d < k; ++d)
    slices *= shape[d];
  if (picks.size() != slices * k)
    return false;
  for (int64_t t = 0; t < slices; ++t) {
    int64_t rest = t;
    for (int64_t d = k - 1; d >= 0; --d) {
      int64_t index = picks.ints[t * k + d];
      if (index < 0)
        index += shape[d];
      if (index != rest % shape[d])
        return false;
      rest /= shape[d];
    }
  }
  return true;
}

OpFoldResult ScatterNDOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    // The indices are a constant already in the IR; reading them costs no more than it holds.
    auto picks = valuesOf(a.getIndices(), std::max(maxFoldedElements(), kMaxSelectedFromElements));
    // Writing every element of `data`, in order, with no reduction is `updates` itself, whatever
    // `data` and `updates` are: HF's `mask[..., :n] = masked_fill(...)` when n is the whole
    // length, which keeps a padding mask known only at run time schedulable.
    if (picks && getReduction() == "none" && getUpdates().getType() == getType() &&
        getType().hasStaticShape() && coversInOrder(*picks, getType().getShape()))
      return getUpdates();
    auto data = valuesOf(a.getData());
    auto updates = valuesOf(a.getUpdates());
    if (!data || !picks || !updates || picks->isFloat || data->isFloat != updates->isFloat ||
        !foldable(getType()))
      return {};
    int64_t k = picks->shape.back();
    SmallVector<int64_t> strides = stridesOf(data->shape);
    // Each index tuple names a slice of `slice` contiguous elements (the dimensions past k).
    int64_t slice = k == 0 ? data->size() : strides[k - 1];
    int64_t tuples = k == 0 ? picks->size() : picks->size() / k;
    if (tuples * slice != updates->size())
      return {};
    llvm::StringRef reduction = getReduction();
    Values out = *data;
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t base = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t index = picks->ints[t * k + d];
        if (index < 0)
          index += data->shape[d];
        if (index < 0 || index >= data->shape[d])
          return {}; // out of range: not folded, and refused where it is scheduled
        base += index * strides[d];
      }
      for (int64_t i = 0; i < slice; ++i) {
        int64_t to = base + i, from = t * slice + i;
        if (out.isFloat) {
          double &x = out.floats[to], y = updates->floats[from];
          x = reduction == "add"   ? x + y
              : reduction == "mul" ? x * y
              : reduction == "max" ? std::max(x, y)
              : reduction == "min" ? std::min(x, y)
                                   : y;
        } else {
          int64_t &x = out.ints[to], y = updates->ints[from];
          x = reduction == "add"   ? wrapAdd(x, y)
              : reduction == "mul" ? int64_t(uint64_t(x) * uint64_t(y))
              : reduction == "max" ? std::max(x, y)
              : reduction == "min" ? std::min(x, y)
                                   : y;
        }
      }
    }
    if (out.isFloat)
      return toAttr(getType(), out.floats);
    return makeDense(getType(), ArrayRef<int64_t>(out.ints));
  });
}

OpFoldResult CumSumOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (!foldable(getType()))
      return {};
    auto v = valuesOf(a.getInput());
    auto axisValues = constantInts(a.getAxis());
    if (!v || !axisValues || axisValues->size() != 1)
      return {};
    int64_t rank = int64_t(v->shape.size());
    int64_t axis = (*axisValues)[0] < 0 ? (*axisValues)[0] + rank : (*axisValues)[0];
    if (axis < 0 || axis >= rank)
      return {};
    int64_t stride = stridesOf(v->shape)[axis], length = v->shape[axis];
    SmallVector<double> floats(v->floats);
    SmallVector<int64_t> ints(v->ints);
    // Each line along `axis` starts where the axis coordinate is 0; sum along it in order.
    for (int64_t start = 0; start < v->size(); ++start) {
      if ((start / stride) % length != 0)
        continue;
      double floatSum = 0;
      int64_t intSum = 0;
      for (int64_t step = 0; step < length; ++step) {
        int64_t j = getReverse() ? length - 1 - step : step;
        int64_t i = start + j * stride;
        double floatValue = v->isFloat ? v->floats[i] : 0;
        int64_t intValue = v->isFloat ? 0 : v->ints[i];
        if (!getExclusive()) {
          floatSum += floatValue;
          intSum = wrapAdd(intSum, intValue);
        }
        if (v->isFloat)
          floats[i] = floatSum;
        else
          ints[i] = intSum;
        if (getExclusive()) {
          floatSum += floatValue;
          intSum = wrapAdd(intSum, intValue);
        }
      }
    }
    if (v->isFloat)
      return toAttr(getType(), floats);
    return makeDense(getType(), ArrayRef<int64_t>(ints));
  });
}

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  if (!getType().hasStaticShape())
    return {};
  auto value = llvm::cast<DenseElementsAttr>(getValue());
  return SplatElementsAttr::get(getType(), value.getValues<Attribute>()[0]);
}

OpFoldResult RangeOp::fold(FoldAdaptor a) {
  return memoizedFold(*this, a.getOperands(), [&]() -> OpFoldResult {
    if (!foldable(getType()))
      return {};
    auto start = valuesOf(a.getStart()), delta = valuesOf(a.getDelta());
    if (!start || !delta)
      return {};
    if (!start->isFloat && !delta->isFloat) {
      // Exactly: int64 bounds need more than a double's 53 bits. Every element lies in
      // [start, limit), so none overflows.
      SmallVector<int64_t> out;
      for (int64_t i = 0, n = getType().getNumElements(); i < n; ++i)
        out.push_back(start->ints[0] + i * delta->ints[0]);
      return makeDense(getType(), out);
    }
    SmallVector<double> out;
    for (int64_t i = 0, n = getType().getNumElements(); i < n; ++i)
      out.push_back(start->at(0) + double(i) * delta->at(0));
    return toAttr(getType(), out);
  });
}

} // namespace sl
