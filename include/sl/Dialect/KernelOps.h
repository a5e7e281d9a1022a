//===- KernelOps.h - an op's role in a schedule, for any op -----------------------------------===//
//
// The kernel interface (SLInterfaces.td) answers for the sl ops; these functions answer for any
// op, so a pass walking a function body need not ask first: an op of another dialect (func.return)
// is no kernel and reads every operand.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_KERNELOPS_H
#define SL_DIALECT_KERNELOPS_H

#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace sl {

/// Whether `op` launches a kernel (KernelOpInterface::isKernel).
bool isKernel(mlir::Operation *op);

/// Whether the runtime writes `op`'s result before a step starts: a parameter, a parameter shard or
/// a constant (KernelOpInterface::isPreloaded).
bool isPreloaded(mlir::Operation *op);

/// The stream `op`'s kernel runs on in an explicit step; none when it launches no kernel.
std::optional<StreamKind> streamOf(mlir::Operation *op);

/// Indices of the operands the kernel of `op` reads as tensors. The others (shapes, axes, slice
/// bounds, trilu's k, an optimizer step's parameters) are not kernel operands: the first ones
/// must be constants, which the emitter turns into kernel attributes.
llvm::SmallVector<unsigned> dataOperandIndices(mlir::Operation *op);
llvm::SmallVector<mlir::Value> dataOperands(mlir::Operation *op);

/// The elements of a static tensor type (0 for any other type), as a double for FLOP and byte
/// counts.
double elementsOf(mlir::Type type);

/// The FLOPs of `op`'s kernel (a multiply-add counts two); none when it launches no kernel.
double flopsOf(mlir::Operation *op);

} // namespace sl

#endif // SL_DIALECT_KERNELOPS_H
