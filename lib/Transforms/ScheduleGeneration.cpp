//===- ScheduleGeneration.cpp - sl-schedule-generation: the explicit generation step -------------===//
//
// Input: @prefill and @decode from sl-split-generation: sl.param and one sl.layer per stage, at
// the sub-batch size b. Output: @generate over a batch of N sub-batches, two programs in issue
// order:
//
//   sl.program "prefill"   per stage: its parameters fetched once; per sub-batch (pipelined one
//                          ahead): prefetch inputs, compute, offload the boundary activation and
//                          each attention's keys and values, sl.kv_write them into the host cache
//   sl.program "decode"    per stage: parameters fetched once; per sub-batch: prefetch the
//                          (sub-batch, layer) cache chunk, compute (activations stay on the
//                          device: one token each), offload the new keys and values, sl.kv_write
//                          them at each sequence's position
//
// Each program joins its sub-batches' logits on the device and offloads them once. Memory
// spaces follow from the defining ops (MemorySpaces.h), as in a training step, so
// sl-assign-streams, sl-allocate, sl-insert-events and the emitter handle the result unchanged.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/ExplicitStep.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/StringMap.h"

#include <functional>

namespace sl {
#define GEN_PASS_DEF_SCHEDULEGENERATIONPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

RankedTensorType tensorType(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

class GenerationStepBuilder {
public:
  GenerationStepBuilder(ModuleOp module, func::FuncOp prefill, func::FuncOp decode, int64_t n,
                        bool weightsOnDevice, bool cacheOnDevice)
      : module(module), prefill(prefill), decode(decode), n(n),
        weightsOnDevice(weightsOnDevice), cacheOnDevice(cacheOnDevice),
        builder(module.getContext()), loc(decode.getLoc()) {}

  LogicalResult build();

private:
  LogicalResult check(func::FuncOp func);
  void createStep();
  /// Emits one program: `func`'s stages over every sub-batch. `args` maps `func`'s arguments
  /// to the step's; `keepOnDevice` keeps activations between stages on the device.
  void emitProgram(func::FuncOp func, const IRMapping &args, bool keepOnDevice,
                   unsigned program);
  Value hostConstant(ConstantOp constant);
  Value view(Value batch, int64_t j);
  GenerationPlanAttr planAttribute();
  Location named(const llvm::Twine &name) {
    return NameLoc::get(builder.getStringAttr(name), decode.getLoc());
  }

  ModuleOp module;
  func::FuncOp prefill, decode, step;
  int64_t n;
  // Parameters fetched by prefill stay on the device for decode (they fit beside the rest).
  bool weightsOnDevice;
  DenseMap<Value, Value> resident; // host parameter -> its device copy from prefill
  // The KV caches stay on the device: one sl.empty per (layer position, pair, sub-batch), written
  // in place; the step has no host cache arguments.
  bool cacheOnDevice;
  DenseMap<std::tuple<unsigned, unsigned, int64_t>, Value> deviceChunks;
  // Per decode layer position: the types of its caches (one per attention).
  SmallVector<SmallVector<Type>> cacheTypesOfLayer;
  OpBuilder builder;
  Location loc;
  llvm::StringMap<Value> params;                           // by name, in the step
  DenseMap<std::pair<Type, Attribute>, Value> constants;  // hoisted, one per (type, value)
  // Per decode layer position: the step's KV cache arguments its attentions read, in order.
  SmallVector<SmallVector<Value>> cachesOfLayer;
  Value decodePosition; // the step's argument
  // The step's argument for each argument of @prefill and @decode.
  IRMapping prefillArgs, decodeArgs;
  DenseMap<std::pair<Value, int64_t>, Value> views;
  SmallVector<Value> programLogits; // host, per program
};

LogicalResult GenerationStepBuilder::check(func::FuncOp func) {
  for (Operation &op : func.getBody().front().without_terminator())
    if (!llvm::isa<ParamOp, LayerOp>(op))
      return op.emitError("sl-schedule-generation: @")
             << func.getSymName() << " must hold only sl.param and sl.layer, found '"
             << op.getName() << "' (run sl-split-generation first)";
  if (func.getNumResults() != 1)
    return func.emitError("sl-schedule-generation: @")
           << func.getSymName() << " must return only the logits";
  return success();
}

void GenerationStepBuilder::createStep() {
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  auto attrs = [&](func::FuncOp func, unsigned i, int64_t program) {
    NamedAttrList list(func.getArgAttrDict(i));
    if (!list.get(kKvCacheAttr))
      list.set(kProgramAttr, builder.getI64IntegerAttr(program));
    return list.getDictionary(module.getContext());
  };
  for (unsigned i = 0; i < prefill.getNumArguments(); ++i) {
    argTypes.push_back(batched(prefill.getArgumentTypes()[i], n));
    argAttrs.push_back(attrs(prefill, i, 0));
  }
  SmallVector<unsigned> decodeArgIndex; // decode argument -> step argument, or ~0u
  for (unsigned i = 0; i < decode.getNumArguments(); ++i) {
    if (cacheOnDevice && decode.getArgAttr(i, kKvCacheAttr)) {
      decodeArgIndex.push_back(~0u);
      continue;
    }
    decodeArgIndex.push_back(argTypes.size());
    argTypes.push_back(batched(decode.getArgumentTypes()[i], n));
    argAttrs.push_back(attrs(decode, i, 1));
  }
  SmallVector<Type> resultTypes{batched(prefill.getResultTypes()[0], n),
                                batched(decode.getResultTypes()[0], n)};
  SmallVector<DictionaryAttr> resultAttrs;
  for (int64_t program : {0, 1})
    resultAttrs.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("sl.name", builder.getStringAttr("logits")),
         builder.getNamedAttr(kProgramAttr, builder.getI64IntegerAttr(program))}));
  builder.setInsertionPointAfter(decode);
  step = builder.create<func::FuncOp>(loc, sl::kGenerateStepName,
                                      builder.getFunctionType(argTypes, resultTypes));
  step.setAllArgAttrs(argAttrs);
  step.setAllResultAttrs(resultAttrs);
  Block *entry = step.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (unsigned i = 0; i < prefill.getNumArguments(); ++i)
    prefillArgs.map(prefill.getArgument(i), entry->getArgument(i));
  for (unsigned i = 0; i < decode.getNumArguments(); ++i)
    if (decodeArgIndex[i] != ~0u)
      decodeArgs.map(decode.getArgument(i), entry->getArgument(decodeArgIndex[i]));
}

Value GenerationStepBuilder::view(Value batch, int64_t j) {
  if (n == 1)
    return batch;
  Value &v = views[{batch, j}];
  if (!v) {
    auto type = tensorType(batch);
    SmallVector<int64_t> shape(type.getShape());
    shape[0] /= n;
    OpBuilder::InsertionGuard guard(builder);
    // Views cost nothing: put them with the step's first ops so every program can use them.
    builder.setInsertionPointToStart(&step.getBody().front());
    v = builder.create<SubBatchOp>(loc, RankedTensorType::get(shape, type.getElementType()), batch,
                                   builder.getI64IntegerAttr(j), builder.getI64IntegerAttr(n));
  }
  return v;
}

Value GenerationStepBuilder::hostConstant(ConstantOp constant) {
  auto key = std::make_pair(constant.getType(), Attribute(constant.getValueAttr()));
  if (Value v = constants.lookup(key))
    return v;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&step.getBody().front());
  Value v = builder.create<ConstantOp>(loc, constant.getType(), constant.getValueAttr());
  constants[key] = v;
  return v;
}


void GenerationStepBuilder::emitProgram(func::FuncOp func, const IRMapping &args,
                                        bool keepOnDevice, unsigned program) {
  SmallVector<LayerOp> layers = llvm::to_vector(func.getOps<LayerOp>());
  Value returned = func.getBody().front().getTerminator()->getOperand(0);
  // Per sub-batch: where each value of `func` is now.
  SmallVector<IRMapping> onDevice(n);
  SmallVector<DenseMap<Value, Value>> onHost(n);
  for (BlockArgument arg : func.getArguments())
    if (Value stepArg = args.lookupOrNull(arg))
      for (int64_t j = 0; j < n; ++j)
        onHost[j][arg] = view(stepArg, j);
  // The function's `position` argument (decode): where each new token goes.
  Value positionArg;
  for (BlockArgument arg : func.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "sl.name");
        name && name.getValue() == "position")
      positionArg = arg;
  SmallVector<Value> logits(n);

  // Host parameter -> its device copy fetched earlier in this program run: a parameter two stages
  // read (a head tied to the embedding) comes in once per run and stays until its last reader.
  DenseMap<Value, Value> fetchedInProgram;
  auto fetch = [&](LayerOp layer) {
    IRMapping fetched;
    SmallVector<Value> hostParams;
    for (Value p : layer.getParams())
      hostParams.push_back(params.lookup(p.getDefiningOp<ParamOp>().getName()));
    if (hostParams.empty())
      return fetched;
    if (weightsOnDevice && program == 1) {
      for (auto [p, h] : llvm::zip(layer.getParams(), hostParams))
        fetched.map(p, resident.lookup(h));
      return fetched;
    }
    SmallVector<Value> missing;
    for (Value h : hostParams)
      if (!fetchedInProgram.count(h) && !llvm::is_contained(missing, h))
        missing.push_back(h);
    if (!missing.empty()) {
      std::string group = layer.getStage() == "block"
                              ? ("layer " + llvm::Twine(layer.getIndex())).str()
                              : layer.getStage().str();
      auto op = builder.create<FetchParamsOp>(named("fetch " + group),
                                              ValueRange(missing).getTypes(), missing, group);
      for (auto [h, d] : llvm::zip(missing, op.getResults())) {
        fetchedInProgram[h] = d;
        resident.try_emplace(h, d);
      }
    }
    for (auto [p, h] : llvm::zip(layer.getParams(), hostParams))
      fetched.map(p, fetchedInProgram.lookup(h));
    return fetched;
  };

  IRMapping current = layers.empty() ? IRMapping() : fetch(layers.front());
  for (auto [index, layer] : llvm::enumerate(layers)) {
    std::string where = layer.getStage() == "block"
                            ? ("layer " + llvm::Twine(layer.getIndex())).str()
                            : layer.getStage().str();
    bool isBlock = layer.getStage() == "block";
    // The block's KV caches: the decode layer at the same position reads them.
    size_t pairs = isBlock && index < cacheTypesOfLayer.size() ? cacheTypesOfLayer[index].size() : 0;
    // Cache `pair` of sub-batch j: a view of the host cache, or the chunk kept on the device.
    auto cacheChunk = [&](unsigned pair, int64_t j) -> Value {
      if (!cacheOnDevice)
        return view(cachesOfLayer[index][pair], j);
      Value &chunk = deviceChunks[{unsigned(index), pair, j}];
      if (!chunk) {
        OpBuilder::InsertionGuard guard(builder);
        builder.setInsertionPointToStart(&step.getBody().front());
        auto type = llvm::cast<RankedTensorType>(cacheTypesOfLayer[index][pair]);
        SmallVector<int64_t> shape(type.getShape());
        shape[0] /= n;
        chunk = builder.create<EmptyOp>(
            named("kv cache layer " + llvm::Twine(layer.getIndex()) + " sub-batch " +
                  llvm::Twine(j)),
            RankedTensorType::get(shape, type.getElementType()));
      }
      return chunk;
    };
    IRMapping next;
    bool nextFetched = false;
    auto prefetch = [&](int64_t j) {
      if (cacheOnDevice && program == 1) {
        // The layer's cache inputs are its chunks on the device: nothing to copy.
        unsigned pair = 0;
        for (Value v : layer.getInputs())
          if (auto arg = llvm::dyn_cast<BlockArgument>(v);
              arg && func.getArgAttr(arg.getArgNumber(), kKvCacheAttr))
            onDevice[j].map(v, cacheChunk(pair++, j));
      }
      for (Value v : layer.getInputs()) {
        if (onDevice[j].contains(v))
          continue;
        onDevice[j].map(v, builder.create<PrefetchOp>(
                               named(where + " sub-batch " + llvm::Twine(j) + ": prefetch"),
                               onHost[j].lookup(v)));
      }
      if (!nextFetched && index + 1 < layers.size()) {
        // The next stage's parameters arrive while this one computes.
        next = fetch(layers[index + 1]);
        nextFetched = true;
      }
    };
    SmallVector<SmallVector<Value>> results(n);
    auto compute = [&](int64_t j) {
      SmallVector<Value> operands;
      for (Value v : layer.getInputs())
        operands.push_back(onDevice[j].lookup(v));
      for (Value p : layer.getParams())
        operands.push_back(current.lookup(p));
      results[j] = inlineStage(
          builder, module.lookupSymbol<func::FuncOp>(layer.getCallee()), operands,
          [&](ConstantOp constant) { return hostConstant(constant); });
      for (auto [from, to] : llvm::zip(layer.getResults(), results[j]))
        onDevice[j].map(from, to);
    };
    auto offload = [&](int64_t j) {
      std::string prefix = (where + " sub-batch " + llvm::Twine(j) + ": ").str();
      // Each attention's new keys and values: results 1, 2 (k, v of the first), 3, 4, ...
      for (unsigned pair = 0; pair < pairs; ++pair) {
        Value k = results[j][1 + 2 * pair], v = results[j][2 + 2 * pair];
        Value chunk = cacheChunk(pair, j), start;
        // Keys and values that attention read in [B, T, Hkv, D] (sl-fold-head-transposes) are
        // written from that order: the permutation to the cache's is the write's, not a copy.
        HeadLayout layout = HeadLayout::bhsd;
        if (Value kIn = headPermutationInput(k), vIn = headPermutationInput(v); kIn && vIn) {
          k = kIn;
          v = vIn;
          layout = HeadLayout::bshd;
        }
        if (cacheOnDevice) {
          // Written in place on the device, at the position the decode step already has there.
          if (program == 1)
            start = onDevice[j].lookup(positionArg);
        } else {
          k = builder.create<OffloadOp>(named(prefix + "offload keys"), k);
          v = builder.create<OffloadOp>(named(prefix + "offload values"), v);
          if (program == 1)
            start = view(decodePosition, j);
        }
        builder.create<KvWriteOp>(named(prefix + "kv write"), chunk.getType(), chunk, k, v, start,
                                  HeadLayoutAttr::get(builder.getContext(), layout));
      }
      Value out = layer.getResult(0);
      if (out == returned) {
        logits[j] = onDevice[j].lookup(out);
      } else if (!keepOnDevice) {
        onHost[j][out] = builder.create<OffloadOp>(named(prefix + "offload"),
                                                   onDevice[j].lookup(out));
        onDevice[j].erase(out);
      }
    };
    prefetch(0);
    for (int64_t j = 0; j < n; ++j) {
      if (j + 1 < n)
        prefetch(j + 1);
      compute(j);
      if (j > 0)
        offload(j - 1);
    }
    offload(n - 1);
    current = next;
  }
  Value joined = logits.front();
  if (n > 1)
    joined = builder.create<ConcatOp>(loc, batched(logits.front().getType(), n), logits,
                                      builder.getI64IntegerAttr(0));
  programLogits.push_back(builder.create<OffloadOp>(named("offload logits"), joined));
}



GenerationPlanAttr GenerationStepBuilder::planAttribute() {
  // The sizes sl-split-generation compiled at and what it predicted (runOnOperation checked that
  // it wrote them), with the step's own sizes and residence.
  auto generation = module->getAttrOfType<GenerationPlanAttr>(sl::kGenerationAttr);
  int64_t b = tensorType(decode.getArgument(0)).getDimSize(0);
  uint64_t parameterBytes = 0, cacheBytes = 0;
  for (auto &entry : params)
    parameterBytes += storageBytes(entry.second.getType());
  for (auto &types : cacheTypesOfLayer)
    for (Type type : types)
      cacheBytes += storageBytes(type);
  int64_t vocab =
      tensorType(decode.getBody().front().getTerminator()->getOperand(0)).getDimSize(2);
  return GenerationPlanAttr::get(
      module.getContext(), /*batch=*/n * b, generation.getCacheLen(), int64_t(cacheBytes),
      cacheOnDevice, generation.getMaxNewTokens(), generation.getMaxPromptLen(),
      /*num_sub_batches=*/n, int64_t(parameterBytes), generation.getPredictedDeviceBytes(),
      generation.getPredictedHostBytes(), /*sub_batch_size=*/b, vocab, weightsOnDevice);
}

LogicalResult GenerationStepBuilder::build() {
  if (failed(check(prefill)) || failed(check(decode)))
    return failure();
  SmallVector<LayerOp> prefillLayers = llvm::to_vector(prefill.getOps<LayerOp>());
  SmallVector<LayerOp> decodeLayers = llvm::to_vector(decode.getOps<LayerOp>());
  if (prefillLayers.size() != decodeLayers.size())
    return decode.emitError("sl-schedule-generation: @prefill and @decode have different stages");
  createStep();

  for (auto func : {prefill, decode})
    for (auto param : func.getOps<ParamOp>())
      if (!params.count(param.getName()))
        params[param.getName()] = builder.clone(*param)->getResult(0);
  for (BlockArgument arg : decode.getArguments())
    if (auto name = decode.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "sl.name");
        name && name.getValue() == "position")
      decodePosition = decodeArgs.lookup(arg);
  for (auto [p, d] : llvm::zip(prefillLayers, decodeLayers)) {
    if (p.getStage() != d.getStage() || p.getIndex() != d.getIndex())
      return d.emitError("sl-schedule-generation: @prefill and @decode have different stages");
    SmallVector<Value> caches;
    SmallVector<Type> cacheTypes;
    for (Value input : d.getInputs())
      if (auto arg = llvm::dyn_cast<BlockArgument>(input);
          arg && decode.getArgAttr(arg.getArgNumber(), kKvCacheAttr)) {
        caches.push_back(decodeArgs.lookupOrNull(arg));
        cacheTypes.push_back(batched(arg.getType(), n));
      }
    unsigned pairs = caches.size();
    if (d.getNumResults() != 1 + 2 * pairs || p.getNumResults() != 1 + 2 * pairs)
      return d.emitError("sl-schedule-generation: a block must return its output and the keys "
                         "and values of each KV cache it reads");
    if (pairs > 0 && !decodePosition)
      return decode.emitError("sl-schedule-generation: @decode has no 'position' argument");
    cachesOfLayer.push_back(std::move(caches));
    cacheTypesOfLayer.push_back(std::move(cacheTypes));
  }

  builder.create<ProgramOp>(loc, "prefill");
  emitProgram(prefill, prefillArgs, /*keepOnDevice=*/false, 0);
  builder.create<ProgramOp>(loc, "decode");
  emitProgram(decode, decodeArgs, /*keepOnDevice=*/true, 1);
  builder.create<func::ReturnOp>(loc, programLogits);
  eraseUnusedOps(step.getBody().front());
  prefetchConstants(step.getBody().front(), builder, named("prefetch constant"));
  step->setAttr(kPlanAttr, planAttribute());
  return success();
}

struct ScheduleGenerationPass
    : public impl::ScheduleGenerationPassBase<ScheduleGenerationPass> {
  using ScheduleGenerationPassBase::ScheduleGenerationPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto prefill = module.lookupSymbol<func::FuncOp>("prefill");
    auto decode = module.lookupSymbol<func::FuncOp>("decode");
    if (!prefill || !decode) {
      module.emitError("sl-schedule-generation: no @prefill and @decode; run "
                       "sl-split-generation first");
      return signalPassFailure();
    }
    auto generation = module->getAttrOfType<GenerationPlanAttr>(sl::kGenerationAttr);
    if (!generation) {
      module.emitError("sl-schedule-generation: no sl.generation; run sl-split-generation first");
      return signalPassFailure();
    }
    int64_t count = numSubBatches;
    if (count == 0)
      count = generation.getNumSubBatches().value_or(0);
    if (count < 1) {
      module.emitError("sl-schedule-generation: num-sub-batches must be at least 1, got ")
          << count;
      return signalPassFailure();
    }
    bool resident = weightsOnDevice || generation.getWeightsOnDevice().value_or(false);
    bool cacheResident = kvCacheOnDevice || generation.getKvCacheOnDevice().value_or(false);
    if (failed(GenerationStepBuilder(module, prefill, decode, count, resident, cacheResident)
                   .build()))
      return signalPassFailure();
    // The stage functions were inlined into the step: only it remains to schedule.
    for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (func.getSymName() != sl::kGenerateStepName)
        func.erase();
  }
};

} // namespace
} // namespace sl
