//===- PartitionLayers.cpp - sl-partition-layers: a model as a sequence of stages ---------------===//
//
// Finds the transformer blocks of a model function and outlines the model into stages: a
// prologue (embeddings), one sl.layer per block, and an epilogue (final norm, head, loss). Each
// block's body becomes a function whose parameters are arguments; identical blocks share one
// body function, and each sl.layer passes its own parameters.
//
// Which block an operation belongs to comes, in order of preference, from:
//   1. its exporter name scope: `/layers.3/`, `/h.3/`, `/blocks.3/`, `/layer.3/`, `/block.3/`;
//   2. the parameters it reads, when their names carry such an index (`model.layers.3.mlp.w`):
//      exporters that drop node names keep initializer names. Only for an operation whose name
//      has no scope path: a scoped name outside every block (`/model/norm/Mul_1`) is where the
//      operation is, whatever its parameter is called (torch.onnx.export in eval mode merges
//      initializers of equal values, so a fresh model's final norm reads
//      `model.layers.0.input_layernorm.weight`);
// An operation with neither belongs to the stage of its latest operand, or to the prologue (if
// nothing it reads comes from a block) or the epilogue (if nothing a block reads comes from it);
// one that reads only parameters and constants goes with its first user. Where a placement by a
// parameter's name is only a guess (the parameter is read elsewhere too, and may be merged equal
// initializers) and data flow contradicts it, data flow wins.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/BlockNames.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace sl {
#define GEN_PASS_DEF_PARTITIONLAYERSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using sl::blockIndexIn;
using sl::blockOfLocation;
using sl::hasScopePath;

namespace {

constexpr int kPrologue = -1;
constexpr int kUnassigned = -2;

bool isHoisted(Operation *op) { return sl::isPreloaded(op); }

struct Stage {
  int index; // kPrologue, a block number, or the epilogue (after every block)
  SmallVector<Operation *> ops;
  llvm::SetVector<Value> inputs;  // defined outside, not a parameter or constant
  llvm::SetVector<Value> params;  // sl.param results read by the stage
  llvm::SetVector<Value> outputs; // defined inside, used after the stage
  func::FuncOp body;
};

struct PartitionLayersPass : public sl::impl::PartitionLayersPassBase<PartitionLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp func : funcs)
      if (!func.isExternal() && !func.isPrivate() && failed(partition(module, func)))
        return signalPassFailure();
  }

  LogicalResult partition(ModuleOp module, func::FuncOp func) {
    if (!func.getBody().hasOneBlock())
      return func.emitError("sl-partition-layers: the model function must have one block");
    Block &body = func.getBody().front();

    // 1. Block indices from name scopes, then, for operations without one, from parameter names.
    llvm::DenseMap<Operation *, int> stageOf;
    // Operations whose stage is a guess that data flow may overrule (step 3): those placed by the
    // name of a parameter that other operations read too (without node names, merged equal
    // initializers cannot be told from a block's own weight), and those placed in step 2.
    llvm::DenseSet<Operation *> movable;
    int blocks = 0;
    for (Operation &op : body.without_terminator()) {
      if (isHoisted(&op))
        continue;
      std::optional<int> index = blockOfLocation(op.getLoc());
      if (!index && !hasScopePath(op.getLoc()))
        for (Value operand : op.getOperands())
          if (auto param = operand.getDefiningOp<sl::ParamOp>())
            if ((index = blockIndexIn(param.getName()))) {
              if (!param->hasOneUse())
                movable.insert(&op);
              break;
            }
      stageOf[&op] = index ? *index : kUnassigned;
      if (index)
        blocks = std::max(blocks, *index + 1);
    }
    if (blocks == 0)
      return func.emitError("sl-partition-layers: found no transformer blocks (no node scope or "
                            "parameter name like 'layers.N'); nothing to partition");
    const int epilogue = blocks;

    // 2. Unassigned ops: the stage of their latest operand; the epilogue if no block reads them
    //    and they read a block; the prologue otherwise.
    auto producerStage = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || isHoisted(def))
        return kPrologue;
      return stageOf.lookup(def);
    };
    llvm::DenseMap<Operation *, bool> feedsBlock;
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      bool feeds = false;
      for (Operation *user : op.getUsers())
        feeds |= (stageOf.count(user) && !movable.count(user) && stageOf[user] >= 0 &&
                  stageOf[user] < epilogue) ||
                 feedsBlock.lookup(user);
      feedsBlock[&op] = feeds;
    }
    llvm::DenseSet<Operation *> unassigned;
    for (Operation &op : body.without_terminator()) {
      if (isHoisted(&op) || stageOf[&op] != kUnassigned)
        continue;
      unassigned.insert(&op);
      int latest = kPrologue;
      for (Value operand : op.getOperands())
        latest = std::max(latest, producerStage(operand));
      if (latest == kPrologue)
        stageOf[&op] = kPrologue;
      else
        stageOf[&op] = feedsBlock[&op] ? latest : epilogue;
    }

    // 2b. Unassigned work on parameters alone (a tied head's transposed embedding) belongs with
    //     its first user, not in the prologue: it is weight preparation, not an activation.
    llvm::DenseMap<Operation *, bool> readsInput;
    for (Operation &op : body.without_terminator()) {
      bool reads = false;
      for (Value operand : op.getOperands()) {
        Operation *def = operand.getDefiningOp();
        reads |= !def || readsInput.lookup(def);
      }
      readsInput[&op] = reads;
    }
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (isHoisted(&op) || !unassigned.count(&op) || readsInput[&op])
        continue;
      int first = epilogue;
      for (Operation *user : op.getUsers())
        if (stageOf.count(user))
          first = std::min(first, stageOf[user]);
      stageOf[&op] = first;
    }

    // 3. Stages must read only from themselves and earlier stages. A guessed stage that reads a
    //    later one moves there (to the epilogue if no block reads it), in order, so what reads it
    //    is decided after it moved; a stage from a node scope or an unshared parameter is an
    //    error.
    for (Operation &op : body.without_terminator()) {
      if (isHoisted(&op))
        continue;
      int latest = kPrologue;
      for (Value operand : op.getOperands())
        latest = std::max(latest, producerStage(operand));
      if (latest <= stageOf[&op])
        continue;
      if (movable.count(&op) || unassigned.count(&op)) {
        stageOf[&op] = feedsBlock[&op] ? latest : epilogue;
        continue;
      }
      return op.emitError("sl-partition-layers: this operation of stage ")
             << stageOf[&op] << " reads a value of the later stage " << latest
             << "; the layers are not in data-flow order";
    }

    // 4. Collect each stage's operations, inputs, parameters and outputs.
    std::vector<Stage> stages;
    for (int s = kPrologue; s <= epilogue; ++s)
      stages.push_back(Stage{s, {}, {}, {}, {}, nullptr});
    auto stageAt = [&](int s) -> Stage & { return stages[size_t(s - kPrologue)]; };
    for (Operation &op : body.without_terminator())
      if (!isHoisted(&op))
        stageAt(stageOf[&op]).ops.push_back(&op);
    for (Stage &stage : stages) {
      llvm::DenseSet<Operation *> inside(stage.ops.begin(), stage.ops.end());
      for (Operation *op : stage.ops) {
        for (Value operand : op->getOperands()) {
          Operation *def = operand.getDefiningOp();
          if (def && llvm::isa<sl::ParamOp>(def))
            stage.params.insert(operand);
          else if (def && llvm::isa<sl::ConstantOp>(def))
            continue;
          else if (!def || !inside.count(def))
            stage.inputs.insert(operand);
        }
        for (Value result : op->getResults())
          for (OpOperand &use : result.getUses())
            if (!inside.count(use.getOwner()))
              stage.outputs.insert(result);
      }
    }

    // 5. Outline every non-empty stage and call it with sl.layer, in order.
    OpBuilder builder(func.getContext());
    Operation *terminator = body.getTerminator();
    int distinct = 0;
    SmallVector<func::FuncOp> blockBodies; // the distinct ones
    // Outputs of stages already outlined are now sl.layer results: later stages read those.
    llvm::DenseMap<Value, Value> outlined;
    for (Stage &stage : stages) {
      if (stage.ops.empty())
        continue;
      llvm::SetVector<Value> remapped;
      for (Value v : stage.inputs)
        remapped.insert(outlined.lookup(v) ? outlined.lookup(v) : v);
      stage.inputs = std::move(remapped);
      bool isBlock = stage.index >= 0 && stage.index < epilogue;
      std::string name = stage.index == kPrologue ? "prologue"
                         : isBlock                ? "block_" + std::to_string(stage.index)
                                                  : "epilogue";
      func::FuncOp callee = outline(module, func, stage, name);
      if (isBlock) {
        // Identical blocks share one body function.
        auto same =
            llvm::find_if(blockBodies, [&](func::FuncOp body) { return sameBody(body, callee); });
        if (same != blockBodies.end()) {
          callee.erase();
          callee = *same;
        } else {
          callee.setSymName(distinct == 0 ? "block" : "block_" + std::to_string(distinct));
          ++distinct;
          blockBodies.push_back(callee);
        }
      }
      builder.setInsertionPoint(terminator);
      SmallVector<Value> inputs(stage.inputs.begin(), stage.inputs.end());
      SmallVector<Value> params(stage.params.begin(), stage.params.end());
      SmallVector<Type> resultTypes;
      for (Value v : stage.outputs)
        resultTypes.push_back(v.getType());
      auto layer = builder.create<sl::LayerOp>(
          stage.ops.back()->getLoc(), resultTypes, callee.getSymName(), inputs, params,
          stage.index == kPrologue ? "prologue" : isBlock ? "block" : "epilogue",
          int64_t(isBlock ? stage.index : 0));
      llvm::DenseSet<Operation *> inside(stage.ops.begin(), stage.ops.end());
      for (auto [output, result] : llvm::zip(stage.outputs, layer.getResults())) {
        Value value = output;
        value.replaceUsesWithIf(result,
                                [&](OpOperand &use) { return !inside.count(use.getOwner()); });
        outlined[value] = result;
      }
      for (Operation *op : llvm::reverse(stage.ops))
        op->erase();
    }
    // Constants the model function no longer reads were cloned into the stages.
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
      if (llvm::isa<sl::ConstantOp>(op) && op.use_empty())
        op.erase();
    return success();
  }

  /// A private function computing `stage`: (inputs..., params...) -> outputs.
  func::FuncOp outline(ModuleOp module, func::FuncOp model, Stage &stage, llvm::StringRef name) {
    SmallVector<Type> argTypes, resultTypes;
    for (Value v : stage.inputs)
      argTypes.push_back(v.getType());
    for (Value v : stage.params)
      argTypes.push_back(v.getType());
    for (Value v : stage.outputs)
      resultTypes.push_back(v.getType());
    OpBuilder builder(module.getContext());
    builder.setInsertionPoint(model);
    auto callee = builder.create<func::FuncOp>(model.getLoc(), name,
                                               builder.getFunctionType(argTypes, resultTypes));
    callee.setPrivate();
    Block *entry = callee.addEntryBlock();
    IRMapping mapping;
    unsigned arg = 0;
    for (Value v : stage.inputs)
      mapping.map(v, entry->getArgument(arg++));
    // Parameter arguments are marked, not named: a body shared by several blocks receives each
    // block's own parameters, whose names are on the sl.param operands of its sl.layer.
    for (Value v : stage.params) {
      callee.setArgAttr(arg, "sl.param", builder.getUnitAttr());
      mapping.map(v, entry->getArgument(arg++));
    }
    builder.setInsertionPointToStart(entry);
    for (Operation *op : stage.ops) {
      for (Value operand : op->getOperands())
        if (auto constant = operand.getDefiningOp<sl::ConstantOp>(); constant && !mapping.contains(operand))
          mapping.map(operand, builder.clone(*constant)->getResult(0));
      builder.clone(*op, mapping);
    }
    SmallVector<Value> results;
    for (Value v : stage.outputs)
      results.push_back(mapping.lookup(v));
    builder.create<func::ReturnOp>(model.getLoc(), results);
    return callee;
  }

  /// Whether two functions compute the same thing, whatever their names and locations: the same
  /// type, the same arguments marked as parameters, and equivalent bodies (the same ops with the
  /// same attributes, reading values in the same places). Attributes are uniqued, so comparing
  /// them costs nothing, where printing a block's constants (its rotary tables: 2 MB of hex at
  /// 4096) to compare text did.
  static bool sameBody(func::FuncOp a, func::FuncOp b) {
    if (a.getFunctionType() != b.getFunctionType())
      return false;
    for (unsigned i = 0; i < a.getNumArguments(); ++i)
      if (bool(a.getArgAttr(i, "sl.param")) != bool(b.getArgAttr(i, "sl.param")))
        return false;
    return OperationEquivalence::isRegionEquivalentTo(&a.getBody(), &b.getBody(),
                                                      OperationEquivalence::IgnoreLocations);
  }
};

} // namespace
