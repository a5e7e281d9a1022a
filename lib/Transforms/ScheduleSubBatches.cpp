//===- ScheduleSubBatches.cpp - sl-schedule-subbatches: the explicit SpeedLoader training step ---===//
//
// Input: a module after sl-partition-layers and sl-autodiff. @forward holds sl.param references
// and one sl.layer per stage, bound at the sub-batch shape; every stage function has a
// <stage>_backward that recomputes it from its boundary inputs.
//
// Output: @train_step over a batch of N sub-batches, fully unrolled, in the order the runtime
// issues it. Every value's memory space follows from the op that defines it (MemorySpaces.h):
// parameters, inputs, constants and offloaded values are in the host pool; what kernels compute,
// and prefetched or fetched copies, in the device arena.
//
// Issue order is what makes copies overlap compute once streams and events are assigned: a
// group's parameters are fetched while the group before it computes, sub-batch j+1's inputs are
// prefetched before sub-batch j computes, and sub-batch j's outputs are offloaded after sub-batch
// j+1 starts (so that sl-allocate never places j+1's values over buffers a copy still reads).
//
// With forward-only, the step is an inference step, @infer_step: every group's forward pass in
// order (no loss, no backward, no optimizer), the model's outputs offloaded per sub-batch and
// joined on the host.
//
// With world > 1 the step is still unsharded; sl-shard-parameters rewrites it in place, keeping
// this order: a fetch becomes a prefetch of the rank's shard and an all-gather on the collective
// stream, the offload of a group's gradients a concatenation, a reduce-scatter and an offload of
// the rank's shard of them. For that rewrite a pass's parameters are fetched by one
// sl.fetch_params holding all its group's parameters (a shard arrives as one copy and one
// all-gather, and is gathered whole), and each rank seeds its backward with 1/(N W).
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/ExplicitStep.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <functional>

namespace sl {
#define GEN_PASS_DEF_SCHEDULESUBBATCHESPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

struct Stage {
  LayerOp layer;
  func::FuncOp body, backward;
};

/// Stages whose parameters are on the device together.
struct Group {
  SmallVector<unsigned> stages;
  std::string name;
  // @forward parameters the group reads, in first-use order.
  llvm::SetVector<Value> params;
  // @forward values the group reads that it does not compute: arguments and earlier outputs.
  llvm::SetVector<Value> inputs;
  // Results of the group's stages that later groups read.
  llvm::SetVector<Value> outputs;
};

/// One pass of one group over sub-batches: a forward pass, or a backward pass (the last group's
/// backward pass is also its forward: it computes the loss).
struct GroupPass {
  unsigned group;
  bool backward;
  SmallVector<int64_t> subBatches;
};

bool isFloat(Value v) {
  return llvm::isa<FloatType>(llvm::cast<RankedTensorType>(v.getType()).getElementType());
}

/// The type the step accumulates and returns a float tensor in: f32 whatever the stages store
/// (bf16 with precision=bf16), so that summing N sub-batches' losses and gradients rounds in f32.
RankedTensorType accumulationType(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  if (!llvm::isa<FloatType>(tensor.getElementType()) || tensor.getElementType().isF64())
    return tensor;
  return tensor.clone(Float32Type::get(type.getContext()));
}

class StepBuilder {
public:
  StepBuilder(ModuleOp module, func::FuncOp forward, PlanMode mode, int64_t numSubBatches,
              int64_t liveBlocks, int64_t world, bool forwardOnly)
      : module(module), forward(forward), mode(mode), n(numSubBatches), k(liveBlocks),
        world(world), forwardOnly(forwardOnly), builder(module.getContext()) {}

  LogicalResult build();

private:
  LogicalResult collectStages();
  void formGroups();
  func::FuncOp createStep();
  SmallVector<GroupPass> passOrder() const;

  // Fetches `params` (of @forward) of group `group` to the device, mapping them in `into`.
  void fetchParams(ArrayRef<Value> params, llvm::StringRef group, IRMapping &into);
  // Splits the parameters of `passes[index]`'s group into `shares` fetches of about equal bytes,
  // issued one by one by issueNextShare while the current pass prefetches its sub-batches.
  void planNextFetch(ArrayRef<GroupPass> passes, size_t index, size_t shares);
  void issueNextShare();
  // Calls prefetch/compute/offload per sub-batch, pipelined one sub-batch deep.
  void pipelined(ArrayRef<int64_t> subBatches, const std::function<void(int64_t)> &prefetch,
                 const std::function<void(int64_t)> &compute,
                 const std::function<void(int64_t)> &offload);
  void emitForwardPass(const GroupPass &pass, const IRMapping &params);
  void emitBackwardPass(const GroupPass &pass, const IRMapping &params);
  void emitOptimizerSteps(ArrayRef<Value> params);
  // Forward-only: each output of @forward, its sub-batches' host values joined along axis 0.
  SmallVector<Value> joinOutputs();

  SmallVector<Value> inlineFunction(func::FuncOp callee, ValueRange operands);
  // Inlines a group's stages for one sub-batch: inputs from `onDevice`, parameters from `params`;
  // maps each stage's results into `onDevice` and returns each stage's operands.
  SmallVector<SmallVector<Value>> inlineStages(const Group &group, IRMapping &onDevice,
                                               const IRMapping &params);
  Value hostConstant(RankedTensorType type, Attribute value);
  Value splat(Type type, double value);
  Value sum(ArrayRef<Value> values);
  // `v` in its accumulationType: itself, or a cast of it computed on the device.
  Value widen(Value v);
  void prefetchConstants();
  void removeDeadCode();
  PlanAttr planAttribute();
  // A location that names a transfer or accumulation in traces and errors.
  Location named(const llvm::Twine &name) {
    return NameLoc::get(builder.getStringAttr(name), forward.getLoc());
  }
  // What a @forward value is, for those names: an input's name, or the output of a stage.
  std::string describe(Value v);

  ModuleOp module;
  func::FuncOp forward, step;
  PlanMode mode;
  int64_t n, k, world;
  bool forwardOnly;
  OpBuilder builder;
  Location loc = UnknownLoc::get(module.getContext());

  SmallVector<Stage> stages;
  SmallVector<Group> groups;
  DenseMap<Value, unsigned> stageOf; // @forward stage result -> stage index
  DenseMap<unsigned, unsigned> groupOfStage;
  Value lossValue;                   // in @forward
  SmallVector<Value> outputValues;   // forward-only: what @forward returns

  IRMapping stepParams;              // @forward param -> step param
  // Per sub-batch: host value of a @forward argument (a view) or offloaded group output.
  SmallVector<DenseMap<Value, Value>> hostValue;
  // Per sub-batch: host gradient contributions to a group output, in the order they were made.
  SmallVector<DenseMap<Value, SmallVector<Value>>> hostGrads;
  // Per sub-batch: device values of the current pass.
  SmallVector<IRMapping> device;
  // Per sub-batch: device gradients of the current backward pass's inputs.
  SmallVector<DenseMap<Value, Value>> inputGrads;
  llvm::MapVector<Value, Value> hostParamGrad; // @forward param -> host gradient so far
  DenseMap<Value, unsigned> groupsLeft;        // @forward param -> backward passes still to come
  SmallVector<IRMapping> fetched;              // per pass
  // The next pass's parameters still to fetch, in shares, and where they go.
  SmallVector<SmallVector<Value>> nextShares;
  std::string nextGroup;
  IRMapping *nextFetched = nullptr;
  Value lossAccumulator, lossHost;
  // Hoisted constants, one per (type, value).
  DenseMap<std::pair<Type, Attribute>, Value> constants;
};

LogicalResult StepBuilder::collectStages() {
  Block &body = forward.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (isPreloaded(&op))
      continue;
    auto layer = llvm::dyn_cast<LayerOp>(op);
    if (!layer)
      return op.emitError("sl-schedule-subbatches: @forward must hold only sl.param and "
                          "sl.layer (run sl-partition-layers first), found '")
             << op.getName() << "'";
    auto callee = module.lookupSymbol<func::FuncOp>(layer.getCallee());
    std::string name = (layer.getCallee() + "_backward").str();
    auto backward = module.lookupSymbol<func::FuncOp>(name);
    if (!backward && !forwardOnly)
      return layer.emitError("sl-schedule-subbatches: no @") << name << "; run sl-autodiff first";
    for (Value result : layer.getResults())
      stageOf[result] = stages.size();
    stages.push_back({layer, callee, backward});
  }
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  if (!forwardOnly &&
      (ret.getNumOperands() != 1 || !forward.getResultAttrOfType<StringAttr>(0, "sl.name") ||
       forward.getResultAttrOfType<StringAttr>(0, "sl.name").getValue() != "loss"))
    return forward.emitError("sl-schedule-subbatches: @forward must return exactly the 'loss' "
                             "(run sl-append-loss without keep-logits)");
  if (stages.empty())
    return forward.emitError("sl-schedule-subbatches: @forward calls no stages; run "
                             "sl-partition-layers first");
  if (forwardOnly) {
    for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
      if (!stageOf.count(value))
        return forward.emitError("sl-schedule-subbatches: output ")
               << index << " of @forward is not computed by a stage; a forward-only step "
               << "returns what its stages compute";
      outputValues.push_back(value);
    }
    if (outputValues.empty())
      return forward.emitError("sl-schedule-subbatches: @forward returns nothing");
  } else {
    lossValue = ret.getOperand(0);
    auto it = stageOf.find(lossValue);
    if (it == stageOf.end() || it->second != stages.size() - 1)
      return forward.emitError(
          "sl-schedule-subbatches: the loss must be computed by the last stage");
  }
  for (BlockArgument arg : forward.getArguments()) {
    auto type = llvm::dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape() || type.getRank() == 0)
      return forward.emitError("sl-schedule-subbatches: input ")
             << arg.getArgNumber() << " must be a static tensor with a batch dimension, got "
             << arg.getType() << " (bind the shapes first)";
  }
  return success();
}

void StepBuilder::formGroups() {
  for (auto [index, stage] : llvm::enumerate(stages)) {
    bool block = stage.layer.getStage() == "block";
    bool extend = block && !groups.empty() && groups.back().stages.size() < size_t(k) &&
                  stages[groups.back().stages.back()].layer.getStage() == "block";
    if (!extend)
      groups.emplace_back();
    groups.back().stages.push_back(index);
    groupOfStage[index] = groups.size() - 1;
  }
  for (auto [g, group] : llvm::enumerate(groups)) {
    LayerOp first = stages[group.stages.front()].layer;
    LayerOp last = stages[group.stages.back()].layer;
    group.name = first.getStage().str();
    if (first.getStage() == "block") {
      group.name = "layers " + std::to_string(first.getIndex());
      if (group.stages.size() > 1)
        group.name += "-" + std::to_string(last.getIndex());
    }
    for (unsigned s : group.stages) {
      for (Value input : stages[s].layer.getInputs()) {
        auto it = stageOf.find(input);
        if (it == stageOf.end() || groupOfStage[it->second] != g)
          group.inputs.insert(input);
      }
      for (Value param : stages[s].layer.getParams())
        group.params.insert(param);
    }
  }
  for (auto [g, group] : llvm::enumerate(groups))
    for (Value input : group.inputs)
      if (auto it = stageOf.find(input); it != stageOf.end())
        groups[groupOfStage[it->second]].outputs.insert(input);
  // A forward-only step offloads the model's outputs from the groups that compute them.
  for (Value output : outputValues)
    groups[groupOfStage[stageOf.lookup(output)]].outputs.insert(output);
  for (Group &group : groups)
    for (Value param : group.params)
      ++groupsLeft[param];
}

func::FuncOp StepBuilder::createStep() {
  SmallVector<Type> argTypes;
  for (Type type : forward.getArgumentTypes())
    argTypes.push_back(batched(type, n));
  SmallVector<Type> resultTypes;
  SmallVector<Attribute> resultAttrs;
  if (forwardOnly) {
    // The model's outputs for the whole batch, named as @forward names them.
    for (auto [index, value] : llvm::enumerate(outputValues)) {
      resultTypes.push_back(batched(value.getType(), n));
      resultAttrs.push_back(forward.getResultAttrDict(index)
                                ? Attribute(forward.getResultAttrDict(index))
                                : Attribute(builder.getDictionaryAttr({})));
    }
  } else {
    resultTypes.push_back(accumulationType(lossValue.getType()));
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("sl.name", builder.getStringAttr("loss"))));
    for (auto param : forward.getBody().front().getOps<ParamOp>()) {
      resultTypes.push_back(accumulationType(param.getType()));
      resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
          "sl.name", builder.getStringAttr("grad:" + param.getName().str()))));
    }
  }
  builder.setInsertionPointAfter(forward);
  auto func = builder.create<func::FuncOp>(forward.getLoc(),
                                           forwardOnly ? kInferStepName : kTrainStepName,
                                           builder.getFunctionType(argTypes, resultTypes));
  func.setAllArgAttrs(forward.getAllArgAttrs());
  func.setAllResultAttrs(resultAttrs);
  builder.setInsertionPointToStart(func.addEntryBlock());
  return func;
}

SmallVector<GroupPass> StepBuilder::passOrder() const {
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, n));
  unsigned last = groups.size() - 1;
  SmallVector<GroupPass> passes;
  auto oneStep = [&](ArrayRef<int64_t> subBatches) {
    if (forwardOnly) {
      for (unsigned g = 0; g <= last; ++g)
        passes.push_back({g, false, SmallVector<int64_t>(subBatches)});
      return;
    }
    for (unsigned g = 0; g < last; ++g)
      passes.push_back({g, false, SmallVector<int64_t>(subBatches)});
    for (unsigned g = last + 1; g-- > 0;)
      passes.push_back({g, true, SmallVector<int64_t>(subBatches)});
  };
  if (mode == PlanMode::speedloader)
    oneStep(all);
  else
    for (int64_t j : all)
      oneStep({j});
  return passes;
}

std::string StepBuilder::describe(Value v) {
  if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
    if (auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "sl.name"))
      return name.str();
    return "input " + std::to_string(arg.getArgNumber());
  }
  LayerOp layer = stages[stageOf.lookup(v)].layer;
  if (layer.getStage() == "block")
    return "layer " + std::to_string(layer.getIndex()) + " output";
  return layer.getStage().str() + " output";
}

Value StepBuilder::hostConstant(RankedTensorType type, Attribute value) {
  auto key = std::make_pair(Type(type), value);
  if (Value v = constants.lookup(key))
    return v;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&step.getBody().front());
  Value v = builder.create<ConstantOp>(loc, type, llvm::cast<ElementsAttr>(value));
  constants[key] = v;
  return v;
}

Value StepBuilder::splat(Type type, double value) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  Type element = tensor.getElementType();
  Attribute scalar = llvm::isa<FloatType>(element)
                         ? Attribute(builder.getFloatAttr(element, value))
                         : Attribute(builder.getIntegerAttr(element, int64_t(value)));
  return hostConstant(tensor, SplatElementsAttr::get(tensor, scalar));
}

Value StepBuilder::sum(ArrayRef<Value> values) {
  Value total = values.front();
  for (Value v : values.drop_front())
    total = builder.create<AccumulateOp>(loc, total, v);
  return total;
}

Value StepBuilder::widen(Value v) {
  RankedTensorType type = accumulationType(v.getType());
  if (type == v.getType())
    return v;
  return builder.create<CastOp>(loc, type, v, TypeAttr::get(type.getElementType()));
}

SmallVector<Value> StepBuilder::inlineFunction(func::FuncOp callee, ValueRange operands) {
  return inlineStage(builder, callee, operands, [&](ConstantOp constant) {
    return hostConstant(constant.getType(), constant.getValueAttr());
  });
}

SmallVector<SmallVector<Value>>
StepBuilder::inlineStages(const Group &group, IRMapping &onDevice, const IRMapping &params) {
  SmallVector<SmallVector<Value>> stageOperands;
  for (unsigned s : group.stages) {
    LayerOp layer = stages[s].layer;
    SmallVector<Value> operands;
    for (Value v : layer.getInputs())
      operands.push_back(onDevice.lookup(v));
    for (Value p : layer.getParams())
      operands.push_back(params.lookup(p));
    for (auto [from, to] : llvm::zip(layer.getResults(), inlineFunction(stages[s].body, operands)))
      onDevice.map(from, to);
    stageOperands.push_back(std::move(operands));
  }
  return stageOperands;
}

void StepBuilder::fetchParams(ArrayRef<Value> params, llvm::StringRef group, IRMapping &into) {
  if (params.empty())
    return;
  SmallVector<Value> hostParams;
  for (Value p : params)
    hostParams.push_back(stepParams.lookup(p));
  auto fetch = builder.create<FetchParamsOp>(named("fetch " + group),
                                             ValueRange(hostParams).getTypes(), hostParams, group);
  for (auto [p, d] : llvm::zip(params, fetch.getResults()))
    into.map(p, d);
}

void StepBuilder::planNextFetch(ArrayRef<GroupPass> passes, size_t index, size_t shares) {
  nextShares.clear();
  nextFetched = nullptr;
  if (index >= passes.size())
    return;
  const Group &group = groups[passes[index].group];
  nextGroup = group.name;
  nextFetched = &fetched[index];
  uint64_t total = 0;
  for (Value p : group.params)
    total += storageBytes(p.getType());
  // Share k takes the parameters that start in the k-th of `shares` equal byte ranges, so a
  // large parameter never delays the small activation prefetches behind it by more than itself.
  nextShares.resize(shares);
  uint64_t before = 0;
  for (Value p : group.params) {
    size_t share = total == 0 ? 0 : std::min<size_t>(shares - 1, before * shares / total);
    nextShares[share].push_back(p);
    before += storageBytes(p.getType());
  }
  std::reverse(nextShares.begin(), nextShares.end()); // issued from the back
}

void StepBuilder::issueNextShare() {
  if (nextShares.empty())
    return;
  fetchParams(nextShares.back(), nextGroup, *nextFetched);
  nextShares.pop_back();
}

void StepBuilder::pipelined(ArrayRef<int64_t> subBatches,
                            const std::function<void(int64_t)> &prefetch,
                            const std::function<void(int64_t)> &compute,
                            const std::function<void(int64_t)> &offload) {
  // The next group's parameters go to the device in shares between the sub-batch prefetches: the
  // host-to-device stream runs in issue order, and a sub-batch's input must not wait behind a
  // whole group's parameters.
  prefetch(subBatches.front());
  issueNextShare();
  for (size_t i = 0; i < subBatches.size(); ++i) {
    if (i + 1 < subBatches.size()) {
      prefetch(subBatches[i + 1]);
      issueNextShare();
    }
    compute(subBatches[i]);
    if (i > 0)
      offload(subBatches[i - 1]);
  }
  offload(subBatches.back());
}

void StepBuilder::emitForwardPass(const GroupPass &pass, const IRMapping &params) {
  const Group &group = groups[pass.group];
  auto prefetch = [&](int64_t j) {
    device[j] = IRMapping();
    for (Value v : group.inputs)
      device[j].map(v, builder.create<PrefetchOp>(
                           named(group.name + " sub-batch " + llvm::Twine(j) + ": prefetch " +
                                 describe(v)),
                           hostValue[j].lookup(v)));
  };
  auto compute = [&](int64_t j) { inlineStages(group, device[j], params); };
  auto offload = [&](int64_t j) {
    for (Value v : group.outputs)
      hostValue[j][v] = builder.create<OffloadOp>(
          named(group.name + " sub-batch " + llvm::Twine(j) + ": offload " + describe(v)),
          device[j].lookup(v));
  };
  pipelined(pass.subBatches, prefetch, compute, offload);
}

void StepBuilder::emitBackwardPass(const GroupPass &pass, const IRMapping &params) {
  const Group &group = groups[pass.group];
  bool computesLoss = pass.group == groups.size() - 1;
  // Device parameter gradients accumulated over this pass's sub-batches.
  llvm::MapVector<Value, Value> accumulated;
  SmallVector<DenseMap<Value, SmallVector<Value>>> outputGrads(n);

  auto prefetch = [&](int64_t j) {
    device[j] = IRMapping();
    std::string where = (group.name + " backward sub-batch " + llvm::Twine(j) + ": prefetch ").str();
    for (Value v : group.inputs)
      device[j].map(v, builder.create<PrefetchOp>(named(where + describe(v)),
                                                  hostValue[j].lookup(v)));
    for (Value v : group.outputs)
      for (Value contribution : hostGrads[j].lookup(v))
        outputGrads[j][v].push_back(builder.create<PrefetchOp>(
            named(where + "gradient of " + describe(v)), contribution));
  };
  auto compute = [&](int64_t j) {
    // Recompute the group's stages (CSE merges this with each backward function's own
    // recomputation, so the group's activations are computed once per sub-batch).
    SmallVector<SmallVector<Value>> stageOperands = inlineStages(group, device[j], params);
    DenseMap<Value, SmallVector<Value>> grads; // @forward value -> device gradient contributions
    for (auto &[v, contributions] : outputGrads[j])
      grads[v] = contributions;
    if (computesLoss) {
      // A bf16 stage's loss is rounded to bf16 once, then averaged in f32.
      Value loss = widen(device[j].lookup(lossValue));
      Value scaled = n == 1 ? loss
                            : builder.create<MulOp>(loc, loss.getType(), loss,
                                                    splat(loss.getType(), 1.0 / double(n)));
      lossAccumulator = lossAccumulator ? builder.create<AccumulateOp>(loc, lossAccumulator, scaled)
                                        : scaled;
      // Each rank's loss is the mean over its own tokens; its gradient, seeded with 1/(N W), is
      // the rank's part of the gradient of the mean over every rank's tokens (all ranks have
      // the same number), which the reduce-scatter sums. The seed has the stage's dtype.
      grads[lossValue].push_back(splat(lossValue.getType(), 1.0 / double(n * world)));
    }
    llvm::MapVector<Value, SmallVector<Value>> paramGrads;
    for (size_t i = group.stages.size(); i-- > 0;) {
      LayerOp layer = stages[group.stages[i]].layer;
      SmallVector<Value> operands = stageOperands[i];
      for (Value result : layer.getResults()) {
        auto it = grads.find(result);
        operands.push_back(it != grads.end() ? sum(it->second) : splat(result.getType(), 0.0));
      }
      SmallVector<Value> results = inlineFunction(stages[group.stages[i]].backward, operands);
      // Results: gradients of the float operands (inputs, then parameters), in operand order.
      auto result = results.begin();
      for (Value v : layer.getInputs())
        if (isFloat(v))
          grads[v].push_back(*result++);
      for (Value p : layer.getParams())
        paramGrads[p].push_back(*result++);
    }
    // Each sub-batch's gradient (bf16 with precision=bf16) is widened before it is summed:
    // the accumulation over sub-batches, the offload and the host sums are f32.
    for (auto &[p, contributions] : paramGrads) {
      for (Value &c : contributions)
        c = widen(c);
      Value g = sum(contributions);
      Value &acc = accumulated[p];
      acc = acc ? builder.create<AccumulateOp>(loc, acc, g) : g;
    }
    inputGrads[j].clear();
    for (Value v : group.inputs)
      if (isFloat(v) && stageOf.count(v))
        if (auto it = grads.find(v); it != grads.end())
          inputGrads[j][v] = sum(it->second);
  };
  auto offload = [&](int64_t j) {
    for (Value v : group.inputs)
      if (Value g = inputGrads[j].lookup(v))
        hostGrads[j][v].push_back(builder.create<OffloadOp>(
            named(group.name + " backward sub-batch " + llvm::Twine(j) +
                  ": offload gradient of " + describe(v)),
            g));
  };
  pipelined(pass.subBatches, prefetch, compute, offload);

  // The loss is final once the last group's last pass is done.
  if (computesLoss && pass.subBatches.back() == n - 1)
    lossHost = builder.create<OffloadOp>(named("offload loss"), lossAccumulator);
  // The group's gradients leave the device once per pass.
  SmallVector<Value> finished;
  for (auto &[p, acc] : accumulated) {
    llvm::StringRef name = p.getDefiningOp<ParamOp>().getName();
    Value host = builder.create<OffloadOp>(named(group.name + ": offload gradient of " + name),
                                           acc);
    Value &total = hostParamGrad[p];
    total = total ? builder.create<AccumulateOp>(named("accumulate gradient of " + name), total,
                                                 host)
                  : host;
    if (mode == PlanMode::speedloader && --groupsLeft[p] == 0)
      finished.push_back(p);
  }
  if (!finished.empty())
    emitOptimizerSteps(finished);
}

void StepBuilder::emitOptimizerSteps(ArrayRef<Value> params) {
  SmallVector<Value> grads, hostParams;
  for (Value p : params) {
    grads.push_back(hostParamGrad.lookup(p));
    hostParams.push_back(stepParams.lookup(p));
  }
  std::string names;
  for (Value p : params)
    names += (names.empty() ? "" : ", ") + p.getDefiningOp<ParamOp>().getName().str();
  builder.create<OptimizerStepOp>(named("optimizer step: " + names), lossHost, grads, hostParams);
}

SmallVector<Value> StepBuilder::joinOutputs() {
  SmallVector<Value> joined;
  for (auto [index, value] : llvm::enumerate(outputValues)) {
    SmallVector<Value> pieces;
    for (int64_t j = 0; j < n; ++j)
      pieces.push_back(hostValue[j].lookup(value));
    if (n == 1) {
      joined.push_back(pieces.front());
      continue;
    }
    // Every piece is in the host pool: the concatenation is a host kernel (MemorySpaces.h),
    // so the whole batch's output never needs the device.
    auto name = forward.getResultAttrOfType<StringAttr>(index, "sl.name");
    joined.push_back(builder.create<ConcatOp>(
        named("join " + (name ? name.getValue() : llvm::StringRef("output"))),
        step.getResultTypes()[index], pieces, uint64_t(0)));
  }
  return joined;
}

void StepBuilder::removeDeadCode() {
  // Recomputation the backward rules do not read (a matmul's output, say), copies of values
  // nothing reads, and the parameters that only such code read: a group fetches what its pass
  // computes with, nothing more.
  Block &body = step.getBody().front();
  eraseUnusedOps(body);
  // Sharded, a pass gathers its shards whole: sl-shard-parameters reads which parameters a group
  // owns from the fetches and prunes what the pass does not read itself.
  if (world > 1)
    return;
  removeUnusedFetches(body, builder);
}

void StepBuilder::prefetchConstants() {
  sl::prefetchConstants(step.getBody().front(), builder, named("prefetch constant"));
}

PlanAttr StepBuilder::planAttribute() {
  uint64_t parameterBytes = 0, boundaryBytes = 0;
  for (auto param : forward.getBody().front().getOps<ParamOp>())
    parameterBytes += storageBytes(param.getType());
  for (const Group &group : groups)
    for (Value v : group.outputs)
      if (!llvm::is_contained(outputValues, v)) // the model's outputs cross no boundary
        boundaryBytes = std::max(boundaryBytes, storageBytes(v.getType()));
  int64_t subBatchSize =
      llvm::cast<RankedTensorType>(forward.getArgumentTypes().front()).getDimSize(0);
  // What sl-plan predicted stays with the plan it chose.
  auto planned = module->getAttrOfType<PlanAttr>(kPlanAttr);
  auto predicted = [&](std::optional<int64_t> (PlanAttr::*field)() const) {
    return planned ? (planned.*field)() : std::nullopt;
  };
  return PlanAttr::get(
      module.getContext(), int64_t(boundaryBytes), k, mode, n, int64_t(parameterBytes),
      predicted(&PlanAttr::getPredictedDeviceBytes),
      predicted(&PlanAttr::getPredictedHostBytes), predicted(&PlanAttr::getPredictedHostPoolBytes),
      planned ? planned.getPredictedStepSeconds() : std::nullopt, subBatchSize,
      world > 1 ? std::optional<int64_t>(world) : std::nullopt); // absent: one rank
}

LogicalResult StepBuilder::build() {
  if (failed(collectStages()))
    return failure();
  loc = forward.getLoc();
  formGroups();
  step = createStep();

  for (auto param : forward.getBody().front().getOps<ParamOp>())
    stepParams.map(param.getResult(), builder.clone(*param)->getResult(0));
  hostValue.resize(n);
  hostGrads.resize(n);
  device.resize(n);
  inputGrads.resize(n);
  for (auto [arg, stepArg] : llvm::zip(forward.getArguments(), step.getArguments()))
    for (int64_t j = 0; j < n; ++j)
      hostValue[j][arg] = n == 1 ? Value(stepArg)
                                 : builder.create<SubBatchOp>(loc, arg.getType(), stepArg,
                                                              builder.getI64IntegerAttr(j),
                                                              builder.getI64IntegerAttr(n));

  SmallVector<GroupPass> passes = passOrder();
  fetched.resize(passes.size());
  fetchParams(groups[passes.front().group].params.getArrayRef(), groups[passes.front().group].name,
              fetched.front());
  for (auto [index, pass] : llvm::enumerate(passes)) {
    // While this pass runs, the next one's parameters arrive: one share per sub-batch.
    // With world > 1 they arrive as shards, each one copy and one all-gather: no shares.
    planNextFetch(passes, index + 1, world > 1 ? 1 : pass.subBatches.size());
    if (pass.backward)
      emitBackwardPass(pass, fetched[index]);
    else
      emitForwardPass(pass, fetched[index]);
    while (!nextShares.empty())
      issueNextShare();
  }
  if (forwardOnly) {
    builder.create<func::ReturnOp>(loc, joinOutputs());
    removeDeadCode();
    prefetchConstants();
    step->setAttr(kPlanAttr, planAttribute());
    return success();
  }
  if (mode == PlanMode::canonical) {
    // Every group's gradients are final only after the last sub-batch.
    for (unsigned g = groups.size(); g-- > 0;) {
      SmallVector<Value> finished;
      for (Value p : groups[g].params)
        if (--groupsLeft[p] == 0)
          finished.push_back(p);
      if (!finished.empty())
        emitOptimizerSteps(finished);
    }
  }

  SmallVector<Value> returned{lossHost};
  for (auto param : forward.getBody().front().getOps<ParamOp>()) {
    Value g = hostParamGrad.lookup(param.getResult());
    if (!g)
      return param.emitError("sl-schedule-subbatches: parameter '")
             << param.getName() << "' is read by no stage";
    returned.push_back(g);
  }
  builder.create<func::ReturnOp>(loc, returned);
  removeDeadCode();
  prefetchConstants();
  step->setAttr(kPlanAttr, planAttribute());
  return success();
}

struct ScheduleSubBatchesPass
    : public impl::ScheduleSubBatchesPassBase<ScheduleSubBatchesPass> {
  using ScheduleSubBatchesPassBase::ScheduleSubBatchesPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal()) {
      module.emitError("sl-schedule-subbatches: no @forward function");
      return signalPassFailure();
    }
    llvm::StringRef stepName = forwardOnly ? kInferStepName : kTrainStepName;
    if (module.lookupSymbol(stepName)) {
      module.emitError("sl-schedule-subbatches: the module already has a @") << stepName;
      return signalPassFailure();
    }
    if (numSubBatches < 0 || liveBlocks < 0) {
      module.emitError("sl-schedule-subbatches: num-sub-batches and live-blocks must be at "
                       "least 1, got ")
          << int64_t(numSubBatches) << " and " << int64_t(liveBlocks);
      return signalPassFailure();
    }
    if (world < 0) {
      module.emitError("sl-schedule-subbatches: world must be at least 1, got ") << int64_t(world);
      return signalPassFailure();
    }
    auto planned = module->getAttrOfType<PlanAttr>(kPlanAttr);
    auto plannedOr = [&](std::optional<int64_t> (PlanAttr::*field)() const) {
      return planned ? (planned.*field)().value_or(1) : 1;
    };
    int64_t n = numSubBatches > 0 ? int64_t(numSubBatches) : plannedOr(&PlanAttr::getNumSubBatches);
    int64_t k = liveBlocks > 0 ? int64_t(liveBlocks) : plannedOr(&PlanAttr::getLiveBlocks);
    int64_t w = world > 0 ? int64_t(world) : plannedOr(&PlanAttr::getWorld);
    // The option, else the plan's mode, else speedloader.
    std::optional<PlanMode> planMode =
        !mode.empty() ? symbolizePlanMode(mode)
                      : (planned && planned.getMode() ? planned.getMode() : PlanMode::speedloader);
    if (!planMode) {
      module.emitError("sl-schedule-subbatches: mode must be 'speedloader' or 'canonical', got '")
          << mode << "'";
      return signalPassFailure();
    }
    if (n < 1 || k < 1 || w < 1) {
      module.emitError("sl-schedule-subbatches: sl.plan asks for num_sub_batches=")
          << n << ", live_blocks=" << k << " and world=" << w << "; each must be at least 1";
      return signalPassFailure();
    }
    auto first = llvm::dyn_cast<RankedTensorType>(forward.getArgumentTypes().empty()
                                                       ? Type()
                                                       : forward.getArgumentTypes().front());
    if (batch > 0 && first && first.hasStaticShape() && first.getRank() > 0 &&
        first.getDimSize(0) * n != batch) {
      module.emitError("sl-schedule-subbatches: batch=")
          << int64_t(batch) << " is not num-sub-batches x sub-batch size = " << n << " x "
          << first.getDimSize(0) << "; give a batch that splits into equal sub-batches";
      return signalPassFailure();
    }
    StepBuilder builder(module, forward, *planMode, n, k, w, forwardOnly);
    if (failed(builder.build()))
      signalPassFailure();
  }
};

} // namespace
} // namespace sl
