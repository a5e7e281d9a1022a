// Facts about the element types of the schedule contract.
#pragma once

#include <cstdint>
#include <string>

#include "schedule/schedule.pb.h"

namespace slrt {

using sl::schedule::DType;

// Bytes per element, or 0 for DTYPE_UNSPECIFIED and values this runtime does not know.
uint64_t dtypeSize(DType dtype);

// Short lower-case name ("f32", "bf16", ...); "dtype(N)" for an unknown value N.
std::string dtypeName(DType dtype);

} // namespace slrt
