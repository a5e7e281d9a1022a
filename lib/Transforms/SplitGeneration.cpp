//===- SplitGeneration.cpp - sl-split-generation: prefill and decode stages of a language model --===//
//
// Input: an imported model whose @forward maps `input_ids` [batch, seq] to `logits`
// [batch, seq, vocab], shapes not yet bound. Output: the same module with two partitioned
// functions in its place, both at sub-batch size b:
//
//   @prefill(input_ids [b, P], last_index [b]) -> logits [b, 1, V]
//     every block also returns, for each of its attentions, the keys and values [b, Hkv, P, D]
//     (after rotary) that go into the KV cache; the epilogue takes each prompt's last position
//     (sl.take_rows) before the head, so the logits are the next-token ones.
//   @decode(input_ids [b, 1], position [b], kv cache per block [b, 2, Hkv, C, D]) -> logits
//     every causal sl.attention becomes sl.decode_attention over the block's cache and the new
//     token (with the ALiBi slopes of the copy bound at [1, C], where binding at one token folded
//     the position bias away); blocks return the new token's keys and values. Whatever depended
//     on the position of the token (rotary cos/sin tables, learned position embeddings), which
//     binding at one position folded to position 0, reads the `position` of each sequence
//     instead.
//
// The two are compiled from copies of the module by the pass's stage-pipeline (bind, fold, fuse,
// partition), at [b, P] and [b, 1] (each copy's sl.bind_shapes); a third copy bound at [1, C]
// gives the rotary tables for every position a cache holds (C = P + max new tokens) and must
// attend causally over all of them (a sliding-window mask, causal at P, is refused).
// sl-schedule-generation turns them into the explicit generation step. With a budget, the
// generation planner (sl/Analysis/GenerationPlanner.h) chooses b, N and the placement, measuring
// candidates by compiling the whole step on copies with step-pipeline. Both pipelines run through
// Pass::runPipeline (sl/Transforms/CopyPipeline.h). This file compiles the copies, plans and
// assembles; GenerationRewrites.cpp rewrites the copies into the prefill and decode functions.
//
//===--------------------------------------------------------------------------------------------===//

#include "GenerationRewrites.h"

#include "sl/Analysis/CostModel.h"
#include "sl/Analysis/GenerationPlanner.h"
#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"
#include "sl/Transforms/CopyPipeline.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"

namespace sl {
#define GEN_PASS_DEF_SPLITGENERATIONPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using namespace sl::generation;

namespace {

struct SplitGenerationPass
    : public sl::CopyPipelinePass<sl::impl::SplitGenerationPassBase<SplitGenerationPass>> {
  using CopyPipelinePass::CopyPipelinePass;

  void runOnOperation() override;

private:
  enum Pipeline : unsigned { kStages, kSteps };
  SmallVector<std::pair<llvm::StringRef, std::string>, 2> pipelineOptions() const override {
    return {{"stage-pipeline", stagePipeline}, {"step-pipeline", stepPipeline}};
  }
  /// A copy of the module compiled by stage-pipeline at [batch, seq].
  FailureOr<OwningOpRef<ModuleOp>> compile(int64_t batch, int64_t seq);
  /// The arena and pool of the whole generation step at sub-batch size b, N sub-batches, compiled
  /// by step-pipeline.
  FailureOr<sl::GenerationMemory> measure(int64_t b, int64_t count,
                                          sl::GenerationResidence residence);
  /// A copy of the module in which @forward has become the prefill and decode functions at
  /// sub-batch size b, its sl.generation holding the shapes; compiled once per b (planning
  /// measures several counts and residences at each size, and the tables copy once in all).
  FailureOr<ModuleOp> splitAt(int64_t b);
  /// Completes sl.generation on a split module with the sub-batch count, what stays on the
  /// device and the predicted memory.
  static void setPlan(ModuleOp split, int64_t count, sl::GenerationResidence residence,
                      sl::GenerationMemory predicted);
  /// splitAt's compiled copies for one run of the pass; a copy of the pass starts empty.
  struct SplitCache {
    SplitCache() = default;
    SplitCache(const SplitCache &) {}
    SplitCache &operator=(const SplitCache &) { return *this; }
    llvm::DenseMap<int64_t, OwningOpRef<ModuleOp>> splits;
    OwningOpRef<ModuleOp> tables;
  } cache;
};

FailureOr<OwningOpRef<ModuleOp>> SplitGenerationPass::compile(int64_t batch, int64_t seq) {
  ModuleOp module = getOperation();
  OwningOpRef<ModuleOp> copy = module.clone();
  (*copy)->setAttr(sl::kBindShapesAttr, sl::BindShapesAttr::get(&getContext(), batch, seq));
  if (failed(runOnCopy(kStages, *copy))) {
    mlir::emitError(module.getLoc(), "sl-split-generation: compiling a copy of the model at [")
        << batch << ", " << seq << "] failed (see the errors above)";
    return failure();
  }
  return copy;
}

FailureOr<sl::GenerationMemory> SplitGenerationPass::measure(int64_t b, int64_t count,
                                                             sl::GenerationResidence residence) {
  FailureOr<ModuleOp> split = splitAt(b);
  if (failed(split))
    return failure();
  OwningOpRef<ModuleOp> copy = split->clone();
  setPlan(*copy, count, residence, sl::GenerationMemory{});
  if (failed(runOnCopy(kSteps, *copy)))
    return failure();
  auto step = (*copy).lookupSymbol<func::FuncOp>(sl::kGenerateStepName);
  if (!step)
    return mlir::emitError(getOperation().getLoc(), "sl-split-generation: step-pipeline='")
           << stepPipeline << "' wrote no @" << sl::kGenerateStepName
           << " (it needs sl-schedule-generation)";
  auto arena = step->getAttrOfType<IntegerAttr>(sl::kDeviceArenaBytesAttr);
  auto pool = step->getAttrOfType<IntegerAttr>(sl::kHostPoolBytesAttr);
  if (!arena || !pool)
    return mlir::emitError(getOperation().getLoc(), "sl-split-generation: step-pipeline='")
           << stepPipeline << "' did not lay out @" << sl::kGenerateStepName
           << " (it needs sl-assign-streams and sl-allocate)";
  return sl::GenerationMemory{uint64_t(arena.getInt()), uint64_t(pool.getInt())};
}

void SplitGenerationPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp forward = forwardOf(module);
  if (!forward)
    return (void)(module.emitError("sl-split-generation: no @forward to generate with"),
                  signalPassFailure());
  auto inputName = forward.getNumArguments() == 1
                       ? forward.getArgAttrOfType<StringAttr>(0, "sl.name")
                       : StringAttr();
  if (!inputName || inputName.getValue() != "input_ids")
    return (void)(forward.emitError("sl-split-generation: generation needs a model whose only "
                                    "input is 'input_ids' [batch, seq]"),
                  signalPassFailure());
  if (forward.getNumResults() != 1)
    return (void)(forward.emitError("sl-split-generation: generation needs a model with one "
                                    "output, the logits"),
                  signalPassFailure());
  if (maxPromptLen < 1 || maxNewTokens < 1)
    return (void)(module.emitError("sl-split-generation: max-prompt-len and max-new-tokens must "
                                   "be at least 1, got ")
                      << int64_t(maxPromptLen) << " and " << int64_t(maxNewTokens),
                  signalPassFailure());
  if (batch < 0 || subBatchSize < 0 || numSubBatches < 0)
    return (void)(module.emitError("sl-split-generation: batch, sub-batch-size and "
                                   "num-sub-batches cannot be negative"),
                  signalPassFailure());
  sl::GenerationRequest request;
  request.batch = batch;
  request.subBatchSize = subBatchSize;
  request.numSubBatches = numSubBatches;
  request.deviceMemory = deviceMemory;
  request.hostMemory = hostMemory;
  request.weightsOnDevice = sl::forcedOnDevice(weightsOnDevice);
  request.kvCacheOnDevice = sl::forcedOnDevice(kvCacheOnDevice);
  auto emitError = [&] { return mlir::emitError(module.getLoc()); };
  if (failed(sl::parseMemoryBudget("sl-split-generation", "device-memory", deviceMemory,
                                   request.deviceBudget, emitError)) ||
      failed(sl::parseMemoryBudget("sl-split-generation", "host-memory", hostMemory,
                                   request.hostBudget, emitError)))
    return signalPassFailure();
  FailureOr<sl::GenerationPlan> plan = sl::chooseGeneration(
      request,
      [&](int64_t b, int64_t count, sl::GenerationResidence residence) {
        return measure(b, count, residence);
      },
      emitError);
  if (failed(plan))
    return signalPassFailure();

  FailureOr<ModuleOp> split = splitAt(plan->subBatchSize);
  if (failed(split))
    return signalPassFailure();
  setPlan(*split, plan->numSubBatches, plan->residence, plan->predicted);
  forward.erase();
  for (auto func : llvm::make_early_inc_range(split->getOps<func::FuncOp>())) {
    func->remove();
    module.push_back(func);
  }
  module->setAttr(sl::kGenerationAttr, (*split)->getAttr(sl::kGenerationAttr));
  cache.splits.clear();
  cache.tables = nullptr;
}

FailureOr<ModuleOp> SplitGenerationPass::splitAt(int64_t b) {
  if (auto it = cache.splits.find(b); it != cache.splits.end())
    return it->second.get();
  ModuleOp module = getOperation();
  int64_t cacheLen = maxPromptLen + maxNewTokens;
  FailureOr<OwningOpRef<ModuleOp>> prefill = failure();
  {
    // The rotary tables must fold to constants, at all C positions in the tables' copy and at
    // the P prompt positions in the prefill's, and for a real head size they pass the fold limit
    // meant for shapes (544 positions x 128 = 69632 elements; a prefill of 2048 does too): raise
    // it, for these copies only (their folds run on this thread: binding and canonicalisation
    // are module passes), to C x 1024, room for head sizes up to 1024 whatever the tables'
    // layout.
    sl::ScopedFoldLimit limit(std::max<int64_t>(sl::kMaxFoldedElements, cacheLen * 1024));
    if (!cache.tables) {
      auto compiled = compile(1, cacheLen);
      if (failed(compiled))
        return failure();
      cache.tables = std::move(*compiled);
    }
    prefill = compile(b, maxPromptLen);
  }
  auto decode = compile(b, 1);
  if (failed(prefill) || failed(decode))
    return failure();
  if (failed(rewriteDecode(**decode, *cache.tables, maxPromptLen + maxNewTokens)) ||
      failed(rewritePrefill(**prefill, **decode)) ||
      failed(checkCausalOverCache(*cache.tables, **prefill, cacheLen)))
    return failure();

  auto logits = tensorType(forwardOf(**decode).getBody().front().getTerminator()->getOperand(0));
  if (logits.getRank() != 3 || logits.getDimSize(1) != 1)
    return forwardOf(module).emitError("sl-split-generation: the output must be logits [batch, "
                                       "seq, vocab], got ")
           << logits;
  OwningOpRef<ModuleOp> split = module.clone();
  forwardOf(*split).erase();
  moveFunctions(**prefill, *split, "prefill");
  moveFunctions(**decode, *split, "decode");
  (*split)->setAttr(sl::kGenerationAttr,
                    sl::GenerationPlanAttr::get(
                        &getContext(), /*batch=*/{}, cacheLen, /*kv_cache_bytes=*/{},
                        /*kv_cache_on_device=*/{}, maxNewTokens, maxPromptLen,
                        /*num_sub_batches=*/{}, /*parameter_bytes=*/{},
                        /*predicted_device_bytes=*/{}, /*predicted_host_bytes=*/{},
                        /*sub_batch_size=*/b, /*vocab=*/logits.getDimSize(2),
                        /*weights_on_device=*/{}));
  ModuleOp result = *split;
  cache.splits[b] = std::move(split);
  return result;
}

void SplitGenerationPass::setPlan(ModuleOp split, int64_t count, sl::GenerationResidence residence,
                                  sl::GenerationMemory predicted) {
  auto sizes = split->getAttrOfType<sl::GenerationPlanAttr>(sl::kGenerationAttr);
  split->setAttr(sl::kGenerationAttr,
                 sl::GenerationPlanAttr::get(
                     split.getContext(), sizes.getBatch(), sizes.getCacheLen(),
                     sizes.getKvCacheBytes(), residence.cache, sizes.getMaxNewTokens(),
                     sizes.getMaxPromptLen(), count, sizes.getParameterBytes(),
                     int64_t(predicted.device), int64_t(predicted.host), sizes.getSubBatchSize(),
                     sizes.getVocab(), residence.weights));
}

} // namespace
