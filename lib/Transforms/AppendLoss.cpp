//===- AppendLoss.cpp - sl-append-loss: the training loss of a language model -------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace sl {
#define GEN_PASS_DEF_APPENDLOSSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kTokenInput = "input_ids";

struct AppendLossPass : public sl::impl::AppendLossPassBase<AppendLossPass> {
  using AppendLossPassBase::AppendLossPassBase;

  void runOnOperation() override {
    bool found = false;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      std::optional<unsigned> index;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (auto name = func.getResultAttrOfType<StringAttr>(i, "sl.name");
            name && name.getValue() == logitsName)
          index = i;
      if (!index)
        continue;
      found = true;
      if (failed(appendLoss(func, *index)))
        return signalPassFailure();
    }
    if (!found) {
      getOperation().emitError("sl-append-loss: no function has an output named '")
          << logitsName << "'";
      signalPassFailure();
    }
  }

  // A training step reads its token ids (sl-run's --data) into the input named input_ids; a model
  // without one compiles to a schedule sl-run cannot train, so it is refused here, first.
  LogicalResult checkTokenInput(func::FuncOp func, RankedTensorType logitsType) {
    std::string names;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto name = func.getArgAttrOfType<StringAttr>(i, "sl.name");
      names += (names.empty() ? "'" : ", '") + (name ? name.str() : "#" + std::to_string(i)) + "'";
      if (!name || name.getValue() != kTokenInput)
        continue;
      auto type = llvm::dyn_cast<RankedTensorType>(func.getArgument(i).getType());
      if (!type || !type.getElementType().isInteger(64) ||
          type.getRank() != logitsType.getRank() - 1)
        return func.emitError("sl-append-loss: input '")
               << kTokenInput << "' must be int64 token ids of the logits' shape without the "
               << "vocabulary dimension (rank " << logitsType.getRank() - 1 << "), got "
               << func.getArgument(i).getType();
      return success();
    }
    return func.emitError("sl-append-loss: @")
           << func.getSymName() << " has no input named '" << kTokenInput << "' (its inputs: "
           << (names.empty() ? std::string("none") : names)
           << "); a training step feeds the token ids of sl-run's --data to that input: export "
              "the model with input_names=[\"input_ids\"]";
  }

  LogicalResult appendLoss(func::FuncOp func, unsigned logitsIndex) {
    auto ret = llvm::cast<func::ReturnOp>(func.getBody().back().getTerminator());
    Value logits = ret.getOperand(logitsIndex);
    auto logitsType = llvm::dyn_cast<RankedTensorType>(logits.getType());
    if (!logitsType || logitsType.getRank() < 2)
      return func.emitError("sl-append-loss: output '")
             << logitsName << "' must be [..., vocab] logits, got " << logits.getType();
    if (failed(checkTokenInput(func, logitsType)))
      return failure();
    OpBuilder builder(func.getContext());

    // labels: the logits' shape without the vocabulary, named like the token input's dimensions.
    auto labelsType =
        RankedTensorType::get(logitsType.getShape().drop_back(), builder.getI64Type());
    ArrayAttr dims;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto argDims = func.getArgAttrOfType<ArrayAttr>(i, "sl.dims");
          argDims && int64_t(argDims.size()) == labelsType.getRank())
        dims = argDims;
    if (!dims) {
      SmallVector<Attribute> names(labelsType.getRank(), builder.getStringAttr(""));
      dims = builder.getArrayAttr(names);
    }
    unsigned labelsIndex = func.getNumArguments();
    func.insertArgument(
        labelsIndex, labelsType,
        builder.getDictionaryAttr({builder.getNamedAttr("sl.name", builder.getStringAttr("labels")),
                                   builder.getNamedAttr("sl.dims", dims)}),
        func.getLoc());
    Value labels = func.getArgument(labelsIndex);

    builder.setInsertionPoint(ret);
    auto lossType = RankedTensorType::get({}, logitsType.getElementType());
    Value loss = builder.create<sl::CrossEntropyOp>(func.getLoc(), lossType, logits, labels,
                                                    builder.getI64IntegerAttr(-100));
    SmallVector<Value> results{loss};
    SmallVector<Attribute> resultAttrs{builder.getDictionaryAttr(
        builder.getNamedAttr("sl.name", builder.getStringAttr("loss")))};
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (i == logitsIndex && !keepLogits)
        continue;
      results.push_back(ret.getOperand(i));
      resultAttrs.push_back(func.getResultAttrDict(i) ? Attribute(func.getResultAttrDict(i))
                                                      : builder.getDictionaryAttr({}));
    }
    builder.create<func::ReturnOp>(ret.getLoc(), results);
    ret.erase();
    SmallVector<Type> resultTypes;
    for (Value v : results)
      resultTypes.push_back(v.getType());
    func.setFunctionType(builder.getFunctionType(func.getArgumentTypes(), resultTypes));
    func.setAllResultAttrs(resultAttrs);
    return success();
  }
};

} // namespace
