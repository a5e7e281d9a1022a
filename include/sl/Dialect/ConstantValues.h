//===- ConstantValues.h - reading the values of sl.constant operands ----------------------------===//
//
// Shape, axis and bound operands are tensors; their values matter to type inference, folding and
// schedule emission once they are constants.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_CONSTANTVALUES_H
#define SL_DIALECT_CONSTANTVALUES_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace sl {

/// The elements of an integer (or i1) constant as int64, in row-major order.
std::optional<llvm::SmallVector<int64_t>> constantInts(mlir::Attribute attr);
std::optional<llvm::SmallVector<int64_t>> constantInts(mlir::Value value);

/// The elements of a 1-D integer vector of static length (a shape being built) as far as they
/// are known before shapes are bound: those of a constant, the static dimensions an sl.shape
/// reads, and the known pieces of an sl.concat of such vectors; ShapedType::kDynamic for the
/// others. Lets a reshape to [1, dim(x, 0)] have the static dimension it has while importing.
std::optional<llvm::SmallVector<int64_t>> knownInts(mlir::Value value);

/// The elements of a floating-point constant as double, in row-major order.
std::optional<llvm::SmallVector<double>> constantFloats(mlir::Attribute attr);

/// A dense attribute of `type` from int64 or double values (converted to the element type).
mlir::DenseElementsAttr makeDense(mlir::RankedTensorType type, llvm::ArrayRef<int64_t> values);
mlir::DenseElementsAttr makeDense(mlir::RankedTensorType type, llvm::ArrayRef<double> values);

/// Folds give up above this many result elements: constants are for shapes and small tables, and
/// a bigger one would bloat the IR and the schedule for nothing (the kernel computes it as fast).
constexpr int64_t kMaxFoldedElements = 1 << 16;

/// The limit folds use now: kMaxFoldedElements, unless a ScopedFoldLimit raised it.
int64_t maxFoldedElements();

/// Raises the fold limit for this thread while it lives: for analyses that evaluate a value
/// without putting it into the IR (is this mask causal?).
class ScopedFoldLimit {
public:
  explicit ScopedFoldLimit(int64_t limit);
  ~ScopedFoldLimit();
  ScopedFoldLimit(const ScopedFoldLimit &) = delete;
  ScopedFoldLimit &operator=(const ScopedFoldLimit &) = delete;

private:
  int64_t previous;
};

} // namespace sl

#endif // SL_DIALECT_CONSTANTVALUES_H
