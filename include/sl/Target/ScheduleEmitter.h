//===- ScheduleEmitter.h - write an sl module as a SpeedLoader schedule ------------------------===//
#ifndef SL_TARGET_SCHEDULEEMITTER_H
#define SL_TARGET_SCHEDULEEMITTER_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace sl {

struct ScheduleEmitOptions {
  /// The function to emit, an explicit step; empty: defaultScheduleEntry.
  std::string entryName;
  /// Recorded in the schedule for diagnostics (the pipeline that produced it).
  std::string producer = "sl-opt";
};

/// @generate, @train_step or @infer_step, whichever `module` has, else "forward".
std::string defaultScheduleEntry(mlir::ModuleOp module);

/// Translates the explicit step `options.entryName` of `module` (a function that is not a step is
/// refused: buildEntryStepPipeline makes one) to a schedule (ir/schedule/schedule.proto) and
/// writes it to `path` atomically: the file appears complete or not at all. Parameters keep
/// pointing at their model files; a file beside the schedule is recorded by its name alone so the
/// pair can be moved together. Reports errors through the context's diagnostic handler.
mlir::LogicalResult emitScheduleFile(mlir::ModuleOp module, llvm::StringRef path,
                                     const ScheduleEmitOptions &options = {});

} // namespace sl

#endif // SL_TARGET_SCHEDULEEMITTER_H
