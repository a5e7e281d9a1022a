//===- SLDialect.cpp - the sl dialect -----------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"

#include "sl/SLOpsDialect.cpp.inc"

void sl::SLDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "sl/SLOps.cpp.inc"
      >();
}
