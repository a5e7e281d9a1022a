//===- CostModel.cpp - memory, traffic and time of a sub-batched step ---------------------------===//
//
// Measuring: every stage's parameters, boundary values, FLOPs and workspace, as linear functions
// of the sub-batch size. Predicting: the SpeedLoader and canonical schedules phase by phase (the
// schedule sl-schedule-subbatches emits): link traffic and time; device arena and host pool from
// the step itself, scheduled and laid out (StepMemoryFn, sl/Analysis/StepMemory.h). Choosing: the
// largest sub-batch that fits the device, then as many sub-batches as fit the host; then, among
// the configurations left free, a predicted faster one that fits.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/CostModel.h"

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/SLDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace sl {

//===--------------------------------------------------------------------------------------------===//
// Linear functions of the sub-batch size
//===--------------------------------------------------------------------------------------------===//

double Envelope::at(int64_t b) const {
  double peak = 0;
  for (const Linear &line : lines)
    peak = std::max(peak, line.at(b));
  return peak;
}

void Envelope::add(Linear line) {
  // A line no larger than another at every b >= 0 can never be the peak.
  for (const Linear &kept : lines)
    if (kept.fixed >= line.fixed && kept.perSequence >= line.perSequence)
      return;
  llvm::erase_if(lines, [&](const Linear &kept) {
    return line.fixed >= kept.fixed && line.perSequence >= kept.perSequence;
  });
  lines.push_back(line);
}

int ModelCosts::numBlocks() const {
  return llvm::count_if(stages, [](const StageCosts &s) { return s.kind == "block"; });
}

//===--------------------------------------------------------------------------------------------===//
// Measuring one module
//===--------------------------------------------------------------------------------------------===//

namespace {

double bytesOf(Type type) {
  auto ranked = llvm::dyn_cast<RankedTensorType>(type);
  if (!ranked || !ranked.hasStaticShape())
    return 0;
  return double(ranked.getNumElements()) *
         double((ranked.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

double elementsOf(Type type) {
  auto ranked = llvm::dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() ? double(ranked.getNumElements()) : 0;
}

RankedTensorType rankedOf(Value v) { return llvm::dyn_cast<RankedTensorType>(v.getType()); }

/// What measuring one function body yields: the live bytes after each op, the FLOPs, each split
/// into the part that grows with the sub-batch and the fixed part (see Classifier), and the
/// kernels it launches.
struct FunctionProfile {
  SmallVector<Linear> live;
  Linear flops;
  int64_t kernels = 0;
};

/// Splits a bound function's values into per-sequence and fixed ones. With `scaleBy` = 0 nothing
/// is split: everything is reported as fixed (the raw totals fitModules compares across two
/// bindings).
struct Classifier {
  int64_t scaleBy = 0;

  Linear split(double amount, bool perSequence) const {
    if (scaleBy == 0 || !perSequence)
      return {amount, 0};
    return {0, amount / double(scaleBy)};
  }
};

/// Live bytes after every op of `func` (its arguments excluded: they are boundary values and
/// parameters, counted by the caller), with a reshape sharing its operand's bytes as the emitter
/// makes it, and every value freed after its last use.
FunctionProfile profileFunction(func::FuncOp func, const Classifier &classifier) {
  Block &body = func.getBody().front();

  // Shapes of the parameters and of their transposes: a value of one of these shapes that
  // depends on the inputs is a parameter gradient, whose size does not depend on the batch.
  llvm::DenseSet<Type> parameterShaped;
  llvm::DenseSet<Value> dependsOnInputs;
  for (BlockArgument arg : body.getArguments()) {
    if (func.getArgAttr(arg.getArgNumber(), "sl.param")) {
      auto type = llvm::cast<RankedTensorType>(arg.getType());
      parameterShaped.insert(type);
      if (type.getRank() == 2)
        parameterShaped.insert(
            RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)}, type.getElementType()));
      continue;
    }
    dependsOnInputs.insert(arg);
  }
  auto perSequence = [&](Value v) {
    auto type = rankedOf(v);
    return type && type.getRank() > 0 && dependsOnInputs.contains(v) &&
           !parameterShaped.contains(type);
  };

  // The value whose bytes a value uses: itself, or for a reshape its operand's owner.
  llvm::DenseMap<Value, Value> owner;
  llvm::DenseMap<Value, unsigned> defined, lastUse;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  unsigned end = ops.size();

  FunctionProfile profile;
  for (auto [index, op] : llvm::enumerate(ops)) {
    bool dependent =
        llvm::any_of(op->getOperands(), [&](Value v) { return dependsOnInputs.contains(v); });
    if (dependent)
      for (Value result : op->getResults())
        dependsOnInputs.insert(result);
    profile.flops += classifier.split(flopsOf(op), dependent);
    if (isKernel(op))
      ++profile.kernels;

    for (Value operand : op->getOperands())
      if (Value root = owner.lookup(operand))
        lastUse[root] = index;
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(op)) {
      if (Value root = owner.lookup(reshape.getInput()))
        owner[reshape.getResult()] = root;
      continue;
    }
    for (Value result : op->getResults()) {
      owner[result] = result;
      defined[result] = index;
      lastUse[result] = index;
    }
  }
  for (Value returned : body.getTerminator()->getOperands())
    if (Value root = owner.lookup(returned))
      lastUse[root] = end;

  // Bytes come alive at definition and die after the last use: a running sum over the ops.
  SmallVector<Linear> delta(end + 2);
  for (auto [value, index] : defined) {
    Linear bytes = classifier.split(bytesOf(value.getType()), perSequence(value));
    delta[index] += bytes;
    delta[lastUse[value] + 1] += Linear{-bytes.fixed, -bytes.perSequence};
  }
  Linear running;
  for (unsigned index = 0; index <= end; ++index) {
    running += delta[index];
    profile.live.push_back(running);
  }
  return profile;
}

/// Everything measured in one module; Linear figures as Classifier makes them.
struct Measurement {
  ModelCosts costs;
  SmallVector<SmallVector<Linear>> forwardLive, backwardLive;
};

FailureOr<Measurement> measure(ModuleOp module, const Classifier &classifier,
                               bool forwardOnly) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return mlir::emitError(module.getLoc(), "sl-plan: no @forward function");

  Measurement m;
  ModelCosts &costs = m.costs;
  llvm::StringMap<std::pair<double, double>> parameters; // bytes, fp32 bytes
  llvm::DenseMap<Value, int> boundaryIndex;
  auto boundaryOf = [&](Value v) {
    auto [it, inserted] = boundaryIndex.try_emplace(v, costs.boundary.size());
    if (inserted) {
      BoundaryValue value;
      auto type = rankedOf(v);
      value.bytes = classifier.split(bytesOf(v.getType()), type && type.getRank() > 0);
      value.isFloat = type && llvm::isa<FloatType>(type.getElementType());
      costs.boundary.push_back(value);
    }
    return it->second;
  };

  // Each stage function's forward and backward profiles.
  llvm::DenseMap<Operation *, std::pair<FunctionProfile, FunctionProfile>> profiles;
  Block &body = forward.getBody().front();
  for (Operation &op : body) {
    if (auto param = llvm::dyn_cast<ParamOp>(op)) {
      parameters[param.getName()] = {bytesOf(param.getType()), 4 * elementsOf(param.getType())};
      continue;
    }
    auto layer = llvm::dyn_cast<LayerOp>(op);
    if (!layer)
      continue;
    int stageIndex = costs.stages.size();
    StageCosts stage;
    stage.callee = layer.getCallee().str();
    stage.kind = layer.getStage().str();
    stage.index = layer.getIndex();
    for (Value param : layer.getParams())
      stage.parameterBytes += int64_t(bytesOf(param.getType()));
    for (Value input : layer.getInputs()) {
      int id = boundaryOf(input);
      costs.boundary[id].consumers.push_back(stageIndex);
      stage.inputs.push_back(id);
    }
    for (Value result : layer.getResults()) {
      int id = boundaryOf(result);
      costs.boundary[id].producer = stageIndex;
      stage.outputs.push_back(id);
    }

    auto stageFunc = module.lookupSymbol<func::FuncOp>(layer.getCallee());
    auto backwardFunc = module.lookupSymbol<func::FuncOp>((layer.getCallee() + "_backward").str());
    if (!stageFunc || stageFunc.isExternal())
      return mlir::emitError(layer.getLoc(), "sl-plan: no body for stage function @")
             << layer.getCallee();
    if (!forwardOnly && (!backwardFunc || backwardFunc.isExternal()))
      return mlir::emitError(layer.getLoc(), "sl-plan: stage @")
             << layer.getCallee() << " has no backward function; run sl-autodiff first";
    // Identical blocks share one stage function (sl-partition-layers): each is measured once.
    auto [measured, first] = profiles.try_emplace(stageFunc.getOperation());
    if (first) {
      measured->second.first = profileFunction(stageFunc, classifier);
      // A forward-only step has no backward: its FLOPs and workspace are zero.
      if (!forwardOnly)
        measured->second.second = profileFunction(backwardFunc, classifier);
    }
    const auto &[forwardProfile, backwardProfile] = measured->second;
    stage.forwardFlops = forwardProfile.flops;
    stage.forwardKernels = forwardProfile.kernels;
    m.forwardLive.push_back(forwardProfile.live);
    stage.backwardFlops = backwardProfile.flops;
    stage.backwardKernels = backwardProfile.kernels;
    m.backwardLive.push_back(backwardProfile.live);
    costs.stages.push_back(std::move(stage));
  }
  for (Value returned : body.getTerminator()->getOperands())
    if (auto it = boundaryIndex.find(returned); it != boundaryIndex.end())
      costs.boundary[it->second].returned = true;

  if (costs.stages.empty())
    return mlir::emitError(forward.getLoc(),
                           "sl-plan: @forward calls no stages; run sl-partition-layers and "
                           "sl-autodiff first (--sl-train runs sl-plan before binding shapes)");
  costs.forwardOnly = forwardOnly;
  for (auto &entry : parameters) {
    costs.parameterBytes += int64_t(entry.second.first);
    costs.parameterBytesFp32 += int64_t(entry.second.second);
  }
  return m;
}

Envelope envelopeOf(ArrayRef<Linear> points) {
  Envelope envelope;
  for (const Linear &point : points)
    envelope.add(point);
  return envelope;
}

/// The sub-batch size @forward's inputs are bound at: the size of their batch dimensions (named
/// by sl.dims as sl-bind-shapes reads them, else axis 0 of the first input).
FailureOr<int64_t> boundBatchOf(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return mlir::emitError(module.getLoc(), "sl-plan: no @forward function");
  std::optional<int64_t> batch;
  for (BlockArgument arg : forward.getArguments()) {
    auto type = rankedOf(arg);
    auto names = forward.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), "sl.dims");
    if (!type || !names)
      continue;
    for (auto [axis, name] : llvm::enumerate(names)) {
      auto str = llvm::dyn_cast<StringAttr>(name);
      if (!str || !llvm::is_contained({"batch", "batch_size", "N"}, str.getValue()) ||
          axis >= unsigned(type.getRank()))
        continue;
      int64_t size = type.getDimSize(axis);
      if (ShapedType::isDynamic(size))
        return mlir::emitError(forward.getLoc(),
                               "sl-plan: the batch dimension of @forward's input #")
               << arg.getArgNumber() << " is not bound; run sl-bind-shapes first";
      if (batch && *batch != size)
        return mlir::emitError(forward.getLoc(),
                               "sl-plan: @forward's inputs disagree on the batch size (")
               << *batch << " and " << size << ")";
      batch = size;
    }
  }
  if (!batch && forward.getNumArguments() > 0)
    if (auto type = rankedOf(forward.getArgument(0));
        type && type.getRank() > 0 && !type.isDynamicDim(0))
      batch = type.getDimSize(0);
  if (!batch || *batch <= 0)
    return mlir::emitError(forward.getLoc(),
                           "sl-plan: cannot tell the batch size @forward is bound at: give "
                           "its inputs sl.dims = [\"batch\", ...]");
  return *batch;
}

} // namespace

FailureOr<ModelCosts> analyseBoundModule(ModuleOp module, bool forwardOnly) {
  FailureOr<int64_t> b0 = boundBatchOf(module);
  if (failed(b0))
    return failure();
  FailureOr<Measurement> m = measure(module, Classifier{*b0}, forwardOnly);
  if (failed(m))
    return failure();
  for (auto [stage, forwardLive, backwardLive] :
       llvm::zip(m->costs.stages, m->forwardLive, m->backwardLive)) {
    stage.forwardWorkspace = envelopeOf(forwardLive);
    stage.backwardWorkspace = envelopeOf(backwardLive);
  }
  m->costs.boundSubBatchSize = *b0;
  return m->costs;
}

FailureOr<ModelCosts> fitModules(ModuleOp atB1, int64_t b1, ModuleOp atB2, int64_t b2,
                                 bool forwardOnly) {
  FailureOr<Measurement> m1 = measure(atB1, Classifier{}, forwardOnly);
  if (failed(m1))
    return failure();
  FailureOr<Measurement> m2 = measure(atB2, Classifier{}, forwardOnly);
  if (failed(m2))
    return failure();
  ModelCosts &c1 = m1->costs, &c2 = m2->costs;
  if (c1.stages.size() != c2.stages.size() || c1.boundary.size() != c2.boundary.size())
    return mlir::emitError(atB1.getLoc(),
                           "sl-plan: the model partitions differently at sub-batch sizes ")
           << b1 << " and " << b2;

  // Raw totals are in `fixed`; the line through (b1, t1) and (b2, t2).
  auto fit = [&](const Linear &at1, const Linear &at2) {
    double slope = (at2.fixed - at1.fixed) / double(b2 - b1);
    return Linear{std::max(0.0, at1.fixed - slope * double(b1)), std::max(0.0, slope)};
  };
  auto fitPoints = [&](ArrayRef<Linear> p1, ArrayRef<Linear> p2) {
    Envelope envelope;
    if (p1.size() == p2.size()) {
      for (auto [a, b] : llvm::zip(p1, p2))
        envelope.add(fit(a, b));
      return envelope;
    }
    // Folding made the two bodies differ: fit the peaks instead.
    auto peak = [](ArrayRef<Linear> points) {
      double most = 0;
      for (const Linear &p : points)
        most = std::max(most, p.fixed);
      return Linear{most, 0};
    };
    envelope.add(fit(peak(p1), peak(p2)));
    return envelope;
  };

  ModelCosts costs = c1;
  for (auto [index, stage] : llvm::enumerate(costs.stages)) {
    stage.forwardFlops = fit(c1.stages[index].forwardFlops, c2.stages[index].forwardFlops);
    stage.backwardFlops = fit(c1.stages[index].backwardFlops, c2.stages[index].backwardFlops);
    stage.forwardWorkspace = fitPoints(m1->forwardLive[index], m2->forwardLive[index]);
    stage.backwardWorkspace = fitPoints(m1->backwardLive[index], m2->backwardLive[index]);
  }
  for (auto [index, value] : llvm::enumerate(costs.boundary))
    value.bytes = fit(c1.boundary[index].bytes, c2.boundary[index].bytes);
  costs.boundSubBatchSize = 0;
  return costs;
}

//===--------------------------------------------------------------------------------------------===//
// Predicting
//===--------------------------------------------------------------------------------------------===//

llvm::StringRef stringifyScheduleMode(ScheduleMode mode) {
  return mode == ScheduleMode::SpeedLoader ? "speedloader" : "canonical";
}

std::optional<ScheduleMode> parseScheduleMode(llvm::StringRef text) {
  if (text == "speedloader")
    return ScheduleMode::SpeedLoader;
  if (text == "canonical")
    return ScheduleMode::Canonical;
  return std::nullopt;
}

namespace {

/// The stages whose parameters are on the device together: the prologue, K consecutive blocks,
/// the epilogue; and what crosses the group's edges for one sub-batch.
struct Group {
  SmallVector<int> stages;
  bool isEpilogue = false;
  double parameterBytes = 0;
  double inputs = 0;          // read from outside the group (previous group, model inputs)
  double inputGradients = 0;  // gradients of the float inputs another group computed
  double outputs = 0;         // read by later groups or returned
  double outputGradients = 0; // gradients of the float outputs later groups read
  double internal = 0;        // passed between the group's own stages
  double forwardFlops = 0;
  double backwardFlops = 0;
  double recomputeFlops = 0; // forward of all but the last stage: the inputs backward needs
  // The kernels of the same, for one sub-batch.
  int64_t forwardKernels = 0, backwardKernels = 0, recomputeKernels = 0;
};

SmallVector<Group> groupsOf(const ModelCosts &costs, int64_t liveBlocks, int64_t b,
                            SmallVectorImpl<int> &groupOfStage) {
  SmallVector<Group> groups;
  groupOfStage.assign(costs.stages.size(), 0);
  for (auto [index, stage] : llvm::enumerate(costs.stages)) {
    bool joins = stage.kind == "block" && !groups.empty() &&
                 costs.stages[groups.back().stages.front()].kind == "block" &&
                 int64_t(groups.back().stages.size()) < liveBlocks;
    if (!joins) {
      groups.emplace_back();
      groups.back().isEpilogue = stage.kind == "epilogue";
    }
    groups.back().stages.push_back(index);
    groupOfStage[index] = groups.size() - 1;
  }
  for (auto [g, group] : llvm::enumerate(groups)) {
    for (int s : group.stages) {
      const StageCosts &stage = costs.stages[s];
      group.parameterBytes += double(stage.parameterBytes);
      group.forwardFlops += stage.forwardFlops.at(b);
      group.backwardFlops += stage.backwardFlops.at(b);
      group.forwardKernels += stage.forwardKernels;
      group.backwardKernels += stage.backwardKernels;
      if (s != group.stages.back()) {
        group.recomputeFlops += stage.forwardFlops.at(b);
        group.recomputeKernels += stage.forwardKernels;
      }
    }
    for (const BoundaryValue &value : costs.boundary) {
      bool producedHere = value.producer >= 0 && groupOfStage[value.producer] == int(g);
      bool readHere =
          llvm::any_of(value.consumers, [&](int s) { return groupOfStage[s] == int(g); });
      bool readLater = value.returned || llvm::any_of(value.consumers, [&](int s) {
                         return groupOfStage[s] != int(g);
                       });
      double bytes = value.bytes.at(b);
      if (readHere && !producedHere) {
        group.inputs += bytes;
        if (value.isFloat && value.producer >= 0)
          group.inputGradients += bytes;
      }
      if (producedHere && readHere)
        group.internal += bytes;
      if (producedHere && readLater) {
        group.outputs += bytes;
        if (value.isFloat && !value.returned)
          group.outputGradients += bytes;
      }
    }
  }
  return groups;
}

/// One step of the schedule between parameter fetches: a group's forward over the sub-batches,
/// the epilogue's forward and backward, or a group's backward.
struct Phase {
  /// The phase's own activations and activation gradients, each direction.
  double hostToDevice = 0, deviceToHost = 0, flops = 0;
  /// Kernels launched, over all the phase's sub-batches.
  int64_t kernels = 0;
  /// Its group's parameters fetched, and its parameter gradients offloaded (none in a forward
  /// phase): issued in the neighbouring phases, not in this one (see predict).
  double parameterFetch = 0, gradientOffload = 0;
};

} // namespace

Prediction predictTime(const ModelCosts &costs, const PlanConfig &config,
                       const Machine &machine) {
  const int64_t b = config.subBatchSize;
  const double n = double(config.numSubBatches);
  SmallVector<int> groupOfStage;
  SmallVector<Group> groups =
      groupsOf(costs, std::max<int64_t>(1, config.liveBlocks), b, groupOfStage);

  // Execution order: forward of every group but the epilogue, the epilogue, backward in reverse.
  SmallVector<int> forwardOrder, backwardOrder;
  std::optional<int> epilogue;
  for (auto [g, group] : llvm::enumerate(groups)) {
    if (group.isEpilogue)
      epilogue = g;
    else
      forwardOrder.push_back(g);
  }
  backwardOrder.assign(forwardOrder.rbegin(), forwardOrder.rend());
  SmallVector<std::pair<char, int>> order; // 'F', 'E', 'B'
  for (int g : forwardOrder)
    order.push_back({'F', g});
  // A forward-only step runs the epilogue forward like every other group, and stops there.
  if (epilogue)
    order.push_back({costs.forwardOnly ? 'F' : 'E', *epilogue});
  if (!costs.forwardOnly)
    for (int g : backwardOrder)
      order.push_back({'B', g});

  double modelInputs = 0, boundaryActivation = 0;
  for (const BoundaryValue &value : costs.boundary) {
    double bytes = value.bytes.at(b);
    if (value.producer < 0)
      modelInputs += bytes;
    if (value.isFloat && value.producer >= 0 && !value.returned)
      boundaryActivation = std::max(boundaryActivation, bytes);
  }

  // Traffic and compute per phase. Both modes offload every group's outputs and input gradients
  // per sub-batch and prefetch them back; SpeedLoader fetches each group's parameters once per
  // pass over all the sub-batches, canonical once per sub-batch.
  bool speedloader = config.mode == ScheduleMode::SpeedLoader;
  double fetches = speedloader ? 1 : n;
  SmallVector<Phase> phases;
  for (auto [kind, g] : order) {
    const Group &group = groups[g];
    Phase phase;
    phase.hostToDevice = n * group.inputs;
    if (kind == 'B')
      phase.hostToDevice += n * group.outputGradients;
    phase.deviceToHost = kind == 'F' ? n * group.outputs : n * group.inputGradients;
    phase.parameterFetch = fetches * group.parameterBytes;
    phase.gradientOffload = kind == 'F' ? 0 : fetches * group.parameterBytes;
    double flops = kind == 'F'   ? group.forwardFlops
                   : kind == 'E' ? group.forwardFlops + group.backwardFlops
                                 : group.backwardFlops + group.recomputeFlops;
    phase.flops = n * flops;
    int64_t kernels = kind == 'F'   ? group.forwardKernels
                      : kind == 'E' ? group.forwardKernels + group.backwardKernels
                                    : group.backwardKernels + group.recomputeKernels;
    phase.kernels = config.numSubBatches * kernels;
    phases.push_back(std::move(phase));
  }

  Prediction p;
  p.boundaryActivationBytes = boundaryActivation;
  // The phases' time before the first backward phase: what the host optimizer waits for.
  double beforeBackward = 0;
  for (auto [index, phase] : llvm::enumerate(phases)) {
    p.hostToDeviceBytes += phase.hostToDevice + phase.parameterFetch;
    p.deviceToHostBytes += phase.deviceToHost + phase.gradientOffload;
    double compute =
        phase.flops / machine.flopsPerSecond + double(phase.kernels) * machine.kernelSeconds;
    p.computeSeconds += compute;
    p.kernels += phase.kernels;
    p.kernelSeconds += double(phase.kernels) * machine.kernelSeconds;
    // Within a phase, compute and both directions of the link overlap; phases follow each
    // other. A phase cannot compute before its parameters are on the device, so their fetch
    // runs in the phase before (each pass issues the next one's fetch at its start), and its
    // parameter gradients leave after its last sub-batch, during the phase after. The first
    // phase's first fetch and the last phase's last offload stand alone (below); canonical's
    // other fetches and offloads of those groups overlap the phase's other sub-batches.
    double toDevice = phase.hostToDevice;
    if (index + 1 < phases.size())
      toDevice += phases[index + 1].parameterFetch;
    if (index == 0)
      toDevice += phase.parameterFetch * (1 - 1 / fetches);
    double toHost = phase.deviceToHost;
    if (index > 0)
      toHost += phases[index - 1].gradientOffload;
    if (index + 1 == phases.size())
      toHost += phase.gradientOffload * (1 - 1 / fetches);
    // One sub-batch goes through prefetch, compute and offload in turn, and the next one can
    // enter a stage only when it is free: N sub-batches take the three stages of one, then N - 1
    // times the slowest stage. With one sub-batch nothing overlaps: a boundary value is
    // offloaded, and prefetched back by the next phase, on the critical path.
    double perSubBatch[] = {phase.hostToDevice / n / machine.linkBytesPerSecond, compute / n,
                            phase.deviceToHost / n / machine.linkBytesPerSecond};
    double pipeline = perSubBatch[0] + perSubBatch[1] + perSubBatch[2] +
                      (n - 1) * *std::max_element(std::begin(perSubBatch), std::end(perSubBatch));
    double seconds = std::max({pipeline, compute, toDevice / machine.linkBytesPerSecond,
                               toHost / machine.linkBytesPerSecond});
    if (order[index].first != 'B') // the forward phases and the epilogue's all come first
      beforeBackward += seconds;
    p.stepSeconds += seconds;
  }
  // Nothing overlaps the first parameter fetch or the last gradient offload.
  if (!phases.empty()) {
    double firstFetch = phases.front().parameterFetch / fetches / machine.linkBytesPerSecond;
    beforeBackward += firstFetch;
    p.stepSeconds += firstFetch;
    p.stepSeconds += phases.back().gradientOffload / fetches / machine.linkBytesPerSecond;
  }
  // The host's AdamW updates a group once its gradients are offloaded, overlapping the rest of
  // the backward; it cannot start before the backward does, so the step takes at least the
  // forward (the epilogue's fused pass included) and then the whole update.
  if (machine.hostOptimizerParamsPerSecond > 0 && !costs.forwardOnly) {
    p.optimizerSeconds =
        double(costs.parameterBytesFp32) / 4 / machine.hostOptimizerParamsPerSecond;
    p.stepSeconds = std::max(p.stepSeconds, beforeBackward + p.optimizerSeconds);
  }
  // AdamW's fp32 master weights and two moments, kept on the host outside the pool, sharded
  // over the ranks by ZeRO-3.
  p.optimizerStateBytes = costs.forwardOnly ? 0.0
                                             : 3 * double(costs.parameterBytesFp32) /
                                                   double(std::max<int64_t>(1, config.world));
  return p;
}

Prediction predict(const ModelCosts &costs, const PlanConfig &config, const Machine &machine,
                   const StepMemoryFn &memory, MemoryQuery query) {
  Prediction p = predictTime(costs, config, machine);
  // Memory: the step laid out as sl-allocate lays it out.
  StepMemory step = memory(config, query);
  p.deviceBytes = step.deviceArenaBytes;
  p.devicePeak = step.devicePeak;
  p.deviceTerms = step.deviceTerms;
  p.hostPoolBytes = step.hostPoolBytes;
  p.hostPeak = step.hostPeak;
  p.hostTerms = step.hostTerms;
  p.hostBytes = p.hostPoolBytes + p.optimizerStateBytes;
  return p;
}

//===--------------------------------------------------------------------------------------------===//
// Choosing
//===--------------------------------------------------------------------------------------------===//

namespace {

// Bounds of the searches, reached only by a model with no per-sequence memory or an enormous
// budget: a million sequences per sub-batch or sub-batches per step is beyond any real step.
constexpr int64_t kMaxSearch = int64_t(1) << 20;

/// The largest x in [1, limit] with fits(x), for a `fits` that holds up to some x and not
/// beyond; 0 if fits(1) fails.
int64_t largestFitting(int64_t limit, llvm::function_ref<bool(int64_t)> fits) {
  if (!fits(1))
    return 0;
  int64_t good = 1;
  while (good < limit && fits(std::min(limit, 2 * good)))
    good = std::min(limit, 2 * good);
  int64_t bad = std::min(limit, 2 * good) + 1;
  while (bad - good > 1) {
    int64_t mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

std::string bytesWithCount(double bytes) {
  return llvm::formatv("{0} ({1} bytes)", formatBytes(bytes), int64_t(std::ceil(bytes))).str();
}

} // namespace

FailureOr<PlanConfig> choose(const ModelCosts &costs, const PlanRequest &request,
                             const Machine &machine, const StepMemoryFn &memory,
                             llvm::function_ref<InFlightDiagnostic()> emitError) {
  if (request.batch < 0 || request.subBatchSize < 0 || request.numSubBatches < 0 ||
      request.liveBlocks < 0 || request.world < 1)
    return emitError() << "sl-plan: batch, sub-batch-size, num-sub-batches and live-blocks must "
                          "not be negative and world must be at least 1";
  PlanConfig config;
  config.mode = request.mode;
  config.world = request.world;

  int blocks = costs.numBlocks();
  if (request.liveBlocks > std::max(blocks, 1))
    return emitError() << "sl-plan: live-blocks=" << request.liveBlocks << " but the model has "
                       << blocks << " blocks";
  config.liveBlocks = request.liveBlocks ? request.liveBlocks : 1;

  int64_t b = request.subBatchSize, n = request.numSubBatches;
  if (int64_t bound = costs.boundSubBatchSize) {
    if (b && b != bound)
      return emitError() << "sl-plan: the module is bound at sub-batch size " << bound << ", not "
                         << b << "; bind shapes at the sub-batch size";
    b = bound;
  }
  if (request.batch) {
    if (b && n && b * n != request.batch)
      return emitError() << "sl-plan: batch=" << request.batch << " is not sub-batch-size=" << b
                         << " x num-sub-batches=" << n;
    if (b && request.batch % b)
      return emitError() << "sl-plan: batch=" << request.batch
                         << " is not a multiple of sub-batch-size=" << b;
    if (n && request.batch % n)
      return emitError() << "sl-plan: batch=" << request.batch
                         << " is not a multiple of num-sub-batches=" << n;
    if (n && !b)
      b = request.batch / n;
  }

  bool unschedulable = false;
  auto predictAt = [&](int64_t size, int64_t count, bool device,
                       int64_t liveBlocks = 0) {
    PlanConfig c = config;
    if (liveBlocks)
      c.liveBlocks = liveBlocks;
    c.subBatchSize = size;
    c.numSubBatches = count;
    MemoryQuery query;
    query.device = device;
    query.host = !device;
    Prediction p = predict(costs, c, machine, memory, query);
    // A step that cannot be scheduled needs infinite memory; its error is out already.
    unschedulable |= std::isinf(p.deviceBytes) || std::isinf(p.hostBytes);
    return p;
  };
  // The device must hold the step at the number of sub-batches it will have: the one given (or
  // batch / b); when the host budget chooses it later, any number: the bound for more than
  // kDeviceLaidOutSubBatches (the step laid out at that many, with kArenaGrowthSlack), which also
  // covers fewer (the arena grows little with N); else 1.
  auto deviceCount = [&](int64_t size) -> int64_t {
    if (n)
      return n;
    if (request.batch)
      return request.batch / size;
    return request.hostBudget ? kDeviceLaidOutSubBatches + 1 : 1;
  };
  auto deviceTooSmall = [&](int64_t size) -> LogicalResult {
    double needs = predictAt(size, deviceCount(size), true).deviceBytes;
    if (unschedulable)
      return failure();
    return emitError() << "sl-plan: sub-batch-size=" << size
                       << " with live-blocks=" << config.liveBlocks << " needs "
                       << bytesWithCount(needs)
                       << " of device memory, more than the budget of "
                       << bytesWithCount(*request.deviceBudget);
  };
  auto hostTooSmall = [&](int64_t size, int64_t count) -> LogicalResult {
    double needs = predictAt(size, count, false).hostBytes;
    if (unschedulable)
      return failure();
    return emitError() << "sl-plan: num-sub-batches=" << count << " of sub-batch-size=" << size
                       << " needs " << bytesWithCount(needs)
                       << " of host memory, more than the budget of "
                       << bytesWithCount(*request.hostBudget);
  };
  auto deviceFits = [&](int64_t size) {
    return !request.deviceBudget ||
           predictAt(size, deviceCount(size), true).deviceBytes <= *request.deviceBudget;
  };
  auto hostFits = [&](int64_t size, int64_t count, int64_t liveBlocks = 0) {
    return !request.hostBudget ||
           predictAt(size, count, false, liveBlocks).hostBytes <= *request.hostBudget;
  };

  bool chooseSubBatch = !b;
  if (chooseSubBatch) {
    if (request.deviceBudget) {
      if (request.batch) {
        for (int64_t size = request.batch; size >= 1 && !b; --size)
          if (request.batch % size == 0 && deviceFits(size))
            b = size;
      } else {
        b = largestFitting(kMaxSearch, deviceFits);
      }
      if (!b)
        return deviceTooSmall(1);
    } else if (request.batch) {
      b = request.batch;
    } else {
      return emitError() << "sl-plan: nothing sets the sub-batch size: give batch=, "
                            "sub-batch-size= or a device-memory= budget to choose it from";
    }
  } else if (!deviceFits(b)) {
    return deviceTooSmall(b);
  }

  if (request.batch && !n)
    n = request.batch / b;
  if (!n) {
    // The host must hold at least one sub-batch: a sub-batch chosen for the device alone may
    // have to shrink for it.
    if (chooseSubBatch && !hostFits(b, 1))
      b = largestFitting(b, [&](int64_t size) { return hostFits(size, 1); });
    if (!b)
      return hostTooSmall(1, 1);
    n = request.hostBudget
            ? largestFitting(kMaxSearch, [&](int64_t count) { return hostFits(b, count); })
            : 1;
    if (!n)
      return hostTooSmall(b, 1);
  } else if (!hostFits(b, n)) {
    return hostTooSmall(b, n);
  }
  if (unschedulable)
    return failure();
  config.subBatchSize = b;
  config.numSubBatches = n;

  // Time: where live-blocks, or the sub-batch size of a given batch, was left to the planner, a
  // configuration predicted faster than the memory-first one by kTimeChoiceMinGain, if it fits.
  // Without batch=, the sub-batch size and count are what the budgets allow: a smaller
  // sub-batch would do less work per step, not the same work faster. A smaller sub-batch
  // overlaps more of its transfers but launches more, smaller kernels: without the machine's
  // cost per kernel the model cannot weigh the two, and keeps the largest.
  bool chooseLiveBlocks = !request.liveBlocks && blocks > 1;
  bool chooseSize =
      chooseSubBatch && request.batch && !request.numSubBatches && machine.kernelSeconds > 0;
  if (!chooseLiveBlocks && !chooseSize)
    return config;
  struct Candidate {
    int64_t size, count, liveBlocks;
    double seconds;
  };
  auto secondsOf = [&](int64_t size, int64_t count, int64_t liveBlocks) {
    PlanConfig c = config;
    c.subBatchSize = size;
    c.numSubBatches = count;
    c.liveBlocks = liveBlocks;
    return predictTime(costs, c, machine).stepSeconds;
  };
  double memoryFirst = secondsOf(b, n, config.liveBlocks);
  SmallVector<Candidate> faster;
  for (int64_t size = chooseSize ? 1 : b; size <= b; ++size) {
    if (chooseSize && request.batch % size)
      continue;
    int64_t count = chooseSize ? request.batch / size : n;
    for (int64_t k = chooseLiveBlocks ? 1 : config.liveBlocks;
         k <= (chooseLiveBlocks ? blocks : config.liveBlocks); ++k) {
      double seconds = secondsOf(size, count, k);
      if (seconds < memoryFirst * (1 - kTimeChoiceMinGain))
        faster.push_back({size, count, k, seconds});
    }
  }
  // Fastest first; between equals the larger sub-batch and the fewer live blocks (less memory).
  llvm::stable_sort(faster, [](const Candidate &x, const Candidate &y) {
    if (x.seconds != y.seconds)
      return x.seconds < y.seconds;
    if (x.size != y.size)
      return x.size > y.size;
    return x.liveBlocks < y.liveBlocks;
  });
  if (faster.size() > size_t(kTimeChoiceMaxLayouts))
    faster.resize(kTimeChoiceMaxLayouts);
  for (const Candidate &candidate : faster) {
    // deviceCount() reads `n`, the count of the memory-first choice; a candidate's own is
    // batch / size here.
    bool fits = (!request.deviceBudget ||
                 predictAt(candidate.size, candidate.count, true, candidate.liveBlocks)
                         .deviceBytes <= *request.deviceBudget) &&
                hostFits(candidate.size, candidate.count, candidate.liveBlocks);
    if (unschedulable)
      return failure();
    if (fits) {
      config.subBatchSize = candidate.size;
      config.numSubBatches = candidate.count;
      config.liveBlocks = candidate.liveBlocks;
      break;
    }
  }
  return config;
}

//===--------------------------------------------------------------------------------------------===//
// Byte sizes
//===--------------------------------------------------------------------------------------------===//

std::optional<double> parseByteSize(llvm::StringRef text) {
  text = text.trim();
  size_t unitStart = text.find_first_not_of("0123456789.eE+");
  // An exponent's `e` must be followed by digits; "1e9" is a number, "16GiB" has no exponent.
  llvm::StringRef number = text.substr(0, unitStart);
  llvm::StringRef unit = unitStart == llvm::StringRef::npos ? "" : text.substr(unitStart).trim();
  double value;
  if (number.empty() || number.getAsDouble(value) || value < 0)
    return std::nullopt;
  std::optional<double> scale = llvm::StringSwitch<std::optional<double>>(unit.lower())
                                    .Cases("", "b", 1.0)
                                    .Case("kb", 1e3)
                                    .Case("mb", 1e6)
                                    .Case("gb", 1e9)
                                    .Case("tb", 1e12)
                                    .Case("kib", 1024.0)
                                    .Case("mib", 1024.0 * 1024)
                                    .Case("gib", 1024.0 * 1024 * 1024)
                                    .Case("tib", 1024.0 * 1024 * 1024 * 1024)
                                    .Default(std::nullopt);
  if (!scale)
    return std::nullopt;
  return std::floor(value * *scale);
}

LogicalResult parseMemoryBudget(llvm::StringRef pass, llvm::StringRef option,
                                llvm::StringRef text, std::optional<double> &budget,
                                llvm::function_ref<InFlightDiagnostic()> emitError) {
  budget.reset();
  if (text.empty())
    return success();
  budget = parseByteSize(text);
  if (!budget)
    return emitError() << pass << ": " << option << "='" << text
                       << "' is not a byte count (a number, optionally with B, KB, MB, GB, TB, "
                          "KiB, MiB, GiB or TiB)";
  return success();
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0)
    return llvm::formatv("{0} B", int64_t(std::ceil(bytes))).str();
  return llvm::formatv("{0:F2} {1}", bytes, units[unit]).str();
}

} // namespace sl
