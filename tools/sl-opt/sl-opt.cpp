//===- sl-opt.cpp - the SpeedLoader compiler driver --------------------------------------------===//
//
// mlir-opt with two additions: it reads ONNX models (.onnx, .onnxtxt) as well as MLIR, and when
// the output file ends in .slsched (or --emit=schedule) it writes the schedule for sl-run instead
// of MLIR text.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/StepAttributes.h"
#include "sl/Import/ONNXImporter.h"
#include "sl/InitAll.h"
#include "sl/Pipelines/Pipelines.h"
#include "sl/Target/ScheduleEmitter.h"
#include "slrt/atomic_file.h"
#include "slrt/distinct_paths.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
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
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

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
    llvm::cl::desc("The function a schedule is written for (default: @generate, @train_step or "
                   "@infer_step when there is one, else @forward); a function that is not a step, "
                   "e.g. a stage or its backward function for gradient checks, is scheduled as "
                   "one inference step (sl-explicit-forward entry=NAME)"),
    llvm::cl::init(""));

constexpr const char *kOverview = R"(sl-opt: the SpeedLoader compiler

Reads an ONNX model (.onnx or .onnxtxt) or MLIR, runs the passes and pipelines given on the
command line, and writes MLIR or, when the output ends in .slsched, a schedule for sl-run.

  sl-opt model.onnx --sl-infer="batch=4 seq=128" -o model.slsched   compile for sl-run
  sl-opt model.onnx --sl-train="batch=4 seq=128" -o train.slsched   compile a training step
  sl-opt model.onnx                                                 show the imported IR
  sl-opt model.onnx --sl-infer="batch=4"                            show the compiled IR
)";

// The files the parameters of `module` are read from (the model file, its external data).
std::set<std::string> parameterFiles(mlir::ModuleOp module) {
  std::set<std::string> files;
  module.walk([&](sl::ParamOp param) {
    if (std::optional<llvm::StringRef> file = param.getFile())
      files.insert(file->str());
  });
  return files;
}

// Refuses an output that is one of the files the run reads: the input, or a file its parameters
// are in (the schedule would point at the bytes it replaced). True when the output may be written.
bool outputIsNotAnInput(llvm::StringRef input, llvm::StringRef output,
                        const std::set<std::string> &files) {
  if (output == "-")
    return true;
  std::vector<slrt::NamedPath> inputs = {{"the input", input.str()}};
  for (const std::string &file : files)
    inputs.push_back({"the parameter file", file});
  std::string conflict = slrt::sameFileConflict(inputs, {{"-o", output.str()}});
  if (conflict.empty())
    return true;
  llvm::errs() << "sl-opt: error: " << conflict << "\n";
  return false;
}

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

// Imports an ONNX model and writes it as bytecode (locations included, so later errors still name
// ONNX nodes) into the buffer MlirOptMain parses: the IR holds no weights, so this costs little.
// Not as text: text is printed with the command line's printing flags, and
// --mlir-elide-elementsattrs-if-larger would replace the model's constants (rotary tables, masks)
// by elided resources that read back as no data. `files` receives the files its parameters are in.
std::unique_ptr<llvm::MemoryBuffer> importToBuffer(llvm::StringRef path,
                                                   mlir::DialectRegistry &registry,
                                                   std::set<std::string> &files) {
  mlir::MLIRContext context(registry);
  // Import errors carry the file and node names in their text; a location prefix adds nothing.
  mlir::ScopedDiagnosticHandler handler(&context, [](mlir::Diagnostic &diag) {
    llvm::errs() << "sl-opt: " << severityName(diag) << ": " << diag.str() << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = sl::importOnnxFile(path, &context);
  if (!module)
    return nullptr;
  files = parameterFiles(*module);
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (mlir::failed(mlir::writeBytecodeToFile(*module, os))) {
    llvm::errs() << "sl-opt: error: " << path << ": cannot write the imported model as bytecode\n";
    return nullptr;
  }
  return llvm::MemoryBuffer::getMemBufferCopy(bytes, path);
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
  // An error names its op and, for an imported model, the ONNX node: MLIR's note that prints the
  // op would print a whole function for errors about a function's inputs. Given explicitly, the
  // flag still turns it on.
  auto &options = llvm::cl::getRegisteredOptions();
  if (auto it = options.find("mlir-print-op-on-diagnostic"); it != options.end())
    if (auto *flag = static_cast<llvm::cl::opt<bool> *>(it->second); flag->getNumOccurrences() == 0)
      *flag = false;

  // Nothing is imported or compiled for an output that is the input.
  if (!outputIsNotAnInput(inputFilename, outputFilename, {}))
    return EXIT_FAILURE;
  std::unique_ptr<llvm::MemoryBuffer> input;
  std::set<std::string> files;
  if (sl::isOnnxFileName(inputFilename)) {
    input = importToBuffer(inputFilename, registry, files);
  } else {
    std::string error;
    input = mlir::openInputFile(inputFilename, &error);
    if (!input)
      llvm::errs() << "sl-opt: " << error << "\n";
  }
  if (!input || !outputIsNotAnInput(inputFilename, outputFilename, files))
    return EXIT_FAILURE;

  // The output's temporary is made before the work, so that an output that cannot be written is
  // refused before it is done (slrt::AtomicWriter: a unique name, every error checked).
  slrt::AtomicWriter writer;
  if (outputFilename != "-" && !writer.open(outputFilename)) {
    llvm::errs() << "sl-opt: error: " << outputFilename << ": " << writer.error() << "\n";
    return EXIT_FAILURE;
  }

  bool schedule = emitKind == EmitKind::Schedule ||
                  (emitKind == EmitKind::Auto && llvm::StringRef(outputFilename).ends_with(".slsched"));
  if (!schedule) {
    if (outputFilename == "-")
      return mlir::succeeded(mlir::MlirOptMain(llvm::outs(), std::move(input), registry, config))
                 ? EXIT_SUCCESS
                 : EXIT_FAILURE;
    // Renamed over the output only when everything succeeded: a failing run leaves no partial
    // file and keeps an existing one as it was.
    std::string streamError;
    bool ran;
    {
      llvm::raw_fd_ostream os(writer.fd(), /*shouldClose=*/false);
      ran = mlir::succeeded(mlir::MlirOptMain(os, std::move(input), registry, config));
      os.flush();
      if (os.has_error()) {
        streamError = os.error().message();
        os.clear_error();
      }
    }
    if (!ran)
      return EXIT_FAILURE; // its diagnostics are out already
    if (!streamError.empty()) {
      llvm::errs() << "sl-opt: error: " << outputFilename << ": cannot write (" << streamError
                   << ")\n";
      return EXIT_FAILURE;
    }
    if (!writer.commit()) {
      llvm::errs() << "sl-opt: error: " << outputFilename << ": " << writer.error() << "\n";
      return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
  }
  // The emitter writes the schedule with a writer of its own.
  writer.discard();

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
  // An MLIR input names its parameter files in the IR.
  if (!sl::isOnnxFileName(inputFilename) &&
      !outputIsNotAnInput(inputFilename, outputFilename, parameterFiles(*module)))
    return EXIT_FAILURE;
  // Implicit nesting, as MlirOptMain: function passes given on the command line run on every
  // function of the module.
  mlir::PassManager pm(&context, mlir::ModuleOp::getOperationName(),
                       mlir::OpPassManager::Nesting::Implicit);
  if (mlir::failed(mlir::applyPassManagerCLOptions(pm)) ||
      mlir::failed(config.setupPassPipeline(pm)) || mlir::failed(pm.run(*module)))
    return EXIT_FAILURE;
  // Every schedule is translated from an explicit step: a function that is not one (a bound
  // @forward, or a stage that --schedule-entry names) becomes @infer_step first.
  sl::ScheduleEmitOptions emitOptions;
  emitOptions.entryName =
      scheduleEntry.empty() ? sl::defaultScheduleEntry(*module) : std::string(scheduleEntry);
  if (auto entry = module->lookupSymbol<mlir::func::FuncOp>(emitOptions.entryName);
      entry && !entry.isExternal() && !sl::isExplicitStep(entry)) {
    // The schedule is this function's alone: an @infer_step the pipeline wrote (a planned
    // --sl-infer keeps its stages beside it) gives way to the one written from `entry`.
    if (auto step = module->lookupSymbol<mlir::func::FuncOp>(sl::kInferStepName))
      step.erase();
    mlir::PassManager lowering(&context);
    sl::buildEntryStepPipeline(lowering, emitOptions.entryName);
    if (mlir::failed(lowering.run(*module)))
      return EXIT_FAILURE;
    emitOptions.entryName = sl::kInferStepName.str();
  }
  return mlir::succeeded(sl::emitScheduleFile(*module, outputFilename, emitOptions)) ? EXIT_SUCCESS
                                                                        : EXIT_FAILURE;
}
