//===- SLDialect.h - the sl dialect and its operations ----------------------------------------===//
#ifndef SL_DIALECT_SLDIALECT_H
#define SL_DIALECT_SLDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sl/SLOpsDialect.h.inc"

#include "sl/SLEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "sl/SLAttrs.h.inc"

namespace sl {
/// Inferred and written result types agree when element types are equal and shapes compatible:
/// a `?` where inference knows the size (or the other way round) describes the same tensor.
bool compatibleReturnTypes(mlir::TypeRange inferred, mlir::TypeRange actual);

/// Checks that every tensor type a shape rule inferred fits in memory at all (fewer than 2^63
/// bytes); `op` names the op in the error.
llvm::LogicalResult checkInferredSizes(std::optional<mlir::Location> loc, llvm::StringRef op,
                                       llvm::ArrayRef<mlir::Type> types);

/// Where a sharded group's parameters lie in its flattened vector (sl.param_shard): each starts at
/// a multiple of kShardElementAlignment elements (16 bytes of f32, so every parameter view of the
/// gathered vector is vector-aligned), and the vector is padded with zeros to a multiple of
/// kShardElementAlignment * world, so that every rank's part has the same, aligned size.
inline constexpr int64_t kShardElementAlignment = 4;
struct ShardLayout {
  llvm::SmallVector<int64_t> offsets; // per parameter, in elements
  int64_t flatElements = 0;
};
ShardLayout shardLayout(mlir::TypeRange params, int64_t world);

/// A per-head tensor's shape with dimensions 1 and 2 exchanged when `layout` is bshd: a [B, S, H, D]
/// shape as [B, H, S, D] and back (the exchange is its own inverse). Ranks other than 4 are
/// returned as they are.
llvm::SmallVector<int64_t, 4> swapHeadsIf(HeadLayout layout, llvm::ArrayRef<int64_t> shape);

/// The kernel interface's defaults (SLInterfaces.td): every operand index of `op`, in order, and
/// the number of elements of its results.
llvm::SmallVector<unsigned> allOperandIndices(mlir::Operation *op);
double resultElements(mlir::Operation *op);

/// `v` is `sl.transpose %x [0, 2, 1, 3]`, the exchange of a per-head tensor's heads and positions
/// ([B, S, H, D] to [B, H, S, D] or back): its input `%x`, else null.
mlir::Value headPermutationInput(mlir::Value v);
} // namespace sl

#include "sl/SLInterfaces.h.inc"

#define GET_OP_CLASSES
#include "sl/SLOps.h.inc"

#endif // SL_DIALECT_SLDIALECT_H
