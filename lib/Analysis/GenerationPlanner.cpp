//===- GenerationPlanner.cpp - sub-batches and placement of a generation step -------------------===//

#include "sl/Analysis/GenerationPlanner.h"

#include "sl/Analysis/CostModel.h"

#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <string>

using namespace mlir;

namespace sl {
namespace {

/// The placements to try, the planner's order (both on the device, else the weights, else the
/// caches, else neither) less those that weights-on-device= / kv-cache-on-device= rule out;
/// without a device budget, what they do not force streams, so there is one.
llvm::SmallVector<GenerationResidence> allowedResidences(const GenerationRequest &request) {
  std::optional<bool> weights = request.weightsOnDevice, cache = request.kvCacheOnDevice;
  bool deviceLimited = request.deviceBudget.has_value();
  // Both on the device, else the weights (they move once per step for every sequence), else the
  // caches, else neither.
  const GenerationResidence order[] = {{true, true}, {true, false}, {false, true}, {false, false}};
  llvm::SmallVector<GenerationResidence> allowed;
  for (GenerationResidence keep : order) {
    if ((weights && keep.weights != *weights) || (cache && keep.cache != *cache))
      continue;
    // Without a device budget, the SpeedLoader flow: what is not forced streams.
    if (!deviceLimited && ((keep.weights && !weights) || (keep.cache && !cache)))
      continue;
    allowed.push_back(keep);
  }
  return allowed;
}

/// " with weights-on-device=... kv-cache-on-device=..." for the placements forced, for errors.
std::string forcedPlacement(const GenerationRequest &request) {
  std::string text;
  auto name = [](bool onDevice) { return onDevice ? "true" : "false"; };
  if (request.weightsOnDevice)
    text += std::string(" weights-on-device=") + name(*request.weightsOnDevice);
  if (request.kvCacheOnDevice)
    text += std::string(" kv-cache-on-device=") + name(*request.kvCacheOnDevice);
  return text.empty() ? text : " with" + text;
}

} // namespace

FailureOr<GenerationPlan>
chooseGeneration(const GenerationRequest &request, GenerationMeasureFn measure,
                 llvm::function_ref<InFlightDiagnostic()> emitError) {
  const int64_t batch = request.batch;
  const int64_t subBatchSize = request.subBatchSize, numSubBatches = request.numSubBatches;
  int64_t b = subBatchSize, count = numSubBatches;
  if (b == 0 && count == 0)
    count = 1;
  if (b == 0 && batch > 0 && batch % count == 0)
    b = batch / count;
  if (count == 0 && b > 0)
    count = batch > 0 && batch % b == 0 ? batch / b : (batch > 0 ? 0 : 1);
  if (b < 1 || count < 1 || (batch > 0 && b * count != batch))
    return emitError() << "sl-split-generation: batch=" << batch
                       << " sub-batch-size=" << subBatchSize
                       << " num-sub-batches=" << numSubBatches
                       << " do not give a batch of N sub-batches of b sequences (batch = b x N); "
                          "give batch, or two of them";

  bool deviceLimited = request.deviceBudget.has_value();
  bool hostLimited = request.hostBudget.has_value();
  double device = request.deviceBudget.value_or(0), host = request.hostBudget.value_or(0);
  llvm::SmallVector<GenerationResidence> choices = allowedResidences(request);
  GenerationPlan plan;
  plan.subBatchSize = b;
  plan.numSubBatches = count;
  plan.residence = choices.front();
  if (!deviceLimited && !hostLimited)
    return plan;

  // Sub-batch sizes to try, largest first.
  llvm::SmallVector<int64_t> sizes;
  if (subBatchSize > 0)
    sizes.push_back(subBatchSize);
  else if (batch > 0 && numSubBatches > 0)
    sizes.push_back(batch / numSubBatches);
  else if (batch > 0)
    for (int64_t d = batch; d >= 1; --d)
      if (batch % d == 0)
        sizes.push_back(d);
  if (sizes.empty())
    for (int64_t d = 256; d >= 1; d /= 2)
      sizes.push_back(d);
  auto countFor = [&](int64_t size) -> int64_t {
    if (batch > 0)
      return batch / size;
    return numSubBatches > 0 ? numSubBatches : 1;
  };

  std::optional<GenerationMemory> smallest;
  bool chosen = false;
  for (int64_t size : sizes) {
    for (GenerationResidence keep : choices) {
      FailureOr<GenerationMemory> f = measure(size, countFor(size), keep);
      if (failed(f))
        return emitError() << "sl-split-generation: compiling a copy of the step at sub-batch "
                              "size "
                           << size << " to measure it failed (see the errors above)";
      if (!smallest || f->device < smallest->device)
        smallest = *f;
      if (deviceLimited && double(f->device) > device)
        continue;
      plan.subBatchSize = size;
      plan.residence = keep;
      plan.predicted = *f;
      chosen = true;
      break;
    }
    if (chosen)
      break;
  }
  std::string forced = forcedPlacement(request);
  if (!chosen)
    return emitError() << "sl-split-generation: device-memory=" << request.deviceMemory << " ("
                       << formatBytes(device) << ") is too small" << forced
                       << ": the smallest generation step (of sub-batch sizes " << sizes.back()
                       << " to " << sizes.front() << ") needs " << smallest->device << " bytes ("
                       << formatBytes(double(smallest->device)) << ") of device memory"
                       << (forced.empty() ? "" : "; give more device memory, or leave the "
                                                 "placement to the planner (auto)");

  b = plan.subBatchSize;
  count = countFor(b);
  if (hostLimited && batch <= 0 && numSubBatches <= 0) {
    // The pool grows linearly with the sub-batches (KV caches, activations): the most that fit.
    FailureOr<GenerationMemory> two = measure(b, 2, plan.residence);
    if (failed(two))
      return failure();
    double perSubBatch = double(two->host) - double(plan.predicted.host);
    if (perSubBatch > 0 && double(plan.predicted.host) <= host)
      count = std::max<int64_t>(1, 1 + int64_t((host - double(plan.predicted.host)) / perSubBatch));
    count = std::min<int64_t>(count, 4096);
    for (;;) {
      FailureOr<GenerationMemory> f = measure(b, count, plan.residence);
      if (failed(f))
        return failure();
      plan.predicted = *f;
      if (double(f->host) <= host || count == 1)
        break;
      count = std::max<int64_t>(1, count * 9 / 10);
    }
  }
  plan.numSubBatches = count;
  if (hostLimited && double(plan.predicted.host) > host)
    return emitError() << "sl-split-generation: host-memory=" << request.hostMemory << " ("
                       << formatBytes(host) << ") is too small: " << count
                       << " sub-batches of " << b << " need " << plan.predicted.host
                       << " bytes (" << formatBytes(double(plan.predicted.host))
                       << ") of host pool (weights, KV caches and activations)";
  if (deviceLimited && double(plan.predicted.device) > device)
    return emitError() << "sl-split-generation: device-memory=" << request.deviceMemory << " ("
                       << formatBytes(device) << ") is too small" << forced << ": " << count
                       << " sub-batches of " << b << " need " << plan.predicted.device
                       << " bytes (" << formatBytes(double(plan.predicted.device))
                       << ") of device memory";
  return plan;
}

} // namespace sl
