//===- ExplicitStep.h - building blocks of the passes that write explicit steps ----------------===//
//
// sl-schedule-subbatches (training) and sl-schedule-generation both unroll stage functions into
// one explicit step; these are the pieces they share.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_TRANSFORMS_EXPLICITSTEP_H
#define SL_TRANSFORMS_EXPLICITSTEP_H

#include "sl/Dialect/SLDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace sl {

/// Clones the body of the stage function `callee` at the builder's insertion point, its
/// arguments bound to `operands`, and returns what it returns. Its constants are not cloned:
/// `constantFor` gives the value to use for each (the callers hoist them, one per value).
llvm::SmallVector<mlir::Value>
inlineStage(mlir::OpBuilder &builder, mlir::func::FuncOp callee, mlir::ValueRange operands,
            llvm::function_ref<mlir::Value(ConstantOp)> constantFor);

/// A per-sub-batch tensor type with dimension 0 grown to hold the step's `n` sub-batches.
mlir::RankedTensorType batched(mlir::Type type, int64_t n);

/// Erases, last to first, the ops of a step whose results nothing reads: dead computation and
/// copies of values nobody reads.
void eraseUnusedOps(mlir::Block &body);

/// Narrows every sl.fetch_params of a step to the parameters whose device copies are read, and
/// erases one whose copies nobody reads: a group fetches what it computes with, nothing more.
void removeUnusedFetches(mlir::Block &body, mlir::OpBuilder &builder);

/// Makes every device kernel of a step that reads a host constant read a device copy of it
/// instead: one sl.prefetch per constant, at the start of the step (after its constants) or of
/// the sl.program it is in, shared by every reader there. Shape-like operands stay constants.
void prefetchConstants(mlir::Block &body, mlir::OpBuilder &builder, mlir::Location loc);

} // namespace sl

#endif // SL_TRANSFORMS_EXPLICITSTEP_H
