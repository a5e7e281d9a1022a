//===- GenerationPlanner.h - sub-batches and placement of a generation step ---------------------===//
//
// The planner behind sl-split-generation: from the batch options, the memory budgets and the
// forced placements, it chooses the sub-batch size b, the number of sub-batches N and whether the
// weights and the KV caches stay on the device. It measures a candidate through a callback that
// compiles the whole generation step for it and lays it out (the pass runs sl-schedule-generation
// and sl-allocate on a copy of the module), so the figures are the arena and pool sl-run gets.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_ANALYSIS_GENERATIONPLANNER_H
#define SL_ANALYSIS_GENERATIONPLANNER_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace sl {

/// Where the weights and the KV caches stay between program runs: on the device (true) or in
/// the host pool, moved every program run (false).
struct GenerationResidence {
  bool weights = false;
  bool cache = false;
};

/// The device arena and the host pool of a generation step, as sl-allocate lays it out.
struct GenerationMemory {
  uint64_t device = 0;
  uint64_t host = 0;
};

/// What the user fixed (0: not fixed), the budgets (none: unlimited) and the placements forced by
/// weights-on-device= / kv-cache-on-device= (none: auto). The budgets' text is for messages.
struct GenerationRequest {
  int64_t batch = 0;
  int64_t subBatchSize = 0;
  int64_t numSubBatches = 0;
  std::optional<double> deviceBudget;
  std::optional<double> hostBudget;
  llvm::StringRef deviceMemory;
  llvm::StringRef hostMemory;
  std::optional<bool> weightsOnDevice;
  std::optional<bool> kvCacheOnDevice;
};

struct GenerationPlan {
  int64_t subBatchSize = 1;
  int64_t numSubBatches = 1;
  GenerationResidence residence;
  /// The step's arena and pool, measured when a budget planned it (else 0).
  GenerationMemory predicted;
};

/// Compiles and lays out the step of `numSubBatches` sub-batches of `subBatchSize` with the
/// weights and caches where `residence` says.
using GenerationMeasureFn = llvm::function_ref<mlir::FailureOr<GenerationMemory>(
    int64_t subBatchSize, int64_t numSubBatches, GenerationResidence residence)>;

/// Chooses the plan. b and N come from batch, sub-batch-size and num-sub-batches (any two, or one
/// with N = 1); without a budget they are the plan, the forced placements kept and the rest
/// streamed. With a device budget: sub-batch-size (or batch / num-sub-batches) when given, else
/// the largest divisor of batch that fits, or without batch the largest power of two up to 256,
/// each tried with the placements in the order both on the device, the weights, the caches,
/// neither (less those the forced placements rule out). With a host budget and neither batch nor
/// num-sub-batches: the most sub-batches whose host pool fits. Inconsistent options and budgets
/// nothing fits are errors through `emitError`, with the bytes needed.
mlir::FailureOr<GenerationPlan>
chooseGeneration(const GenerationRequest &request, GenerationMeasureFn measure,
                 llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

} // namespace sl

#endif // SL_ANALYSIS_GENERATIONPLANNER_H
