//===- sl-opt.cpp - the SpeedLoader compiler driver --------------------------------------------===//
//
// mlir-opt with two additions: it reads ONNX models (.onnx, .onnxtxt) as well as MLIR, and when
// the output file ends in .slsched (or --emit=schedule) it writes the schedule for sl-run instead
// of MLIR text.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Import/ONNXImporter.h"
#include "sl/InitAll.h"
#include "sl/Target/ScheduleEmitter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>

namespace {

enum class EmitKind { Auto, MLIR, Schedule };

llvm::cl::opt<EmitKind> emitKind(
    "emit", llvm::cl::desc("What to write to the output file"), llvm::cl::init(EmitKind::Auto),
    llvm::cl::values(
        clEnumValN(EmitKind::Auto, "auto",
                   "a schedule if the output file name ends in .slsched, else MLIR (default)"),
        clEnumValN(EmitKind::MLIR, "mlir", "MLIR text"),
        clEnumValN(EmitKind::Schedule, "schedule", "a SpeedLoader schedule for sl-run")));

llvm::cl::opt<std::string> scheduleEntry(
    "schedule-entry",
    llvm::cl::desc("The function a schedule is written for (default: @train_step when there is "
                   "one, else @forward); a stage or its backward function can be scheduled on "
                   "its own, e.g. for gradient checks"),
    llvm::cl::init(""));

constexpr const char *kOverview = R"(sl-opt: the SpeedLoader compiler

Reads an ONNX model (.onnx or .onnxtxt) or MLIR, runs the passes and pipelines given on the
command line, and writes MLIR or, when the output ends in .slsched, a schedule for sl-run.

  sl-opt model.onnx --sl-infer="batch=4 seq=128" -o model.slsched   compile for sl-run
  sl-opt model.onnx --sl-train="batch=4 seq=128" -o train.slsched   compile a training step
  sl-opt model.onnx                                                 show the imported IR
  sl-opt model.onnx --sl-infer="batch=4"                            show the compiled IR
)";

const char *severityName(const mlir::Diagnostic &diag) {
  switch (diag.getSeverity()) {
  case mlir::DiagnosticSeverity::Error:
    return "error";
  case mlir::DiagnosticSeverity::Warning:
    return "warning";
  case mlir::DiagnosticSeverity::Remark:
    return "remark";
  case mlir::DiagnosticSeverity::Note:
    return "note";
  }
  return "note";
}

// Imports an ONNX model and prints it (with locations, so later errors still name ONNX nodes) as
// the buffer MlirOptMain parses: the IR holds no weights, so this costs nothing.
std::unique_ptr<llvm::MemoryBuffer> importToBuffer(llvm::StringRef path,
                                                   mlir::DialectRegistry &registry) {
  mlir::MLIRContext context(registry);
  // Import errors carry the file and node names in their text; a location prefix adds nothing.
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    llvm::errs() << "sl-opt: " << severityName(diag) << ": " << diag.str() << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = sl::importOnnxFile(path, &context);
  if (!module)
    return nullptr;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo());
  return llvm::MemoryBuffer::getMemBufferCopy(text, path);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::DialectRegistry registry;
  sl::registerAllDialects(registry);
  sl::registerAllPasses();

  auto [inputFilename, outputFilename] =
      mlir::registerAndParseCLIOptions(argc, argv, kOverview, registry);
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();

  std::unique_ptr<llvm::MemoryBuffer> input;
  if (sl::isOnnxFileName(inputFilename)) {
    input = importToBuffer(inputFilename, registry);
  } else {
    std::string error;
    input = mlir::openInputFile(inputFilename, &error);
    if (!input)
      llvm::errs() << "sl-opt: " << error << "\n";
  }
  if (!input)
    return EXIT_FAILURE;

  bool schedule = emitKind == EmitKind::Schedule ||
                  (emitKind == EmitKind::Auto && llvm::StringRef(outputFilename).ends_with(".slsched"));
  if (!schedule) {
    // Written to a temporary beside the output and renamed over it only when everything
    // succeeded: a failing run leaves no partial file and keeps an existing one as it was.
    std::optional<bool> ran;
    llvm::Error error = llvm::writeToOutput(outputFilename, [&](llvm::raw_ostream &os) {
      ran = mlir::succeeded(mlir::MlirOptMain(os, std::move(input), registry, config));
      return *ran ? llvm::Error::success()
                  : llvm::createStringError(llvm::inconvertibleErrorCode(), "the run failed");
    });
    if (ran && !*ran) {
      // Its diagnostics are out already.
      llvm::consumeError(std::move(error));
      return EXIT_FAILURE;
    }
    if (error) {
      llvm::errs() << "sl-opt: " << llvm::toString(std::move(error)) << "\n";
      return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
  }

  if (outputFilename == "-") {
    llvm::errs() << "sl-opt: a schedule is binary; name an output file with -o\n";
    return EXIT_FAILURE;
  }
  // Run the pipeline given on the command line, as MlirOptMain would, then emit the module.
  mlir::MLIRContext context(registry);
  context.allowUnregisteredDialects(config.shouldAllowUnregisteredDialects());
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  // An imported model's operations are located at their ONNX node; say which node, since the
  // text the source manager would quote is sl-opt's own, not the user's.
  std::optional<mlir::ScopedDiagnosticHandler> nodeHandler;
  if (sl::isOnnxFileName(inputFilename))
    nodeHandler.emplace(&context, [](mlir::Diagnostic &diag) {
      std::string where;
      if (auto name = llvm::dyn_cast<mlir::NameLoc>(diag.getLocation())) {
        if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(name.getChildLoc()))
          where = file.getFilename().str() + ": ";
        where += "node '" + name.getName().str() + "': ";
      } else if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(diag.getLocation())) {
        where = file.getFilename().str() + ": ";
      }
      llvm::errs() << "sl-opt: " << severityName(diag) << ": " << where << diag.str() << "\n";
      return mlir::success();
    });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module)
    return EXIT_FAILURE;
  // Implicit nesting, as MlirOptMain: function passes given on the command line run on every
  // function of the module.
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName(),
                       mlir::OpPassManager::Nesting::Implicit);
  if (mlir::failed(mlir::applyPassManagerCLOptions(pm)) ||
      mlir::failed(config.setupPassPipeline(pm)) || mlir::failed(pm.run(*module)))
    return EXIT_FAILURE;
  sl::ScheduleEmitOptions emitOptions;
  emitOptions.entryName = scheduleEntry;
  return mlir::succeeded(sl::emitScheduleFile(*module, outputFilename, emitOptions)) ? EXIT_SUCCESS
                                                                        : EXIT_FAILURE;
}
