//===- CheckSharedParams.cpp - sl-check-shared-params: a tie or merged equal initializers? ------===//
//
// A parameter read in several places is one weight to training: its gradients from every use are
// summed and it is stepped once. That is right for a weight the model ties (an embedding reused
// as the output head), and wrong where the exporter merged distinct weights that happened to be
// equal: torch.onnx.export in eval mode keeps one initializer per set of equal values, so every
// all-ones norm weight of a freshly initialised model becomes `model.layers.0.input_layernorm
// .weight`, read by every layer and by the final norm. Training would keep those norms equal
// forever. Models never tie weights across their layers, so a parameter read in two blocks, or
// named after one block and read outside it, is almost surely merged: say so, and how to export.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/BlockNames.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <set>

namespace sl {
#define GEN_PASS_DEF_CHECKSHAREDPARAMSPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

struct CheckSharedParamsPass : public sl::impl::CheckSharedParamsPassBase<CheckSharedParamsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        func.walk([&](sl::ParamOp param) { check(param); });
  }

  static void check(sl::ParamOp param) {
    std::optional<int> own = sl::blockIndexIn(param.getName());
    std::set<int> blocks;
    llvm::StringRef outside; // a reader scoped outside every block
    for (Operation *user : param->getUsers()) {
      if (std::optional<int> block = sl::blockOfLocation(user->getLoc()))
        blocks.insert(*block);
      else if (outside.empty())
        outside = sl::scopedNodeName(user->getLoc());
    }
    bool acrossBlocks = blocks.size() > 1;
    bool outsideItsBlock = own && (!outside.empty() || llvm::any_of(blocks, [&](int b) {
                                     return b != *own;
                                   }));
    if (!acrossBlocks && !outsideItsBlock)
      return;
    std::string where;
    for (int b : blocks)
      where += (where.empty() ? "blocks " : ", ") + std::to_string(b);
    if (!outside.empty())
      where += (where.empty() ? "" : " and ") + ("outside the blocks (node '" + outside + "')").str();
    param.emitWarning("sl-check-shared-params: parameter '")
        << param.getName() << "' is read in " << where
        << ": this looks like torch.onnx.export merging initializers of equal values (it does "
           "in eval mode, and a freshly initialised model's norm weights are all equal), not a "
           "weight the model ties. Training steps it as one weight, so these stay tied. To train "
           "them apart, export with the model in train mode and "
           "training=torch.onnx.TrainingMode.PRESERVE (docs/user-guide.md)";
  }
};

} // namespace
