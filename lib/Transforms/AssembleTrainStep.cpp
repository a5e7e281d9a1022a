//===- AssembleTrainStep.cpp - sl-assemble-train-step: one training step as a function ------------===//
//
// After sl-partition-layers and sl-autodiff, the model function calls its stages and every stage
// has a backward function. This pass writes the whole step as one function, @train_step: the
// stages forward in order (keeping each stage's boundary inputs), then the backward functions in
// reverse, each recomputing its stage from those inputs. It returns the loss and the gradient of
// every parameter (summed over every stage that reads it). Stage bodies are inlined, so the
// schedule emitter sees plain sl ops; every stage stays resident (one sub-batch) until
// sl-schedule-subbatches takes over the same structure.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace sl {
#define GEN_PASS_DEF_ASSEMBLETRAINSTEPPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

struct AssembleTrainStepPass
    : public sl::impl::AssembleTrainStepPassBase<AssembleTrainStepPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal()) {
      module.emitError("sl-assemble-train-step: no @forward function");
      return signalPassFailure();
    }
    if (failed(assemble(module, forward)))
      signalPassFailure();
  }

  /// Clones `callee`'s body at the builder's point with its arguments bound to `operands`;
  /// returns what it returns.
  static SmallVector<Value> inlineCall(OpBuilder &builder, func::FuncOp callee,
                                       ValueRange operands) {
    IRMapping mapping;
    for (auto [arg, operand] : llvm::zip(callee.getArguments(), operands))
      mapping.map(arg, operand);
    Block &body = callee.getBody().front();
    for (Operation &op : body.without_terminator())
      builder.clone(op, mapping);
    SmallVector<Value> results;
    for (Value v : body.getTerminator()->getOperands())
      results.push_back(mapping.lookup(v));
    return results;
  }

  LogicalResult assemble(ModuleOp module, func::FuncOp forward) {
    auto ret = llvm::cast<func::ReturnOp>(forward.getBody().front().getTerminator());
    std::optional<unsigned> lossIndex;
    for (unsigned i = 0; i < forward.getNumResults(); ++i)
      if (auto name = forward.getResultAttrOfType<StringAttr>(i, "sl.name");
          name && name.getValue() == "loss")
        lossIndex = i;
    if (!lossIndex)
      return forward.emitError("sl-assemble-train-step: @forward has no 'loss' output; run "
                               "sl-append-loss first");

    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(forward);
    SmallVector<Type> resultTypes{ret.getOperand(*lossIndex).getType()};
    SmallVector<Attribute> resultAttrs{builder.getDictionaryAttr(
        builder.getNamedAttr("sl.name", builder.getStringAttr("loss")))};
    SmallVector<sl::ParamOp> params;
    for (auto param : forward.getBody().front().getOps<sl::ParamOp>()) {
      params.push_back(param);
      resultTypes.push_back(param.getType());
      resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
          "sl.name", builder.getStringAttr("grad:" + param.getName().str()))));
    }
    auto step = builder.create<func::FuncOp>(
        forward.getLoc(), "train_step",
        builder.getFunctionType(forward.getArgumentTypes(), resultTypes));
    step.setAllArgAttrs(forward.getAllArgAttrs());
    step.setAllResultAttrs(resultAttrs);
    Block *entry = step.addEntryBlock();
    builder.setInsertionPointToStart(entry);

    IRMapping mapping;
    for (auto [from, to] : llvm::zip(forward.getArguments(), entry->getArguments()))
      mapping.map(from, to);

    // Forward: parameters and constants as they are, stages inlined; keep every stage's operands.
    struct Call {
      sl::LayerOp layer;
      SmallVector<Value> operands;
    };
    SmallVector<Call> calls;
    for (Operation &op : forward.getBody().front().without_terminator()) {
      auto layer = llvm::dyn_cast<sl::LayerOp>(op);
      if (!layer) {
        builder.clone(op, mapping);
        continue;
      }
      auto callee = module.lookupSymbol<func::FuncOp>(layer.getCallee());
      SmallVector<Value> operands;
      for (Value v : layer.getOperands())
        operands.push_back(mapping.lookup(v));
      SmallVector<Value> results = inlineCall(builder, callee, operands);
      for (auto [from, to] : llvm::zip(layer.getResults(), results))
        mapping.map(from, to);
      calls.push_back({layer, operands});
    }
    if (calls.empty())
      return forward.emitError("sl-assemble-train-step: @forward calls no stages; run "
                               "sl-partition-layers first");
    Value loss = mapping.lookup(ret.getOperand(*lossIndex));

    // Backward, stages in reverse, gradients summed where a value or parameter is read twice.
    llvm::DenseMap<Value, Value> grads;
    auto accumulate = [&](Value v, Value g) {
      auto [it, inserted] = grads.try_emplace(v, g);
      if (!inserted)
        it->second = builder.create<sl::AddOp>(forward.getLoc(), g.getType(), it->second, g);
    };
    auto zeros = [&](Type type) -> Value {
      auto ranked = llvm::cast<RankedTensorType>(type);
      return builder.create<sl::ConstantOp>(
          forward.getLoc(), ranked,
          SplatElementsAttr::get(ranked, builder.getFloatAttr(ranked.getElementType(), 0.0)));
    };
    auto lossType = llvm::cast<RankedTensorType>(loss.getType());
    grads[loss] = builder.create<sl::ConstantOp>(
        forward.getLoc(), lossType,
        SplatElementsAttr::get(lossType, builder.getFloatAttr(lossType.getElementType(), 1.0)));
    for (Call &call : llvm::reverse(calls)) {
      std::string name = (call.layer.getCallee() + "_backward").str();
      auto backward = module.lookupSymbol<func::FuncOp>(name);
      if (!backward)
        return call.layer.emitError("sl-assemble-train-step: no @")
               << name << "; run sl-autodiff first";
      SmallVector<Value> operands = call.operands;
      for (Value result : call.layer.getResults()) {
        Value mapped = mapping.lookup(result);
        Value g = grads.lookup(mapped);
        operands.push_back(g ? g : zeros(mapped.getType()));
      }
      SmallVector<Value> results = inlineCall(builder, backward, operands);
      // Results: gradients of the float operands, in operand order.
      auto result = results.begin();
      for (Value operand : call.operands)
        if (llvm::isa<FloatType>(llvm::cast<RankedTensorType>(operand.getType()).getElementType()))
          accumulate(operand, *result++);
    }

    SmallVector<Value> returned{loss};
    for (sl::ParamOp param : params) {
      Value value = mapping.lookup(param.getResult());
      Value g = grads.lookup(value);
      returned.push_back(g ? g : zeros(value.getType()));
    }
    builder.create<func::ReturnOp>(forward.getLoc(), returned);
    return success();
  }
};

} // namespace
