//===- StepAttributes.cpp - the scheduling passes' attributes, checked ---------------------------===//

#include "sl/Dialect/StepAttributes.h"

#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace sl {
namespace {

/// Checks one field of a plan: at least `least` where it is set.
struct FieldCheck {
  llvm::function_ref<InFlightDiagnostic()> emitError;
  llvm::StringRef attr;
  bool failed = false;

  void atLeast(llvm::StringRef field, std::optional<int64_t> value, int64_t least) {
    if (!failed && value && *value < least) {
      emitError() << attr << "'s " << field << " must be at least " << least << ", got " << *value;
      failed = true;
    }
  }
  LogicalResult result() const { return failure(failed); }
};

/// A plan's fields, checked again where it sits: the parser checks those it reads, but a pass
/// builds its plans with get(), which checks nothing in a release build.
LogicalResult verifyFields(Operation *op, NamedAttribute attribute) {
  auto emitError = [&] { return op->emitOpError() << attribute.getName().getValue() << ": "; };
  Attribute value = attribute.getValue();
  if (auto plan = llvm::dyn_cast<PlanAttr>(value))
    return PlanAttr::verify(emitError, plan.getBoundaryActivationBytes(), plan.getLiveBlocks(),
                            plan.getMode(), plan.getNumSubBatches(), plan.getParameterBytes(),
                            plan.getPredictedDeviceBytes(), plan.getPredictedHostBytes(),
                            plan.getPredictedHostPoolBytes(), plan.getPredictedStepSeconds(),
                            plan.getSubBatchSize(), plan.getWorld());
  if (auto plan = llvm::dyn_cast<GenerationPlanAttr>(value))
    return GenerationPlanAttr::verify(
        emitError, plan.getBatch(), plan.getCacheLen(), plan.getKvCacheBytes(),
        plan.getKvCacheOnDevice(), plan.getMaxNewTokens(), plan.getMaxPromptLen(),
        plan.getNumSubBatches(), plan.getParameterBytes(), plan.getPredictedDeviceBytes(),
        plan.getPredictedHostBytes(), plan.getSubBatchSize(), plan.getVocab(),
        plan.getWeightsOnDevice());
  auto shapes = llvm::cast<BindShapesAttr>(value);
  return BindShapesAttr::verify(emitError, shapes.getBatch(), shapes.getSeq());
}

/// sl.plan, sl.generation and sl.bind_shapes: the attribute of the right type on the right op.
LogicalResult verifyPlacement(Operation *op, NamedAttribute attribute) {
  llvm::StringRef name = attribute.getName().getValue();
  Attribute value = attribute.getValue();
  bool module = llvm::isa<ModuleOp>(op);
  if (name == kPlanAttr) {
    auto function = llvm::dyn_cast<FunctionOpInterface>(op);
    if (!module && !function)
      return op->emitOpError() << kPlanAttr << " belongs on a builtin.module or a step function";
    // The @generate step's plan is a generation plan; every other one is a #sl.plan.
    if (function && function.getName() == kGenerateStepName) {
      if (!llvm::isa<GenerationPlanAttr>(value))
        return op->emitOpError() << kPlanAttr << " of @" << kGenerateStepName
                                 << " must be a #sl.generation_plan, got " << value;
      return success();
    }
    if (!llvm::isa<PlanAttr>(value))
      return op->emitOpError() << kPlanAttr << " must be a #sl.plan, got " << value;
    return success();
  }
  if (!module)
    return op->emitOpError() << name << " belongs on a builtin.module";
  if (name == kGenerationAttr && !llvm::isa<GenerationPlanAttr>(value))
    return op->emitOpError() << kGenerationAttr << " must be a #sl.generation_plan, got " << value;
  if (name == kBindShapesAttr && !llvm::isa<BindShapesAttr>(value))
    return op->emitOpError() << kBindShapesAttr << " must be a #sl.bind_shapes, got " << value;
  return success();
}

LogicalResult verifyNonNegative(Operation *op, NamedAttribute attribute) {
  auto integer = llvm::dyn_cast<IntegerAttr>(attribute.getValue());
  if (!integer || integer.getInt() < 0)
    return op->emitOpError() << attribute.getName().getValue() << " must be a non-negative integer, got "
                             << attribute.getValue();
  return success();
}

LogicalResult verifyIndexArray(Operation *op, NamedAttribute attribute,
                               std::optional<size_t> count) {
  auto array = llvm::dyn_cast<DenseI64ArrayAttr>(attribute.getValue());
  if (!array)
    return op->emitOpError() << attribute.getName().getValue() << " must be an array<i64>, got "
                             << attribute.getValue();
  if (count && array.size() != static_cast<int64_t>(*count))
    return op->emitOpError() << attribute.getName().getValue() << " holds " << array.size()
                             << " offsets for " << *count << " results";
  for (int64_t value : array.asArrayRef())
    if (value < 0)
      return op->emitOpError() << attribute.getName().getValue() << " holds " << value
                               << "; offsets and events are at least 0";
  return success();
}

} // namespace

LogicalResult verifyStepAttribute(Operation *op, NamedAttribute attribute) {
  llvm::StringRef name = attribute.getName().getValue();
  if (name == kPlanAttr || name == kGenerationAttr || name == kBindShapesAttr)
    return failure(failed(verifyPlacement(op, attribute)) || failed(verifyFields(op, attribute)));
  if (name == kStreamAttr) {
    if (!llvm::isa<StreamKindAttr>(attribute.getValue()))
      return op->emitOpError() << "sl.stream must be a #sl.stream<compute|h2d|d2h|host|"
                                  "collective>, got "
                               << attribute.getValue();
    return success();
  }
  if (name == kOffsetsAttr)
    return verifyIndexArray(op, attribute, op->getNumResults());
  if (name == kWaitAttr)
    return verifyIndexArray(op, attribute, std::nullopt);
  if (name == kRecordAttr || name == kDeviceArenaBytesAttr || name == kHostPoolBytesAttr ||
      name == kNumEventsAttr)
    return verifyNonNegative(op, attribute);
  return success(); // sl.name, sl.param, ...: described by the ops that carry them
}

LogicalResult PlanAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                               std::optional<int64_t> boundaryActivationBytes,
                               std::optional<int64_t> liveBlocks, std::optional<PlanMode> mode,
                               std::optional<int64_t> numSubBatches,
                               std::optional<int64_t> parameterBytes,
                               std::optional<int64_t> predictedDeviceBytes,
                               std::optional<int64_t> predictedHostBytes,
                               std::optional<int64_t> predictedHostPoolBytes,
                               std::optional<llvm::APFloat> predictedStepSeconds,
                               std::optional<int64_t> subBatchSize, std::optional<int64_t> world) {
  FieldCheck check{emitError, "#sl.plan"};
  check.atLeast("boundary_activation_bytes", boundaryActivationBytes, 0);
  check.atLeast("live_blocks", liveBlocks, 1);
  check.atLeast("num_sub_batches", numSubBatches, 1);
  check.atLeast("parameter_bytes", parameterBytes, 0);
  check.atLeast("predicted_device_bytes", predictedDeviceBytes, 0);
  check.atLeast("predicted_host_bytes", predictedHostBytes, 0);
  check.atLeast("predicted_host_pool_bytes", predictedHostPoolBytes, 0);
  check.atLeast("sub_batch_size", subBatchSize, 1);
  check.atLeast("world", world, 1);
  if (failed(check.result()))
    return failure();
  if (predictedStepSeconds && !(predictedStepSeconds->convertToDouble() >= 0))
    return emitError() << "#sl.plan's predicted_step_seconds must be at least 0, got "
                       << predictedStepSeconds->convertToDouble();
  return success();
}

LogicalResult GenerationPlanAttr::verify(
    llvm::function_ref<InFlightDiagnostic()> emitError, std::optional<int64_t> batch,
    int64_t cacheLen, std::optional<int64_t> kvCacheBytes, std::optional<bool> kvCacheOnDevice,
    int64_t maxNewTokens, int64_t maxPromptLen, std::optional<int64_t> numSubBatches,
    std::optional<int64_t> parameterBytes, std::optional<int64_t> predictedDeviceBytes,
    std::optional<int64_t> predictedHostBytes, int64_t subBatchSize, int64_t vocab,
    std::optional<bool> weightsOnDevice) {
  FieldCheck check{emitError, "#sl.generation_plan"};
  check.atLeast("batch", batch, 1);
  check.atLeast("cache_len", cacheLen, 1);
  check.atLeast("kv_cache_bytes", kvCacheBytes, 0);
  check.atLeast("max_new_tokens", maxNewTokens, 1);
  check.atLeast("max_prompt_len", maxPromptLen, 1);
  check.atLeast("num_sub_batches", numSubBatches, 1);
  check.atLeast("parameter_bytes", parameterBytes, 0);
  check.atLeast("predicted_device_bytes", predictedDeviceBytes, 0);
  check.atLeast("predicted_host_bytes", predictedHostBytes, 0);
  check.atLeast("sub_batch_size", subBatchSize, 1);
  check.atLeast("vocab", vocab, 1);
  return check.result();
}

LogicalResult BindShapesAttr::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                                     std::optional<int64_t> batch, std::optional<int64_t> seq) {
  FieldCheck check{emitError, "#sl.bind_shapes"};
  check.atLeast("batch", batch, 1);
  check.atLeast("seq", seq, 1);
  return check.result();
}

bool isExplicitStep(mlir::Operation *func) { return func->hasAttr(kPlanAttr); }

} // namespace sl

LogicalResult sl::SLDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  return verifyStepAttribute(op, attribute);
}
