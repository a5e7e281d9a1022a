//===- SLDialect.h - the sl dialect and its operations ----------------------------------------===//
#ifndef SL_DIALECT_SLDIALECT_H
#define SL_DIALECT_SLDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sl/SLOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "sl/SLOps.h.inc"

#endif // SL_DIALECT_SLDIALECT_H
