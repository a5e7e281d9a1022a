//===- SLDialect.cpp - the sl dialect -----------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"

#include "sl/Dialect/FoldMemo.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "sl/SLOpsDialect.cpp.inc"
#include "sl/SLEnums.cpp.inc"
#include "sl/SLInterfaces.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "sl/SLAttrs.cpp.inc"

void sl::SLDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "sl/SLOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "sl/SLAttrs.cpp.inc"
      >();
  addInterfaces<FoldMemo>();
}
