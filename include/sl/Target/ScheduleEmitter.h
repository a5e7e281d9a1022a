//===- ScheduleEmitter.h - write an sl module as a SpeedLoader schedule ------------------------===//
#ifndef SL_TARGET_SCHEDULEEMITTER_H
#define SL_TARGET_SCHEDULEEMITTER_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace sl {

struct ScheduleEmitOptions {
  /// The function to emit; empty: @train_step if the module has one, else @forward.
  std::string entryName;
  /// Recorded in the schedule for diagnostics (the pipeline that produced it).
  std::string producer = "sl-opt";
};

/// Lowers the static-shaped entry function of `module` to a schedule (ir/schedule/schedule.proto)
/// and writes it to `path` atomically: the file appears complete or not at all. Parameters keep
/// pointing at their model files; a file beside the schedule is recorded by its name alone so the
/// pair can be moved together. Reports errors through the context's diagnostic handler.
mlir::LogicalResult emitScheduleFile(mlir::ModuleOp module, llvm::StringRef path,
                                     const ScheduleEmitOptions &options = {});

} // namespace sl

#endif // SL_TARGET_SCHEDULEEMITTER_H
