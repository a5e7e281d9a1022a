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

namespace sl {

/// NumPy / ONNX multidirectional broadcasting of two ranked tensor types of one element type.
mlir::FailureOr<mlir::RankedTensorType>
inferBroadcastType(std::optional<mlir::Location> loc, llvm::StringRef opName, mlir::Type lhs,
                   mlir::Type rhs);

/// NumPy matmul (ONNX MatMul), including rank-1 operands and broadcast batch dimensions.
mlir::FailureOr<mlir::RankedTensorType> inferMatmulType(std::optional<mlir::Location> loc,
                                                        mlir::Type lhs, mlir::Type rhs);

/// ONNX Gemm: rank-2 operands, optional transposes, optional C broadcast one way to [M, N].
mlir::FailureOr<mlir::RankedTensorType> inferGemmType(std::optional<mlir::Location> loc,
                                                      mlir::Type a, mlir::Type b,
                                                      mlir::Type c, bool transA, bool transB);

/// ONNX Transpose: `perm` must be a permutation of the input's dimensions.
mlir::FailureOr<mlir::RankedTensorType> inferTransposeType(std::optional<mlir::Location> loc,
                                                           mlir::Type input,
                                                           llvm::ArrayRef<int64_t> perm);

} // namespace sl

#endif // SL_DIALECT_SHAPEINFERENCE_H
