// sl-run's modes behind one entry point: the tool parses its command line into RunOptions and
// calls run(); everything after the parsing is here, in the runtime, where it can be tested.
#pragma once

#include "slrt/tooling/run_options.h"

namespace slrt::tooling {

// Checks the options (checkRunOptions), then: --calibrate measures the machine
// (tooling/calibration.h); otherwise the schedule is loaded and --consolidate consolidates a
// sharded checkpoint (tooling/consolidation.h), and a schedule of kind "train", "generate" or
// any other (inference) runs in its mode (tooling/training.h, generation.h, inference.h) on
// --backend, its host<->device copies paced to --link-gbps (slrt/paced_backend.h). Returns the
// exit code; throws Error for anything the user gave wrong or a run that fails.
int run(const RunOptions &options);

} // namespace slrt::tooling
