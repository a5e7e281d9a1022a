//===- GenerationRewrites.cpp - prefill and decode stages from copies of a model --------------===//
//
// The IR surgery of sl-split-generation (SplitGeneration.cpp), on copies of the model that its
// stage-pipeline compiled: the decode copy's attentions read the KV caches and its position
// tables each sequence's position; the prefill copy's blocks return what goes into the caches and
// its epilogue takes each prompt's last position; both move into the module under their names.
//
//===--------------------------------------------------------------------------------------------===//

#include "GenerationRewrites.h"

#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace sl::generation {

RankedTensorType tensorType(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

func::FuncOp forwardOf(ModuleOp module) { return module.lookupSymbol<func::FuncOp>("forward"); }

/// Bound at the prompt length and at one token, a mask that is causal only over a window (GPT-Neo's
/// local attention, a sliding window) is causal and fuses; a decode step would then attend to
/// keys the model masks once a sequence is longer than the window. The copy bound at [1, C], all
/// the positions a cache holds, shows it: each of its attentions must be fused and causal there
/// too, and carry a mask only if the prompt-length copy's attentions do (a position bias is
/// there at every length; a window's mask appears only past the window).
LogicalResult checkCausalOverCache(ModuleOp tables, ModuleOp prefill, int64_t c) {
  bool prefillMasked = false;
  prefill.walk([&](sl::AttentionOp attention) { prefillMasked |= bool(attention.getMask()); });
  Operation *offending = nullptr;
  tables.walk([&](Operation *op) {
    auto attention = llvm::dyn_cast<sl::AttentionOp>(op);
    if (llvm::isa<sl::SoftmaxOp>(op) ||
        (attention && (!attention.getCausal() || (attention.getMask() && !prefillMasked)))) {
      offending = op;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (!offending)
    return success();
  return offending->emitError("sl-split-generation: this attention is causal at the prompt "
                              "length but not over all ")
         << c << " positions a KV cache holds (max-prompt-len + max-new-tokens): its mask drops "
                 "more keys than a causal one there (a sliding window, as GPT-Neo's local "
                 "attention has, shorter than that); give a max-prompt-len + max-new-tokens "
                 "within the window";
}

namespace {

Value i64Constant(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({int64_t(values.size())}, b.getI64Type());
  return b.create<sl::ConstantOp>(loc, type, DenseElementsAttr::get(type, values));
}

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, tensorType(v).getElementType());
  return b.create<sl::ReshapeOp>(loc, type, v, i64Constant(b, loc, shape), UnitAttr());
}

/// Appends an argument to a stage function and to every sl.layer that calls it.
BlockArgument addStageInput(func::FuncOp stage, Type type, ModuleOp module,
                            llvm::function_ref<Value(sl::LayerOp)> operandFor) {
  unsigned index = stage.getNumArguments();
  // Stage inputs come before the parameters: insert after the last non-parameter argument.
  for (unsigned i = 0; i < stage.getNumArguments(); ++i)
    if (stage.getArgAttr(i, "sl.param")) {
      index = i;
      break;
    }
  (void)stage.insertArgument(index, type, {}, stage.getLoc());
  for (auto func : module.getOps<func::FuncOp>())
    for (auto layer : llvm::make_early_inc_range(func.getOps<sl::LayerOp>())) {
      if (layer.getCallee() != stage.getSymName())
        continue;
      SmallVector<Value> inputs(layer.getInputs());
      inputs.push_back(operandFor(layer));
      OpBuilder b(layer);
      auto replaced = b.create<sl::LayerOp>(layer.getLoc(), layer.getResultTypes(),
                                            layer.getCalleeAttr(), inputs, layer.getParams(),
                                            layer.getStageAttr(), layer.getIndexAttr());
      layer.replaceAllUsesWith(replaced.getResults());
      layer.erase();
    }
  return stage.getArgument(index);
}

/// Appends results to a stage function (its return gets `values`) and to its sl.layer calls.
void addStageResults(func::FuncOp stage, ValueRange values, ModuleOp module) {
  auto ret = llvm::cast<func::ReturnOp>(stage.getBody().front().getTerminator());
  SmallVector<Value> returned(ret.getOperands());
  returned.append(values.begin(), values.end());
  OpBuilder b(ret);
  b.create<func::ReturnOp>(ret.getLoc(), returned);
  ret.erase();
  stage.setType(FunctionType::get(stage.getContext(), stage.getArgumentTypes(),
                                  ValueRange(returned).getTypes()));
  for (auto func : module.getOps<func::FuncOp>())
    for (auto layer : llvm::make_early_inc_range(func.getOps<sl::LayerOp>())) {
      if (layer.getCallee() != stage.getSymName())
        continue;
      OpBuilder lb(layer);
      auto replaced = lb.create<sl::LayerOp>(
          layer.getLoc(), stage.getResultTypes(), layer.getCalleeAttr(), layer.getInputs(),
          layer.getParams(), layer.getStageAttr(), layer.getIndexAttr());
      for (auto [from, to] : llvm::zip(layer.getResults(), replaced.getResults()))
        from.replaceAllUsesWith(to);
      layer.erase();
    }
}


SmallVector<func::FuncOp> stagesOf(ModuleOp module, llvm::StringRef kind) {
  SmallVector<func::FuncOp> stages;
  llvm::SmallDenseSet<StringRef> seen;
  for (auto layer : forwardOf(module).getOps<sl::LayerOp>())
    if (layer.getStage() == kind && seen.insert(layer.getCallee()).second)
      stages.push_back(module.lookupSymbol<func::FuncOp>(layer.getCallee()));
  return stages;
}

/// The attentions of a block stage, checked to be what generation can cache.
FailureOr<SmallVector<sl::AttentionOp>> attentionsOf(func::FuncOp block, bool oneToken) {
  SmallVector<sl::AttentionOp> attentions;
  WalkResult walk = block.walk([&](Operation *op) {
    if (llvm::isa<sl::SoftmaxOp>(op)) {
      op->emitError("sl-split-generation: block @")
          << block.getSymName()
          << " has a softmax that sl-fuse-transformer did not fuse into sl.attention; "
             "generation needs fused causal attention (compile with fuse=true; with it, "
             "sl-fuse-transformer's remark on this softmax says which check failed)";
      return WalkResult::interrupt();
    }
    if (auto attention = llvm::dyn_cast<sl::AttentionOp>(op)) {
      // One query over one key is causal whatever the flag says (a folded mask may drop it).
      if (!attention.getCausal() && !oneToken) {
        attention.emitError("sl-split-generation: only causal attention can use a KV cache");
        return WalkResult::interrupt();
      }
      // A decoding step computes ALiBi from the key's position; a mask is [S, T] scores' own.
      if (attention.getMask()) {
        attention.emitError("sl-split-generation: sl.attention adds a mask ")
            << attention.getMask().getType()
            << " to its scores that is neither causal masking nor an ALiBi position bias (a "
               "slope per head times the key's position); a KV cache needs scores that "
               "follow from the key's position alone, so this attention cannot generate";
        return WalkResult::interrupt();
      }
      attentions.push_back(attention);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (attentions.empty())
    return block.emitError("sl-split-generation: block @")
           << block.getSymName() << " has no attention, so it has nothing to cache";
  return attentions;
}

} // namespace

/// Positions feed a decode step in two ways once it is bound at one position: rotary cos/sin
/// constants (the row of position 0), and gathers of a parameter (learned position embeddings)
/// at a constant index. Both are made to read each sequence's `position`.
LogicalResult rewriteDecode(ModuleOp decode, ModuleOp tables, int64_t cachePositions) {
  MLIRContext *context = decode.getContext();
  func::FuncOp forward = forwardOf(decode);
  int64_t b = tensorType(forward.getArgument(0)).getDimSize(0);
  int64_t c = cachePositions;
  auto i64 = IntegerType::get(context, 64);
  auto positionType = RankedTensorType::get({b}, i64);
  auto named = [&](llvm::StringRef name) {
    return DictionaryAttr::get(
        context, {NamedAttribute(StringAttr::get(context, "sl.name"),
                                       StringAttr::get(context, name))});
  };
  (void)forward.insertArgument(forward.getNumArguments(), positionType, named("position"),
                               forward.getLoc());
  Value position = forward.getArgument(forward.getNumArguments() - 1);

  // The rotary tables at every position, from the copy bound at [1, C].
  ElementsAttr cosTable, sinTable;
  bool conflicting = false;
  tables.walk([&](sl::RotaryOp rotary) {
    auto cos = rotary.getCos().getDefiningOp<sl::ConstantOp>();
    auto sin = rotary.getSin().getDefiningOp<sl::ConstantOp>();
    if (!cos || !sin) {
      conflicting = true;
      return;
    }
    if ((cosTable && cosTable != cos.getValueAttr()) || (sinTable && sinTable != sin.getValueAttr()))
      conflicting = true;
    cosTable = cos.getValueAttr();
    sinTable = sin.getValueAttr();
  });
  if (conflicting)
    return forward.emitError("sl-split-generation: bound at all ")
           << c << " positions (max-prompt-len + max-new-tokens), the rotary embeddings do not "
                   "read one cos/sin table computed at compile time; does the model support "
                   "that many positions?";

  // Rows `position` of a table constant [1.., C, rest..] for a rotary of `x` whose cos/sin were
  // `like` [1.., 1, rest..] at one position. Tables with a batch dimension ([1, C, D] gathered or
  // computed from position_ids, [1, 1, C, D] sliced from a buffer) keep their rank, the sub-batch
  // in dimension 0; tables without one ([C, D], a cached table sliced by the sequence length)
  // broadcast against x from the right, so the rows get x's rank with the sub-batch in front.
  auto tableRows = [&](OpBuilder &builder, Location loc, ElementsAttr table,
                       RankedTensorType like, RankedTensorType x, Value pos) -> FailureOr<Value> {
    auto tableType = llvm::cast<RankedTensorType>(table.getType());
    if (tableType.getRank() != like.getRank() || like.getRank() > x.getRank())
      return failure();
    int64_t axis = -1;
    // Positions given per sequence ([batch, seq] position_ids) give cos/sin a batch dimension
    // [b, 1, ...] where the table, bound at batch 1, has 1: the rows gathered for each sequence
    // fill it.
    bool perSequence = like.getRank() >= 2 && tableType.getDimSize(0) == 1 &&
                       like.getDimSize(0) == b && b != 1;
    for (int64_t d = 0; d < like.getRank(); ++d) {
      if (tableType.getDimSize(d) == like.getDimSize(d) || (d == 0 && perSequence))
        continue;
      if (axis >= 0 || like.getDimSize(d) != 1 || tableType.getDimSize(d) != c)
        return failure();
      axis = d;
    }
    int64_t pad = axis < 1 ? x.getRank() - like.getRank() : 0;
    if (axis < 0 || axis + pad < 1)
      return failure();
    for (int64_t d = perSequence ? 1 : 0; d < axis; ++d)
      if (like.getDimSize(d) != 1)
        return failure();
    int64_t rest = 1;
    for (int64_t d = axis + 1; d < like.getRank(); ++d)
      rest *= like.getDimSize(d);
    auto rowsType = RankedTensorType::get({c, rest}, like.getElementType());
    auto rows = builder.create<sl::ConstantOp>(
        loc, rowsType, llvm::cast<DenseElementsAttr>(table).reshape(rowsType));
    auto gathered = builder.create<sl::GatherOp>(
        loc, RankedTensorType::get({b, rest}, like.getElementType()), rows, pos,
        builder.getI64IntegerAttr(0));
    SmallVector<int64_t> shape(pad, 1);
    shape.append(like.getShape().begin(), like.getShape().end());
    shape[0] = b;
    return reshape(builder, loc, gathered, shape);
  };

  for (func::FuncOp stage : llvm::concat<func::FuncOp>(stagesOf(decode, "prologue"),
                                                       stagesOf(decode, "block"))) {
    SmallVector<sl::RotaryOp> rotaries;
    stage.walk([&](sl::RotaryOp r) { rotaries.push_back(r); });
    SmallVector<sl::GatherOp> positionGathers;
    stage.walk([&](sl::GatherOp g) {
      auto data = llvm::dyn_cast<BlockArgument>(g.getData());
      if (data && stage.getArgAttr(data.getArgNumber(), "sl.param") &&
          g.getIndices().getDefiningOp<sl::ConstantOp>())
        positionGathers.push_back(g);
    });
    if (rotaries.empty() && positionGathers.empty())
      continue;
    Value pos = addStageInput(stage, positionType, decode, [&](sl::LayerOp) { return position; });
    OpBuilder builder(context);
    for (sl::RotaryOp rotary : rotaries) {
      if (!cosTable)
        return rotary.emitError("sl-split-generation: no rotary table in the copy of the model "
                                "bound at every position");
      builder.setInsertionPoint(rotary);
      FailureOr<Value> cos = tableRows(builder, rotary.getLoc(), cosTable,
                                       tensorType(rotary.getCos()),
                                       tensorType(rotary.getInput()), pos);
      FailureOr<Value> sin = tableRows(builder, rotary.getLoc(), sinTable,
                                       tensorType(rotary.getSin()),
                                       tensorType(rotary.getInput()), pos);
      if (failed(cos) || failed(sin))
        return rotary.emitError("sl-split-generation: the rotary cos/sin ")
               << rotary.getCos().getType() << " do not match the table " << cosTable.getType()
               << " of positions 0 to " << c - 1
               << " (max-prompt-len + max-new-tokens) position by position; does the model "
                  "support that many positions?";
      rotary.getCosMutable().assign(*cos);
      rotary.getSinMutable().assign(*sin);
    }
    for (sl::GatherOp gather : positionGathers) {
      // Bound at one token, a position index is one value: [1], [1, 1], or [b, 1] when the
      // positions were computed per row (OPT's cumsum of the attention mask, offset by 2).
      std::optional<SmallVector<int64_t>> index = sl::constantInts(gather.getIndices());
      auto indexShape = tensorType(gather.getIndices()).getShape();
      bool oneColumn =
          indexShape.empty() || (indexShape.size() <= 2 && indexShape.back() == 1);
      bool onePosition = index && !index->empty() && gather.getAxis() == 0 && oneColumn &&
                         llvm::all_equal(*index);
      if (!onePosition)
        return gather.emitError("sl-split-generation: a gather of parameter rows at a constant "
                                "index must be one position's embedding (an index of shape [1], "
                                "[1, 1] or [batch, 1] with one value), got ")
               << gather.getIndices().getType();
      builder.setInsertionPoint(gather);
      Location loc = gather.getLoc();
      auto indexType = RankedTensorType::get({b, 1}, i64);
      Value rows = reshape(builder, loc, pos, {b, 1});
      Value offset = builder.create<sl::ConstantOp>(
          loc, indexType, DenseElementsAttr::get(indexType, (*index)[0]));
      Value indices = builder.create<sl::AddOp>(loc, indexType, rows, offset);
      auto data = tensorType(gather.getData());
      SmallVector<int64_t> shape{b, 1};
      shape.append(data.getShape().begin() + 1, data.getShape().end());
      auto replaced = builder.create<sl::GatherOp>(
          loc, RankedTensorType::get(shape, data.getElementType()), gather.getData(), indices,
          gather.getAxisAttr());
      gather.getResult().replaceAllUsesWith(replaced.getResult());
      gather.erase();
    }
  }

  // ALiBi slopes, from the same copy: bound at one token, the position bias of a decoding step
  // has one key and folds to zero, so its attentions lost their slopes.
  ElementsAttr alibi;
  bool mixed = false, plain = false;
  tables.walk([&](sl::AttentionOp attention) {
    auto slopes = attention.getAlibiSlopes()
                      ? attention.getAlibiSlopes().getDefiningOp<sl::ConstantOp>()
                      : sl::ConstantOp();
    if (!slopes) {
      plain = true;
      return;
    }
    if (alibi && alibi != slopes.getValueAttr())
      mixed = true;
    alibi = slopes.getValueAttr();
  });
  if (alibi && (mixed || plain))
    return forward.emitError("sl-split-generation: bound at all ")
           << c << " positions, the attentions do not share one constant set of ALiBi slopes "
                   "(some have none or others); generation supports one set for every attention";

  // Each block's causal attentions read the block's KV cache.
  unsigned layerIndex = 0;
  for (func::FuncOp block : stagesOf(decode, "block")) {
    FailureOr<SmallVector<sl::AttentionOp>> attentions = attentionsOf(block, /*oneToken=*/true);
    if (failed(attentions))
      return failure();
    Value blockPosition;
    for (BlockArgument arg : block.getArguments())
      if (arg.getType() == positionType && !block.getArgAttr(arg.getArgNumber(), "sl.param"))
        blockPosition = arg;
    if (!blockPosition)
      blockPosition =
          addStageInput(block, positionType, decode, [&](sl::LayerOp) { return position; });
    SmallVector<Value> newKv;
    for (sl::AttentionOp attention : *attentions) {
      // sl-fold-head-transposes keeps a single position's attention in [B, H, 1, D].
      if (attention.getLayout() != sl::HeadLayout::bhsd)
        return attention.emitError("sl-split-generation: a decoding step's attention must read "
                                   "[batch, heads, 1, dim] (layout bhsd)");
      auto k = tensorType(attention.getK());
      if (k.getDimSize(3) != tensorType(attention.getV()).getDimSize(3))
        return attention.emitError("sl-split-generation: keys and values of different head "
                                   "sizes cannot share one cache");
      auto cacheType = RankedTensorType::get(
          {b, 2, k.getDimSize(1), c, k.getDimSize(3)}, k.getElementType());
      // One cache argument per layer instance of this block.
      Value cache = addStageInput(block, cacheType, decode, [&](sl::LayerOp layer) {
        DictionaryAttr attrs = named("kv cache " + std::to_string(layerIndex++));
        NamedAttrList list(attrs);
        list.set(sl::kKvCacheAttr, UnitAttr::get(context));
        (void)forward.insertArgument(forward.getNumArguments(), cacheType,
                                     list.getDictionary(context), layer.getLoc());
        return Value(forward.getArgument(forward.getNumArguments() - 1));
      });
      OpBuilder builder(attention);
      Value slopes = attention.getAlibiSlopes();
      if (!slopes && alibi)
        slopes = builder.create<sl::ConstantOp>(attention.getLoc(), alibi.getType(), alibi);
      auto decoded = builder.create<sl::DecodeAttentionOp>(
          attention.getLoc(), attention.getType(), attention.getQ(), attention.getK(),
          attention.getV(), cache, blockPosition, slopes, attention.getScaleAttr());
      attention.getResult().replaceAllUsesWith(decoded.getResult());
      newKv.push_back(attention.getK());
      newKv.push_back(attention.getV());
      attention.erase();
    }
    addStageResults(block, newKv, decode);
  }
  return success();
}

/// Blocks also return the keys and values their attentions computed; the epilogue becomes the
/// decode step's own, applied to each prompt's last position.
LogicalResult rewritePrefill(ModuleOp prefill, ModuleOp decode) {
  MLIRContext *context = prefill.getContext();
  func::FuncOp forward = forwardOf(prefill);
  Block &entry = forward.getBody().front();
  int64_t b = tensorType(forward.getArgument(0)).getDimSize(0);
  auto indexType = RankedTensorType::get({b}, IntegerType::get(context, 64));
  (void)forward.insertArgument(
      1u, indexType,
      DictionaryAttr::get(context,
                          {NamedAttribute(StringAttr::get(context, "sl.name"),
                                          StringAttr::get(context, "last_index"))}),
      forward.getLoc());
  Value lastIndex = forward.getArgument(1);

  for (func::FuncOp block : stagesOf(prefill, "block")) {
    FailureOr<SmallVector<sl::AttentionOp>> attentions = attentionsOf(block, /*oneToken=*/false);
    if (failed(attentions))
      return failure();
    SmallVector<Value> kv;
    for (sl::AttentionOp attention : *attentions) {
      // The cache is [B, 2, Hkv, C, D]: keys and values read in [B, S, H, D] order (layout
      // bshd, sl-fold-head-transposes) go to it permuted, after the attention, so that the
      // permuted copies are not live beside its operands.
      for (Value keysOrValues : {attention.getK(), attention.getV()}) {
        if (attention.getLayout() == sl::HeadLayout::bshd) {
          OpBuilder builder(attention->getContext());
          builder.setInsertionPointAfter(attention);
          auto type = tensorType(keysOrValues);
          keysOrValues = builder.create<sl::TransposeOp>(
              attention.getLoc(),
              RankedTensorType::get(sl::swapHeadsIf(sl::HeadLayout::bshd, type.getShape()),
                                    type.getElementType()),
              keysOrValues, ArrayRef<int64_t>{0, 2, 1, 3});
        }
        kv.push_back(keysOrValues);
      }
    }
    addStageResults(block, kv, prefill);
  }

  SmallVector<func::FuncOp> epilogues = stagesOf(prefill, "epilogue");
  SmallVector<func::FuncOp> decodeEpilogues = stagesOf(decode, "epilogue");
  if (epilogues.size() != 1 || decodeEpilogues.size() != 1)
    return forward.emitError("sl-split-generation: the model needs one epilogue stage (final "
                             "norm and head)");
  func::FuncOp epilogue = epilogues.front();
  // Its body: the decode epilogue's (bound at one position), after sl.take_rows.
  func::FuncOp last = decodeEpilogues.front().clone();
  last.setSymName((epilogue.getSymName() + "_last").str());
  prefill.push_back(last);
  auto hidden = tensorType(epilogue.getArgument(0));
  Value rows = last.getBody().front().insertArgument(1u, indexType, last.getLoc());
  BlockArgument full = last.getBody().front().insertArgument(1u, hidden, last.getLoc());
  BlockArgument old = last.getArgument(0);
  OpBuilder builder(&last.getBody().front(), last.getBody().front().begin());
  SmallVector<int64_t> shape(hidden.getShape());
  shape[1] = 1;
  Value taken = builder.create<sl::TakeRowsOp>(
      last.getLoc(), RankedTensorType::get(shape, hidden.getElementType()), full, rows);
  if (taken.getType() != old.getType())
    return epilogue.emitError("sl-split-generation: the epilogue's input ")
           << old.getType() << " is not one row of " << hidden;
  old.replaceAllUsesWith(taken);
  last.getBody().front().eraseArgument(0);
  SmallVector<Type> argTypes(last.getBody().front().getArgumentTypes());
  SmallVector<DictionaryAttr> argAttrs;
  argAttrs.push_back(DictionaryAttr::get(context));
  argAttrs.push_back(DictionaryAttr::get(context));
  for (unsigned i = 1; i < decodeEpilogues.front().getNumArguments(); ++i)
    argAttrs.push_back(decodeEpilogues.front().getArgAttrDict(i));
  last.setType(FunctionType::get(context, argTypes, last.getResultTypes()));
  last.setAllArgAttrs(argAttrs);

  for (auto layer : llvm::make_early_inc_range(forward.getOps<sl::LayerOp>())) {
    if (layer.getStage() != "epilogue")
      continue;
    if (layer.getInputs().size() != 1)
      return layer.emitError("sl-split-generation: the epilogue must read only the last block's "
                             "output");
    OpBuilder lb(layer);
    auto replaced = lb.create<sl::LayerOp>(
        layer.getLoc(), last.getResultTypes(), FlatSymbolRefAttr::get(last.getSymNameAttr()),
        ValueRange{layer.getInputs()[0], lastIndex}, layer.getParams(), layer.getStageAttr(),
        layer.getIndexAttr());
    layer.replaceAllUsesWith(replaced.getResults());
    layer.erase();
  }
  forward.setType(FunctionType::get(context, entry.getArgumentTypes(),
                                    entry.getTerminator()->getOperandTypes()));
  epilogue.erase();
  return success();
}

/// Moves every function of `from` into `into`, @forward renamed `name` and the others prefixed
/// with `name.`, rewriting the calls.
void moveFunctions(ModuleOp from, ModuleOp into, llvm::StringRef name) {
  for (auto func : llvm::make_early_inc_range(from.getOps<func::FuncOp>())) {
    std::string renamed =
        func.getSymName() == "forward" ? name.str() : (name + "." + func.getSymName()).str();
    if (func.getSymName() != "forward")
      for (auto caller : from.getOps<func::FuncOp>())
        caller.walk([&](sl::LayerOp layer) {
          if (layer.getCallee() == func.getSymName())
            layer.setCalleeAttr(FlatSymbolRefAttr::get(from.getContext(), renamed));
        });
    func.setSymName(renamed);
  }
  for (auto func : llvm::make_early_inc_range(from.getOps<func::FuncOp>())) {
    func->remove();
    into.push_back(func);
  }
}

} // namespace sl::generation
