// sl-run on a train schedule: --steps training steps on the tokens of --data, then --save,
// --export-onnx, --report and --trace.
#pragma once

#include "slrt/backend.h"
#include "slrt/schedule_loader.h"
#include "slrt/tooling/run_options.h"

namespace slrt::tooling {

// Trains the train schedule `loaded` on `backend`, printing a progress line per step (rank 0).
// Everything that can be checked (the flags, the schedule, the AdamW settings, the token file,
// the output paths, the memory, and with several ranks that every rank agrees) is checked before
// the parameters are read. Returns the exit code (0); throws Error for anything the user gave
// wrong or a step that fails.
int runTraining(const RunOptions &options, Backend &backend, const LoadedSchedule &loaded);

} // namespace slrt::tooling
