//===- Autodiff.cpp - sl-autodiff: a backward function for every stage --------------------------===//
//
// Reverse-mode differentiation of each stage function. The backward function clones the forward
// (recomputation from the saved boundary input) and then walks it backwards, applying one rule
// per op. Adjoints of values used several times are summed. Gradients flowing into a broadcast
// operand are summed over the dimensions it was broadcast along ("unbroadcast").
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace sl {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using namespace sl;

namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }
bool isFloat(Value v) { return llvm::isa<FloatType>(typeOf(v).getElementType()); }

/// Builds the ops of gradient rules, with static types.
class GradBuilder {
public:
  GradBuilder(OpBuilder &b, Location loc) : b(b), loc(loc) {}

  Value scalar(Type element, double value) {
    auto type = RankedTensorType::get({}, element);
    return b.create<ConstantOp>(loc, type, makeDense(type, ArrayRef<double>{value}));
  }
  Value zeros(RankedTensorType type) {
    Attribute zero = llvm::isa<FloatType>(type.getElementType())
                         ? Attribute(b.getFloatAttr(type.getElementType(), 0.0))
                         : Attribute(b.getIntegerAttr(type.getElementType(), 0));
    return b.create<ConstantOp>(loc, type, SplatElementsAttr::get(type, zero));
  }
  Value ints(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
    return b.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, values));
  }

  template <typename OpT> Value binary(Value lhs, Value rhs) {
    auto type = inferBroadcastType(std::nullopt, "", lhs.getType(), rhs.getType());
    return b.create<OpT>(loc, *type, lhs, rhs);
  }
  /// A comparison: broadcast shape, i1 elements.
  template <typename OpT> Value compare(Value lhs, Value rhs) {
    auto type = inferBroadcastType(std::nullopt, "", lhs.getType(), rhs.getType());
    return b.create<OpT>(loc, type->clone(b.getI1Type()), lhs, rhs);
  }
  Value add(Value a, Value c) { return binary<AddOp>(a, c); }
  Value sub(Value a, Value c) { return binary<SubOp>(a, c); }
  Value mul(Value a, Value c) { return binary<MulOp>(a, c); }
  Value div(Value a, Value c) { return binary<DivOp>(a, c); }
  Value neg(Value a) { return b.create<NegOp>(loc, a); }

  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, typeOf(v).getElementType());
    if (type == typeOf(v))
      return v;
    return b.create<ReshapeOp>(loc, type, v, ints(shape), /*allowzero=*/true);
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    auto type = inferTransposeType(std::nullopt, v.getType(), perm);
    return b.create<TransposeOp>(loc, *type, v, perm);
  }
  /// Swaps the last two dimensions.
  Value transposeLast2(Value v) {
    int64_t rank = typeOf(v).getRank();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(v, perm);
  }
  Value matmul(Value lhs, Value rhs) {
    auto type = inferMatmulType(std::nullopt, lhs.getType(), rhs.getType());
    return b.create<MatmulOp>(loc, *type, lhs, rhs);
  }
  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keepdims) {
    SmallVector<int64_t> shape;
    auto type = typeOf(v);
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (!llvm::is_contained(axes, d))
        shape.push_back(type.getDimSize(d));
      else if (keepdims)
        shape.push_back(1);
    }
    return b.create<ReduceSumOp>(loc, RankedTensorType::get(shape, type.getElementType()), v,
                                 ints(axes), keepdims, false);
  }
  Value expandTo(Value v, ArrayRef<int64_t> shape) {
    auto type = RankedTensorType::get(shape, typeOf(v).getElementType());
    if (type == typeOf(v))
      return v;
    return b.create<ExpandOp>(loc, type, v, ints(shape));
  }

  /// The gradient of a value broadcast to `grad`'s shape: summed over the broadcast dimensions.
  Value unbroadcast(Value grad, RankedTensorType to) {
    auto type = typeOf(grad);
    if (type.getShape() == to.getShape())
      return grad;
    int64_t offset = type.getRank() - to.getRank();
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d < offset || (to.getDimSize(d - offset) == 1 && type.getDimSize(d) != 1))
        axes.push_back(d);
    Value summed = axes.empty() ? grad : reduceSum(grad, axes, /*keepdims=*/true);
    return reshape(summed, to.getShape());
  }

  OpBuilder &b;
  Location loc;
};

/// The adjoints of one backward function under construction.
class Adjoints {
public:
  explicit Adjoints(GradBuilder &g) : g(g) {}
  void accumulate(Value v, Value grad) {
    if (!grad || !isFloat(v))
      return;
    grad = g.unbroadcast(grad, typeOf(v));
    auto [it, inserted] = grads.try_emplace(v, grad);
    if (!inserted)
      it->second = g.add(it->second, grad);
  }
  Value get(Value v) const { return grads.lookup(v); }

private:
  GradBuilder &g;
  llvm::DenseMap<Value, Value> grads;
};

/// Applies the gradient rule of `op` (a clone in the backward function) given its result's
/// adjoint `dy`.
LogicalResult applyRule(Operation *op, ArrayRef<Value> dys, GradBuilder &g, Adjoints &adj) {
  Value dy = dys.empty() ? Value() : dys[0];
  Value y = op->getNumResults() ? op->getResult(0) : Value();
  auto single = [&](Value operand, Value grad) {
    adj.accumulate(operand, grad);
    return success();
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<AddOp>([&](AddOp o) {
        adj.accumulate(o.getLhs(), dy);
        adj.accumulate(o.getRhs(), dy);
        return success();
      })
      .Case<SubOp>([&](SubOp o) {
        adj.accumulate(o.getLhs(), dy);
        adj.accumulate(o.getRhs(), g.neg(dy));
        return success();
      })
      .Case<MulOp>([&](MulOp o) {
        adj.accumulate(o.getLhs(), g.mul(dy, o.getRhs()));
        adj.accumulate(o.getRhs(), g.mul(dy, o.getLhs()));
        return success();
      })
      .Case<DivOp>([&](DivOp o) {
        adj.accumulate(o.getLhs(), g.div(dy, o.getRhs()));
        // d(a/b)/db = -(a/b)/b
        adj.accumulate(o.getRhs(), g.neg(g.div(g.mul(dy, y), o.getRhs())));
        return success();
      })
      .Case<PowOp>([&](PowOp o) -> LogicalResult {
        auto exponent = constantFloats(o.getRhs().getDefiningOp<ConstantOp>()
                                           ? o.getRhs().getDefiningOp<ConstantOp>().getValue()
                                           : Attribute());
        if (!exponent || exponent->size() != 1)
          return o.emitError("sl-autodiff: pow is differentiated only for a constant scalar "
                             "exponent");
        double c = (*exponent)[0];
        Type element = typeOf(o.getLhs()).getElementType();
        Value base = c == 2.0 ? o.getLhs()
                              : g.binary<PowOp>(o.getLhs(), g.scalar(element, c - 1.0));
        return single(o.getLhs(), g.mul(dy, g.mul(base, g.scalar(element, c))));
      })
      .Case<SqrtOp>([&](SqrtOp o) {
        // d sqrt(x) = 0.5 / sqrt(x)
        return single(o.getInput(), g.div(g.mul(dy, g.scalar(typeOf(y).getElementType(), 0.5)), y));
      })
      .Case<ReciprocalOp>([&](ReciprocalOp o) {
        return single(o.getInput(), g.neg(g.mul(dy, g.mul(y, y))));
      })
      .Case<NegOp>([&](NegOp o) { return single(o.getInput(), g.neg(dy)); })
      .Case<ExpOp>([&](ExpOp o) { return single(o.getInput(), g.mul(dy, y)); })
      .Case<CosOp>([&](CosOp o) {
        Value x = o.getInput();
        Value sin = g.b.create<SinOp>(g.loc, x);
        return single(x, g.neg(g.mul(dy, sin)));
      })
      .Case<SinOp>([&](SinOp o) {
        Value x = o.getInput();
        return single(x, g.mul(dy, g.b.create<CosOp>(g.loc, x).getResult()));
      })
      .Case<TanhOp>([&](TanhOp o) {
        Value one = g.scalar(typeOf(y).getElementType(), 1.0);
        return single(o.getInput(), g.mul(dy, g.sub(one, g.mul(y, y))));
      })
      .Case<SigmoidOp>([&](SigmoidOp o) {
        Value one = g.scalar(typeOf(y).getElementType(), 1.0);
        return single(o.getInput(), g.mul(dy, g.mul(y, g.sub(one, y))));
      })
      .Case<ErfOp>([&](ErfOp o) {
        // d erf(x) = 2/sqrt(pi) exp(-x^2)
        Type element = typeOf(y).getElementType();
        Value x = o.getInput();
        Value e = g.b.create<ExpOp>(g.loc, g.neg(g.mul(x, x)));
        return single(x, g.mul(dy, g.mul(e, g.scalar(element, 2.0 / std::sqrt(M_PI)))));
      })
      .Case<ReluOp>([&](ReluOp o) {
        Value x = o.getInput();
        Type element = typeOf(x).getElementType();
        Value positive = g.compare<LessOp>(g.scalar(element, 0.0), x);
        auto where = g.b.create<WhereOp>(g.loc, typeOf(dy), positive, dy,
                                         g.scalar(element, 0.0));
        return single(x, where.getResult());
      })
      .Case<SiluOp>([&](SiluOp o) {
        // d silu(x) = s (1 + x (1 - s)), s = sigmoid(x)
        Value x = o.getInput();
        Type element = typeOf(x).getElementType();
        Value s = g.b.create<SigmoidOp>(g.loc, x);
        Value one = g.scalar(element, 1.0);
        return single(x, g.mul(dy, g.mul(s, g.add(one, g.mul(x, g.sub(one, s))))));
      })
      .Case<CastOp>([&](CastOp o) -> LogicalResult {
        if (!isFloat(o.getInput()))
          return success();
        auto type = typeOf(o.getInput());
        Value back = g.b.create<CastOp>(g.loc, typeOf(dy).clone(type.getElementType()), dy,
                                        TypeAttr::get(type.getElementType()));
        return single(o.getInput(), back);
      })
      .Case<WhereOp>([&](WhereOp o) {
        Value zero = g.scalar(typeOf(dy).getElementType(), 0.0);
        adj.accumulate(o.getX(), g.b.create<WhereOp>(g.loc, typeOf(dy), o.getCondition(), dy, zero));
        adj.accumulate(o.getY(), g.b.create<WhereOp>(g.loc, typeOf(dy), o.getCondition(), zero, dy));
        return success();
      })
      .Case<MatmulOp>([&](MatmulOp o) -> LogicalResult {
        if (typeOf(o.getLhs()).getRank() < 2 || typeOf(o.getRhs()).getRank() < 2)
          return o.emitError("sl-autodiff: matmul of a vector is not differentiated yet");
        // The products are written for the operands as multiplied (op(A), op(B)), with the
        // transposes spelled out; sl-fold-matmul-transposes turns them back into flags.
        Value a = o.getTransA() ? g.transposeLast2(o.getLhs()) : o.getLhs();
        Value bm = o.getTransB() ? g.transposeLast2(o.getRhs()) : o.getRhs();
        Value da = g.matmul(dy, g.transposeLast2(bm));
        adj.accumulate(o.getLhs(), o.getTransA() ? g.transposeLast2(da) : da);
        auto lhs = typeOf(a);
        Value db;
        if (typeOf(bm).getRank() == 2 && lhs.getRank() > 2) {
          // A weight shared by every batch: one [K, rows] x [rows, N] product over all rows,
          // rather than a product per batch summed afterwards.
          int64_t k = lhs.getShape().back(), n = typeOf(dy).getShape().back();
          int64_t rows = lhs.getNumElements() / k;
          Value x2 = g.reshape(a, {rows, k}), dy2 = g.reshape(dy, {rows, n});
          db = g.matmul(g.transposeLast2(x2), dy2);
        } else {
          db = g.matmul(g.transposeLast2(a), dy);
        }
        adj.accumulate(o.getRhs(), o.getTransB() ? g.transposeLast2(db) : db);
        return success();
      })
      .Case<GemmOp>([&](GemmOp o) {
        Type element = typeOf(dy).getElementType();
        Value a = o.getTransA() ? g.transposeLast2(o.getA()) : o.getA();
        Value bm = o.getTransB() ? g.transposeLast2(o.getB()) : o.getB();
        Value scaled = g.mul(dy, g.scalar(element, o.getAlpha().convertToFloat()));
        Value da = g.matmul(scaled, g.transposeLast2(bm)); // d op(A)
        Value db = g.matmul(g.transposeLast2(a), scaled);  // d op(B)
        adj.accumulate(o.getA(), o.getTransA() ? g.transposeLast2(da) : da);
        adj.accumulate(o.getB(), o.getTransB() ? g.transposeLast2(db) : db);
        if (o.getC())
          adj.accumulate(o.getC(), g.mul(dy, g.scalar(element, o.getBeta().convertToFloat())));
        return success();
      })
      .Case<TransposeOp>([&](TransposeOp o) {
        ArrayRef<int64_t> perm = o.getPerm();
        SmallVector<int64_t> inverse(perm.size());
        for (auto [i, p] : llvm::enumerate(perm))
          inverse[p] = int64_t(i);
        return single(o.getInput(), g.transpose(dy, inverse));
      })
      .Case<ReshapeOp>([&](ReshapeOp o) {
        return single(o.getInput(), g.reshape(dy, typeOf(o.getInput()).getShape()));
      })
      .Case<ExpandOp>([&](ExpandOp o) { return single(o.getInput(), dy); })
      .Case<ReduceSumOp, ReduceMeanOp>([&](auto o) -> LogicalResult {
        auto input = typeOf(o.getInput());
        int64_t rank = input.getRank();
        SmallVector<int64_t> axes;
        if (o.getAxes()) {
          std::optional<SmallVector<int64_t>> given = sl::constantInts(o.getAxes());
          if (!given)
            return o.emitError("sl-autodiff: the axes of a reduction must be constants");
          for (int64_t a : *given)
            axes.push_back(a < 0 ? a + rank : a);
        }
        if (axes.empty() && o.getNoopWithEmptyAxes())
          return single(o.getInput(), dy);
        if (axes.empty())
          axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
        SmallVector<int64_t> kept(input.getShape());
        int64_t count = 1;
        for (int64_t a : axes) {
          count *= kept[a];
          kept[a] = 1;
        }
        Value grad = g.expandTo(g.reshape(dy, kept), input.getShape());
        if (llvm::isa<ReduceMeanOp>(o.getOperation()))
          grad = g.div(grad, g.scalar(input.getElementType(), double(count)));
        return single(o.getInput(), grad);
      })
      .Case<SoftmaxOp>([&](SoftmaxOp o) {
        // dx = y * (dy - sum(dy * y, axis))
        int64_t rank = o.getType().getRank();
        int64_t axis = int64_t(o.getAxis()) < 0 ? int64_t(o.getAxis()) + rank : int64_t(o.getAxis());
        Value dot = g.reduceSum(g.mul(dy, y), {axis}, /*keepdims=*/true);
        return single(o.getInput(), g.mul(y, g.sub(dy, dot)));
      })
      .Case<ConcatOp>([&](ConcatOp o) {
        int64_t rank = o.getType().getRank();
        int64_t axis = int64_t(o.getAxis()) < 0 ? int64_t(o.getAxis()) + rank : int64_t(o.getAxis());
        int64_t start = 0;
        for (Value input : o.getInputs()) {
          int64_t size = typeOf(input).getDimSize(axis);
          auto slice = g.b.create<SliceOp>(g.loc, typeOf(input).clone(typeOf(dy).getElementType()),
                                           dy, g.ints({start}), g.ints({start + size}),
                                           g.ints({axis}), g.ints({1}));
          adj.accumulate(input, slice.getResult());
          start += size;
        }
        return success();
      })
      .Case<SliceOp>([&](SliceOp o) {
        // Absent axes are the first len(starts) dimensions, absent steps are 1.
        int64_t count = typeOf(o.getStarts()).getDimSize(0);
        Value axes = o.getAxes() ? o.getAxes() : g.ints(llvm::to_vector(llvm::seq<int64_t>(0, count)));
        SmallVector<int64_t> starts(count, 0);
        Value steps = o.getSteps() ? o.getSteps() : g.ints(SmallVector<int64_t>(starts.size(), 1));
        auto grad = g.b.create<SliceGradOp>(g.loc, typeOf(o.getData()), dy, o.getStarts(),
                                            o.getEnds(), axes, steps);
        return single(o.getData(), grad.getDdata());
      })
      .Case<GatherOp>([&](GatherOp o) {
        auto grad = g.b.create<GatherGradOp>(g.loc, typeOf(o.getData()), o.getIndices(), dy,
                                             g.b.getI64IntegerAttr(int64_t(o.getAxis())));
        return single(o.getData(), grad.getDdata());
      })
      .Case<TriluOp>([&](TriluOp o) {
        auto grad = g.b.create<TriluOp>(g.loc, typeOf(dy), dy, o.getK(), o.getUpper());
        return single(o.getInput(), grad.getResult());
      })
      .Case<CumSumOp>([&](CumSumOp o) {
        // x[j] reaches y[i] for j <= i (j < i exclusive; the other way with reverse), so dy[i]
        // reaches dx[j] for i >= j (i > j): the same running sum taken from the other end.
        auto grad = g.b.create<CumSumOp>(g.loc, typeOf(dy), dy, o.getAxis(), o.getExclusive(),
                                         !o.getReverse());
        return single(o.getInput(), grad.getResult());
      })
      .Case<CrossEntropyOp>([&](CrossEntropyOp o) {
        auto grad = g.b.create<CrossEntropyGradOp>(
            g.loc, typeOf(o.getLogits()), o.getLabels(), dy, o.getLogits(),
            g.b.getI64IntegerAttr(int64_t(o.getIgnoreIndex())));
        return single(o.getLogits(), grad.getDlogits());
      })
      .Case<RmsNormOp>([&](RmsNormOp o) {
        auto grad = g.b.create<RmsNormGradOp>(g.loc, typeOf(o.getInput()), typeOf(o.getScale()),
                                              o.getInput(), o.getScale(), dy, o.getEpsilonAttr());
        adj.accumulate(o.getInput(), grad.getDinput());
        adj.accumulate(o.getScale(), grad.getDscale());
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp o) {
        int64_t rank = o.getType().getRank();
        int64_t axis = int64_t(o.getAxis()) < 0 ? int64_t(o.getAxis()) + rank : int64_t(o.getAxis());
        auto normalized = RankedTensorType::get(o.getType().getShape().drop_front(axis),
                                                o.getType().getElementType());
        auto grad = g.b.create<LayerNormGradOp>(
            g.loc, typeOf(o.getInput()), normalized, normalized, o.getInput(), o.getScale(), dy,
            g.b.getI64IntegerAttr(axis), o.getEpsilonAttr());
        adj.accumulate(o.getInput(), grad.getDinput());
        adj.accumulate(o.getScale(), grad.getDscale());
        if (o.getBias())
          adj.accumulate(o.getBias(), grad.getDbias());
        return success();
      })
      .Case<RotaryOp>([&](RotaryOp o) {
        // cos and sin are position tables: constants, never trained.
        auto grad = g.b.create<RotaryGradOp>(g.loc, typeOf(dy), dy, o.getCos(), o.getSin(),
                                             o.getInterleavedAttr());
        return single(o.getInput(), grad.getDinput());
      })
      .Case<AttentionOp>([&](AttentionOp o) {
        SmallVector<Value> operands{o.getQ(), o.getK(), o.getV(), dy};
        if (o.getMask())
          operands.push_back(o.getMask());
        // The mask and the slopes are constants: the probabilities include them, nothing else.
        if (o.getAlibiSlopes())
          operands.push_back(o.getAlibiSlopes());
        auto grad = g.b.create<AttentionGradOp>(
            g.loc, TypeRange{typeOf(o.getQ()), typeOf(o.getK()), typeOf(o.getV())}, operands,
            o.getCausalAttr(), o.getScaleAttr(),
            o.getAlibiSlopes() ? g.b.getUnitAttr() : UnitAttr(), o.getLayoutAttr());
        adj.accumulate(o.getQ(), grad.getDq());
        adj.accumulate(o.getK(), grad.getDk());
        adj.accumulate(o.getV(), grad.getDv());
        return success();
      })
      .Case<GeluOp>([&](GeluOp o) {
        auto grad =
            g.b.create<GeluGradOp>(g.loc, typeOf(dy), o.getInput(), dy, o.getTanhAttr());
        return single(o.getInput(), grad.getDinput());
      })
      .Case<SwigluOp>([&](SwigluOp o) {
        auto grad = g.b.create<SwigluGradOp>(g.loc, typeOf(dy), typeOf(dy), o.getGate(),
                                             o.getUp(), dy);
        adj.accumulate(o.getGate(), grad.getDgate());
        adj.accumulate(o.getUp(), grad.getDup());
        return success();
      })
      .Case<EqualOp, LessOp, ShapeOp, ConstantOfShapeOp, RangeOp>(
          [&](Operation *) { return success(); })
      .Default([&](Operation *other) {
        return other->emitError("sl-autodiff: no gradient rule for '") << other->getName() << "'";
      });
}

struct AutodiffPass : public sl::impl::AutodiffPassBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::SetVector<StringRef> stages;
    module.walk([&](LayerOp layer) { stages.insert(layer.getCallee()); });
    if (stages.empty()) {
      module.emitError("sl-autodiff: no stages to differentiate; run sl-partition-layers first");
      return signalPassFailure();
    }
    for (StringRef name : stages) {
      auto stage = module.lookupSymbol<func::FuncOp>(name);
      if (!stage || failed(differentiate(module, stage)))
        return signalPassFailure();
    }
  }

  /// Values that depend on a floating-point argument: the only ones with gradients.
  static llvm::DenseSet<Value> activeValues(func::FuncOp stage) {
    llvm::DenseSet<Value> active;
    for (BlockArgument arg : stage.getArguments())
      if (isFloat(arg))
        active.insert(arg);
    stage.walk([&](Operation *op) {
      if (llvm::any_of(op->getOperands(), [&](Value v) { return active.count(v); }))
        for (Value r : op->getResults())
          if (isFloat(r))
            active.insert(r);
    });
    return active;
  }

  LogicalResult differentiate(ModuleOp module, func::FuncOp stage) {
    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(stage);
    FunctionType forwardType = stage.getFunctionType();
    SmallVector<Type> argTypes(forwardType.getInputs());
    llvm::append_range(argTypes, forwardType.getResults());
    SmallVector<Type> resultTypes;
    for (Type t : forwardType.getInputs())
      if (llvm::isa<FloatType>(llvm::cast<RankedTensorType>(t).getElementType()))
        resultTypes.push_back(t);
    auto backward = builder.create<func::FuncOp>(
        stage.getLoc(), (stage.getSymName() + "_backward").str(),
        builder.getFunctionType(argTypes, resultTypes));
    backward.setPrivate();
    backward->setAttr("sl.backward_of", FlatSymbolRefAttr::get(stage.getSymNameAttr()));
    for (unsigned i = 0; i < stage.getNumArguments(); ++i)
      if (auto attrs = stage.getArgAttrDict(i))
        backward.setArgAttrs(i, attrs);
    Block *entry = backward.addEntryBlock();

    // Recompute the forward from the boundary inputs.
    builder.setInsertionPointToStart(entry);
    IRMapping mapping;
    for (auto [from, to] : llvm::zip(stage.getArguments(), entry->getArguments()))
      mapping.map(from, to);
    llvm::DenseSet<Value> active = activeValues(stage);
    SmallVector<Operation *> originals, forward;
    for (Operation &op : stage.getBody().front().without_terminator()) {
      originals.push_back(&op);
      forward.push_back(builder.clone(op, mapping));
    }
    auto ret = llvm::cast<func::ReturnOp>(stage.getBody().front().getTerminator());

    GradBuilder g(builder, stage.getLoc());
    Adjoints adj(g);
    unsigned seed = stage.getNumArguments();
    for (auto [i, result] : llvm::enumerate(ret.getOperands()))
      adj.accumulate(mapping.lookup(result), entry->getArgument(seed + i));

    // Reverse sweep over the recomputed ops; only active ops with an adjoint need a rule.
    for (size_t i = forward.size(); i-- > 0;) {
      Operation *original = originals[i], *clone = forward[i];
      if (llvm::none_of(original->getResults(), [&](Value r) { return active.count(r); }))
        continue;
      SmallVector<Value> dys;
      bool any = false;
      for (Value r : clone->getResults()) {
        Value d = adj.get(r);
        any |= bool(d);
        dys.push_back(d ? d : (isFloat(r) ? g.zeros(typeOf(r)) : Value()));
      }
      if (!any)
        continue;
      g.loc = clone->getLoc();
      if (failed(applyRule(clone, dys, g, adj)))
        return failure();
    }

    g.loc = stage.getLoc();
    SmallVector<Value> results;
    for (BlockArgument arg : entry->getArguments().take_front(stage.getNumArguments()))
      if (isFloat(arg)) {
        Value d = adj.get(arg);
        results.push_back(d ? d : g.zeros(typeOf(arg)));
      }
    builder.create<func::ReturnOp>(stage.getLoc(), results);
    return success();
  }
};

} // namespace
