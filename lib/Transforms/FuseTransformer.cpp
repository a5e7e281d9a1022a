//===- FuseTransformer.cpp - sl-fuse-transformer: exporter patterns into fused ops --------------===//
//
// Exporters decompose every transformer building block into elementwise ops, reductions and
// reshapes. This pass recognises the blocks on static, folded IR (after sl-bind-shapes) and
// rewrites them into the fused ops the runtime has kernels for:
//
//   RMSNorm      x * 1/sqrt(mean(x^2) + eps) * w                        -> sl.rms_norm
//   LayerNorm    (x - mean) / sqrt(mean((x - mean)^2) + eps) * w + b     -> sl.layer_norm
//   GELU         0.5 * x * (1 + erf(x / sqrt(2)))  and the tanh form     -> sl.gelu
//                (x^3 as a power, or BLOOM's x * (1 + 0.044715 * x * x))
//   SwiGLU       silu(g) * u                                              -> sl.swiglu
//   Rotary       x * cos + rotate(x) * sin, rotate-half or interleaved    -> sl.rotary
//   Attention    softmax(q k^T / c + causal mask) v, with repeat_kv        -> sl.attention
//                (scale and mask in any order, on 3-D or 4-D scores; a softmax that still
//                multiplies values afterwards gets a remark saying which check failed)
//
// Every match checks the constants it relies on (exponents, 1/2, epsilons, the mask's values),
// so a near-miss stays as it is and still runs, op by op.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/AttentionMasks.h"
#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/FoldMemo.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/ScopeExit.h"

#include <cmath>

namespace sl {
#define GEN_PASS_DEF_FUSETRANSFORMERPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using namespace sl;

namespace {

//===--------------------------------------------------------------------------------------------===//
// Matching helpers
//===--------------------------------------------------------------------------------------------===//

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// The value of a one-element (or splat) numeric constant.
std::optional<double> scalarOf(Value v) {
  auto constant = v ? v.getDefiningOp<ConstantOp>() : ConstantOp();
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  if (auto f = constantFloats(dense))
    return (*f)[0];
  if (auto i = sl::constantInts(dense))
    return double((*i)[0]);
  return std::nullopt;
}

bool isScalar(Value v, double expected, double relTol = 1e-4) {
  std::optional<double> value = scalarOf(v);
  return value && std::abs(*value - expected) <= relTol * std::max(1.0, std::abs(expected));
}

/// `op`'s two operands in both orders, for commutative matches.
template <typename OpT> SmallVector<std::pair<Value, Value>, 2> bothOrders(OpT op) {
  return {{op.getLhs(), op.getRhs()}, {op.getRhs(), op.getLhs()}};
}

template <typename OpT> OpT defining(Value v) { return v ? v.getDefiningOp<OpT>() : OpT(); }

/// True if `reduce` averages over exactly the last dimension, keeping it.
bool meanOverLastDim(ReduceMeanOp reduce) {
  if (!reduce || !reduce.getKeepdims() || !reduce.getAxes())
    return false;
  auto axes = sl::constantInts(reduce.getAxes());
  int64_t rank = typeOf(reduce.getInput()).getRank();
  return axes && axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
}

/// x^2 as pow(x, 2) or x * x; returns x.
Value squareOf(Value v) {
  if (auto pow = defining<PowOp>(v); pow && isScalar(pow.getRhs(), 2.0))
    return pow.getLhs();
  if (auto mul = defining<MulOp>(v); mul && mul.getLhs() == mul.getRhs())
    return mul.getLhs();
  return {};
}

/// sqrt(var + eps), either operand order of the add; returns (var, eps).
std::optional<std::pair<Value, double>> sqrtPlusEps(Value v) {
  auto sqrt = defining<SqrtOp>(v);
  auto add = sqrt ? defining<AddOp>(sqrt.getInput()) : AddOp();
  if (!add)
    return std::nullopt;
  for (auto [var, eps] : bothOrders(add))
    if (auto e = scalarOf(eps); e && *e >= 0)
      return std::make_pair(var, *e);
  return std::nullopt;
}

/// 1 / s as div(1, s) or reciprocal(s); returns s.
Value reciprocalOf(Value v) {
  if (auto div = defining<DivOp>(v); div && isScalar(div.getLhs(), 1.0))
    return div.getRhs();
  if (auto rec = defining<ReciprocalOp>(v))
    return rec.getInput();
  return {};
}

bool isVectorOfLastDim(Value w, RankedTensorType x) {
  auto type = typeOf(w);
  return type.getRank() == 1 && type.getDimSize(0) == x.getShape().back();
}

/// The factors of a product tree: through muls used only inside the tree.
void collectFactors(Value v, bool root, SmallVectorImpl<Value> &factors) {
  auto mul = defining<MulOp>(v);
  if (mul && (root || v.hasOneUse()) && mul.getType() == typeOf(v)) {
    collectFactors(mul.getLhs(), false, factors);
    collectFactors(mul.getRhs(), false, factors);
    return;
  }
  factors.push_back(v);
}

//===--------------------------------------------------------------------------------------------===//
// RMSNorm: w * (x * 1/sqrt(mean(x^2, -1) + eps)), or x / sqrt(...)
//===--------------------------------------------------------------------------------------------===//

struct FuseRmsNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// x normalised by its RMS over the last dimension, as the exporter wrote it.
  static std::optional<std::pair<Value, double>> normalized(Value n) {
    auto check = [](Value x, Value s) -> std::optional<std::pair<Value, double>> {
      auto root = sqrtPlusEps(s);
      if (!root)
        return std::nullopt;
      auto mean = defining<ReduceMeanOp>(root->first);
      if (!meanOverLastDim(mean) || squareOf(mean.getInput()) != x)
        return std::nullopt;
      return std::make_pair(x, root->second);
    };
    if (auto div = defining<DivOp>(n))
      return check(div.getLhs(), div.getRhs());
    if (auto mul = defining<MulOp>(n))
      for (auto [x, r] : bothOrders(mul))
        if (Value s = reciprocalOf(r))
          if (auto found = check(x, s))
            return found;
    return std::nullopt;
  }

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    for (auto [w, n] : bothOrders(op)) {
      auto found = normalized(n);
      if (!found || typeOf(found->first) != op.getType() || !isVectorOfLastDim(w, op.getType()))
        continue;
      rewriter.replaceOpWithNewOp<RmsNormOp>(op, op.getType(), found->first, w,
                                             rewriter.getF32FloatAttr(float(found->second)));
      return success();
    }
    return failure();
  }
};

//===--------------------------------------------------------------------------------------------===//
// LayerNorm: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * w [+ b], or * 1/sqrt(...)
//===--------------------------------------------------------------------------------------------===//

struct FuseLayerNorm : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    for (auto [n, w] : bothOrders(op)) {
      if (!isVectorOfLastDim(w, op.getType()))
        continue;
      // (x - mean) / sqrt(...), or (x - mean) * 1/sqrt(...) (Cohere's rsqrt).
      SubOp sub;
      std::optional<std::pair<Value, double>> root;
      if (auto div = defining<DivOp>(n)) {
        sub = defining<SubOp>(div.getLhs());
        root = sqrtPlusEps(div.getRhs());
      } else if (auto mul = defining<MulOp>(n)) {
        for (auto [centered, r] : bothOrders(mul))
          if (Value s = reciprocalOf(r); s && !sub && defining<SubOp>(centered)) {
            sub = defining<SubOp>(centered);
            root = sqrtPlusEps(s);
          }
      }
      if (!sub || !root)
        continue;
      auto mean = defining<ReduceMeanOp>(sub.getRhs());
      auto var = defining<ReduceMeanOp>(root->first);
      Value x = sub.getLhs();
      if (!meanOverLastDim(mean) || mean.getInput() != x || !meanOverLastDim(var) ||
          squareOf(var.getInput()) != sub.getResult() || typeOf(x) != op.getType())
        continue;
      // A bias added right after the scale belongs to the layer norm.
      Value bias;
      Operation *root_op = op;
      if (op->hasOneUse())
        if (auto add = llvm::dyn_cast<AddOp>(*op->getUsers().begin()))
          for (auto [self, b] : bothOrders(add))
            if (self == op.getResult() && isVectorOfLastDim(b, op.getType()) &&
                add.getType() == op.getType()) {
              bias = b;
              root_op = add;
            }
      rewriter.setInsertionPoint(root_op);
      auto norm = rewriter.create<LayerNormOp>(
          op.getLoc(), op.getType(), x, w, bias, rewriter.getI64IntegerAttr(-1),
          rewriter.getF32FloatAttr(float(root->second)));
      rewriter.replaceOp(root_op, norm.getResult());
      return success();
    }
    return failure();
  }
};

//===--------------------------------------------------------------------------------------------===//
// GELU: x * 0.5 * (1 + erf(x / sqrt(2))), or with tanh(sqrt(2/pi) * (x + 0.044715 x^3)); the
// factors in any order and grouping (torch.onnx applies the 0.5 last)
//===--------------------------------------------------------------------------------------------===//

struct FuseGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  /// erf(x / sqrt(2)) or erf(x * (1/sqrt(2))): returns x.
  static Value erfArgument(Value t) {
    auto erf = defining<ErfOp>(t);
    if (!erf)
      return {};
    if (auto div = defining<DivOp>(erf.getInput()); div && isScalar(div.getRhs(), std::sqrt(2.0)))
      return div.getLhs();
    if (auto mul = defining<MulOp>(erf.getInput()))
      for (auto [x, c] : bothOrders(mul))
        if (isScalar(c, 1.0 / std::sqrt(2.0)))
          return x;
    return {};
  }

  /// tanh(sqrt(2/pi) * (x + 0.044715 * x^3)): returns x.
  static Value tanhArgument(Value t) {
    auto tanh = defining<TanhOp>(t);
    if (!tanh)
      return {};
    SmallVector<Value> outer;
    collectFactors(tanh.getInput(), true, outer);
    // BLOOM's factored form: tanh(sqrt(2/pi) * x * (1 + 0.044715 * x * x)).
    if (outer.size() == 3)
      for (int ci = 0; ci < 3; ++ci)
        for (int xi = 0; xi < 3; ++xi) {
          auto add = xi == ci ? AddOp() : defining<AddOp>(outer[3 - ci - xi]);
          if (!add || !isScalar(outer[ci], std::sqrt(2.0 / M_PI)))
            continue;
          Value x = outer[xi];
          for (auto [one, cubic] : bothOrders(add)) {
            SmallVector<Value> inner;
            collectFactors(cubic, true, inner);
            if (!isScalar(one, 1.0) || inner.size() != 3)
              continue;
            for (int ki = 0; ki < 3; ++ki)
              if (isScalar(inner[ki], 0.044715) && inner[(ki + 1) % 3] == x &&
                  inner[(ki + 2) % 3] == x)
                return x;
          }
        }
    if (outer.size() != 2)
      return {};
    for (auto [c, sum] : {std::pair(outer[0], outer[1]), std::pair(outer[1], outer[0])}) {
      auto add = defining<AddOp>(sum);
      if (!isScalar(c, std::sqrt(2.0 / M_PI)) || !add)
        continue;
      for (auto [x, cubic] : bothOrders(add)) {
        // 0.044715 * x^3, the cube as pow(x, 3) or as x * x * x (torch.onnx's export of
        // gelu(approximate="tanh"), Gemma's activation).
        SmallVector<Value> inner;
        collectFactors(cubic, true, inner);
        auto kappa = llvm::find_if(inner, [](Value v) { return isScalar(v, 0.044715); });
        if (kappa == inner.end())
          continue;
        inner.erase(kappa);
        bool cube = inner.size() == 3 && llvm::all_of(inner, [&](Value v) { return v == x; });
        if (inner.size() == 1)
          if (auto pow = defining<PowOp>(inner[0]))
            cube = pow.getLhs() == x && isScalar(pow.getRhs(), 3.0);
        if (cube)
          return x;
      }
    }
    return {};
  }

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(op.getResult(), true, factors);
    if (factors.size() != 3)
      return failure();
    // Some order of {x, 0.5, 1 + f(x)}.
    for (int half = 0; half < 3; ++half) {
      if (!isScalar(factors[half], 0.5))
        continue;
      for (int xi = 0; xi < 3; ++xi) {
        if (xi == half)
          continue;
        Value x = factors[xi], g = factors[3 - half - xi];
        auto add = defining<AddOp>(g);
        if (!add || typeOf(x) != op.getType())
          continue;
        for (auto [one, t] : bothOrders(add)) {
          if (!isScalar(one, 1.0))
            continue;
          bool exact = erfArgument(t) == x, approximate = !exact && tanhArgument(t) == x;
          if (!exact && !approximate)
            continue;
          auto gelu = rewriter.replaceOpWithNewOp<GeluOp>(op, op.getType(), x);
          if (approximate)
            gelu.setTanh(true);
          return success();
        }
      }
    }
    return failure();
  }
};

//===--------------------------------------------------------------------------------------------===//
// SwiGLU: silu(g) * u
//===--------------------------------------------------------------------------------------------===//

struct FuseSwiglu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MulOp op, PatternRewriter &rewriter) const override {
    for (auto [s, up] : bothOrders(op)) {
      auto silu = defining<SiluOp>(s);
      if (!silu || silu.getType() != op.getType() || typeOf(up) != op.getType())
        continue;
      rewriter.replaceOpWithNewOp<SwigluOp>(op, op.getType(), silu.getInput(), up);
      return success();
    }
    return failure();
  }
};

//===--------------------------------------------------------------------------------------------===//
// Rotary embedding: x * cos + rotate(x) * sin
//===--------------------------------------------------------------------------------------------===//

/// A slice of the last dimension of `x`: (first index, count, step), if that is what `v` is.
std::optional<std::tuple<Value, int64_t, int64_t, int64_t>> lastDimSlice(Value v) {
  auto slice = defining<SliceOp>(v);
  if (!slice)
    return std::nullopt;
  auto data = typeOf(slice.getData());
  int64_t rank = data.getRank();
  auto starts = sl::constantInts(slice.getStarts()), ends = sl::constantInts(slice.getEnds());
  std::optional<SmallVector<int64_t>> axes =
      slice.getAxes() ? sl::constantInts(slice.getAxes()) : SmallVector<int64_t>{rank - 1};
  std::optional<SmallVector<int64_t>> steps =
      slice.getSteps() ? sl::constantInts(slice.getSteps()) : SmallVector<int64_t>{1};
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || axes->size() != 1 ||
      steps->size() != 1 || ends->size() != 1)
    return std::nullopt;
  if ((*axes)[0] != -1 && (*axes)[0] != rank - 1)
    return std::nullopt;
  auto [first, count] = sliceBounds(data.getShape().back(), (*starts)[0], (*ends)[0], (*steps)[0]);
  return std::make_tuple(slice.getData(), first, count, (*steps)[0]);
}

/// rotate(x) for rotate-half (concat(-x[D/2:], x[:D/2])): returns x.
Value rotateHalfOf(Value v) {
  auto concat = defining<ConcatOp>(v);
  if (!concat || concat.getInputs().size() != 2)
    return {};
  int64_t rank = concat.getType().getRank();
  if (int64_t axis = int64_t(concat.getAxis()); axis != -1 && axis != rank - 1)
    return {};
  auto neg = defining<NegOp>(concat.getInputs()[0]);
  auto second = neg ? lastDimSlice(neg.getInput()) : std::nullopt;
  auto first = lastDimSlice(concat.getInputs()[1]);
  if (!first || !second)
    return {};
  auto [x1, start1, count1, step1] = *first;
  auto [x2, start2, count2, step2] = *second;
  int64_t d = concat.getType().getShape().back();
  if (x1 != x2 || step1 != 1 || step2 != 1 || start1 != 0 || count1 != d / 2 ||
      start2 != d / 2 || count2 != d / 2 || typeOf(x1) != concat.getType())
    return {};
  return x1;
}

/// rotate(x) for interleaved pairs: reshape(concat(unsqueeze(-x[1::2]), unsqueeze(x[0::2])), D).
Value rotateInterleavedOf(Value v) {
  auto flat = defining<ReshapeOp>(v);
  auto concat = flat ? defining<ConcatOp>(flat.getInput()) : ConcatOp();
  if (!concat || concat.getInputs().size() != 2)
    return {};
  auto pairs = concat.getType();
  int64_t axis = int64_t(concat.getAxis());
  if (pairs.getShape().back() != 2 || (axis != -1 && axis != pairs.getRank() - 1))
    return {};
  auto oddHalf = defining<ReshapeOp>(concat.getInputs()[0]);
  auto evenHalf = defining<ReshapeOp>(concat.getInputs()[1]);
  auto neg = oddHalf ? defining<NegOp>(oddHalf.getInput()) : NegOp();
  if (!neg || !evenHalf)
    return {};
  auto odd = lastDimSlice(neg.getInput()), even = lastDimSlice(evenHalf.getInput());
  if (!odd || !even)
    return {};
  auto [x1, start1, count1, step1] = *even;
  auto [x2, start2, count2, step2] = *odd;
  int64_t d = flat.getType().getShape().back();
  if (x1 != x2 || step1 != 2 || step2 != 2 || start1 != 0 || start2 != 1 || count1 != d / 2 ||
      count2 != d / 2 || typeOf(x1) != flat.getType())
    return {};
  return x1;
}

struct FuseRotary : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AddOp op, PatternRewriter &rewriter) const override {
    for (auto [a, b] : bothOrders(op)) {
      auto mulCos = defining<MulOp>(a), mulSin = defining<MulOp>(b);
      if (!mulCos || !mulSin)
        continue;
      for (auto [x, cos] : bothOrders(mulCos))
        for (auto [rot, sin] : bothOrders(mulSin)) {
          bool half = rotateHalfOf(rot) == x, interleaved = !half && rotateInterleavedOf(rot) == x;
          if ((!half && !interleaved) || typeOf(x) != op.getType())
            continue;
          auto rotary = rewriter.replaceOpWithNewOp<RotaryOp>(op, op.getType(), x, cos, sin);
          if (interleaved)
            rotary.setInterleaved(true);
          if (failed(rotary.verify()))
            return failure();
          return success();
        }
    }
    return failure();
  }
};

//===--------------------------------------------------------------------------------------------===//
// Attention: softmax(q k^T * scale + causal mask) v
//===--------------------------------------------------------------------------------------------===//

/// Undoes HF's repeat_kv (reshape to [B, Hkv, 1, T, D], expand the 1 to n, reshape to
/// [B, Hkv * n, T, D]): the fused kernel maps query heads to key/value heads itself.
Value unrepeatKv(Value v) {
  auto merged = defining<ReshapeOp>(v);
  auto expand = merged ? defining<ExpandOp>(merged.getInput()) : ExpandOp();
  auto split = expand ? defining<ReshapeOp>(expand.getInput()) : ReshapeOp();
  if (!split)
    return v;
  auto src = typeOf(split.getInput()), one = split.getType(), many = expand.getType();
  auto out = typeOf(v);
  if (src.getRank() != 4 || one.getRank() != 5 || many.getRank() != 5 || out.getRank() != 4)
    return v;
  bool ok = one.getShape() == ArrayRef<int64_t>{src.getDimSize(0), src.getDimSize(1), 1,
                                                src.getDimSize(2), src.getDimSize(3)} &&
            many.getDimSize(0) == src.getDimSize(0) && many.getDimSize(1) == src.getDimSize(1) &&
            many.getShape().drop_front(3) == one.getShape().drop_front(3) &&
            out.getShape() == ArrayRef<int64_t>{src.getDimSize(0),
                                                src.getDimSize(1) * many.getDimSize(2),
                                                src.getDimSize(2), src.getDimSize(3)};
  return ok ? split.getInput() : v;
}

/// What evaluate() and classifyMask() found during one run of the pass, by value: every layer's
/// attention reads the same causal mask (millions of elements at a realistic length), which is
/// then evaluated and classified once, not once per layer. Only what was evaluated is kept, with
/// the fold limit it was evaluated under: a lower limit might refuse it, and gets what evaluating
/// under it gives. Rewrites keep what a value means, so entries stay true while their value
/// lives; they go when its op is erased, whose memory a new op may reuse.
struct EvaluationCache : RewriterBase::Listener {
  DenseMap<Value, std::pair<int64_t, DenseElementsAttr>> values; // fold limit, value
  DenseMap<Value, SmallVector<std::tuple<int64_t, int64_t, MaskKind>, 1>> masks; // S, T, kind
  // check-masks: every mask is evaluated too, and a verdict read row by row that differs from
  // the verdict on the evaluated values is kept here for the pass to report.
  bool checkMasks = false;
  struct Disagreement {
    Location mask;
    std::string what;
  };
  SmallVector<Disagreement> disagreements;
  int64_t judgedBoth = 0, rowsOnly = 0, valuesOnly = 0;

  void notifyOperationErased(Operation *op) override {
    for (Value result : op->getResults()) {
      values.erase(result);
      masks.erase(result);
    }
  }
};

/// The cache of the pass run on this thread (none outside the pass).
thread_local EvaluationCache *evaluationCache = nullptr;

DenseElementsAttr evaluateUncached(Value v, int depth);

/// The value of `v` if it is a constant or can be folded from constants: masks are built from
/// shapes, but at realistic lengths they are too big to keep as constants in the IR, so they are
/// evaluated here, on the side, with a raised fold limit.
DenseElementsAttr evaluate(Value v, int depth = 0) {
  if (auto constant = defining<ConstantOp>(v))
    return llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!evaluationCache)
    return evaluateUncached(v, depth);
  int64_t limit = maxFoldedElements();
  if (auto it = evaluationCache->values.find(v);
      it != evaluationCache->values.end() && it->second.first <= limit)
    return it->second.second;
  DenseElementsAttr value = evaluateUncached(v, depth);
  if (value)
    evaluationCache->values[v] = {limit, value};
  return value;
}

DenseElementsAttr evaluateUncached(Value v, int depth) {
  Operation *op = v.getDefiningOp();
  if (!op || depth > 32 || op->getNumRegions() != 0 || op->getNumResults() != 1 ||
      op->getDialect() != v.getContext()->getLoadedDialect<SLDialect>() ||
      llvm::isa<ParamOp>(op))
    return {};
  SmallVector<Attribute> operands;
  for (Value operand : op->getOperands()) {
    DenseElementsAttr value = evaluate(operand, depth + 1);
    if (!value)
      return {};
    operands.push_back(value);
  }
  SmallVector<OpFoldResult> results;
  if (failed(op->fold(operands, results)) || results.size() != 1)
    return {};
  if (auto attr = llvm::dyn_cast<Attribute>(results[0]))
    return llvm::dyn_cast<DenseElementsAttr>(attr);
  return evaluate(llvm::cast<Value>(results[0]), depth + 1);
}

MaskKind classifyMaskUncached(Value mask, int64_t s, int64_t t, bool &judged);

/// Classifies `mask` against [.., S, T] scores (sl/Analysis/AttentionMasks.h). Broadcasts of the
/// mask (the exporter's expand to [B, 1, S, T]) are looked through: only the [S, T] pattern
/// matters.
MaskKind classifyMask(Value mask, int64_t s, int64_t t) {
  while (auto expand = defining<ExpandOp>(mask))
    mask = expand.getInput();
  bool judged = false;
  if (!evaluationCache)
    return classifyMaskUncached(mask, s, t, judged);
  if (auto it = evaluationCache->masks.find(mask); it != evaluationCache->masks.end())
    for (auto [rows, cols, kind] : it->second)
      if (rows == s && cols == t)
        return kind;
  MaskKind kind = classifyMaskUncached(mask, s, t, judged);
  // Kept only when the mask's values were read: a verdict on values, not on a failure to get them.
  if (judged)
    evaluationCache->masks[mask].emplace_back(s, t, kind);
  return kind;
}

/// `judged` is set when the verdict is on the mask's values (read row by row from the ops that
/// compute it, or evaluated), not on a failure to get them.
MaskKind classifyMaskUncached(Value mask, int64_t s, int64_t t, bool &judged) {
  auto type = typeOf(mask);
  if (!type.hasStaticShape())
    return MaskKind::Unknown;
  int64_t rank = type.getRank();
  int64_t rows = rank >= 2 ? type.getShape()[rank - 2] : 1;
  int64_t cols = rank >= 1 ? type.getShape().back() : 1;
  if ((rows != s && rows != 1) || (cols != t && cols != 1))
    return MaskKind::Unknown;
  // Row by row from its expression first: no S x T values, at any length.
  std::optional<MaskKind> byRows = classifyMaskRows(mask, s, t);
  bool check = evaluationCache && evaluationCache->checkMasks;
  if (byRows && !check) {
    judged = true;
    return *byRows;
  }
  // Otherwise evaluated: causal masks of long sequences are millions of elements; allow that
  // much, here only.
  ScopedFoldLimit limit(int64_t(1) << 26);
  DenseElementsAttr dense = evaluate(mask);
  if (!dense) {
    judged = byRows.has_value();
    if (check && byRows)
      ++evaluationCache->rowsOnly;
    return byRows.value_or(MaskKind::Unknown);
  }
  judged = true;
  bool countValuesOnly = false;
  if (check && byRows)
    ++evaluationCache->judgedBoth;
  else if (check)
    countValuesOnly = true; // counted below if its values make it a mask
  // The same mask is classified again in every copy of the model that sl-plan and
  // sl-split-generation compile: the verdict on its values is remembered with the context.
  MLIRContext *context = mask.getContext();
  FoldMemo *memo = FoldMemo::get(context);
  auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(context, 64), v); };
  Attribute key = ArrayAttr::get(
      context, {StringAttr::get(context, "sl-fuse-transformer.mask-kind"), dense, i64(s), i64(t)});
  std::optional<MaskKind> kind;
  if (memo)
    if (std::optional<Attribute> known = memo->lookup(key))
      kind = MaskKind(llvm::cast<IntegerAttr>(*known).getInt());
  if (!kind) {
    kind = classifyMaskValues(dense, type, s, t);
    if (memo)
      memo->remember(key, i64(int64_t(*kind)));
  }
  if (countValuesOnly && *kind != MaskKind::Unknown)
    ++evaluationCache->valuesOnly;
  if (check && byRows && *byRows != *kind)
    evaluationCache->disagreements.push_back(
        {mask.getLoc(), (llvm::Twine("read row by row, this mask is ") + maskKindName(*byRows) +
                         "; evaluated, it is " + maskKindName(*kind))
                            .str()});
  if (check && byRows)
    if (std::string differ = maskRowsDiffer(mask, dense); !differ.empty())
      evaluationCache->disagreements.push_back({mask.getLoc(), differ});
  return *kind;
}

/// Through reshapes that keep the last two dimensions (between [B, H, S, T] and [B * H, S, T])
/// and casts that change nothing; `fourD`, when given, gets the first 4-D type on the way.
Value throughViews(Value v, RankedTensorType *fourD = nullptr) {
  while (true) {
    if (fourD && !*fourD && typeOf(v).getRank() == 4)
      *fourD = typeOf(v);
    if (auto reshape = defining<ReshapeOp>(v)) {
      auto in = typeOf(reshape.getInput()), out = typeOf(v);
      if ((in.getRank() == 3 || in.getRank() == 4) && (out.getRank() == 3 || out.getRank() == 4) &&
          in.getShape().take_back(2) == out.getShape().take_back(2)) {
        v = reshape.getInput();
        continue;
      }
    }
    if (auto cast = defining<CastOp>(v); cast && typeOf(cast.getInput()) == typeOf(v)) {
      v = cast.getInput();
      continue;
    }
    return v;
  }
}

/// softmax(scores) v, taken apart: what the fused op needs.
struct AttentionMatch {
  MatmulOp qk;             // q @ k^T, 3-D ([B * H, S, T]) or 4-D
  TransposeOp kt;          // k^T
  double scale = 1.0;      // every positive scalar the scores were multiplied by or divided by
  RankedTensorType scores; // [B, H, S, T]
  // A constant added to the scores that is not a mask (ALiBi's position bias), and the product
  // of the scales applied after it was added, which apply to it too.
  DenseElementsAttr bias;
  double biasScale = 1.0;
  // A padding mask known only at run time (from the user's attention_mask), added as the fused
  // op's mask: the value itself, or, when it came combined with the causal mask, the condition
  // and fill of a where that keeps only the padding part (paddingFillIfTrue says which side).
  Value padding;
  Value paddingCondition;
  double paddingFill = 0;
  bool paddingFillIfTrue = true;
};

/// Bias constants up to this many elements are kept in the IR as the attention's mask operand.
constexpr int64_t kMaxBiasElements = int64_t(1) << 22;

/// Through the broadcasts, reshapes and casts between a mask and the scores it is added to.
Value throughMaskViews(Value v) {
  while (true) {
    if (auto expand = defining<ExpandOp>(v))
      v = expand.getInput();
    else if (auto reshape = defining<ReshapeOp>(v))
      v = reshape.getInput();
    else if (auto cast = defining<CastOp>(v))
      v = cast.getInput();
    else
      return v;
  }
}

/// Whether `term`, not a constant, is HF's additive padding mask built from the user's 0/1
/// attention_mask m: (1 - m) * fill with fill at most -1e4 (GPT-2's).
bool isPaddingMask(Value term) {
  auto mul = defining<MulOp>(throughMaskViews(term));
  if (!mul)
    return false;
  for (auto [x, c] : bothOrders(mul)) {
    auto sub = defining<SubOp>(throughMaskViews(x));
    auto one = sub ? scalarOf(sub.getLhs()) : std::nullopt;
    if (scalarOf(c) && *scalarOf(c) <= -1e4 && one && *one == 1.0 && !evaluate(sub.getRhs()))
      return true;
  }
  return false;
}

/// Takes apart the scores a softmax normalises, by meaning rather than by one exporter's
/// spelling: scaling by positive constants, the causal mask (added, or selected with where in
/// either polarity), additions of zero (an all-zero padding mask, baddbmm's beta * zeros), HF's
/// clamp to the float minimum and reshapes between 3-D and 4-D commute with each other, so they
/// are peeled off in whatever order they come until q @ k^T is reached. On failure, `why` says
/// which check failed.
std::optional<AttentionMatch> matchScores(Value scores, std::string &why) {
  AttentionMatch match;
  bool causal = false;
  auto sameScores = [](Value a, Value b) {
    return typeOf(a).getShape().take_back(2) == typeOf(b).getShape().take_back(2);
  };
  for (int steps = 0;; ++steps) {
    scores = throughViews(scores, &match.scores);
    auto type = typeOf(scores);
    if (type.getRank() < 2 || steps > 32) {
      why = "the scores are not built from a matmul";
      return std::nullopt;
    }
    int64_t s = type.getShape()[type.getRank() - 2], t = type.getShape().back();
    if (auto qk = defining<MatmulOp>(scores)) {
      match.qk = qk;
      break;
    }
    if (auto where = defining<WhereOp>(scores)) {
      // HF's clamp to the float minimum (max(scores, min)) changes nothing a causal mask keeps.
      if (auto less = defining<LessOp>(where.getCondition()))
        if (less.getLhs() == where.getY() && less.getRhs() == where.getX() &&
            scalarOf(where.getX()) && *scalarOf(where.getX()) <= -1e30) {
          scores = where.getY();
          continue;
        }
      auto fillY = scalarOf(where.getY()), fillX = scalarOf(where.getX());
      MaskKind kind = classifyMask(where.getCondition(), s, t);
      if (fillY && *fillY <= -1e4 && sameScores(where.getX(), scores) && kind == MaskKind::Causal) {
        causal = true;
        scores = where.getX();
        continue;
      }
      if (fillX && *fillX <= -1e4 && sameScores(where.getY(), scores) &&
          kind == MaskKind::AntiCausal) {
        causal = true;
        scores = where.getY();
        continue;
      }
      why = "the where on the scores ('" + where->getName().getStringRef().str() +
            "') does not select a causal mask: its condition must be constant and causal, the "
            "other operand a fill of at most -1e4";
      return std::nullopt;
    }
    if (auto add = defining<AddOp>(scores)) {
      bool peeled = false;
      for (auto [x, mask] : bothOrders(add)) {
        if (peeled || typeOf(x).getShape() != type.getShape())
          continue;
        MaskKind kind = classifyMask(mask, s, t);
        if (kind == MaskKind::Zero || kind == MaskKind::Causal) {
          causal |= kind == MaskKind::Causal;
          scores = x;
          peeled = true;
        }
      }
      // Any other constant term is a position bias (ALiBi), added by the fused op as its mask.
      for (auto [x, term] : bothOrders(add)) {
        if (peeled || match.bias || typeOf(x).getShape() != type.getShape() ||
            !llvm::isa<FloatType>(typeOf(term).getElementType()) ||
            typeOf(term).getNumElements() > kMaxBiasElements)
          continue;
        ScopedFoldLimit limit(kMaxBiasElements);
        if (DenseElementsAttr value = evaluate(term)) {
          match.bias = value;
          match.biasScale = match.scale;
          scores = x;
          peeled = true;
        }
      }
      // A padding mask known at run time, alone (GPT-2) or combined with the causal mask by a
      // where that fills where the padding drops and keeps the causal mask elsewhere (LLaMA's
      // and Mistral's where(pad, min, causal)): the fused op adds the padding part as its mask
      // and applies the causal part itself. What the causal part drops is dropped either way.
      for (auto [x, term] : bothOrders(add)) {
        if (peeled || match.padding || match.paddingCondition ||
            typeOf(x).getShape() != type.getShape() ||
            !llvm::isa<FloatType>(typeOf(term).getElementType()) || match.scale != 1.0 ||
            evaluate(term))
          continue;
        if (isPaddingMask(term)) {
          match.padding = term;
          scores = x;
          peeled = true;
          continue;
        }
        Value inner = term;
        while (auto expand = defining<ExpandOp>(inner))
          inner = expand.getInput();
        auto where = defining<WhereOp>(inner);
        if (!where || evaluate(where.getCondition()))
          continue;
        auto fillY = scalarOf(where.getY()), fillX = scalarOf(where.getX());
        if (fillX && *fillX <= -1e4 && classifyMask(where.getY(), s, t) == MaskKind::Causal) {
          match.paddingFill = *fillX;
          match.paddingFillIfTrue = true;
        } else if (fillY && *fillY <= -1e4 &&
                   classifyMask(where.getX(), s, t) == MaskKind::Causal) {
          match.paddingFill = *fillY;
          match.paddingFillIfTrue = false;
        } else {
          continue;
        }
        match.paddingCondition = where.getCondition();
        causal = true;
        scores = x;
        peeled = true;
      }
      if (peeled)
        continue;
      why = "a term added to the scores is not a constant (a causal mask, zeros or a position "
            "bias) nor a padding mask known at run time ((1 - mask) * min, or a where of it with "
            "the causal mask), added after the scale";
      return std::nullopt;
    }
    if (auto mul = defining<MulOp>(scores)) {
      bool peeled = false;
      for (auto [x, c] : bothOrders(mul))
        if (!peeled && scalarOf(c) && *scalarOf(c) > 0 && typeOf(x).getShape() == type.getShape()) {
          match.scale *= *scalarOf(c);
          scores = x;
          peeled = true;
        }
      // Under a causal mask already peeled, a 0/1 causal multiplier zeroes only scores that mask
      // drops (OpenAI GPT's w * b + -1e4 * (1 - b)).
      for (auto [x, c] : bothOrders(mul))
        if (!peeled && causal && typeOf(x).getShape() == type.getShape() &&
            classifyMask(c, s, t) == MaskKind::CausalOnes) {
          scores = x;
          peeled = true;
        }
      if (peeled)
        continue;
      why = "the scores are multiplied by something other than a positive scalar constant or, "
            "under a causal mask, a causal 0/1 mask";
      return std::nullopt;
    }
    if (auto div = defining<DivOp>(scores)) {
      auto c = scalarOf(div.getRhs());
      if (c && *c > 0 && typeOf(div.getLhs()).getShape() == type.getShape()) {
        match.scale /= *c;
        scores = div.getLhs();
        continue;
      }
      why = "the scores are divided by something other than a positive scalar constant";
      return std::nullopt;
    }
    why = "the scores come from '" + scores.getDefiningOp()->getName().getStringRef().str() +
          "', which is not part of q @ k^T, a scale or a causal mask";
    if (!scores.getDefiningOp())
      why = "the scores are a function argument, not q @ k^T";
    return std::nullopt;
  }
  auto qkType = match.qk.getType();
  int64_t s = qkType.getShape()[qkType.getRank() - 2], t = qkType.getShape().back();
  // One query over one key: causal masking keeps the only score, and binding the shapes at
  // one token (a decoding step) may have folded the mask away.
  if (!causal && !(s == 1 && t == 1)) {
    why = "the scores have no causal mask";
    return std::nullopt;
  }
  if (!match.scores) {
    why = "the scores are never [batch, heads, queries, keys]";
    return std::nullopt;
  }
  // k^T, or (BLOOM) a reshape of a 4-D k^T to [B * H, D, T].
  Value kt = match.qk.getRhs();
  if (auto merge = defining<ReshapeOp>(kt)) {
    auto in = typeOf(merge.getInput()), out = typeOf(kt);
    if (in.getRank() == 4 && out.getRank() == 3 && in.getShape().take_back(2) ==
                                                       out.getShape().take_back(2))
      kt = merge.getInput();
  }
  match.kt = defining<TransposeOp>(kt);
  if (!match.kt || (match.kt.getPerm().size() != 3 && match.kt.getPerm().size() != 4)) {
    why = "the right operand of q @ k^T is not a transpose of k";
    return std::nullopt;
  }
  return match;
}

/// The per-head slopes of `values`, a bias of `shape` (broadcast from the right to the scores
/// [batch, heads, s, t]), when it is ALiBi: every query row of head h is slope[h] * key + a
/// constant of its own, which softmax ignores. A row's slope is read from its ends, and every
/// element must lie on that line to within float rounding of the row's largest value.
std::optional<SmallVector<double>> alibiSlopes(ArrayRef<int64_t> shape, ArrayRef<double> values,
                                               int64_t batch, int64_t heads, int64_t s,
                                               int64_t t) {
  if (shape.size() > 4 || t < 2)
    return std::nullopt;
  SmallVector<int64_t> dims(4 - shape.size(), 1);
  dims.append(shape.begin(), shape.end());
  if ((dims[0] != 1 && dims[0] != batch) || (dims[1] != 1 && dims[1] != heads) ||
      (dims[2] != 1 && dims[2] != s) || dims[3] != t)
    return std::nullopt;
  // Twice float's epsilon would do for BLOOM's slope * key computed in f32; a bias that is
  // this close to a line is that line as far as f32 scores can tell.
  constexpr double kTolerance = 1e-6;
  SmallVector<double> slopes(dims[1]);
  SmallVector<bool> seen(dims[1], false);
  for (int64_t row = 0; row < dims[0] * dims[1] * dims[2]; ++row) {
    int64_t head = (row / dims[2]) % dims[1];
    ArrayRef<double> r = values.slice(row * t, t);
    double largest = 0;
    for (double x : r) {
      if (!std::isfinite(x))
        return std::nullopt;
      largest = std::max(largest, std::fabs(x));
    }
    if (!seen[head]) {
      slopes[head] = (r[t - 1] - r[0]) / double(t - 1);
      seen[head] = true;
    }
    for (int64_t j = 0; j < t; ++j)
      if (std::fabs(r[j] - r[0] - slopes[head] * double(j)) > kTolerance * largest)
        return std::nullopt;
  }
  if (dims[1] == 1)
    slopes.assign(heads, slopes[0]);
  return slopes;
}

/// The softmax whose probabilities `pv` multiplies with the values, if it is one.
SoftmaxOp probabilitiesOf(MatmulOp pv) { return defining<SoftmaxOp>(throughViews(pv.getLhs())); }

struct FuseAttention : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  static Value reshaped(PatternRewriter &rewriter, Location loc, Value v,
                        ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, typeOf(v).getElementType());
    if (typeOf(v) == type)
      return v;
    auto shapeType = RankedTensorType::get({int64_t(shape.size())}, rewriter.getI64Type());
    Value target = rewriter.create<ConstantOp>(loc, shapeType,
                                               DenseElementsAttr::get(shapeType, shape));
    return rewriter.create<ReshapeOp>(loc, type, v, target, /*allowzero=*/false);
  }

  /// The fused attention replacing `op`, or why there is none (nothing is created then).
  static FailureOr<Value> fuse(MatmulOp op, PatternRewriter &rewriter, std::string &why) {
    auto softmax = probabilitiesOf(op);
    int64_t rank = softmax.getType().getRank();
    int64_t axis = int64_t(softmax.getAxis());
    if ((rank != 3 && rank != 4) || (axis != -1 && axis != rank - 1)) {
      why = "the softmax is not over the last dimension of 3-D or 4-D scores";
      return failure();
    }
    std::optional<AttentionMatch> match = matchScores(softmax.getInput(), why);
    if (!match)
      return failure();
    if (op.getTransA() || op.getTransB() || match->qk.getTransA() || match->qk.getTransB()) {
      why = "a product reads a transposed operand (fuse before sl-fold-matmul-transposes)";
      return failure();
    }
    int64_t batch = match->scores.getDimSize(0), heads = match->scores.getDimSize(1);
    int64_t s = match->scores.getDimSize(2), t = match->scores.getDimSize(3);
    Value q = match->qk.getLhs(), k = match->kt.getInput(), v = op.getRhs();
    int64_t qkRank = typeOf(q).getRank(), pvRank = typeOf(v).getRank();
    int64_t kRank = typeOf(k).getRank();
    if ((qkRank != 3 && qkRank != 4) || (pvRank != 3 && pvRank != 4) ||
        int64_t(match->kt.getPerm().size()) != kRank) {
      why = "q, k and v are not 3-D or 4-D";
      return failure();
    }
    // k^T[i] = src[perm[i]]; k swaps k^T's last two dimensions back.
    SmallVector<int64_t> kPerm(match->kt.getPerm());
    std::swap(kPerm[kRank - 1], kPerm[kRank - 2]);
    auto kType = inferTransposeType(std::nullopt, k.getType(), kPerm);
    if (failed(kType)) {
      why = "k^T is not a transpose of a k";
      return failure();
    }
    // Back to [B, H, ...]; a 3-D operand's first dimension is B * H.
    int64_t rows = batch * heads;
    if ((qkRank == 3 && typeOf(q).getDimSize(0) != rows) ||
        (kRank == 3 && llvm::cast<RankedTensorType>(*kType).getDimSize(0) != rows) ||
        (pvRank == 3 && typeOf(v).getDimSize(0) != rows)) {
      why = "3-D q, k or v do not have batch * heads rows";
      return failure();
    }
    rewriter.setInsertionPoint(op);
    if (kPerm != llvm::to_vector(llvm::seq<int64_t>(0, kRank)))
      k = rewriter.create<TransposeOp>(match->kt.getLoc(), *kType, k, kPerm);
    if (qkRank == 3)
      q = reshaped(rewriter, op.getLoc(), q, {batch, heads, s, typeOf(q).getDimSize(2)});
    if (kRank == 3)
      k = reshaped(rewriter, op.getLoc(), k, {batch, heads, t, typeOf(k).getDimSize(2)});
    if (pvRank == 3)
      v = reshaped(rewriter, op.getLoc(), v, {batch, heads, t, typeOf(v).getDimSize(2)});
    k = unrepeatKv(k);
    v = unrepeatKv(v);
    auto resultType = RankedTensorType::get({batch, heads, s, typeOf(v).getShape().back()},
                                            op.getType().getElementType());
    Value bias, slopes;
    if (match->bias) {
      // [B * H, ...] rows of a 3-D bias are [B, H, ...]; each value is scaled by what the scores
      // were scaled by after it was added.
      auto biasType = llvm::cast<RankedTensorType>(match->bias.getType());
      SmallVector<int64_t> shape(biasType.getShape());
      if (shape.size() == 3 && shape[0] == batch * heads && batch * heads != 1) {
        shape[0] = heads;
        shape.insert(shape.begin(), batch);
      }
      SmallVector<double> values = *constantFloats(match->bias);
      for (double &value : values)
        value *= match->biasScale;
      // ALiBi is a slope per head, which a decoding step can apply at any position; any other
      // bias stays a mask.
      if (std::optional<SmallVector<double>> alibi =
              alibiSlopes(shape, values, batch, heads, s, t)) {
        auto type = RankedTensorType::get({heads}, biasType.getElementType());
        slopes = rewriter.create<ConstantOp>(op.getLoc(), type, makeDense(type, *alibi));
      } else {
        auto type = RankedTensorType::get(shape, biasType.getElementType());
        bias = rewriter.create<ConstantOp>(op.getLoc(), type, makeDense(type, values));
      }
    }
    if (match->padding || match->paddingCondition) {
      if (bias) {
        why = "the scores have both a position bias that is not ALiBi and a padding mask known "
              "at run time, and sl.attention takes one mask";
        return failure();
      }
      bias = match->padding;
      if (match->paddingCondition) {
        auto elementType = match->scores.getElementType();
        auto scalar = RankedTensorType::get({}, elementType);
        Value fill = rewriter.create<ConstantOp>(
            op.getLoc(), scalar, makeDense(scalar, ArrayRef<double>{match->paddingFill}));
        Value zero = rewriter.create<ConstantOp>(op.getLoc(), scalar,
                                                 makeDense(scalar, ArrayRef<double>{0.0}));
        auto condition = typeOf(match->paddingCondition);
        auto type = RankedTensorType::get(condition.getShape(), elementType);
        bias = match->paddingFillIfTrue
                   ? rewriter.create<WhereOp>(op.getLoc(), type, match->paddingCondition, fill,
                                              zero)
                   : rewriter.create<WhereOp>(op.getLoc(), type, match->paddingCondition, zero,
                                              fill);
      }
    }
    auto attention = rewriter.create<AttentionOp>(op.getLoc(), resultType, q, k, v, bias, slopes,
                                                  rewriter.getUnitAttr(),
                                                  rewriter.getF32FloatAttr(float(match->scale)));
    if (failed(attention.verify())) {
      why = "the operands do not make a valid sl.attention (see its verifier)";
      rewriter.eraseOp(attention);
      return failure();
    }
    return reshaped(rewriter, op.getLoc(), attention.getResult(), op.getType().getShape());
  }

  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    if (!probabilitiesOf(op))
      return failure();
    std::string why;
    FailureOr<Value> fused = fuse(op, rewriter, why);
    if (failed(fused))
      return rewriter.notifyMatchFailure(op, why);
    rewriter.replaceOp(op, *fused);
    return success();
  }
};

/// Says, for every softmax whose probabilities still multiply values after fusion, why it is not
/// sl.attention: the model runs unfused and correct, but generation needs the fused op, and the
/// remark is what a user can report.
void remarkUnfusedAttention(func::FuncOp func) {
  func.walk([](MatmulOp pv) {
    SoftmaxOp softmax = probabilitiesOf(pv);
    if (!softmax)
      return;
    std::string why = "the softmax is not over the last dimension of 3-D or 4-D scores";
    int64_t rank = softmax.getType().getRank();
    int64_t axis = int64_t(softmax.getAxis());
    if ((rank == 3 || rank == 4) && (axis == -1 || axis == rank - 1) &&
        matchScores(softmax.getInput(), why))
      why = "q, k and v do not make a sl.attention (shapes or the verifier)";
    softmax.emitRemark("sl-fuse-transformer: attention not fused: ") << why;
  });
}

struct FuseTransformerPass : public sl::impl::FuseTransformerPassBase<FuseTransformerPass> {
  using FuseTransformerPassBase::FuseTransformerPassBase;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    patterns.add<FuseRmsNorm, FuseGelu, FuseSwiglu, FuseRotary, FuseAttention>(context);
    // A LayerNorm is also an RMSNorm of the centred input; the whole LayerNorm wins.
    patterns.add<FuseLayerNorm>(context, /*benefit=*/2);
    // SiLU fusion (mul of sigmoid) first, so SwiGLU sees sl.silu.
    MulOp::getCanonicalizationPatterns(patterns, context);
    EvaluationCache cache;
    cache.checkMasks = checkMasks;
    evaluationCache = &cache;
    auto reset = llvm::make_scope_exit([] { evaluationCache = nullptr; });
    GreedyRewriteConfig config;
    config.listener = &cache;
    // A disagreement keeps the mask's location: its ops may be gone once attention fused.
    bool rewritten =
        succeeded(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config));
    for (const EvaluationCache::Disagreement &d : cache.disagreements)
      emitError(d.mask) << "sl-fuse-transformer: check-masks: " << d.what;
    if (!rewritten || !cache.disagreements.empty())
      return signalPassFailure();
    if (checkMasks && cache.judgedBoth + cache.rowsOnly + cache.valuesOnly > 0)
      getOperation().emitRemark("sl-fuse-transformer: check-masks: ")
          << cache.judgedBoth << " terms read row by row and evaluated, alike; " << cache.rowsOnly
          << " read row by row only (too big to evaluate); " << cache.valuesOnly
          << " masks evaluated only (built in a way the row model does not cover)";
    remarkUnfusedAttention(getOperation());
  }
};

} // namespace
