//===- ONNXImporter.h - ONNX models into the sl dialect ----------------------------------------===//
#ifndef SL_IMPORT_ONNXIMPORTER_H
#define SL_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace sl {

struct ImportOptions {
  /// Name of the function that holds the graph.
  std::string entryName = "forward";
};

/// True for the file names the importer reads: `.onnx` (binary) and `.onnxtxt` (ONNX text syntax).
bool isOnnxFileName(llvm::StringRef path);

/// Imports an ONNX model into a module with one `func.func` of `sl` operations. Initializers
/// become `sl.param` references to their bytes in the file, never dense attributes. On failure
/// returns null after reporting an error (naming the node, its op type, domain and opset) through
/// the context's diagnostic handler.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(llvm::StringRef path, mlir::MLIRContext *context,
                                                 const ImportOptions &options = {});

} // namespace sl

#endif // SL_IMPORT_ONNXIMPORTER_H
