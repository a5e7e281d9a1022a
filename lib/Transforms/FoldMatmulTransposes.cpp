//===- FoldMatmulTransposes.cpp - sl-fold-matmul-transposes: transposes as GEMM flags ----------===//
//
// A transpose that swaps the last two dimensions of a matrix product's operand (or of its result)
// is what a BLAS transpose flag does for free. Importers write a linear layer's weight as
// sl.transpose + sl.matmul, and sl-autodiff spells out every transpose of its gradient rules; this
// pass turns them into the `trans_a` / `trans_b` flags of sl.matmul and sl.gemm, so that the
// schedule never writes a transposed copy of a weight, an activation or an output gradient.
//
//===----------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace sl {
#define GEN_PASS_DEF_FOLDMATMULTRANSPOSESPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;
using namespace sl;

namespace {

int64_t rankOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getRank(); }

/// Whether `perm` swaps the last two dimensions and keeps every other in place.
bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t rank = int64_t(perm.size());
  if (rank < 2)
    return false;
  for (int64_t i = 0; i < rank - 2; ++i)
    if (perm[i] != i)
      return false;
  return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
}

/// The matrix `v` is a last-two-dimensions transpose of, if it is one.
Value transposedFrom(Value v) {
  auto transpose = v.getDefiningOp<TransposeOp>();
  return transpose && swapsLastTwo(transpose.getPerm()) ? transpose.getInput() : Value();
}

/// matmul(transpose(A), B) -> matmul(A, B) {trans_a}, for either operand; a flag already set is
/// cleared. Vector operands (rank 1) have no flags.
struct FoldOperandTransposes : OpRewritePattern<MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatmulOp op, PatternRewriter &rewriter) const override {
    if (rankOf(op.getLhs()) < 2 || rankOf(op.getRhs()) < 2)
      return failure();
    Value lhs = transposedFrom(op.getLhs()), rhs = transposedFrom(op.getRhs());
    if (!lhs && !rhs)
      return failure();
    bool transA = op.getTransA() != bool(lhs), transB = op.getTransB() != bool(rhs);
    rewriter.replaceOpWithNewOp<MatmulOp>(op, op.getType(), lhs ? lhs : op.getLhs(),
                                          rhs ? rhs : op.getRhs(), transA, transB);
    return success();
  }
};

/// transpose(matmul(A, B)) -> matmul(B, A) with both flags flipped ((op(A) op(B))^T =
/// op(B)^T op(A)^T), when the transpose is the product's only user: otherwise the product would
/// be computed twice.
struct FoldResultTranspose : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op, PatternRewriter &rewriter) const override {
    auto matmul = op.getInput().getDefiningOp<MatmulOp>();
    if (!matmul || !swapsLastTwo(op.getPerm()) || !matmul->hasOneUse() ||
        rankOf(matmul.getLhs()) < 2 || rankOf(matmul.getRhs()) < 2)
      return failure();
    rewriter.replaceOpWithNewOp<MatmulOp>(op, op.getType(), matmul.getRhs(), matmul.getLhs(),
                                          !matmul.getTransB(), !matmul.getTransA());
    rewriter.eraseOp(matmul);
    return success();
  }
};

/// gemm(transpose(A), B, C) -> gemm(A, B, C) with trans_a flipped, for either operand.
struct FoldGemmOperandTransposes : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GemmOp op, PatternRewriter &rewriter) const override {
    Value a = transposedFrom(op.getA()), b = transposedFrom(op.getB());
    if (!a && !b)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      if (a) {
        op.getAMutable().assign(a);
        op.setTransA(!op.getTransA());
      }
      if (b) {
        op.getBMutable().assign(b);
        op.setTransB(!op.getTransB());
      }
    });
    return success();
  }
};

struct FoldMatmulTransposesPass
    : public sl::impl::FoldMatmulTransposesPassBase<FoldMatmulTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldOperandTransposes, FoldResultTranspose, FoldGemmOperandTransposes>(
        &getContext());
    // The greedy driver also applies the ops' folders: a transpose of a transpose that restores
    // the order (autodiff's transposed transposed weights) goes, and dead transposes are erased.
    // Not converging within its iteration limit leaves correct IR with some transposes kept, as
    // for the canonicalizer, so it is no error.
    (void)applyPatternsAndFoldGreedily(getOperation(), std::move(patterns));
  }
};

} // namespace
