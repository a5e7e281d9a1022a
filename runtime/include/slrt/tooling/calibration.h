// sl-run --calibrate FILE: the planner's rates measured on this machine and backend
// (slrt/calibrate.h), written as a machine profile for sl-opt's target=FILE.
#pragma once

#include "slrt/tooling/run_options.h"

namespace slrt::tooling {

// Measures options.backendName's backend for at least options.calibrateSeconds per rate, writes
// the profile to options.calibratePath atomically and prints it. Returns the exit code (0).
int runCalibration(const RunOptions &options);

} // namespace slrt::tooling
