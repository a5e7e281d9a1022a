//===- FoldHeadTransposes.cpp - sl-fold-head-transposes: attention in the projections' order ---===//
//
// Exporters permute each attention projection's [B, S, H, D] to [B, H, S, D] (q, k, v, through
// the rotary embedding for q and k) and the result back, and sl-autodiff permutes the gradients
// the same way: four to seven transposes per layer and pass, each a copy of an activation. The
// attention kernels can read and write [B, S, H, D] as well (layout bshd: only the strides of a
// head's rows differ), so this pass gives them that layout and the permutations go.
//
//===----------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace sl {
#define GEN_PASS_DEF_FOLDHEADTRANSPOSESPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using namespace sl;

namespace {

constexpr int64_t kHeadPerm[] = {0, 2, 1, 3};

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

RankedTensorType swapped(RankedTensorType type) {
  return RankedTensorType::get(swapHeadsIf(HeadLayout::bshd, type.getShape()),
                               type.getElementType());
}

/// `v` is `sl.transpose %x [0, 2, 1, 3]` of a static rank-4 tensor: its input, else null.
Value headPermuted(Value v) {
  if (!typeOf(v).hasStaticShape())
    return {};
  return headPermutationInput(v);
}

/// A rotary table [B', H', S, D] broadcast to [B, H, S, D], read in [B, S, H, D] order: the same
/// elements when its heads or positions dimension is 1, so a reshape. Only rank-4 tables: a
/// lower rank would grow to 4 ([S, D] to [S, 1, D] at least), and sl-split-generation reads a
/// decoding step's rows from the table at the rank the step's own (one-position, unfolded)
/// rotary has.
std::optional<SmallVector<int64_t, 4>> exchangedTable(Value table) {
  auto type = typeOf(table);
  if (!type.hasStaticShape() || type.getRank() != 4)
    return std::nullopt;
  SmallVector<int64_t, 4> shape(type.getShape());
  if (shape[1] != 1 && shape[2] != 1)
    return std::nullopt;
  std::swap(shape[1], shape[2]);
  return shape;
}

bool tablesExchange(Value cos, Value sin) {
  return exchangedTable(cos) && exchangedTable(sin);
}

class Folder {
public:
  explicit Folder(MLIRContext *context) : builder(context) {}

  /// Whether `v` ([B, H, S, D]) has a [B, S, H, D] form without a copy: a head permutation's input,
  /// or the rotary embedding of one.
  bool hasBshd(Value v) const {
    if (headPermuted(v))
      return true;
    auto rotary = v.getDefiningOp<RotaryOp>();
    return rotary && headPermuted(rotary.getInput()) &&
           tablesExchange(rotary.getCos(), rotary.getSin());
  }

  /// That form (hasBshd(v) holds): a rotary moves behind the permutation, built once per value.
  Value bshdOf(Value v) {
    if (Value x = headPermuted(v))
      return x;
    if (Value known = built.lookup(v))
      return known;
    auto rotary = v.getDefiningOp<RotaryOp>();
    Value x = headPermuted(rotary.getInput());
    builder.setInsertionPoint(rotary);
    auto moved = builder.create<RotaryOp>(rotary.getLoc(), x.getType(), x,
                                          exchangeTable(rotary.getCos(), rotary.getLoc()),
                                          exchangeTable(rotary.getSin(), rotary.getLoc()),
                                          rotary.getInterleavedAttr());
    built[v] = moved.getResult();
    return moved.getResult();
  }

  /// Every use of `old` ([B, H, S, D]) reads `bshd` ([B, S, H, D], defined by `op`) instead: a
  /// head permutation of it is `bshd` itself, a head permutation of its rotary gradient is that
  /// gradient of `bshd`, and any other user reads a permutation of `bshd`.
  void replaceResult(Value old, Value bshd, Operation *op) {
    Value restored;
    for (OpOperand &use : llvm::make_early_inc_range(old.getUses())) {
      Operation *user = use.getOwner();
      if (llvm::isa<TransposeOp>(user) && headPermuted(user->getResult(0)) == old) {
        user->getResult(0).replaceAllUsesWith(bshd);
        eraseNow(user);
        continue;
      }
      if (auto grad = llvm::dyn_cast<RotaryGradOp>(user);
          grad && use.getOperandNumber() == 0 && tablesExchange(grad.getCos(), grad.getSin()) &&
          llvm::all_of(grad->getUsers(), [&](Operation *gradUser) {
            return llvm::isa<TransposeOp>(gradUser) &&
                   headPermuted(gradUser->getResult(0)) == grad.getDinput();
          })) {
        builder.setInsertionPoint(grad);
        auto moved = builder.create<RotaryGradOp>(
            grad.getLoc(), bshd.getType(), bshd, exchangeTable(grad.getCos(), grad.getLoc()),
            exchangeTable(grad.getSin(), grad.getLoc()), grad.getInterleavedAttr());
        for (Operation *gradUser : llvm::to_vector(grad->getUsers())) {
          gradUser->getResult(0).replaceAllUsesWith(moved.getDinput());
          gradUser->erase();
        }
        eraseNow(grad);
        continue;
      }
      if (!restored) {
        builder.setInsertionPointAfter(op);
        restored = builder.create<TransposeOp>(op->getLoc(), old.getType(), bshd,
                                               ArrayRef<int64_t>(kHeadPerm));
      }
      use.set(restored);
    }
  }

  void fold(AttentionOp op) {
    if (op.getLayout() != HeadLayout::bhsd || !worthIt(op.getQ()) ||
        !llvm::all_of(ValueRange{op.getQ(), op.getK(), op.getV()},
                      [&](Value v) { return hasBshd(v); }))
      return;
    Value q = bshdOf(op.getQ()), k = bshdOf(op.getK()), v = bshdOf(op.getV());
    builder.setInsertionPoint(op);
    auto folded = builder.create<AttentionOp>(
        op.getLoc(), swapped(op.getType()), q, k, v, op.getMask(), op.getAlibiSlopes(),
        op.getCausalAttr(), op.getScaleAttr(),
        HeadLayoutAttr::get(builder.getContext(), HeadLayout::bshd));
    replaceResult(op.getResult(), folded.getResult(), folded);
    eraseNow(op);
  }

  void fold(AttentionGradOp op) {
    if (op.getLayout() != HeadLayout::bhsd || op.getNumOperands() < 4 ||
        !worthIt(op.getOperand(0)) ||
        !llvm::all_of(op.getOperands().take_front(4), [&](Value v) { return hasBshd(v); }))
      return;
    SmallVector<Value> operands(op.getOperands());
    SmallVector<Type> types;
    for (int i = 0; i < 4; ++i)
      operands[i] = bshdOf(operands[i]);
    for (Value result : op.getResults())
      types.push_back(swapped(typeOf(result)));
    builder.setInsertionPoint(op);
    auto folded = builder.create<AttentionGradOp>(
        op.getLoc(), types, operands, op.getCausalAttr(), op.getScaleAttr(), op.getAlibiAttr(),
        HeadLayoutAttr::get(builder.getContext(), HeadLayout::bshd));
    for (auto [old, bshd] : llvm::zip(op.getResults(), folded.getResults()))
      replaceResult(old, bshd, folded);
    eraseNow(op);
  }

  /// The permutations, rotaries and tables the folded ops read, once nothing else reads them.
  void eraseDead() {
    while (!dead.empty()) {
      Operation *op = dead.pop_back_val();
      if (op->use_empty())
        eraseNow(op);
    }
  }

private:
  /// A single position (a decoding step) or a single head makes the permutation a reshape, and
  /// sl-split-generation reads a decoding step's attention in [B, H, S, D].
  static bool worthIt(Value q) {
    auto shape = typeOf(q).getShape();
    return shape.size() == 4 && shape[1] != 1 && shape[2] != 1;
  }

  /// The table reshaped to [B, S, H, D] order, once per table, right after its definition so
  /// that it dominates every rotary that reads it.
  Value exchangeTable(Value table, Location loc) {
    if (Value known = tables.lookup(table))
      return known;
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(table);
    SmallVector<int64_t, 4> shape = *exchangedTable(table);
    auto type = RankedTensorType::get(shape, typeOf(table).getElementType());
    // A constant table (the usual case: sl-fuse-transformer folds the angles) is the same
    // constant of the new shape, which sl-split-generation reads its rows from.
    if (auto constant = table.getDefiningOp<ConstantOp>())
      if (auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValueAttr())) {
        Value reshaped = builder.create<ConstantOp>(loc, type, dense.reshape(type));
        tables[table] = reshaped;
        return reshaped;
      }
    auto shapeType = RankedTensorType::get({4}, builder.getI64Type());
    Value dims = builder.create<ConstantOp>(loc, shapeType,
                                            DenseElementsAttr::get(shapeType, ArrayRef(shape)));
    Value reshaped = builder.create<ReshapeOp>(loc, type, table, dims, /*allowzero=*/false);
    tables[table] = reshaped;
    return reshaped;
  }

  /// Erases `op` (nothing reads it any more) and notes what it read for eraseDead.
  void eraseNow(Operation *op) {
    noteOperands(op);
    dead.remove(op);
    op->erase();
  }

  void noteOperands(Operation *op) {
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && llvm::isa<TransposeOp, RotaryOp, RotaryGradOp, ReshapeOp, ConstantOp>(def))
        dead.insert(def);
  }

  OpBuilder builder;
  DenseMap<Value, Value> built, tables;
  llvm::SetVector<Operation *> dead;
};

/// A head permutation that moves no element (the heads or the positions number 1: a decoding
/// step's q, k, v and result) is a reshape, which the schedule makes a view, not a copy.
void reshapeTrivialPermutations(func::FuncOp func) {
  SmallVector<TransposeOp> trivial;
  func.walk([&](TransposeOp op) {
    auto shape = typeOf(op.getInput()).getShape();
    if (op.getPerm() == ArrayRef<int64_t>(kHeadPerm) && typeOf(op.getInput()).hasStaticShape() &&
        (shape[1] == 1 || shape[2] == 1))
      trivial.push_back(op);
  });
  OpBuilder builder(func.getContext());
  auto shapeType = RankedTensorType::get({4}, builder.getI64Type());
  for (TransposeOp op : trivial) {
    builder.setInsertionPoint(op);
    auto shape = typeOf(op).getShape();
    Value dims = builder.create<ConstantOp>(op.getLoc(), shapeType,
                                            DenseElementsAttr::get(shapeType, shape));
    op.getResult().replaceAllUsesWith(
        builder.create<ReshapeOp>(op.getLoc(), op.getType(), op.getInput(), dims, false));
    op.erase();
  }
}

struct FoldHeadTransposesPass
    : public sl::impl::FoldHeadTransposesPassBase<FoldHeadTransposesPass> {
  void runOnOperation() override {
    Folder folder(&getContext());
    // Forward attentions first: the gradients of a recomputed forward read the same rotaries.
    SmallVector<AttentionOp> attentions;
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](Operation *op) {
      if (auto attention = llvm::dyn_cast<AttentionOp>(op))
        attentions.push_back(attention);
      else if (auto grad = llvm::dyn_cast<AttentionGradOp>(op))
        grads.push_back(grad);
    });
    for (AttentionOp op : attentions)
      folder.fold(op);
    for (AttentionGradOp op : grads)
      folder.fold(op);
    folder.eraseDead();
    reshapeTrivialPermutations(getOperation());
  }
};

} // namespace
