//===- StepMemory.h - where an explicit step's values go, and how much memory that takes -------===//
//
// The memory layout of an explicit training step (after sl-schedule-subbatches): device values
// in the arena and host values in the pool, each placed by best fit over the free ranges of its
// space in issue order and freed after its last reader (inputs, parameters and constants keep
// their host slots all step). sl-allocate writes this layout; sl-plan runs the same layout over
// the steps it schedules for candidate configurations, with every value's bytes a linear
// function of the sub-batch size, to predict the arena and the pool (see StepFootprint).
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
#include <optional>
#include <vector>

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

/// What layoutStep records besides the layout.
struct LayoutCapture {
  /// The device buffers live just after this op's results were placed (StepLayout::liveAtCapture).
  std::optional<unsigned> deviceAt;
  /// Host bookkeeping: the live host bytes after every op (StepLayout::hostLive) and, at `hostAt`,
  /// the host values live then (StepLayout::liveHostAtCapture).
  bool host = false;
  std::optional<unsigned> hostAt;
  /// With `host`: the values whose bytes StepLayout::hostLive counts apart as `held`.
  llvm::function_ref<bool(mlir::Value)> held = nullptr;
};

struct StepLayout {
  /// Offset of every value in its memory space (views: their source's plus their offset).
  llvm::DenseMap<mlir::Value, uint64_t> offsets;
  uint64_t deviceArenaBytes = 0;
  uint64_t hostPoolBytes = 0;
  /// The op whose results last raised the arena's high-water mark (its index in the block).
  unsigned peakOp = 0;
  /// With `captureAt`: the device buffers live just after that op's results were placed.
  llvm::SmallVector<mlir::Value> liveAtCapture;
  /// The op whose results last raised the pool's high-water mark (0 when only the inputs did).
  unsigned hostPeakOp = 0;
  /// With LayoutCapture::host: after each op's results are placed (before the buffers that die
  /// there are released), the bytes of the live host slots but the inputs, each rounded up to the
  /// host alignment, and the part of them in `held` values.
  std::vector<std::pair<uint64_t, uint64_t>> hostLive;
  /// With LayoutCapture::hostAt: the host values but the inputs live just after that op.
  llvm::SmallVector<mlir::Value> liveHostAtCapture;
};

/// Lays out the step `body` (the block of an explicit step) with `bytes` giving the size of every
/// buffer (a value that is no view). A dying accumulator is overwritten in place; a value nobody
/// reads dies where it is written.
StepLayout layoutStep(mlir::Block &body, llvm::function_ref<uint64_t(mlir::Value)> bytes,
                      const LayoutCapture &capture = {});

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
  /// With `growthOver` (the number of sub-batches the step has), also the live host bytes after
  /// every op as lines in the number of sub-batches (StepMemory::hostLiveLines).
  StepMemory at(int64_t b, bool terms, int64_t growthOver = 0) const;

private:
  mlir::Block *body = nullptr;
  llvm::DenseMap<mlir::Value, Linear> bytes;
};

} // namespace sl

#endif // SL_ANALYSIS_STEPMEMORY_H
