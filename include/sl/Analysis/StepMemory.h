//===- StepMemory.h - where an explicit step's values go, and how much memory that takes -------===//
//
// The memory layout of an explicit training step (after sl-schedule-subbatches): device values
// placed by best fit over the free ranges of the arena in issue order and freed after their last
// reader, host values in a pool that grows slot by slot and is never reused. sl-allocate writes
// this layout; sl-plan runs the same layout over the steps it schedules for candidate
// configurations, with every value's bytes a linear function of the sub-batch size, to predict
// the arena and the pool (see StepMemoryModel).
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_ANALYSIS_STEPMEMORY_H
#define SL_ANALYSIS_STEPMEMORY_H

#include "sl/Analysis/CostModel.h"

#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>

namespace sl {

/// Device buffers start on 256-byte boundaries (what cuBLAS and vector loads like); host slots on
/// 64-byte ones (a cache line).
inline constexpr uint64_t kDeviceAlignment = 256;
inline constexpr uint64_t kHostAlignment = 64;

inline uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// The name of the host term of the step's inputs (one slot of the whole batch per input).
inline constexpr const char *kInputsTerm = "inputs (the whole batch)";

struct StepLayout {
  /// Offset of every value in its memory space (views: their source's plus their offset).
  llvm::DenseMap<mlir::Value, uint64_t> offsets;
  uint64_t deviceArenaBytes = 0;
  uint64_t hostPoolBytes = 0;
  /// The op whose results last raised the arena's high-water mark (its index in the block).
  unsigned peakOp = 0;
  /// With `captureAt`: the device buffers live just after that op's results were placed.
  llvm::SmallVector<mlir::Value> liveAtCapture;
};

/// Lays out the step `body` (the block of an explicit step) with `bytes` giving the size of every
/// buffer (a value that is no view). A dying accumulator is overwritten in place; a value nobody
/// reads dies where it is written.
StepLayout layoutStep(mlir::Block &body, llvm::function_ref<uint64_t(mlir::Value)> bytes,
                      std::optional<unsigned> captureAt = std::nullopt);

/// The memory of one explicit step as a function of the sub-batch size: built from the step
/// scheduled on modules bound at two sub-batch sizes b1 < b2 (every value's bytes fitted exactly
/// as a line through the two), or at one size b0 (the bytes as they are, whatever b is asked).
class StepFootprint {
public:
  /// `atB1` and `atB2` are the @train_step functions of the same step scheduled on the two
  /// modules. Fails (returns nullopt) when the two steps differ in shape.
  static std::optional<StepFootprint> fit(mlir::Block &atB1, int64_t b1, mlir::Block &atB2,
                                          int64_t b2);
  static StepFootprint bound(mlir::Block &atB0);

  /// Arena and pool at sub-batch size b; with `terms`, what the arena holds at its peak and what
  /// the pool holds, by kind.
  StepMemory at(int64_t b, bool terms) const;

private:
  mlir::Block *body = nullptr;
  llvm::DenseMap<mlir::Value, Linear> bytes;
};

} // namespace sl

#endif // SL_ANALYSIS_STEPMEMORY_H
