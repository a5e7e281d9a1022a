// sl-run --consolidate: a sharded checkpoint (written by --save in a run of several ranks) into
// one checkpoint file and/or an ONNX model with the trained weights, for the schedule's model.
#pragma once

#include "slrt/schedule_loader.h"
#include "slrt/tooling/run_options.h"

namespace slrt::tooling {

// Reads the sharded checkpoint whose index is options.consolidatePath and writes it whole as
// --save FILE and/or --export-onnx FILE; one process, no MPI. Returns the exit code (0); throws
// Error when run under mpirun, with --random-weights, without an output, or for a checkpoint
// that is not the schedule's model.
int runConsolidation(const RunOptions &options, const LoadedSchedule &loaded);

} // namespace slrt::tooling
