//===- StepAttributes.h - what the scheduling passes write on an explicit step ------------------===//
//
// The scheduling passes communicate through discardable attributes of the `sl` dialect: the plan
// (sl.plan on a module, from sl-plan, and on the step function, from sl-schedule-subbatches or
// sl-schedule-generation), the generation settings (sl.generation on a module, from
// sl-split-generation), each kernel's stream (sl.stream, a #sl.stream enum), its buffers' offsets
// (sl.offsets), its events (sl.wait, sl.record) and the step's totals (sl.device_arena_bytes,
// sl.host_pool_bytes, sl.num_events), and the sizes a copy of a model is compiled at (sl.bind_shapes
// on a module, from sl-plan and sl-split-generation, for sl-bind-shapes). Their names and the
// plan's keys are spelled here once, and
// SLDialect::verifyOperationAttribute checks every one of them wherever it appears (a key the
// plan does not have, a value of the wrong type or sign, an offset count that is not the result
// count), so a pass that writes a wrong one fails at the verifier, not in the emitter.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_STEPATTRIBUTES_H
#define SL_DIALECT_STEPATTRIBUTES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace sl {

/// Attribute names.
inline constexpr llvm::StringLiteral kStreamAttr = "sl.stream";     // op: #sl.stream<...>
inline constexpr llvm::StringLiteral kOffsetsAttr = "sl.offsets";   // op: one offset per result
inline constexpr llvm::StringLiteral kOffsetAttr = "sl.offset";     // argument
inline constexpr llvm::StringLiteral kWaitAttr = "sl.wait";         // op: events waited for
inline constexpr llvm::StringLiteral kRecordAttr = "sl.record";     // op: event recorded
inline constexpr llvm::StringLiteral kPlanAttr = "sl.plan";         // module, step function
inline constexpr llvm::StringLiteral kGenerationAttr = "sl.generation"; // module
inline constexpr llvm::StringLiteral kProgramAttr = "sl.program";   // argument, result: its program
inline constexpr llvm::StringLiteral kKvCacheAttr = "sl.kv_cache";  // argument: a KV cache (state)
inline constexpr llvm::StringLiteral kDeviceArenaBytesAttr = "sl.device_arena_bytes"; // step
inline constexpr llvm::StringLiteral kHostPoolBytesAttr = "sl.host_pool_bytes";       // step
inline constexpr llvm::StringLiteral kNumEventsAttr = "sl.num_events";                // step
inline constexpr llvm::StringLiteral kBindShapesAttr = "sl.bind_shapes"; // module: sizes to bind

/// The explicit steps' function names: what sl-schedule-subbatches and sl-schedule-generation
/// write and the emitter turns into a schedule's kind ("train", "infer", "generate").
inline constexpr llvm::StringLiteral kTrainStepName = "train_step";
inline constexpr llvm::StringLiteral kInferStepName = "infer_step";
inline constexpr llvm::StringLiteral kGenerateStepName = "generate";

/// Keys of the plan and generation dictionaries (sl.plan, sl.generation).
namespace plan {
inline constexpr llvm::StringLiteral kMode = "mode"; // speedloader, canonical or generate
inline constexpr llvm::StringLiteral kSubBatchSize = "sub_batch_size";
inline constexpr llvm::StringLiteral kNumSubBatches = "num_sub_batches";
inline constexpr llvm::StringLiteral kLiveBlocks = "live_blocks";
inline constexpr llvm::StringLiteral kWorld = "world"; // absent: one rank
inline constexpr llvm::StringLiteral kParameterBytes = "parameter_bytes";
inline constexpr llvm::StringLiteral kBoundaryActivationBytes = "boundary_activation_bytes";
inline constexpr llvm::StringLiteral kPredictedDeviceBytes = "predicted_device_bytes";
inline constexpr llvm::StringLiteral kPredictedHostBytes = "predicted_host_bytes";
inline constexpr llvm::StringLiteral kPredictedHostPoolBytes = "predicted_host_pool_bytes";
inline constexpr llvm::StringLiteral kPredictedStepSeconds = "predicted_step_seconds";
// Generation.
inline constexpr llvm::StringLiteral kBatch = "batch";
inline constexpr llvm::StringLiteral kMaxPromptLen = "max_prompt_len";
inline constexpr llvm::StringLiteral kMaxNewTokens = "max_new_tokens";
inline constexpr llvm::StringLiteral kCacheLen = "cache_len";
inline constexpr llvm::StringLiteral kVocab = "vocab";
inline constexpr llvm::StringLiteral kKvCacheBytes = "kv_cache_bytes";
inline constexpr llvm::StringLiteral kWeightsOnDevice = "weights_on_device";
inline constexpr llvm::StringLiteral kKvCacheOnDevice = "kv_cache_on_device";
} // namespace plan

/// Keys of sl.bind_shapes: the sizes sl-bind-shapes binds a module's batch and sequence
/// dimensions to where its own options leave them 0 (each at least 1, both optional).
namespace shapes {
inline constexpr llvm::StringLiteral kBatch = "batch";
inline constexpr llvm::StringLiteral kSeq = "seq";
} // namespace shapes

/// Typed reads of a plan or generation dictionary that the verifier has checked: a key that is
/// absent reads as `otherwise`.
class PlanView {
public:
  explicit PlanView(mlir::DictionaryAttr dict) : dict(dict) {}
  /// The plan of `op` (kPlanAttr), or an empty view.
  static PlanView of(mlir::Operation *op, llvm::StringRef name = kPlanAttr);

  explicit operator bool() const { return bool(dict); }
  int64_t integer(llvm::StringRef key, int64_t otherwise = 0) const;
  bool flag(llvm::StringRef key) const;
  std::optional<double> real(llvm::StringRef key) const;
  std::optional<llvm::StringRef> text(llvm::StringRef key) const;

private:
  mlir::DictionaryAttr dict;
};

/// The check behind SLDialect::verifyOperationAttribute.
mlir::LogicalResult verifyStepAttribute(mlir::Operation *op, mlir::NamedAttribute attribute);

} // namespace sl

#endif // SL_DIALECT_STEPATTRIBUTES_H
