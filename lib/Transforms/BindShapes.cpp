//===- BindShapes.cpp - sl-bind-shapes: make a model's shapes static ----------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/ADT/StringSwitch.h"

namespace sl {
#define GEN_PASS_DEF_BINDSHAPESPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

enum class DimRole { Batch, Seq, Unknown };

DimRole roleOfName(llvm::StringRef name) {
  return llvm::StringSwitch<DimRole>(name)
      .Cases("batch", "batch_size", "N", DimRole::Batch)
      .Cases("seq", "sequence", "seq_len", "sequence_length", "S", DimRole::Seq)
      .Default(DimRole::Unknown);
}

struct BindShapesPass : public sl::impl::BindShapesPassBase<BindShapesPass> {
  using BindShapesPassBase::BindShapesPassBase;

  void runOnOperation() override {
    if (batch < 0 || seq < 0) {
      getOperation().emitError("sl-bind-shapes: batch and seq must be positive, got batch=")
          << int64_t(batch) << " seq=" << int64_t(seq);
      return signalPassFailure();
    }
    // The kernels of a sub-batched step are shaped for one sub-batch, which sl-plan chose.
    if (batch == 0)
      if (auto plan = getOperation()->getAttrOfType<DictionaryAttr>("sl.plan"))
        if (auto size = plan.getAs<IntegerAttr>("sub_batch_size"))
          batch = size.getInt();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(bindFunction(func)))
        return signalPassFailure();
  }

  FailureOr<int64_t> sizeFor(func::FuncOp func, unsigned argIndex, unsigned axis) {
    llvm::StringRef dimName;
    if (auto names = func.getArgAttrOfType<ArrayAttr>(argIndex, "sl.dims"))
      if (axis < names.size())
        if (auto str = llvm::dyn_cast<StringAttr>(names[axis]))
          dimName = str.getValue();
    DimRole role = roleOfName(dimName);
    if (role == DimRole::Unknown && dimName.empty())
      role = axis == 0 ? DimRole::Batch : axis == 1 ? DimRole::Seq : DimRole::Unknown;

    std::string input = "#" + std::to_string(argIndex);
    if (auto name = func.getArgAttrOfType<StringAttr>(argIndex, "sl.name"))
      input = "'" + name.getValue().str() + "'";
    std::string dim = "dimension " + std::to_string(axis);
    if (!dimName.empty())
      dim += " ('" + dimName.str() + "')";

    if (role == DimRole::Unknown)
      return func.emitError("input ") << input << " " << dim
                                      << " is dynamic and is neither a batch nor a sequence "
                                         "dimension; export the model with it static";
    int64_t size = role == DimRole::Batch ? batch : seq;
    if (size == 0)
      return func.emitError("input ")
             << input << " " << dim << " is dynamic: give its size with "
             << (role == DimRole::Batch ? "batch=N" : "seq=N");
    return size;
  }

  LogicalResult bindFunction(func::FuncOp func) {
    Block &entry = func.getBody().front();
    SmallVector<Type> argTypes;
    for (BlockArgument arg : entry.getArguments()) {
      auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
      if (type && !type.hasStaticShape()) {
        SmallVector<int64_t> shape(type.getShape());
        for (auto [axis, dim] : llvm::enumerate(shape)) {
          if (!ShapedType::isDynamic(dim))
            continue;
          FailureOr<int64_t> size = sizeFor(func, arg.getArgNumber(), axis);
          if (failed(size))
            return failure();
          dim = *size;
        }
        arg.setType(RankedTensorType::get(shape, type.getElementType(), type.getEncoding()));
      }
      argTypes.push_back(arg.getType());
    }

    // Types flow forward from the bound inputs, and folding turns shape arithmetic into constants,
    // which makes more types static (a Reshape whose target shape just became a constant): repeat
    // both until nothing changes.
    FrozenRewritePatternSet patterns = canonicalizationPatterns(func.getContext());
    // A round settles at least one more layer (a layer's Reshape targets come from the Shape of
    // its input, static only once the previous layer's types are), so deep models need as many
    // rounds as they have layers. Every round that does not stop changes a type or folds an op,
    // so the number of ops bounds the rounds that can make progress.
    int64_t ops = 0;
    func.walk([&](Operation *) { ++ops; });
    const int64_t maxRounds = std::max<int64_t>(kMinRounds, ops);
    for (int64_t round = 0;; ++round) {
      FailureOr<bool> refined = refineTypes(func);
      if (failed(refined))
        return failure();
      bool folded = false;
      if (failed(applyPatternsAndFoldGreedily(func, patterns, GreedyRewriteConfig(), &folded)))
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
                                   << int64_t(batch) << " seq=" << int64_t(seq)
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
    for (Dialect *dialect : context->getLoadedDialects())
      dialect->getCanonicalizationPatterns(patterns);
    for (RegisteredOperationName op : context->getRegisteredOperations())
      op.getCanonicalizationPatterns(patterns, context);
    return FrozenRewritePatternSet(std::move(patterns));
  }

  static constexpr int64_t kMinRounds = 32;
};

} // namespace
