//===- PredictStep.cpp - the cost model: predicting a sub-batched step ------------------------===//
//
// The SpeedLoader and canonical schedules phase by phase (the schedule sl-schedule-subbatches
// emits): link traffic and time from the measured costs and a machine; the device arena and host
// pool from the step itself, scheduled and laid out (StepMemoryFn, sl/Analysis/StepMemory.h).
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/CostModel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace sl {

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
  /// phase): issued in the neighbouring phases, not in this one (see predict). With W ranks these
  /// are a rank's 1/W; the other (W - 1)/W of the parameters is all-gathered from the other
  /// ranks (parameterGather), and of the gradients reduce-scattered to them (gradientReduce).
  double parameterFetch = 0, gradientOffload = 0;
  double parameterGather = 0, gradientReduce = 0;
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
  // per sub-batch and prefetch them back. SpeedLoader runs each phase over all the sub-batches,
  // fetching its group's parameters once; canonical (sl-schedule-subbatches' order) takes each
  // sub-batch through the whole model in turn, N passes of one sub-batch, each fetching every
  // group's parameters again.
  bool speedloader = config.mode == PlanMode::speedloader;
  const double perPhase = speedloader ? n : 1; // sub-batches a phase runs
  // The host's AdamW can start on a group only once its last sub-batch's gradients are in: not
  // before the last pass's first backward phase.
  size_t lastPassBackward =
      llvm::find_if(order, [](auto &step) { return step.first == 'B'; }) - order.begin();
  if (!speedloader) {
    SmallVector<std::pair<char, int>> onePass = order;
    for (int64_t pass = 1; pass < config.numSubBatches; ++pass) {
      lastPassBackward += onePass.size();
      order.append(onePass.begin(), onePass.end());
    }
  }
  // sl-shard-parameters' step for W ranks: each rank holds and fetches 1/W of every group, and the
  // collectives move the rest between the devices.
  const double world = double(std::max<int64_t>(1, config.world));
  const double ownShare = 1 / world, othersShare = (world - 1) / world;
  SmallVector<Phase> phases;
  for (auto [kind, g] : order) {
    const Group &group = groups[g];
    Phase phase;
    phase.hostToDevice = perPhase * group.inputs;
    if (kind == 'B')
      phase.hostToDevice += perPhase * group.outputGradients;
    phase.deviceToHost = kind == 'F' ? perPhase * group.outputs : perPhase * group.inputGradients;
    phase.parameterFetch = group.parameterBytes * ownShare;
    phase.gradientOffload = kind == 'F' ? 0 : group.parameterBytes * ownShare;
    phase.parameterGather = group.parameterBytes * othersShare;
    phase.gradientReduce = kind == 'F' ? 0 : group.parameterBytes * othersShare;
    double flops = kind == 'F'   ? group.forwardFlops
                   : kind == 'E' ? group.forwardFlops + group.backwardFlops
                                 : group.backwardFlops + group.recomputeFlops;
    phase.flops = perPhase * flops;
    int64_t kernels = kind == 'F'   ? group.forwardKernels
                      : kind == 'E' ? group.forwardKernels + group.backwardKernels
                                    : group.backwardKernels + group.recomputeKernels;
    phase.kernels = int64_t(perPhase) * kernels;
    phases.push_back(std::move(phase));
  }

  Prediction p;
  p.boundaryActivationBytes = boundaryActivation;
  auto collectiveSeconds = [&](double bytes) {
    return machine.collectiveBytesPerSecond > 0 ? bytes / machine.collectiveBytesPerSecond : 0.0;
  };
  // The phases' time before the last pass's first backward phase: what the host optimizer waits
  // for.
  double beforeBackward = 0;
  for (auto [index, phase] : llvm::enumerate(phases)) {
    p.hostToDeviceBytes += phase.hostToDevice + phase.parameterFetch;
    p.deviceToHostBytes += phase.deviceToHost + phase.gradientOffload;
    p.collectiveBytes += phase.parameterGather + phase.gradientReduce;
    double compute =
        phase.flops / machine.flopsPerSecond + double(phase.kernels) * machine.kernelSeconds;
    p.computeSeconds += compute;
    p.kernels += phase.kernels;
    p.kernelSeconds += double(phase.kernels) * machine.kernelSeconds;
    // Within a phase, compute and both directions of the link overlap; phases follow each
    // other. A phase cannot compute before its parameters are on the device, so their fetch
    // runs in the phase before (each pass issues the next one's fetch at its start), and its
    // parameter gradients leave after its last sub-batch, during the phase after. The first
    // phase's fetch and the last phase's offload stand alone (below).
    double toDevice = phase.hostToDevice;
    if (index + 1 < phases.size())
      toDevice += phases[index + 1].parameterFetch;
    double toHost = phase.deviceToHost;
    if (index > 0)
      toHost += phases[index - 1].gradientOffload;
    // The collectives run on a stream of their own, as the copies do: the next phase's gathers
    // and the previous phase's reduce-scatters, beside this phase's work.
    double collective = 0;
    if (index + 1 < phases.size())
      collective += phases[index + 1].parameterGather;
    if (index > 0)
      collective += phases[index - 1].gradientReduce;
    // One sub-batch goes through prefetch, compute and offload in turn, and the next one can
    // enter a stage only when it is free: N sub-batches take the three stages of one, then N - 1
    // times the slowest stage. With one sub-batch nothing overlaps: a boundary value is
    // offloaded, and prefetched back by the next phase, on the critical path.
    double perSubBatch[] = {phase.hostToDevice / perPhase / machine.linkBytesPerSecond,
                            compute / perPhase,
                            phase.deviceToHost / perPhase / machine.linkBytesPerSecond};
    double pipeline =
        perSubBatch[0] + perSubBatch[1] + perSubBatch[2] +
        (perPhase - 1) * *std::max_element(std::begin(perSubBatch), std::end(perSubBatch));
    double seconds = std::max({pipeline, compute, toDevice / machine.linkBytesPerSecond,
                               toHost / machine.linkBytesPerSecond, collectiveSeconds(collective)});
    if (index < lastPassBackward)
      beforeBackward += seconds;
    p.stepSeconds += seconds;
  }
  // Nothing overlaps the first parameter fetch (and gather) or the last gradient reduce-scatter
  // (and offload).
  if (!phases.empty()) {
    double firstFetch = phases.front().parameterFetch / machine.linkBytesPerSecond +
                        collectiveSeconds(phases.front().parameterGather);
    beforeBackward += firstFetch;
    p.stepSeconds += firstFetch;
    p.stepSeconds += phases.back().gradientOffload / machine.linkBytesPerSecond +
                     collectiveSeconds(phases.back().gradientReduce);
  }
  // The host's AdamW updates a group once its gradients are offloaded, overlapping the rest of
  // the backward; it cannot start before the backward does, so the step takes at least the
  // forward (the epilogue's fused pass included) and then the whole update.
  if (machine.hostOptimizerParamsPerSecond > 0 && !costs.forwardOnly) {
    // Each rank updates its own 1/W of the parameters.
    p.optimizerSeconds =
        double(costs.parameterBytesFp32) / 4 / world / machine.hostOptimizerParamsPerSecond;
    p.stepSeconds = std::max(p.stepSeconds, beforeBackward + p.optimizerSeconds);
  }
  // AdamW's fp32 master weights and two moments, kept on the host outside the pool, sharded
  // over the ranks by ZeRO-3.
  p.optimizerStateBytes = costs.forwardOnly ? 0.0 : 3 * double(costs.parameterBytesFp32) / world;
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

} // namespace sl
