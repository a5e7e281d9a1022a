//===- ShardParameters.cpp - sl-shard-parameters: ZeRO-3 sharding of a step -------------------===//
//
// Input: @train_step (or the forward-only @infer_step, which has no gradients: only its fetches
// change) as sl-schedule-subbatches writes it for world = W > 1 (sl.plan's `world`):
// unsharded, each pass's parameters fetched by one sl.fetch_params holding all its group's
// parameters, each group's device gradients offloaded and summed on the host per parameter,
// optimizer steps per parameter, and `grad:<param>` results.
//
// Output: the same step, in the same issue order, with parameters, gradients and optimizer state
// sharded over the W ranks. The first group to fetch a parameter owns it; a group's parameters
// are flattened into one f32 vector of which the rank holds 1/W (sl.param_shard). A fetch becomes,
// per shard it reads, a prefetch of the rank's shard, an all-gather and views of the gathered
// vector; the offloads of a pass's gradients become, per shard, a concatenation into the shard's
// layout, a reduce-scatter and an offload of the rank's part; optimizer steps run on shards, and
// the step returns `grad_shard:<group>` per shard.
//
// The scheduler decides the order of issue (which share of a group's parameters is fetched
// beside which sub-batch's inputs); this pass only replaces what is issued, so it needs nothing
// of the scheduler's state but the step itself and its sl.plan.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"
#include "sl/Transforms/ExplicitStep.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace sl {
#define GEN_PASS_DEF_SHARDPARAMETERSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace sl {
namespace {

/// The parameters one group owns (those it is the first to fetch), flattened and sharded over
/// the ranks.
struct Shard {
  std::string name;
  // Step parameters, in the order of the flattened vector, and where each starts in it.
  SmallVector<Value> params;
  DenseMap<Value, int64_t> offset;
  int64_t flatElements = 0;
  Value host;              // the step's sl.param_shard
  unsigned passesLeft = 0; // groups that read it whose backward pass is still to come
  bool stepped = false;
  Value grad;              // the rank's host gradient of the shard so far
};

/// A group as its first fetch names it: the parameters its passes read.
struct Group {
  std::string name;
  SmallVector<Value> params;
};

/// The offloads that end one backward pass: each parameter's device gradient, summed over the
/// pass's sub-batches, in the order they were offloaded.
struct GradientRun {
  Operation *anchor;  // the first offload
  std::string group;
  llvm::MapVector<Value, Value> accumulated; // step parameter -> device gradient
};

/// Whether a parameter's shard can hold its f32 master weights: an f32 parameter, or one computed
/// in another type whose model file stores f32 (precision=bf16 of an f32 model).
bool hasF32Master(ParamOp param) {
  if (param.getType().getElementType().isF32())
    return true;
  std::optional<Type> stored = param.getStoredAs();
  return stored && stored->isF32();
}

RankedTensorType asF32(Type type) {
  return llvm::cast<RankedTensorType>(type).clone(Float32Type::get(type.getContext()));
}

/// The first user of `v` in its block; a copy of a constant to the device stands for its users.
Operation *firstUser(Value v) {
  Operation *first = nullptr;
  for (Operation *user : v.getUsers()) {
    Operation *at = user;
    if (llvm::isa<PrefetchOp>(user) && v.getDefiningOp<ConstantOp>())
      at = firstUser(user->getResult(0));
    if (at && (!first || at->isBeforeInBlock(first)))
      first = at;
  }
  return first;
}

class Sharder {
public:
  Sharder(func::FuncOp step, int64_t world, bool speedLoader, bool forwardOnly)
      : step(step), body(step.getBody().front()), world(world), speedLoader(speedLoader),
        forwardOnly(forwardOnly), builder(step.getContext()), loc(step.getLoc()) {}

  LogicalResult run();

private:
  LogicalResult collect();
  LogicalResult formShards();
  void createShards();
  void gather(FetchParamsOp fetch);
  LogicalResult reduceScatter(const GradientRun &run);
  void emitOptimizerSteps(ArrayRef<unsigned> finished);
  // A host constant of `count` f32 zeros, shared with an equal one the step has.
  Value zeros(int64_t count);
  // Places the constants zeros() made or reused, and their copies to the device, where the
  // scheduler would have put them had it made them (ExplicitStep's hoisting order).
  void placeZeros();

  Location named(const llvm::Twine &name) { return NameLoc::get(builder.getStringAttr(name), loc); }

  func::FuncOp step;
  Block &body;
  int64_t world;
  bool speedLoader;
  bool forwardOnly; // @infer_step: fetches only, no gradients or optimizer steps
  OpBuilder builder;
  Location loc;

  SmallVector<ParamOp> params;
  SmallVector<FetchParamsOp> fetches;
  SmallVector<Group> groups;
  SmallVector<GradientRun> runs;
  SmallVector<Operation *> oldSteps;
  func::ReturnOp ret;
  Value loss;

  SmallVector<Shard> shards;
  DenseMap<Value, unsigned> shardOf;
  // Zero constants in the order they were asked for; those that existed, with their first user.
  SmallVector<ConstantOp> zeroConstants;
  DenseMap<Operation *, Operation *> existingFirstUser;
};

LogicalResult Sharder::collect() {
  for (auto param : body.getOps<ParamOp>())
    params.push_back(param);
  ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  if (!body.getOps<ParamShardOp>().empty())
    return step.emitError("sl-shard-parameters: @") << step.getSymName() << " is already sharded";
  if (forwardOnly) {
    for (auto fetch : body.getOps<FetchParamsOp>()) {
      for (Value p : fetch.getParams())
        if (!p.getDefiningOp<ParamOp>())
          return fetch.emitError("sl-shard-parameters: fetches a value that is not an sl.param "
                                 "of the step");
      fetches.push_back(fetch);
    }
    return success();
  }
  // The step returns the loss and each parameter's gradient, summed on the host from offloads.
  if (ret.getNumOperands() != params.size() + 1)
    return step.emitError("sl-shard-parameters: @train_step returns ")
           << ret.getNumOperands() << " values; an unsharded step returns the loss and the "
           << "gradient of each of its " << params.size() << " parameters";
  loss = ret.getOperand(0);
  DenseMap<Operation *, Value> gradientOffload; // offload -> the parameter its gradient is of
  DenseSet<Operation *> hostSums;
  for (auto [index, param] : llvm::enumerate(params)) {
    auto name = step.getResultAttrOfType<StringAttr>(index + 1, "sl.name");
    if (!name || name.getValue() != ("grad:" + param.getName()).str())
      return step.emitError("sl-shard-parameters: result ")
             << index + 1 << " of @train_step must be 'grad:" << param.getName()
             << "', the gradient of its parameter " << index;
    SmallVector<Value> pending{ret.getOperand(index + 1)};
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      if (auto sum = v.getDefiningOp<AccumulateOp>()) {
        hostSums.insert(sum);
        pending.push_back(sum.getAccumulator());
        pending.push_back(sum.getValue());
      } else if (auto offload = v.getDefiningOp<OffloadOp>()) {
        gradientOffload[offload] = param.getResult();
      } else {
        return step.emitError("sl-shard-parameters: the gradient of parameter '")
               << param.getName() << "' is not a sum of offloaded device gradients";
      }
    }
  }
  // A backward pass's gradient offloads come together, with their host sums and the optimizer
  // steps they finish; the pass's parameters are those of the last fetch of the same group.
  std::optional<GradientRun> current;
  auto finish = [&]() -> LogicalResult {
    if (!current)
      return success();
    FetchParamsOp own;
    for (FetchParamsOp fetch : llvm::reverse(fetches)) {
      if (fetch.getNumOperands() != current->accumulated.size())
        continue;
      if (llvm::all_of(fetch.getParams(),
                       [&](Value p) { return current->accumulated.count(p); })) {
        own = fetch;
        break;
      }
    }
    if (!own)
      return current->anchor->emitError("sl-shard-parameters: these gradients are of no "
                                        "group's parameters: no earlier sl.fetch_params fetches "
                                        "exactly the parameters whose gradients the pass offloads");
    current->group = own.getGroup().str();
    runs.push_back(std::move(*current));
    current.reset();
    return success();
  };
  for (Operation &op : body) {
    if (auto fetch = llvm::dyn_cast<FetchParamsOp>(op)) {
      for (Value p : fetch.getParams())
        if (!p.getDefiningOp<ParamOp>())
          return fetch.emitError("sl-shard-parameters: fetches a value that is not an sl.param "
                                 "of the step");
      fetches.push_back(fetch);
    }
    if (llvm::isa<OptimizerStepOp>(op))
      oldSteps.push_back(&op);
    if (auto it = gradientOffload.find(&op); it != gradientOffload.end()) {
      if (!current)
        current = GradientRun{&op, "", {}};
      current->accumulated[it->second] = op.getOperand(0);
      continue;
    }
    if (hostSums.count(&op) || llvm::isa<OptimizerStepOp>(op))
      continue;
    if (failed(finish()))
      return failure();
  }
  return success();
}

LogicalResult Sharder::formShards() {
  for (FetchParamsOp fetch : fetches) {
    Group *group = llvm::find_if(groups, [&](const Group &g) { return g.name == fetch.getGroup(); });
    if (group == groups.end()) {
      groups.push_back({fetch.getGroup().str(), llvm::to_vector(fetch.getParams())});
      group = &groups.back();
    }
    std::optional<unsigned> own;
    for (Value p : fetch.getParams()) {
      if (shardOf.count(p))
        continue;
      auto param = p.getDefiningOp<ParamOp>();
      if (!hasF32Master(param))
        return param.emitError("sl-shard-parameters: parameter '")
               << param.getName() << "' is " << param.getType()
               << " with no f32 values behind it (its model file stores it so, or it is inline "
                  "in the module); sharding (world > 1) keeps f32 master weights in the "
                  "shards, read from an f32 model file (export the model in f32: precision=bf16 "
                  "then computes in bf16)";
      if (!own) {
        own = shards.size();
        shards.emplace_back();
        shards.back().name = group->name;
      }
      shardOf[p] = *own;
      shards[*own].params.push_back(p);
    }
  }
  for (ParamOp param : params)
    if (!shardOf.count(param.getResult()))
      return param.emitError("sl-shard-parameters: parameter '")
             << param.getName() << "' is fetched by no group";
  for (Shard &shard : shards) {
    SmallVector<Type> types;
    for (Value p : shard.params)
      types.push_back(asF32(p.getType()));
    ShardLayout layout = shardLayout(types, world);
    for (auto [param, offset] : llvm::zip(shard.params, layout.offsets))
      shard.offset[param] = offset;
    shard.flatElements = layout.flatElements;
  }
  for (const Group &group : groups) {
    llvm::SetVector<unsigned> read;
    for (Value p : group.params)
      read.insert(shardOf.lookup(p));
    for (unsigned s : read)
      ++shards[s].passesLeft;
  }
  return success();
}

void Sharder::createShards() {
  // A shard holds the optimizer's f32 master: a parameter computed in bf16 from an f32 file is
  // f32 in the step, and cast after the all-gather.
  for (ParamOp param : params)
    if (!param.getType().getElementType().isF32()) {
      param.getResult().setType(asF32(param.getType()));
      param->removeAttr(param.getStoredAsAttrName());
    }
  builder.setInsertionPointAfter(params.back());
  for (Shard &shard : shards) {
    auto type = RankedTensorType::get({shard.flatElements / world}, builder.getF32Type());
    shard.host = builder.create<ParamShardOp>(named("shard of " + shard.name), type, shard.params,
                                              shard.name, uint64_t(world));
  }
}

void Sharder::gather(FetchParamsOp fetch) {
  builder.setInsertionPoint(fetch);
  llvm::StringRef group = fetch.getGroup();
  llvm::SetVector<unsigned> read;
  for (Value p : fetch.getParams())
    read.insert(shardOf.lookup(p));
  for (unsigned s : read) {
    const Shard &shard = shards[s];
    std::string of = shard.name + (shard.name == group ? "" : (" for " + group).str());
    Value onDevice = builder.create<PrefetchOp>(named("prefetch shard of " + of), shard.host);
    auto type = RankedTensorType::get({shard.flatElements}, builder.getF32Type());
    Value whole = builder
                      .create<AllGatherOp>(named("all-gather " + of), TypeRange{type},
                                           ValueRange{onDevice}, uint64_t(world))
                      .getResult(0);
    for (auto [p, fetched] : llvm::zip(fetch.getParams(), fetch.getResults())) {
      if (shardOf.lookup(p) != s)
        continue;
      // The shard holds f32 masters; a parameter computed in bf16 is cast on the device.
      Type computed = fetched.getType();
      Value view = builder.create<ViewOp>(loc, asF32(computed), whole,
                                          uint64_t(shard.offset.lookup(p)));
      if (view.getType() != computed)
        view = builder.create<CastOp>(
            loc, computed, view,
            TypeAttr::get(llvm::cast<RankedTensorType>(computed).getElementType()));
      fetched.replaceAllUsesWith(view);
    }
  }
  fetch.erase();
}

Value Sharder::zeros(int64_t count) {
  auto type = RankedTensorType::get({count}, builder.getF32Type());
  auto value = SplatElementsAttr::get(type, builder.getFloatAttr(builder.getF32Type(), 0.0));
  for (auto constant : body.getOps<ConstantOp>())
    if (constant.getType() == type && constant.getValueAttr() == value) {
      if (!llvm::is_contained(zeroConstants, constant)) {
        existingFirstUser[constant] = firstUser(constant.getResult());
        zeroConstants.push_back(constant);
      }
      return constant;
    }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&body);
  auto constant = builder.create<ConstantOp>(loc, type, llvm::cast<ElementsAttr>(value));
  zeroConstants.push_back(constant);
  return constant;
}

LogicalResult Sharder::reduceScatter(const GradientRun &run) {
  builder.setInsertionPoint(run.anchor);
  llvm::SetVector<unsigned> read;
  for (auto &[p, acc] : run.accumulated)
    read.insert(shardOf.lookup(p));
  Type f32 = builder.getF32Type();
  SmallVector<unsigned> finished;
  for (unsigned s : read) {
    Shard &shard = shards[s];
    std::string of = shard.name + (shard.name == run.group ? "" : " from " + run.group);
    // The shard's layout, with this pass's gradients and zeros for parameters it did not read
    // (a tied weight's other user) and for the padding.
    SmallVector<Value> pieces;
    int64_t at = 0;
    for (Value p : shard.params) {
      int64_t offset = shard.offset.lookup(p);
      int64_t count = llvm::cast<RankedTensorType>(p.getType()).getNumElements();
      if (offset > at)
        pieces.push_back(zeros(offset - at));
      if (Value g = run.accumulated.lookup(p))
        pieces.push_back(builder.create<ViewOp>(loc, RankedTensorType::get({count}, f32), g, 0));
      else
        pieces.push_back(zeros(count));
      at = offset + count;
    }
    if (shard.flatElements > at)
      pieces.push_back(zeros(shard.flatElements - at));
    auto flatType = RankedTensorType::get({shard.flatElements}, f32);
    Value flat = pieces.size() == 1 ? pieces.front()
                                    : builder.create<ConcatOp>(named("gradients of " + of),
                                                               flatType, pieces, uint64_t(0))
                                          .getResult();
    auto shardType = RankedTensorType::get({shard.flatElements / world}, f32);
    Value scattered = builder
                          .create<ReduceScatterOp>(named("reduce-scatter gradients of " + of),
                                                   TypeRange{shardType}, ValueRange{flat},
                                                   uint64_t(world))
                          .getResult(0);
    Value host = builder.create<OffloadOp>(
        named(run.group + ": offload gradient shard of " + shard.name), scattered);
    shard.grad = shard.grad ? builder.create<AccumulateOp>(
                                  named("accumulate gradient shard of " + shard.name),
                                  shard.grad, host)
                            : host;
    if (speedLoader && shard.passesLeft == 0)
      return run.anchor->emitError("sl-shard-parameters: more backward passes offload gradients "
                                   "of the shard of '")
             << shard.name << "' than groups read it (is sl.plan's mode the step's?)";
    if (speedLoader && --shard.passesLeft == 0)
      finished.push_back(s);
  }
  if (!finished.empty())
    emitOptimizerSteps(finished);
  return success();
}

void Sharder::emitOptimizerSteps(ArrayRef<unsigned> finished) {
  SmallVector<Value> grads, hosts;
  std::string names;
  for (unsigned s : finished) {
    grads.push_back(shards[s].grad);
    hosts.push_back(shards[s].host);
    shards[s].stepped = true;
    names += (names.empty() ? "shards of " : ", ") + shards[s].name;
  }
  builder.create<OptimizerStepOp>(named("optimizer step: " + names), loss, grads, hosts);
}

void Sharder::placeZeros() {
  // The scheduler hoists a constant to the top of the step when it is first asked for, so the
  // constants stand in reverse order of first use, and it copies those that kernels read to the
  // device right after them, in order of first use (ExplicitStep.h).
  auto isBefore = [](Operation *a, Operation *b) { return a && b && a->isBeforeInBlock(b); };
  auto constantRun = [&] {
    SmallVector<Operation *> ops;
    for (Operation &op : body) {
      if (!llvm::isa<ConstantOp>(op))
        break;
      ops.push_back(&op);
    }
    return ops;
  };
  for (auto [index, constant] : llvm::enumerate(zeroConstants)) {
    Operation *first = firstUser(constant.getResult());
    if (auto it = existingFirstUser.find(constant);
        it != existingFirstUser.end() && !isBefore(first, it->second))
      continue; // the step asked for it before this pass did
    SmallVector<Operation *> others = constantRun();
    llvm::erase(others, constant.getOperation());
    // Above the first constant asked for before this one: of the zeros, those asked for earlier
    // (one concatenation may read several); of the rest, those read earlier.
    auto earlier = llvm::find_if(others, [&](Operation *other) {
      auto zero = llvm::find(zeroConstants, llvm::cast<ConstantOp>(other));
      if (zero != zeroConstants.end())
        return size_t(zero - zeroConstants.begin()) < index;
      return isBefore(firstUser(other->getResult(0)), first);
    });
    if (earlier != others.end())
      constant->moveBefore(*earlier);
    else if (!others.empty())
      constant->moveAfter(others.back());
  }
  for (ConstantOp constant : zeroConstants) {
    PrefetchOp copy;
    for (Operation *user : constant->getUsers())
      if (auto prefetch = llvm::dyn_cast<PrefetchOp>(user))
        copy = prefetch;
    if (!copy) {
      builder.setInsertionPointAfter(constantRun().back());
      copy = builder.create<PrefetchOp>(named("prefetch constant"), constant.getResult());
    }
    // Kernels read a constant through its copy.
    for (OpOperand &use : llvm::make_early_inc_range(constant->getUses()))
      if (llvm::isa<ConcatOp>(use.getOwner()))
        use.set(copy);
    Operation *first = firstUser(copy.getResult());
    SmallVector<Operation *> copies;
    for (auto it = std::next(constantRun().back()->getIterator()); it != body.end(); ++it) {
      auto other = llvm::dyn_cast<PrefetchOp>(*it);
      if (!other || !other.getSource().getDefiningOp<ConstantOp>())
        break;
      if (other != copy)
        copies.push_back(other);
    }
    // After the copies read as early (a concatenation reads its zeros in the order asked for).
    auto later = llvm::find_if(copies, [&](Operation *other) {
      return isBefore(first, firstUser(other->getResult(0)));
    });
    if (later != copies.end())
      copy->moveBefore(*later);
    else if (!copies.empty())
      copy->moveAfter(copies.back());
  }
}

LogicalResult Sharder::run() {
  if (failed(collect()) || failed(formShards()))
    return failure();
  if (params.empty())
    return success();
  createShards();
  for (FetchParamsOp fetch : fetches)
    gather(fetch);
  if (forwardOnly) {
    // What the fetches gathered that no stage reads.
    eraseUnusedOps(body);
    return success();
  }
  for (const GradientRun &run : runs)
    if (failed(reduceScatter(run)))
      return failure();
  if (!speedLoader) {
    // Canonical: every shard's gradient is final only after the last sub-batch.
    builder.setInsertionPoint(ret);
    for (const Group &group : llvm::reverse(groups)) {
      llvm::SetVector<unsigned> read;
      for (Value p : group.params)
        read.insert(shardOf.lookup(p));
      SmallVector<unsigned> finished;
      for (unsigned s : read)
        if (--shards[s].passesLeft == 0)
          finished.push_back(s);
      if (!finished.empty())
        emitOptimizerSteps(finished);
    }
  }
  for (const Shard &shard : shards)
    if (!shard.stepped)
      return step.emitError("sl-shard-parameters: the shard of '")
             << shard.name << "' is never stepped: fewer backward passes offload its gradients "
             << "than groups read it (is sl.plan's mode the step's?)";
  // The rank's gradient of each shard instead of every parameter's gradient.
  SmallVector<Value> returned{loss};
  SmallVector<Attribute> resultAttrs{step.getResultAttrDict(0)};
  for (Shard &shard : shards) {
    returned.push_back(shard.grad);
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("sl.name", builder.getStringAttr("grad_shard:" + shard.name))));
  }
  builder.setInsertionPoint(ret);
  builder.create<func::ReturnOp>(ret.getLoc(), returned);
  ret.erase();
  for (Operation *old : oldSteps)
    old->erase();
  step.setFunctionType(
      builder.getFunctionType(step.getArgumentTypes(), ValueRange(returned).getTypes()));
  step.setAllResultAttrs(resultAttrs);
  // What the fetches gathered that the pass does not read, and the per-parameter offloads.
  eraseUnusedOps(body);
  placeZeros();
  return success();
}

struct ShardParametersPass : public impl::ShardParametersPassBase<ShardParametersPass> {
  using ShardParametersPassBase::ShardParametersPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(kTrainStepName);
    bool forwardOnly = false;
    if (!step || step.isExternal()) {
      // A planned inference step (sl-schedule-subbatches{forward-only=true}).
      step = module.lookupSymbol<func::FuncOp>(kInferStepName);
      forwardOnly = step && !step.isExternal() && step->hasAttr(kPlanAttr);
    }
    if (!step || step.isExternal() || (!forwardOnly && step.getSymName() != kTrainStepName)) {
      module.emitError("sl-shard-parameters: no @")
          << kTrainStepName << " or planned @" << kInferStepName
          << "; run sl-schedule-subbatches first";
      return signalPassFailure();
    }
    auto plan = step->getAttrOfType<PlanAttr>(kPlanAttr);
    int64_t world = plan ? plan.getWorld().value_or(1) : 1; // verified to be at least 1
    if (world == 1)
      return; // one rank holds everything: nothing to shard
    std::optional<PlanMode> mode = plan.getMode();
    if (!mode) {
      step.emitError("sl-shard-parameters: sl.plan must name the step's mode, 'speedloader' or "
                     "'canonical'");
      return signalPassFailure();
    }
    if (failed(Sharder(step, world, *mode == PlanMode::speedloader, forwardOnly).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace sl
