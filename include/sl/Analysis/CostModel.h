//===- CostModel.h - memory, traffic and time of a sub-batched training step --------------------===//
//
// The cost model behind sl-plan. It measures a module after sl-partition-layers and sl-autodiff
// (parameter bytes, boundary activation bytes, FLOPs and peak workspace of every stage) as
// functions of the sub-batch size b, predicts device memory, host memory, bytes moved and step
// time of the SpeedLoader and canonical schedules for a configuration, and chooses a
// configuration for memory budgets. docs/user-guide.md ("Plan a training step") gives the
// formulas.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_ANALYSIS_COSTMODEL_H
#define SL_ANALYSIS_COSTMODEL_H

#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sl {

/// A quantity that grows with the sub-batch size b: `fixed + perSequence * b` (bytes or FLOPs).
struct Linear {
  double fixed = 0;
  double perSequence = 0;

  double at(int64_t b) const { return fixed + perSequence * double(b); }
  Linear &operator+=(const Linear &other) {
    fixed += other.fixed;
    perSequence += other.perSequence;
    return *this;
  }
  friend Linear operator+(Linear a, const Linear &b) { return a += b; }
};

/// The peak of the live bytes of a function body over its ops: the largest of several linear
/// functions of b (the live bytes after each op), of which only the ones that can be the largest
/// for some b are kept.
struct Envelope {
  llvm::SmallVector<Linear, 4> lines;

  double at(int64_t b) const;
  void add(Linear line);
};

/// A value passed between stages (or from the model's inputs into one) for one sub-batch.
struct BoundaryValue {
  Linear bytes;
  /// Float values get gradients: a stage's backward returns one for each.
  bool isFloat = false;
  /// The stage that computes it; -1 for a model input (token ids, labels).
  int producer = -1;
  /// The stages that read it, in order; `returned` if the model function returns it (the loss).
  llvm::SmallVector<int, 2> consumers;
  bool returned = false;
};

struct StageCosts {
  std::string callee;
  /// `prologue`, `block` or `epilogue`, from the sl.layer.
  std::string kind;
  int64_t index = 0;
  int64_t parameterBytes = 0;
  /// Indices into ModelCosts::boundary.
  llvm::SmallVector<int, 2> inputs;
  llvm::SmallVector<int, 1> outputs;
  Linear forwardFlops;
  /// The backward function's FLOPs, which include recomputing the stage forward.
  Linear backwardFlops;
  /// The kernels the stage function and its backward function launch for one sub-batch: every
  /// op but the metadata-only ones (parameters, constants, reshapes, shapes).
  int64_t forwardKernels = 0;
  int64_t backwardKernels = 0;
  /// Peak live bytes inside the stage function and inside its backward function for one
  /// sub-batch, not counting their arguments (boundary values and parameters, counted apart).
  Envelope forwardWorkspace;
  Envelope backwardWorkspace;
};

struct ModelCosts {
  std::vector<StageCosts> stages;
  std::vector<BoundaryValue> boundary;
  /// Parameter bytes of the model, a parameter read by several stages counted once: the P of
  /// the traffic formulas.
  int64_t parameterBytes = 0;
  /// fp32 bytes of the same parameters: what AdamW's master weights and each moment take.
  int64_t parameterBytesFp32 = 0;
  /// The sub-batch size the module's shapes are bound at; 0 when the costs were fitted from
  /// two bindings of a module whose shapes are not bound yet.
  int64_t boundSubBatchSize = 0;
  /// Measured as a forward-only (inference) step: the stages have no backward functions, and
  /// the step neither differentiates nor steps an optimizer.
  bool forwardOnly = false;

  int numBlocks() const;
};

/// Measures a module after sl-partition-layers and sl-autodiff, bound at one sub-batch size b0
/// (read from @forward's batch dimensions). Values that depend on the boundary inputs are taken
/// to grow with b (bytes / b0 per sequence), except scalars and values shaped like one of the
/// stage's parameters (or its transpose): parameter gradients. Errors go to `module`.
/// With `forwardOnly`, the stages need no backward functions (an inference step).
mlir::FailureOr<ModelCosts> analyseBoundModule(mlir::ModuleOp module, bool forwardOnly = false);

/// Measures the same program bound at two sub-batch sizes b1 < b2: every figure is fitted
/// exactly from its two values, so fixed-size tensors (rotary tables, masks, parameter
/// gradients) are told apart from per-sequence ones without guessing. The two modules must come
/// from one module by the same passes.
mlir::FailureOr<ModelCosts> fitModules(mlir::ModuleOp atB1, int64_t b1, mlir::ModuleOp atB2,
                                       int64_t b2, bool forwardOnly = false);

struct PlanConfig {
  /// The order the step runs its sub-batches and blocks in (the plan's mode, SLAttrs.td).
  PlanMode mode = PlanMode::speedloader;
  int64_t subBatchSize = 1;
  int64_t numSubBatches = 1;
  int64_t liveBlocks = 1;
  int64_t world = 1;
};

struct Machine {
  /// The profile the rates come from (sl/Analysis/MachineProfiles.h), for reports.
  std::string profile = "cpu";
  /// One direction of the host<->device link; the two directions run at once.
  double linkBytesPerSecond = 25e9;
  double flopsPerSecond = 0.2e12;
  /// The host's AdamW, parameters per second (0: not modelled).
  double hostOptimizerParamsPerSecond = 0;
  /// What every kernel costs beyond its FLOPs at `flopsPerSecond`: its launch and the part of a
  /// small kernel that runs below the rate (0: not modelled). It is what makes N sub-batches of
  /// b / N slower than one of b for the same FLOPs.
  double kernelSeconds = 0;
  /// With several ranks, the bus bandwidth of one rank's all-gather and reduce-scatter, bytes per
  /// second (0: not modelled, the collectives take no time).
  double collectiveBytesPerSecond = 0;
};

/// One named part of a memory prediction.
struct MemoryTerm {
  std::string name;
  double bytes = 0;
};

/// What sl-allocate gives a configuration's step: the device arena and the host pool, from the
/// step scheduled and laid out (sl/Analysis/StepMemory.h); with terms, what each holds by kind.
struct StepMemory {
  double deviceArenaBytes = 0;
  double hostPoolBytes = 0;
  /// Where in the step the arena reaches its size, and what is in it then.
  std::string devicePeak;
  llvm::SmallVector<MemoryTerm> deviceTerms;
  /// Where in the step the pool reaches its size, and what is in it then.
  std::string hostPeak;
  llvm::SmallVector<MemoryTerm> hostTerms;
  /// The inputs' slots (the whole batch; they lie first in the pool).
  double hostInputBytes = 0;
  /// When asked for: the most host bytes but the inputs live at once, and the live host bytes
  /// but the inputs after each op of a step of n sub-batches as lines in n: the offloaded
  /// boundary values live then, counted as growing in proportion to n, and the rest.
  double hostLivePeak = 0;
  Envelope hostLiveLines;
  /// The largest host slot that is freed during the step but no offloaded boundary value (a
  /// parameter gradient): what may find no free range when the step grows.
  double hostLargestSlot = 0;
};

/// How StepMemoryFn lays out a step of N sub-batches: at min(N, 16) sub-batches. The arena nearly
/// stops growing after a few (one sub-batch arrives while one computes and one leaves, and best
/// fit settles): beyond 16 it is bounded with kArenaGrowthSlack; the pool up to 16 is exact,
/// beyond it bounded from the step at 16 (Plan.cpp, poolBound; docs/user-guide.md, "Plan a
/// training step").
inline constexpr int64_t kDeviceLaidOutSubBatches = 16;
/// The arena of a step of more than kDeviceLaidOutSubBatches sub-batches is bounded by the one
/// laid out at kDeviceLaidOutSubBatches times (1 + this). An empirical rule, checked on the test
/// models (python/tests/test_plan_accuracy.py): +0.6% at 37 sub-batches of the GPT-2 test model
/// with the heads permuted around attention; +4.7% at 21 sub-batches of 6 once attention reads
/// [B, S, H, D] (sl-fold-head-transposes), so 3% became 6%.
inline constexpr double kArenaGrowthSlack = 0.06;
inline constexpr int64_t kHostLaidOutSubBatches = 16;

/// What to predict: the arena, the pool, and what each holds by kind (for reports).
struct MemoryQuery {
  bool device = true;
  bool host = true;
  bool terms = false;
};

/// Lays out the step of a configuration.
using StepMemoryFn = std::function<StepMemory(const PlanConfig &, MemoryQuery)>;

struct Prediction {
  /// The device arena: its size, where it peaks and what it holds then.
  std::string devicePeak;
  llvm::SmallVector<MemoryTerm> deviceTerms;
  double deviceBytes = 0;
  /// The host pool: its size, where it peaks and what it holds then; the host in all: the pool
  /// and the optimizer state.
  std::string hostPeak;
  llvm::SmallVector<MemoryTerm> hostTerms;
  double hostPoolBytes = 0;
  double optimizerStateBytes = 0;
  double hostBytes = 0;
  /// Per step and per rank, over the host<->device link: with W ranks, each fetches 1/W of a
  /// group's parameters and offloads 1/W of its gradients.
  double hostToDeviceBytes = 0;
  double deviceToHostBytes = 0;
  /// Per step and per rank, through the collectives: the (W - 1) / W of each group's parameters
  /// a rank all-gathers from the others, and of its gradients it reduce-scatters to them.
  double collectiveBytes = 0;
  double computeSeconds = 0;
  /// The part of computeSeconds that is the kernels' fixed cost (Machine::kernelSeconds).
  double kernelSeconds = 0;
  int64_t kernels = 0;
  /// The host's AdamW over this rank's parameters (all of them, or 1/W of them with W ranks; 0
  /// when the machine does not model it).
  double optimizerSeconds = 0;
  double stepSeconds = 0;
  /// One sub-batch's boundary activation between blocks: the A of the traffic formulas.
  double boundaryActivationBytes = 0;
};

/// Traffic and time from the cost model, no memory.
Prediction predictTime(const ModelCosts &costs, const PlanConfig &config, const Machine &machine);

/// Traffic and time from the cost model; device and host memory from `memory` (what `query`
/// asks for; the rest is 0).
Prediction predict(const ModelCosts &costs, const PlanConfig &config, const Machine &machine,
                   const StepMemoryFn &memory, MemoryQuery query = {});

/// What the user fixed (0: choose it) and the budgets (none: unlimited).
struct PlanRequest {
  PlanMode mode = PlanMode::speedloader;
  int64_t batch = 0;
  int64_t subBatchSize = 0;
  int64_t numSubBatches = 0;
  int64_t liveBlocks = 0;
  int64_t world = 1;
  std::optional<double> deviceBudget;
  std::optional<double> hostBudget;
};

/// Chooses a configuration. First the memory-first one: live-blocks as given, else 1; the
/// sub-batch size as given (or batch / num-sub-batches), else the largest that fits the device
/// budget (a divisor of `batch` when batch is given); then the number of sub-batches as given
/// (or batch / sub-batch-size), else the most that fit the host budget (1 without one). Then,
/// where live-blocks or (with batch= given, on a machine whose cost per kernel is modelled) the
/// sub-batch size was left to it, the fastest predicted configuration (predictTime) among those that fit, if it is predicted at least
/// kTimeChoiceMinGain faster than the memory-first one; the sub-batch count stays batch / b, or
/// the host budget's. A configuration that does not fit is an error through `emitError` that
/// gives the bytes needed and available.
/// How much faster (a fraction of the step) the model must predict a configuration to choose it
/// over the memory-first one: its predictions are off by 10-35% (bench/results/planner-regret.md),
/// mostly alike for configurations of one model, so smaller predicted gains are not taken.
inline constexpr double kTimeChoiceMinGain = 0.05;
/// How many configurations predicted faster than the memory-first one are laid out to see if
/// they fit, fastest first: each layout schedules a step on the probes.
inline constexpr int kTimeChoiceMaxLayouts = 6;

mlir::FailureOr<PlanConfig> choose(const ModelCosts &costs, const PlanRequest &request,
                                   const Machine &machine, const StepMemoryFn &memory,
                                   llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Parses a byte count: a plain number or one with a unit, B, KB, MB, GB, TB (powers of 1000)
/// or KiB, MiB, GiB, TiB (powers of 1024), e.g. `16GiB`, `80GB`, `1.5GiB`, `1073741824`.
std::optional<double> parseByteSize(llvm::StringRef text);

/// A memory budget option of `pass` (`device-memory=`, `host-memory=`; sl-plan and
/// sl-split-generation): none for empty text, else parseByteSize's bytes; text that is not a byte
/// count is an error through `emitError` naming the pass, the option and the units.
mlir::LogicalResult parseMemoryBudget(llvm::StringRef pass, llvm::StringRef option,
                                      llvm::StringRef text, std::optional<double> &budget,
                                      llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// `1.50 GiB`, `12.0 KiB`, `512 B`.
std::string formatBytes(double bytes);

} // namespace sl

#endif // SL_ANALYSIS_COSTMODEL_H
