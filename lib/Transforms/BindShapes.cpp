//===- BindShapes.cpp - sl-bind-shapes: make a model's shapes static ----------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"

namespace sl {
#define GEN_PASS_DEF_BINDSHAPESPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

enum class DimRole { Batch, Seq, Past, KeyLength, Unknown };

/// Names exporters commonly give, for models that do not say by their inputs which is which.
DimRole roleOfName(llvm::StringRef name) {
  return llvm::StringSwitch<DimRole>(name)
      .Cases("batch", "batch_size", "N", DimRole::Batch)
      .Cases("seq", "sequence", "seq_len", "sequence_length", "S", DimRole::Seq)
      .Cases("past_sequence_length", "past_seq_len", "past_length", DimRole::Past)
      .Default(DimRole::Unknown);
}

llvm::StringRef dimName(func::FuncOp func, unsigned argIndex, unsigned axis) {
  if (auto names = func.getArgAttrOfType<ArrayAttr>(argIndex, "sl.dims"))
    if (axis < names.size())
      if (auto str = llvm::dyn_cast<StringAttr>(names[axis]))
        return str.getValue();
  return {};
}

llvm::StringRef argName(func::FuncOp func, unsigned argIndex) {
  if (auto name = func.getArgAttrOfType<StringAttr>(argIndex, "sl.name"))
    return name.getValue();
  return {};
}

bool isPastInput(llvm::StringRef name) {
  return name.starts_with("past_key_values") || name.starts_with("past.");
}

/// The roles of a function's dimension names, from how its inputs use them: `input_ids` (or,
/// without one, the first input) is [batch, seq]; a past key or value's dynamic dimension that is
/// not the batch is the past length. So an export's own names (`b`/`s`, torch's
/// `input_ids_dynamic_axes_1`, Optimum's `past_sequence_length`) bind whatever they are.
llvm::StringMap<DimRole> rolesFromUse(func::FuncOp func) {
  llvm::StringMap<DimRole> roles;
  if (func.getNumArguments() == 0)
    return roles;
  unsigned ids = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (argName(func, i) == "input_ids")
      ids = i;
  auto idsType = llvm::dyn_cast<RankedTensorType>(func.getArgument(ids).getType());
  if (!idsType)
    return roles;
  llvm::StringRef batchName = dimName(func, ids, 0);
  if (idsType.getRank() >= 1 && !batchName.empty())
    roles[batchName] = DimRole::Batch;
  if (idsType.getRank() >= 2 && !dimName(func, ids, 1).empty())
    roles.try_emplace(dimName(func, ids, 1), DimRole::Seq);
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto type = llvm::dyn_cast<RankedTensorType>(func.getArgument(i).getType());
    if (!type || !isPastInput(argName(func, i)))
      continue;
    for (int64_t axis = 0; axis < type.getRank(); ++axis) {
      llvm::StringRef name = dimName(func, i, axis);
      if (ShapedType::isDynamic(type.getDimSize(axis)) && !name.empty() && name != batchName)
        roles.try_emplace(name, DimRole::Past);
    }
  }
  return roles;
}

/// An op's result types re-inferred from its operands' types (and constant operands) as they are
/// now. Inference that fails is left alone here (no location, so no diagnostic): the pass's
/// refineTypes reports it.
struct RefineTypes : RewritePattern {
  explicit RefineTypes(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    auto inferable = llvm::dyn_cast<InferTypeOpInterface>(op);
    if (!inferable)
      return failure();
    SmallVector<Type> types;
    if (failed(inferable.inferReturnTypes(op->getContext(), std::nullopt, op->getOperands(),
                                          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                          op->getRegions(), types)) ||
        TypeRange(types) == op->getResultTypes())
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      for (auto [result, type] : llvm::zip(op->getResults(), types))
        result.setType(type);
    });
    return success();
  }
};

struct BindShapesPass : public sl::impl::BindShapesPassBase<BindShapesPass> {
  using BindShapesPassBase::BindShapesPassBase;

  /// The sizes one run binds: the options, else the module's sl.bind_shapes, else (the batch)
  /// sl.plan's sub-batch size. Local to the run: a pipeline that sl-plan or sl-split-generation
  /// runs on copies at several sizes runs this pass once per copy.
  struct Sizes {
    int64_t batch = 0, seq = 0, past = 0;
  };

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (batch < 0 || seq < 0 || past < 0) {
      module.emitError("sl-bind-shapes: batch, seq and past cannot be negative, got batch=")
          << int64_t(batch) << " seq=" << int64_t(seq) << " past=" << int64_t(past);
      return signalPassFailure();
    }
    // A copy that sl-plan or sl-split-generation compiles says the sizes it is compiled at; once
    // bound, it no longer needs them.
    auto given = module->getAttrOfType<sl::BindShapesAttr>(sl::kBindShapesAttr);
    module->removeAttr(sl::kBindShapesAttr);
    Sizes sizes{batch > 0 ? int64_t(batch) : given ? given.getBatch().value_or(0) : 0,
                seq > 0 ? int64_t(seq) : given ? given.getSeq().value_or(0) : 0, past};
    // The kernels of a sub-batched step are shaped for one sub-batch, which sl-plan chose.
    if (sizes.batch == 0)
      if (auto plan = module->getAttrOfType<sl::PlanAttr>(sl::kPlanAttr))
        sizes.batch = plan.getSubBatchSize().value_or(0);
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && failed(bindFunction(func, sizes)))
        return signalPassFailure();
  }

  static FailureOr<int64_t> sizeFor(func::FuncOp func, const llvm::StringMap<DimRole> &roles,
                                    unsigned argIndex, unsigned axis, const Sizes &sizes) {
    llvm::StringRef name = dimName(func, argIndex, axis);
    llvm::StringRef input = argName(func, argIndex);
    DimRole role = DimRole::Unknown;
    if (auto it = roles.find(name); !name.empty() && it != roles.end())
      role = it->second;
    else if (!name.empty())
      role = roleOfName(name);
    // The mask covers the past and the new tokens: [batch, past + seq].
    if (role == DimRole::Unknown && input == "attention_mask" && axis == 1)
      role = DimRole::KeyLength;
    if (role == DimRole::Unknown && name.empty())
      role = axis == 0 ? DimRole::Batch : axis == 1 ? DimRole::Seq : DimRole::Unknown;

    std::string what = "#" + std::to_string(argIndex);
    if (!input.empty())
      what = "'" + input.str() + "'";
    std::string dim = "dimension " + std::to_string(axis);
    if (!name.empty())
      dim += " ('" + name.str() + "')";

    switch (role) {
    case DimRole::Unknown:
      return func.emitError("input ")
             << what << " " << dim
             << " is dynamic and is none of input_ids' batch and sequence dimensions or the "
                "past length of past_key_values; export the model with it static";
    case DimRole::Past:
      if (sizes.past == 0)
        return func.emitError("input ")
               << what << " " << dim
               << " is the past length: bind the past (the sl-bind-inputs pass, "
                  "bind-inputs=past_key_values in --sl-infer) or give its length with past=N";
      return sizes.past;
    case DimRole::Batch:
    case DimRole::Seq:
    case DimRole::KeyLength: {
      int64_t size = role == DimRole::Batch ? sizes.batch : sizes.seq;
      if (size == 0)
        return func.emitError("input ")
               << what << " " << dim << " is dynamic: give its size with "
               << (role == DimRole::Batch ? "batch=N" : "seq=N");
      return role == DimRole::KeyLength ? size + sizes.past : size;
    }
    }
    llvm_unreachable("every role is handled");
  }

  static LogicalResult bindFunction(func::FuncOp func, const Sizes &sizes) {
    Block &entry = func.getBody().front();
    SmallVector<Type> argTypes;
    llvm::StringMap<DimRole> roles = rolesFromUse(func);
    for (BlockArgument arg : entry.getArguments()) {
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (type && !type.hasStaticShape()) {
        SmallVector<int64_t> shape(type.getShape());
        for (auto [axis, dim] : llvm::enumerate(shape)) {
          if (!ShapedType::isDynamic(dim))
            continue;
          FailureOr<int64_t> size = sizeFor(func, roles, arg.getArgNumber(), axis, sizes);
          if (failed(size))
            return failure();
          dim = *size;
        }
        arg.setType(RankedTensorType::get(shape, type.getElementType(), type.getEncoding()));
      }
      argTypes.push_back(arg.getType());
    }

    // Types flow forward from the bound inputs, and folding turns shape arithmetic into constants,
    // which makes more types static (a Reshape whose target shape just became a constant). The
    // greedy driver visits the ops in program order and re-infers each op's types when it visits
    // it (RefineTypes), after folding what it reads: a layer's Reshape targets come from the
    // Shape of its input, static once the previous layer's types are, so one pass settles every
    // layer. Repeat both until nothing changes (the last round finds nothing); refineTypes is
    // what reports an op whose types cannot be inferred.
    FrozenRewritePatternSet patterns = canonicalizationPatterns(func.getContext());
    GreedyRewriteConfig config;
    config.useTopDownTraversal = true;
    // Every round that does not stop changes a type or folds an op, so the number of ops bounds
    // the rounds that can make progress.
    int64_t ops = 0;
    func.walk([&](Operation *) { ++ops; });
    const int64_t maxRounds = std::max<int64_t>(kMinRounds, ops);
    for (int64_t round = 0;; ++round) {
      FailureOr<bool> refined = refineTypes(func);
      if (failed(refined))
        return failure();
      bool folded = false;
      if (failed(applyPatternsAndFoldGreedily(func, patterns, config, &folded)))
        return func.emitError("sl-bind-shapes: folding did not converge");
      if (!*refined && !folded)
        break;
      if (round == maxRounds)
        return func.emitError("sl-bind-shapes: shapes did not settle after ") << maxRounds
                                                                               << " rounds";
    }

    SmallVector<Type> resultTypes;
    for (Block &block : func.getBody())
      if (auto ret = llvm::dyn_cast<func::ReturnOp>(block.getTerminator()))
        resultTypes.assign(ret.getOperandTypes().begin(), ret.getOperandTypes().end());
    func.setFunctionType(FunctionType::get(func.getContext(), argTypes, resultTypes));

    WalkResult dynamic = func.walk([&](Operation *op) {
      for (Type type : op->getResultTypes())
        if (auto ranked = llvm::dyn_cast<RankedTensorType>(type); ranked && !ranked.hasStaticShape()) {
          op->emitError("result ") << type << " is still dynamic after binding batch="
                                   << sizes.batch << " seq=" << sizes.seq
                                   << ": its shape depends on values known only at run time";
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    return failure(dynamic.wasInterrupted());
  }

  /// Re-infers every result type in program order; true if any changed.
  static FailureOr<bool> refineTypes(func::FuncOp func) {
    bool changed = false;
    WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
      auto inferable = llvm::dyn_cast<InferTypeOpInterface>(op);
      if (!inferable)
        return WalkResult::advance();
      SmallVector<Type> types;
      if (failed(inferable.inferReturnTypes(op->getContext(), op->getLoc(), op->getOperands(),
                                            op->getRawDictionaryAttrs(),
                                            op->getPropertiesStorage(), op->getRegions(), types)))
        return WalkResult::interrupt();
      for (auto [result, type] : llvm::zip(op->getResults(), types))
        if (result.getType() != type) {
          result.setType(type);
          changed = true;
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    return changed;
  }

  static FrozenRewritePatternSet canonicalizationPatterns(MLIRContext *context) {
    RewritePatternSet patterns(context);
    patterns.add<RefineTypes>(context);
    for (Dialect *dialect : context->getLoadedDialects())
      dialect->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : context->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, context);
    return FrozenRewritePatternSet(std::move(patterns));
  }

  static constexpr int64_t kMinRounds = 32;
};

} // namespace
