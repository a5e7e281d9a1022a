//===- StepAttributes.h - what the scheduling passes write on an explicit step ------------------===//
//
// The scheduling passes communicate through discardable attributes of the `sl` dialect: the plan
// (sl.plan, a #sl.plan on a module, from sl-plan, and on a training or inference step function,
// from sl-schedule-subbatches or sl-explicit-forward; a #sl.generation_plan on the @generate step,
// from sl-schedule-generation), the generation settings (sl.generation, a #sl.generation_plan on
// a module, from sl-split-generation), each kernel's stream (sl.stream, a #sl.stream enum), its
// buffers' offsets (sl.offsets), its events (sl.wait, sl.record) and the step's totals
// (sl.device_arena_bytes, sl.host_pool_bytes, sl.num_events), and the sizes a copy of a model is
// compiled at (sl.bind_shapes, a #sl.bind_shapes on a module, from sl-plan and
// sl-split-generation, for sl-bind-shapes). The plans' fields are the typed attributes'
// parameters (ir/sl/SLAttrs.td), read through their getters; their verifiers check each field's
// range. The attributes' names are spelled here once, and SLDialect::verifyOperationAttribute
// checks every one of them wherever it appears (an attribute of the wrong type or on the wrong
// op, an offset count that is not the result count), so a pass that writes a wrong one fails at
// the verifier, not in the emitter.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_STEPATTRIBUTES_H
#define SL_DIALECT_STEPATTRIBUTES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

namespace sl {

/// Attribute names.
inline constexpr llvm::StringLiteral kStreamAttr = "sl.stream";     // op: #sl.stream<...>
inline constexpr llvm::StringLiteral kOffsetsAttr = "sl.offsets";   // op: one offset per result
inline constexpr llvm::StringLiteral kOffsetAttr = "sl.offset";     // argument
inline constexpr llvm::StringLiteral kWaitAttr = "sl.wait";         // op: events waited for
inline constexpr llvm::StringLiteral kRecordAttr = "sl.record";     // op: event recorded
inline constexpr llvm::StringLiteral kPlanAttr = "sl.plan";         // module, step: #sl.plan
                                                                    // (@generate: #sl.generation_plan)
inline constexpr llvm::StringLiteral kGenerationAttr = "sl.generation"; // module: #sl.generation_plan
inline constexpr llvm::StringLiteral kProgramAttr = "sl.program";   // argument, result: its program
inline constexpr llvm::StringLiteral kKvCacheAttr = "sl.kv_cache";  // argument: a KV cache (state)
inline constexpr llvm::StringLiteral kDeviceArenaBytesAttr = "sl.device_arena_bytes"; // step
inline constexpr llvm::StringLiteral kHostPoolBytesAttr = "sl.host_pool_bytes";       // step
inline constexpr llvm::StringLiteral kNumEventsAttr = "sl.num_events";                // step
inline constexpr llvm::StringLiteral kBindShapesAttr = "sl.bind_shapes"; // module: #sl.bind_shapes

/// The explicit steps' function names: what sl-schedule-subbatches and sl-schedule-generation
/// write and the emitter turns into a schedule's kind ("train", "infer", "generate").
inline constexpr llvm::StringLiteral kTrainStepName = "train_step";
inline constexpr llvm::StringLiteral kInferStepName = "infer_step";
inline constexpr llvm::StringLiteral kGenerateStepName = "generate";

/// Whether `func` is an explicit step (sl-schedule-subbatches, sl-explicit-forward or
/// sl-schedule-generation wrote it): a function with an sl.plan.
bool isExplicitStep(mlir::Operation *func);

/// The check behind SLDialect::verifyOperationAttribute.
mlir::LogicalResult verifyStepAttribute(mlir::Operation *op, mlir::NamedAttribute attribute);

} // namespace sl

#endif // SL_DIALECT_STEPATTRIBUTES_H
