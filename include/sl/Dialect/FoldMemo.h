//===- FoldMemo.h - folds of constants, remembered for the context's life -----------------------===//
//
// Compiling one model runs the same folds many times: every layer computes the same rotary tables
// from the same constants, sl-bind-shapes and sl-fuse-transformer run on several copies of the
// model (sl-plan's and sl-split-generation's measurements), and every layer's attention asks
// whether the same mask is causal. Attributes are uniqued in the context and immutable, so a fold
// of constant operands is a function of attributes; the memo keeps its result, keyed by
// attributes, for as long as the context lives (it is a dialect interface of the sl dialect, and
// goes with the dialect).
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_FOLDMEMO_H
#define SL_DIALECT_FOLDMEMO_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/DialectInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <mutex>
#include <optional>

namespace sl {

class FoldMemo : public mlir::DialectInterface::Base<FoldMemo> {
public:
  explicit FoldMemo(mlir::Dialect *dialect) : Base(dialect) {}

  /// The memo of `context`'s sl dialect; null when the dialect is not loaded.
  static FoldMemo *get(mlir::MLIRContext *context);

  /// What was remembered for `key` (a null attribute: the fold declined), if anything.
  std::optional<mlir::Attribute> lookup(mlir::Attribute key);
  void remember(mlir::Attribute key, mlir::Attribute value);

private:
  std::mutex mutex;
  llvm::DenseMap<mlir::Attribute, mlir::Attribute> entries; // a null value: declined
};

/// `fold()` of `op`, remembered when it is worth it: when every operand is a constant
/// (`operands`, as a folder gets them) and they or the result are big. The key is the op's name,
/// its attributes, its result type, the fold limit of this thread (ScopedFoldLimit) and the
/// operands. Only constant results are remembered; a fold to an SSA value (the identity, say) is
/// recomputed, as it is cheap.
mlir::OpFoldResult memoizedFold(mlir::Operation *op, llvm::ArrayRef<mlir::Attribute> operands,
                                llvm::function_ref<mlir::OpFoldResult()> fold);

} // namespace sl

MLIR_DECLARE_EXPLICIT_TYPE_ID(sl::FoldMemo)

#endif // SL_DIALECT_FOLDMEMO_H
