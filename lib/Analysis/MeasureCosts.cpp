//===- MeasureCosts.cpp - the cost model: measuring a partitioned, differentiated module ------===//
//
// Every stage's parameters, boundary values, FLOPs, kernels and workspace, as linear functions of
// the sub-batch size (analyseBoundModule, fitModules). Predicting is PredictStep.cpp, choosing
// ChoosePlan.cpp; CostModel.h declares all three.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/CostModel.h"

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/SLDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace sl {

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

} // namespace sl
