// Writing a trained model back to ONNX.
#pragma once

#include <string>
#include <vector>

#include "slrt/executor.h"
#include "slrt/schedule_loader.h"

namespace slrt {

// Writes the model the schedule was compiled from, with every parameter's bytes replaced by the
// executor's current parameter buffer (the trained weights), to `path`, atomically. The schedule
// records where each parameter's bytes are in the model file, so the graph, names and every
// other byte are kept exactly: the result is the exported model with trained weights. Models
// whose parameters live in external data files are refused (Error) for now.
void exportTrainedOnnx(const LoadedSchedule &schedule, const Executor &executor,
                       const std::string &path);

// The same with the weights given: weights[i] holds parameter i's elements in its dtype (a
// consolidated checkpoint's, or weights gathered from the ranks of a sharded run). A parameter
// stored in the file as another dtype (file_dtype f32 for a bf16 one) is written back widened
// to f32, exactly.
void exportTrainedOnnx(const LoadedSchedule &schedule, const std::vector<const void *> &weights,
                       const std::string &path);

// The same with every parameter's f32 master weights given (a trainer's, a consolidated
// checkpoint's), whatever the parameters' dtypes: written exactly where the file holds f32 (an
// f32 parameter, or a bf16 one with file_dtype f32), rounded to nearest even where it holds bf16.
void exportMasterWeightsOnnx(const LoadedSchedule &schedule,
                             const std::vector<const float *> &masters, const std::string &path);

} // namespace slrt
