//===- SLDialect.h - the sl dialect and its operations ----------------------------------------===//
#ifndef SL_DIALECT_SLDIALECT_H
#define SL_DIALECT_SLDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sl/SLOpsDialect.h.inc"

namespace sl {
/// Inferred and written result types agree when element types are equal and shapes compatible:
/// a `?` where inference knows the size (or the other way round) describes the same tensor.
bool compatibleReturnTypes(mlir::TypeRange inferred, mlir::TypeRange actual);
} // namespace sl

#define GET_OP_CLASSES
#include "sl/SLOps.h.inc"

#endif // SL_DIALECT_SLDIALECT_H
