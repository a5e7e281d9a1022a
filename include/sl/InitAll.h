//===- InitAll.h - everything an sl tool registers ---------------------------------------------===//
#ifndef SL_INITALL_H
#define SL_INITALL_H

#include "sl/Dialect/SLDialect.h"
#include "sl/Pipelines/Pipelines.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace sl {

inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<SLDialect, mlir::func::FuncDialect>();
}

inline void registerAllPasses() {
  registerSLPasses();
  registerPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}

} // namespace sl

#endif // SL_INITALL_H
