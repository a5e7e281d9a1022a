//===- Plan.cpp - sl-plan: choose the shape of a sub-batched training step
//----------------------===//
//
// Runs the cost model (sl/Analysis/CostModel.h) on the module, chooses sub-batch size, number of
// sub-batches and live blocks for the budgets and fixed values given, and records the choice and
// its predictions as the module attribute `sl.plan`, which sl-bind-shapes,
// sl-schedule-subbatches and the schedule emitter read.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/CostModel.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace sl {
#define GEN_PASS_DEF_PLANPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

// Two sub-batch sizes the pre-binding analysis compiles at. Neither is 1, where exporters' Ifs
// on "is this dimension 1" can take the other branch.
constexpr int64_t kProbeSmall = 2;
constexpr int64_t kProbeLarge = 4;

struct PlanPass : public sl::impl::PlanPassBase<PlanPass> {
  using PlanPassBase::PlanPassBase;
  PlanPass(const sl::PlanPassOptions &options, sl::StagePipelineBuilder buildStages)
      : PlanPassBase(options), buildStages(std::move(buildStages)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Errors name the module, not print it: the whole model would follow the message.
    auto emitError = [&] { return mlir::emitError(module.getLoc()); };

    std::optional<sl::ScheduleMode> scheduleMode = sl::parseScheduleMode(mode);
    if (!scheduleMode) {
      emitError() << "sl-plan: mode must be speedloader or canonical, not '" << mode << "'";
      return signalPassFailure();
    }
    sl::PlanRequest request;
    request.mode = *scheduleMode;
    request.batch = batch;
    request.subBatchSize = subBatchSize;
    request.numSubBatches = numSubBatches;
    request.liveBlocks = liveBlocks;
    request.world = world;
    if (failed(parseBudget("device-memory", deviceMemory, request.deviceBudget)) ||
        failed(parseBudget("host-memory", hostMemory, request.hostBudget)))
      return signalPassFailure();
    if (!(linkGBps > 0) || !(tflops > 0)) {
      emitError() << "sl-plan: link-gbps and tflops must be positive";
      return signalPassFailure();
    }
    sl::Machine machine{linkGBps * 1e9, tflops * 1e12};

    FailureOr<sl::ModelCosts> costs = analyse(module);
    if (failed(costs))
      return signalPassFailure();
    FailureOr<sl::PlanConfig> config = sl::choose(*costs, request, machine, emitError);
    if (failed(config))
      return signalPassFailure();
    sl::Prediction prediction = sl::predict(*costs, *config, machine);
    module->setAttr("sl.plan", planAttr(*costs, *config, prediction));
    if (report)
      printReport(llvm::outs(), *costs, *config, machine, prediction);
  }

  LogicalResult parseBudget(llvm::StringRef option, llvm::StringRef text,
                            std::optional<double> &budget) {
    if (text.empty())
      return success();
    budget = sl::parseByteSize(text);
    if (!budget)
      return mlir::emitError(getOperation().getLoc(), "sl-plan: ")
             << option << "='" << text
             << "' is not a byte count (a number, optionally with B, KB, MB, GB, TB, KiB, MiB, "
                "GiB or TiB)";
    return success();
  }

  FailureOr<sl::ModelCosts> analyse(ModuleOp module) {
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    bool hasStages = forward && !forward.isExternal() && !forward.getOps<sl::LayerOp>().empty();
    if (hasStages || !buildStages)
      return sl::analyseBoundModule(module);

    // A model exported with static shapes has one size to measure it at.
    bool bound = llvm::all_of(forward.getArgumentTypes(), [](Type type) {
      auto ranked = llvm::dyn_cast<RankedTensorType>(type);
      return !ranked || ranked.hasStaticShape();
    });
    if (bound) {
      FailureOr<OwningOpRef<ModuleOp>> copy = compileCopy(module, 0);
      if (failed(copy))
        return failure();
      return sl::analyseBoundModule(**copy);
    }
    // Shapes are not bound yet: compile two copies as far as the stages, at two sub-batch sizes,
    // and fit every figure from the pair.
    FailureOr<OwningOpRef<ModuleOp>> small = compileCopy(module, kProbeSmall);
    if (failed(small))
      return failure();
    FailureOr<OwningOpRef<ModuleOp>> large = compileCopy(module, kProbeLarge);
    if (failed(large))
      return failure();
    return sl::fitModules(**small, kProbeSmall, **large, kProbeLarge);
  }

  FailureOr<OwningOpRef<ModuleOp>> compileCopy(ModuleOp module, int64_t subBatchSize) {
    OwningOpRef<ModuleOp> copy = module.clone();
    // A copy must not carry a plan of its own: sl-bind-shapes would bind at it.
    (*copy)->removeAttr("sl.plan");
    PassManager pm(module.getContext());
    buildStages(pm, subBatchSize);
    if (failed(pm.run(*copy))) {
      mlir::emitError(module.getLoc(),
                      "sl-plan: compiling a copy of the model to stages at sub-batch size ")
          << subBatchSize << " to measure it failed (see the errors above)";
      return failure();
    }
    return copy;
  }

  DictionaryAttr planAttr(const sl::ModelCosts &costs, const sl::PlanConfig &config,
                          const sl::Prediction &prediction) {
    Builder b(&getContext());
    auto bytes = [&](double value) { return b.getI64IntegerAttr(int64_t(std::ceil(value))); };
    return b.getDictionaryAttr({
        b.getNamedAttr("mode", b.getStringAttr(sl::stringifyScheduleMode(config.mode))),
        b.getNamedAttr("sub_batch_size", b.getI64IntegerAttr(config.subBatchSize)),
        b.getNamedAttr("num_sub_batches", b.getI64IntegerAttr(config.numSubBatches)),
        b.getNamedAttr("live_blocks", b.getI64IntegerAttr(config.liveBlocks)),
        b.getNamedAttr("predicted_device_bytes", bytes(prediction.deviceBytes)),
        b.getNamedAttr("predicted_host_bytes", bytes(prediction.hostBytes)),
        b.getNamedAttr("predicted_step_seconds", b.getF64FloatAttr(prediction.stepSeconds)),
        b.getNamedAttr("parameter_bytes", b.getI64IntegerAttr(costs.parameterBytes)),
        b.getNamedAttr("boundary_activation_bytes", bytes(prediction.boundaryActivationBytes)),
    });
  }

  static void printReport(llvm::raw_ostream &os, const sl::ModelCosts &costs,
                          const sl::PlanConfig &config, const sl::Machine &machine,
                          const sl::Prediction &prediction) {
    auto bytes = [](double value) {
      return llvm::formatv("{0,11} ({1} bytes)", sl::formatBytes(value), int64_t(std::ceil(value)))
          .str();
    };
    int64_t b = config.subBatchSize;
    os << "sl-plan: " << sl::stringifyScheduleMode(config.mode) << ", " << config.numSubBatches
       << " sub-batches of " << b << " (batch " << b * config.numSubBatches << "), live-blocks "
       << config.liveBlocks << ", world " << config.world << "\n";
    os << llvm::format("  link %g GB/s per direction, %g TFLOP/s\n",
                       machine.linkBytesPerSecond / 1e9, machine.flopsPerSecond / 1e12);
    os << "stages at sub-batch size " << b
       << " (bytes; workspace: peak live bytes inside the function):\n";
    os << llvm::formatv("  {0,-10} {1,5} {2,12} {3,12} {4,12} {5,14} {6,14} {7,12} {8,12}\n",
                        "stage", "index", "params", "inputs", "outputs", "forward FLOPs",
                        "backward FLOPs", "fwd work", "bwd work");
    for (const sl::StageCosts &stage : costs.stages) {
      double inputs = 0, outputs = 0;
      for (int id : stage.inputs)
        inputs += costs.boundary[id].bytes.at(b);
      for (int id : stage.outputs)
        outputs += costs.boundary[id].bytes.at(b);
      os << llvm::formatv("  {0,-10} {1,5} {2,12} {3,12} {4,12} {5,14} {6,14} {7,12} {8,12}\n",
                          stage.kind, stage.index, stage.parameterBytes, int64_t(inputs),
                          int64_t(outputs), int64_t(stage.forwardFlops.at(b)),
                          int64_t(stage.backwardFlops.at(b)), int64_t(stage.forwardWorkspace.at(b)),
                          int64_t(stage.backwardWorkspace.at(b)));
    }
    os << "parameters (P):             " << bytes(double(costs.parameterBytes)) << "\n";
    os << "boundary activation (A):    " << bytes(prediction.boundaryActivationBytes)
       << " per sub-batch\n";
    os << "device memory:              " << bytes(prediction.deviceBytes) << " at its peak, "
       << prediction.devicePeakPhase << "\n";
    for (const sl::MemoryTerm &term : prediction.deviceTerms)
      os << llvm::formatv("  {0,-56}{1}\n", term.name, bytes(term.bytes));
    os << "host memory:                " << bytes(prediction.hostBytes) << "\n";
    for (const sl::MemoryTerm &term : prediction.hostTerms)
      os << llvm::formatv("  {0,-56}{1}\n", term.name, bytes(term.bytes));
    os << "bytes moved per step:\n";
    for (sl::ScheduleMode mode : {sl::ScheduleMode::SpeedLoader, sl::ScheduleMode::Canonical}) {
      sl::PlanConfig other = config;
      other.mode = mode;
      sl::Prediction moved = sl::predict(costs, other, machine);
      os << llvm::formatv("  {0,-12} host->device {1}, device->host {2}\n",
                          sl::stringifyScheduleMode(mode), bytes(moved.hostToDeviceBytes),
                          bytes(moved.deviceToHostBytes));
    }
    os << llvm::formatv("step time:                  {0:e4} s predicted ({1:e4} s of compute)\n",
                        prediction.stepSeconds, prediction.computeSeconds);
  }

  sl::StagePipelineBuilder buildStages;
};

} // namespace

std::unique_ptr<Pass> sl::createPlanPass(const PlanPassOptions &options,
                                         StagePipelineBuilder buildStages) {
  return std::make_unique<PlanPass>(options, std::move(buildStages));
}
