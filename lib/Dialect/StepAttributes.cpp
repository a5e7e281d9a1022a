//===- StepAttributes.cpp - the scheduling passes' attributes, checked ---------------------------===//

#include "sl/Dialect/StepAttributes.h"

#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace sl {
namespace {

/// What a key of sl.plan or sl.generation holds.
enum class KeyKind { Positive, NonNegative, Flag, Seconds, Mode, Unknown };

KeyKind kindOfKey(llvm::StringRef key) {
  return llvm::StringSwitch<KeyKind>(key)
      .Case(plan::kMode, KeyKind::Mode)
      .Cases(plan::kSubBatchSize, plan::kNumSubBatches, plan::kLiveBlocks, plan::kWorld,
             KeyKind::Positive)
      .Cases(plan::kBatch, plan::kMaxPromptLen, plan::kMaxNewTokens, plan::kCacheLen, plan::kVocab,
             KeyKind::Positive)
      .Cases(plan::kParameterBytes, plan::kBoundaryActivationBytes, plan::kPredictedDeviceBytes,
             plan::kPredictedHostBytes, plan::kPredictedHostPoolBytes, plan::kKvCacheBytes,
             KeyKind::NonNegative)
      .Cases(plan::kWeightsOnDevice, plan::kKvCacheOnDevice, KeyKind::Flag)
      .Case(plan::kPredictedStepSeconds, KeyKind::Seconds)
      .Default(KeyKind::Unknown);
}

LogicalResult verifyPlanDictionary(Operation *op, NamedAttribute attribute) {
  auto dict = llvm::dyn_cast<DictionaryAttr>(attribute.getValue());
  if (!dict)
    return op->emitOpError() << attribute.getName().getValue() << " must be a dictionary, got "
                             << attribute.getValue();
  for (NamedAttribute entry : dict) {
    llvm::StringRef key = entry.getName().getValue();
    Attribute value = entry.getValue();
    auto fail = [&](llvm::StringRef what) {
      return op->emitOpError() << attribute.getName().getValue() << "'s " << key << " must be " << what
                               << ", got " << value;
    };
    switch (kindOfKey(key)) {
    case KeyKind::Positive:
    case KeyKind::NonNegative: {
      auto integer = llvm::dyn_cast<IntegerAttr>(value);
      if (!integer || !integer.getType().isSignlessInteger(64))
        return fail("an i64");
      bool positive = kindOfKey(key) == KeyKind::Positive;
      if (integer.getInt() < (positive ? 1 : 0))
        return fail(positive ? "at least 1" : "at least 0");
      break;
    }
    case KeyKind::Flag:
      if (!llvm::isa<BoolAttr>(value))
        return fail("a bool");
      break;
    case KeyKind::Seconds: {
      auto real = llvm::dyn_cast<FloatAttr>(value);
      if (!real || !(real.getValueAsDouble() >= 0))
        return fail("a non-negative float");
      break;
    }
    case KeyKind::Mode: {
      auto mode = llvm::dyn_cast<StringAttr>(value);
      if (!mode || !llvm::is_contained({"speedloader", "canonical", "generate"}, mode.getValue()))
        return fail("\"speedloader\", \"canonical\" or \"generate\"");
      break;
    }
    case KeyKind::Unknown:
      return op->emitOpError() << attribute.getName().getValue() << " has no key '" << key
                               << "' (StepAttributes.h lists the keys)";
    }
  }
  return success();
}

/// sl.bind_shapes: on a module, a dictionary of sizes (StepAttributes.h, namespace shapes).
LogicalResult verifyBindShapes(Operation *op, NamedAttribute attribute) {
  if (!llvm::isa<ModuleOp>(op))
    return op->emitOpError() << kBindShapesAttr << " belongs on a builtin.module";
  auto dict = llvm::dyn_cast<DictionaryAttr>(attribute.getValue());
  if (!dict)
    return op->emitOpError() << kBindShapesAttr << " must be a dictionary, got "
                             << attribute.getValue();
  for (NamedAttribute entry : dict) {
    llvm::StringRef key = entry.getName().getValue();
    if (key != shapes::kBatch && key != shapes::kSeq)
      return op->emitOpError() << kBindShapesAttr << " has no key '" << key << "' (it has "
                               << shapes::kBatch << " and " << shapes::kSeq << ")";
    auto integer = llvm::dyn_cast<IntegerAttr>(entry.getValue());
    if (!integer || !integer.getType().isSignlessInteger(64) || integer.getInt() < 1)
      return op->emitOpError() << kBindShapesAttr << "'s " << key
                               << " must be an i64 of at least 1, got " << entry.getValue();
  }
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

PlanView PlanView::of(Operation *op, llvm::StringRef name) {
  return PlanView(op ? op->getAttrOfType<DictionaryAttr>(name) : DictionaryAttr());
}

int64_t PlanView::integer(llvm::StringRef key, int64_t otherwise) const {
  auto attr = dict ? dict.getAs<IntegerAttr>(key) : IntegerAttr();
  return attr ? attr.getInt() : otherwise;
}

bool PlanView::flag(llvm::StringRef key) const {
  auto attr = dict ? dict.getAs<BoolAttr>(key) : BoolAttr();
  return attr && attr.getValue();
}

std::optional<double> PlanView::real(llvm::StringRef key) const {
  if (auto attr = dict ? dict.getAs<FloatAttr>(key) : FloatAttr())
    return attr.getValueAsDouble();
  return std::nullopt;
}

std::optional<llvm::StringRef> PlanView::text(llvm::StringRef key) const {
  if (auto attr = dict ? dict.getAs<StringAttr>(key) : StringAttr())
    return attr.getValue();
  return std::nullopt;
}

LogicalResult verifyStepAttribute(Operation *op, NamedAttribute attribute) {
  llvm::StringRef name = attribute.getName().getValue();
  if (name == kPlanAttr || name == kGenerationAttr)
    return verifyPlanDictionary(op, attribute);
  if (name == kBindShapesAttr)
    return verifyBindShapes(op, attribute);
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

} // namespace sl

LogicalResult sl::SLDialect::verifyOperationAttribute(Operation *op, NamedAttribute attribute) {
  return verifyStepAttribute(op, attribute);
}
