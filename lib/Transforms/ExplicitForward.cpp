//===- ExplicitForward.cpp - sl-explicit-forward: a bound @forward as one explicit step --------===//
//
// Writes @infer_step from a @forward whose shapes are bound (or from the function entry= names:
// sl-opt -o schedules a function that is not a step this way): the parameters fetched to the
// device once (one sl.fetch_params), every input prefetched, the body as it is, every output
// offloaded to the host pool. It is the step of inference without a memory budget: everything
// resident, one sub-batch, and what sl-assign-streams, sl-allocate (buffers reused by liveness)
// and sl-insert-events make of it; a budget goes through sl-plan and sl-schedule-subbatches
// instead. Unlike those it needs no stages, so any model, with or without transformer blocks, has
// one.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"
#include "sl/Transforms/ExplicitStep.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace sl {
#define GEN_PASS_DEF_EXPLICITFORWARDPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using namespace sl;

namespace {

/// The name sl-run's --input gives argument `index` of `func`: its sl.name, else arg<index>.
std::string inputName(func::FuncOp func, unsigned index) {
  if (auto name = func.getArgAttrOfType<StringAttr>(index, "sl.name"))
    return name.str();
  return "arg" + std::to_string(index);
}

struct ExplicitForwardPass : public sl::impl::ExplicitForwardPassBase<ExplicitForwardPass> {
  using ExplicitForwardPassBase::ExplicitForwardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // `forward` is the function the step is written from: @forward, or the one entry= names.
    auto forward = module.lookupSymbol<func::FuncOp>(entry);
    if (!forward || forward.isExternal()) {
      module.emitError("sl-explicit-forward: no @") << entry << " function";
      return signalPassFailure();
    }
    if (isExplicitStep(forward)) {
      forward.emitError("sl-explicit-forward: @") << entry << " is an explicit step already";
      return signalPassFailure();
    }
    if (module.lookupSymbol(kInferStepName)) {
      module.emitError("sl-explicit-forward: the module already has a @") << kInferStepName;
      return signalPassFailure();
    }
    if (!forward.getBody().hasOneBlock()) {
      forward.emitError("sl-explicit-forward: @") << entry << " must have one block";
      return signalPassFailure();
    }
    Block &body = forward.getBody().front();
    for (auto [index, type] : llvm::enumerate(forward.getFunctionType().getInputs())) {
      auto tensor = llvm::dyn_cast<RankedTensorType>(type);
      if (!tensor || !tensor.hasStaticShape()) {
        forward.emitError("sl-explicit-forward: input '")
            << inputName(forward, index) << "' of type " << type
            << " has no static shape; bind the batch and sequence sizes first "
               "(--sl-infer=\"batch=N seq=N\" or --sl-bind-shapes)";
        return signalPassFailure();
      }
    }
    // Calls and layers would need their callees inlined: this is for a model in one function.
    for (Operation &op : body.without_terminator())
      if (llvm::isa<LayerOp, func::CallOp>(op)) {
        op.emitError("sl-explicit-forward: @")
            << entry << " calls stage functions; schedule stages with sl-schedule-subbatches";
        return signalPassFailure();
      }

    OpBuilder builder(forward);
    builder.setInsertionPointAfter(forward);
    auto step = builder.create<func::FuncOp>(forward.getLoc(), kInferStepName,
                                             forward.getFunctionType());
    // Every input named as sl-run's --input names it (a stage function's parameters are inputs
    // here, no longer marked sl.param).
    step.setAllArgAttrs(forward.getAllArgAttrs());
    step.setAllResultAttrs(forward.getAllResultAttrs());
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      step.removeArgAttr(i, "sl.param");
      step.setArgAttr(i, "sl.name", builder.getStringAttr(inputName(forward, i)));
    }
    Block *entry = step.addEntryBlock();
    builder.setInsertionPointToStart(entry);
    Location loc = forward.getLoc();
    auto named = [&](const llvm::Twine &name) {
      return NameLoc::get(builder.getStringAttr(name), loc);
    };

    // Host values first: the constants (sl::prefetchConstants puts their device copies after
    // them, at the start), the parameters, then one fetch of all of them and the inputs' copies.
    IRMapping mapping;
    for (auto constant : body.getOps<ConstantOp>())
      builder.clone(*constant, mapping);
    SmallVector<Value> hostParams;
    uint64_t parameterBytes = 0;
    for (auto param : body.getOps<ParamOp>()) {
      Value host = builder.clone(*param)->getResult(0);
      hostParams.push_back(host);
      parameterBytes += storageBytes(param.getType());
    }
    if (!hostParams.empty()) {
      auto fetch = builder.create<FetchParamsOp>(
          named("fetch the parameters"), ValueRange(hostParams).getTypes(), hostParams, "model");
      for (auto [param, device] : llvm::zip(body.getOps<ParamOp>(), fetch.getResults()))
        mapping.map(param.getResult(), device);
    }
    for (auto [forwardArg, stepArg] : llvm::zip(body.getArguments(), entry->getArguments()))
      mapping.map(forwardArg, builder.create<PrefetchOp>(named("prefetch input"), stepArg));

    for (Operation &op : body.without_terminator())
      if (!isPreloaded(&op))
        builder.clone(op, mapping);

    // Outputs go back to the host pool, each into a slot of its own: a constant output too goes
    // to the device and back (a constant's host value is no output buffer).
    SmallVector<Value> returned;
    for (Value v : body.getTerminator()->getOperands()) {
      Value mapped = mapping.lookupOrDefault(v);
      if (memorySpaceOf(mapped) == MemorySpace::Host)
        mapped = builder.create<PrefetchOp>(named("prefetch constant output"), mapped);
      returned.push_back(builder.create<OffloadOp>(named("offload output"), mapped));
    }
    builder.create<func::ReturnOp>(loc, returned);

    Block &stepBody = step.getBody().front();
    // Dead code and the copies of what nobody reads (a parameter nothing computes with is not
    // fetched), then the parameters only those read.
    eraseUnusedOps(stepBody);
    removeUnusedFetches(stepBody, builder);
    eraseUnusedOps(stepBody);
    prefetchConstants(stepBody, builder, named("prefetch constant"));

    // The step's plan: one sub-batch of the whole batch (dimension 0 of the first input, where
    // there is one, and it is not empty), every parameter resident.
    std::optional<int64_t> subBatchSize;
    if (step.getNumArguments() > 0) {
      auto first = llvm::cast<RankedTensorType>(step.getArgument(0).getType());
      if (first.getRank() > 0 && first.getDimSize(0) > 0)
        subBatchSize = first.getDimSize(0);
    }
    step->setAttr(kPlanAttr,
                  PlanAttr::get(builder.getContext(), /*boundary_activation_bytes=*/{},
                                /*live_blocks=*/{}, /*mode=*/{}, /*num_sub_batches=*/1,
                                int64_t(parameterBytes), /*predicted_device_bytes=*/{},
                                /*predicted_host_bytes=*/{}, /*predicted_host_pool_bytes=*/{},
                                /*predicted_step_seconds=*/{}, subBatchSize, /*world=*/{}));
    if (SymbolTable::symbolKnownUseEmpty(forward, module))
      forward.erase();
  }
};

} // namespace
