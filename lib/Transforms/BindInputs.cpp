//===- BindInputs.cpp - sl-bind-inputs: the mask, positions and past a pipeline owns -----------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/STLExtras.h"

namespace sl {
#define GEN_PASS_DEF_BINDINPUTSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

llvm::StringRef argName(func::FuncOp func, unsigned index) {
  if (auto name = func.getArgAttrOfType<StringAttr>(index, "sl.name"))
    return name.getValue();
  return {};
}

llvm::StringRef dimName(func::FuncOp func, unsigned index, int64_t axis) {
  if (auto names = func.getArgAttrOfType<ArrayAttr>(index, "sl.dims"))
    if (axis < int64_t(names.size()))
      if (auto str = llvm::dyn_cast<StringAttr>(names[axis]))
        return str.getValue();
  return {};
}

bool isPast(llvm::StringRef name) {
  return name.starts_with("past_key_values") || name.starts_with("past.");
}

bool isPresent(llvm::StringRef name) { return name.starts_with("present"); }

Value i64Constant(OpBuilder &b, Location loc, ArrayRef<int64_t> values, bool scalar = false) {
  auto type = scalar ? RankedTensorType::get({}, b.getI64Type())
                     : RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
  return b.create<sl::ConstantOp>(loc, type, DenseElementsAttr::get(type, values));
}

/// A one-element `value` attribute of `type`'s element type, as ConstantOfShape takes.
ElementsAttr splat(Type elementType, double value) {
  auto type = RankedTensorType::get({1}, elementType);
  if (llvm::isa<FloatType>(elementType))
    return DenseElementsAttr::get(type, FloatAttr::get(elementType, value));
  return DenseElementsAttr::get(type, IntegerAttr::get(elementType, int64_t(value)));
}

struct BindInputsPass : public sl::impl::BindInputsPassBase<BindInputsPass> {
  using BindInputsPassBase::BindInputsPassBase;

  void runOnOperation() override {
    for (const std::string &name : inputs)
      if (name != "attention_mask" && name != "position_ids" && name != "past_key_values") {
        getOperation().emitError("sl-bind-inputs: cannot bind '")
            << name << "': the inputs a pipeline can own are attention_mask, position_ids and "
                       "past_key_values";
        return signalPassFailure();
      }
    for (auto func : llvm::make_early_inc_range(getOperation().getOps<func::FuncOp>()))
      if (!func.isExternal() && failed(bindFunction(func)))
        return signalPassFailure();
  }

  bool binds(llvm::StringRef name) const { return llvm::is_contained(inputs, name.str()); }

  LogicalResult bindFunction(func::FuncOp func) {
    std::optional<unsigned> ids;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (argName(func, i) == "input_ids")
        ids = i;
    // Without input_ids there is nothing to compute the values from; the pipelines' own checks
    // say what they need of such a model.
    if (!ids)
      return success();
    Value tokens = func.getArgument(*ids);
    auto tokensType = llvm::dyn_cast<RankedTensorType>(tokens.getType());
    if (!tokensType || tokensType.getRank() != 2)
      return func.emitError("sl-bind-inputs: 'input_ids' must be [batch, seq], got ")
             << tokens.getType();
    llvm::StringRef batchName = dimName(func, *ids, 0);

    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&func.getBody().front());
    Location loc = func.getLoc();
    llvm::BitVector erase(func.getNumArguments());
    bool pastBound = false;
    for (BlockArgument arg : func.getArguments()) {
      unsigned i = arg.getArgNumber();
      llvm::StringRef name = argName(func, i);
      bool past = isPast(name);
      if (i == *ids || !(binds(past ? "past_key_values" : name)))
        continue;
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (!type)
        return func.emitError("sl-bind-inputs: input '") << name << "' is not a ranked tensor";
      FailureOr<Value> value = failure();
      if (name == "attention_mask")
        value = mask(b, loc, func, i, tokens, type);
      else if (name == "position_ids")
        value = positions(b, loc, func, i, tokens, type);
      else if (past)
        value = emptyPast(b, loc, func, i, tokens, type, batchName);
      if (failed(value))
        return failure();
      arg.replaceAllUsesWith(*value);
      erase.set(i);
      pastBound |= past;
    }

    // The new cache belongs to the pipeline once the past does.
    if (pastBound) {
      auto ret = llvm::cast<func::ReturnOp>(func.getBody().front().getTerminator());
      llvm::BitVector dropped(func.getNumResults());
      for (unsigned r = 0; r < func.getNumResults(); ++r)
        if (auto name = func.getResultAttrOfType<StringAttr>(r, "sl.name"))
          if (isPresent(name.getValue()))
            dropped.set(r);
      if (dropped.any()) {
        SmallVector<Value> kept;
        for (unsigned r = 0; r < ret.getNumOperands(); ++r)
          if (!dropped.test(r))
            kept.push_back(ret.getOperand(r));
        ret->setOperands(kept);
        func.eraseResults(dropped);
      }
    }
    func.eraseArguments(erase);

    if (onlyInputIds)
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (argName(func, i) != "input_ids")
          return func.emitError("sl-bind-inputs: input ")
                 << (argName(func, i).empty() ? "#" + std::to_string(i)
                                              : "'" + argName(func, i).str() + "'")
                 << " has no value the pipeline can give it: training and generation feed only "
                    "input_ids (and bind attention_mask, position_ids and past_key_values.*); "
                    "export the model without it";
    return success();
  }

  /// All ones, [batch, seq] (the past is empty or bound later with its own length).
  FailureOr<Value> mask(OpBuilder &b, Location loc, func::FuncOp func, unsigned i, Value tokens,
                        RankedTensorType type) {
    if (type.getRank() != 2)
      return func.emitError("sl-bind-inputs: 'attention_mask' must be [batch, length], got ")
             << type;
    Value shape = b.create<sl::ShapeOp>(loc, tokens, b.getI64IntegerAttr(0), IntegerAttr());
    return b.create<sl::ConstantOfShapeOp>(loc, type, shape, splat(type.getElementType(), 1.0))
        .getResult();
  }

  /// 0 .. seq-1 in every row: [1, seq] or [batch, seq] as the input is.
  FailureOr<Value> positions(OpBuilder &b, Location loc, func::FuncOp func, unsigned i,
                             Value tokens, RankedTensorType type) {
    if (type.getRank() != 2 || !type.getElementType().isInteger(64))
      return func.emitError("sl-bind-inputs: 'position_ids' must be i64 [batch or 1, seq], got ")
             << type;
    Value seq = b.create<sl::ShapeOp>(loc, tokens, b.getI64IntegerAttr(1), b.getI64IntegerAttr(2));
    auto scalarType = RankedTensorType::get({}, b.getI64Type());
    Value limit = b.create<sl::ReshapeOp>(loc, scalarType, seq, i64Constant(b, loc, {}),
                                          UnitAttr());
    Value range = b.create<sl::RangeOp>(
        loc, RankedTensorType::get({ShapedType::kDynamic}, b.getI64Type()),
        i64Constant(b, loc, {0}, true), limit, i64Constant(b, loc, {1}, true));
    auto rowType = RankedTensorType::get({1, type.getDimSize(1)}, b.getI64Type());
    Value row = b.create<sl::ReshapeOp>(loc, rowType, range, i64Constant(b, loc, {1, -1}),
                                        UnitAttr());
    if (type.getDimSize(0) == 1)
      return row;
    Value shape = b.create<sl::ShapeOp>(loc, tokens, b.getI64IntegerAttr(0), IntegerAttr());
    return b.create<sl::ExpandOp>(loc, type, row, shape).getResult();
  }

  /// Zeros with the past length 0: the batch from input_ids, every other dimension static.
  FailureOr<Value> emptyPast(OpBuilder &b, Location loc, func::FuncOp func, unsigned i,
                             Value tokens, RankedTensorType type, llvm::StringRef batchName) {
    SmallVector<Value> dims;
    int64_t pastAxis = -1;
    for (int64_t axis = 0; axis < type.getRank(); ++axis) {
      if (!ShapedType::isDynamic(type.getDimSize(axis))) {
        dims.push_back(i64Constant(b, loc, {type.getDimSize(axis)}));
        continue;
      }
      llvm::StringRef name = dimName(func, i, axis);
      bool batch = name.empty() ? axis == 0 : name == batchName;
      if (batch) {
        dims.push_back(b.create<sl::ShapeOp>(loc, tokens, b.getI64IntegerAttr(0),
                                             b.getI64IntegerAttr(1)));
        continue;
      }
      if (pastAxis >= 0)
        return func.emitError("sl-bind-inputs: input '")
               << argName(func, i) << "' has two dynamic dimensions beside the batch ("
               << pastAxis << " and " << axis
               << "); a past key or value has one, its length";
      pastAxis = axis;
      dims.push_back(i64Constant(b, loc, {0}));
    }
    if (pastAxis < 0)
      return func.emitError("sl-bind-inputs: input '")
             << argName(func, i) << "' " << type
             << " has no dynamic past length; export the past with a dynamic length";
    Value vector = b.create<sl::ConcatOp>(
        loc, RankedTensorType::get({type.getRank()}, b.getI64Type()), dims,
        b.getI64IntegerAttr(0));
    Value zeros = b.create<sl::ConstantOfShapeOp>(loc, type, vector,
                                                  splat(type.getElementType(), 0.0));
    return zeros;
  }
};

} // namespace
