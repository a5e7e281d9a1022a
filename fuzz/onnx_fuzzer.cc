// libFuzzer target: bytes -> the ONNX importer, as a binary model (.onnx) or, built with
// SL_FUZZ_ONNX_TEXT, as ONNX text (.onnxtxt). Every input must be imported or refused with a
// diagnostic; the importer reads a path, so each input is written to a file first.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "fuzz_file.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#ifdef SL_FUZZ_ONNX_TEXT
static constexpr const char *kModelName = "model.onnxtxt";
#else
static constexpr const char *kModelName = "model.onnx";
#endif

// protobuf logs every string field that is not UTF-8 as it refuses it; the refusal is all that
// matters here.
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = sl::fuzz::writeInput(
      kModelName, std::string_view(reinterpret_cast<const char *>(data), size));
  // A fresh context per input, so that uniqued types and attributes do not pile up over a run.
  mlir::DialectRegistry registry;
  registry.insert<sl::SLDialect, mlir::func::FuncDialect>();
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  mlir::ScopedDiagnosticHandler quiet(&context, [](mlir::Diagnostic &) { return mlir::success(); });
  mlir::OwningOpRef<mlir::ModuleOp> module = sl::importOnnxFile(path, &context);
  if (module && mlir::failed(mlir::verify(*module)))
    __builtin_trap(); // the importer returned a module that does not verify
  return 0;
}
