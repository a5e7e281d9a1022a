//===- ShapeInference.h - result shapes of sl operations ---------------------------------------===//
//
// The shape rules of the ONNX operators the dialect models, shared by the ops' type inference
// (verification, sl-bind-shapes) and the ONNX importer, which must check a node before it builds
// the op. Each function emits an error at `loc` when given one and the shapes do not fit.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_SHAPEINFERENCE_H
#define SL_DIALECT_SHAPEINFERENCE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"

#include <optional>
#include <string>

namespace sl {

/// A type in quotes, as diagnostics print types: 'tensor<4x8xf32>'.
std::string quoted(mlir::Type type);

/// NumPy broadcasting of two shapes (aligned at the last dimension; a dynamic dimension against
/// n > 1 becomes n); nullopt when they do not broadcast.
std::optional<llvm::SmallVector<int64_t>> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                                          llvm::ArrayRef<int64_t> b);

/// NumPy / ONNX multidirectional broadcasting of two ranked tensor types of one element type.
mlir::FailureOr<mlir::RankedTensorType>
inferBroadcastType(std::optional<mlir::Location> loc, llvm::StringRef opName, mlir::Type lhs,
                   mlir::Type rhs);

/// NumPy matmul (ONNX MatMul), including rank-1 operands and broadcast batch dimensions; with
/// `transA` / `transB` the operand is read with its last two dimensions swapped (both operands
/// then have rank 2 or more).
mlir::FailureOr<mlir::RankedTensorType> inferMatmulType(std::optional<mlir::Location> loc,
                                                        mlir::Type lhs, mlir::Type rhs,
                                                        bool transA = false, bool transB = false);

/// ONNX Gemm: rank-2 operands, optional transposes, optional C broadcast one way to [M, N].
mlir::FailureOr<mlir::RankedTensorType> inferGemmType(std::optional<mlir::Location> loc,
                                                      mlir::Type a, mlir::Type b,
                                                      mlir::Type c, bool transA, bool transB);

/// ONNX Transpose: `perm` must be a permutation of the input's dimensions.
mlir::FailureOr<mlir::RankedTensorType> inferTransposeType(std::optional<mlir::Location> loc,
                                                           mlir::Type input,
                                                           llvm::ArrayRef<int64_t> perm);

/// ONNX Slice on one axis of size `dim` (static): the first index read, after ONNX's clamping,
/// and how many elements the slice has.
std::pair<int64_t, int64_t> sliceBounds(int64_t dim, int64_t start, int64_t end, int64_t step);

} // namespace sl

#endif // SL_DIALECT_SHAPEINFERENCE_H
