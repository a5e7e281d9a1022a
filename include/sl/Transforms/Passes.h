//===- Passes.h - passes of the sl dialect -----------------------------------------------------===//
#ifndef SL_TRANSFORMS_PASSES_H
#define SL_TRANSFORMS_PASSES_H

#include "sl/Transforms/Placement.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace sl {

#define GEN_PASS_DECL
#include "sl/SLPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "sl/SLPasses.h.inc"

} // namespace sl

#endif // SL_TRANSFORMS_PASSES_H
