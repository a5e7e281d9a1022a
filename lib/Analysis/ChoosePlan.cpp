//===- ChoosePlan.cpp - the cost model: choosing a configuration ------------------------------===//
//
// The largest sub-batch that fits the device, then as many sub-batches as fit the host; then,
// among the configurations left free, a predicted faster one that fits. A refusal says what each
// budget would need.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/CostModel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace sl {

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

} // namespace sl
