// Index inputs checked against the GATHERs that read them, before a run.
#pragma once

#include <string>

#include "schedule/schedule.pb.h"
#include "slrt/host_tensor.h"

namespace slrt {

// Throws Error when `tensor`, the value of input `name` of a verified `schedule`, holds an index
// outside the axis of a GATHER that reads it as its indices (directly, or through COPY kernels):
// a token id past the embedding table, named by its position in the input, before any kernel
// runs. Inputs no GATHER reads that way pass.
void checkGatherIndices(const sl::schedule::Schedule &schedule, const std::string &name,
                        const HostTensor &tensor);

} // namespace slrt
