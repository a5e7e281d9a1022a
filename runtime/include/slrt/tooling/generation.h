// sl-run on a generate schedule: the prompts of --prompts continued token by token, written as
// JSON Lines to --output (standard output without it).
#pragma once

#include "slrt/backend.h"
#include "slrt/schedule_loader.h"
#include "slrt/tooling/run_options.h"

namespace slrt::tooling {

// Generates for every prompt of options.promptsPath with the generate schedule `loaded` on
// `backend`, a progress line per batch on standard error. The options and every prompt are
// checked before the parameters are read. Returns the exit code (0); throws Error for anything
// the user gave wrong.
int runGeneration(const RunOptions &options, Backend &backend, const LoadedSchedule &loaded);

} // namespace slrt::tooling
