// sl-run on an inference schedule: .npy inputs in, one run, .npy outputs (or printed values) out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "slrt/backend.h"
#include "slrt/schedule_loader.h"
#include "slrt/tooling/run_options.h"

namespace slrt::tooling {

// Maps each --input (or --output, for `kind` "output") argument to a binding name of `bindings`.
// An argument is NAME=FILE when the text before its first '=' is a binding name, or a bare FILE
// when there is no '=' and there is exactly one binding; anything else (an unknown name, a bare
// file among several bindings, no file, a name given twice) is an Error rather than a guess.
std::map<std::string, std::string>
assignFiles(const std::vector<std::string> &args,
            const google::protobuf::RepeatedPtrField<sl::schedule::Binding> &bindings,
            const std::string &kind);

// Runs the inference schedule `loaded` once on `backend`: every input is read and checked, and
// every output path checked, before the parameters are loaded. Writes --output files, or prints
// each output's name, dtype, shape and first values when none is given, then --report and
// --trace. Returns the exit code (0); throws Error for anything the user gave wrong.
int runInference(const RunOptions &options, Backend &backend, const LoadedSchedule &loaded);

} // namespace slrt::tooling
