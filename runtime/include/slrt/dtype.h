// Facts about the element types of the schedule contract.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "schedule/schedule.pb.h"

namespace slrt {

using sl::schedule::DType;

// Bytes per element, or 0 for DTYPE_UNSPECIFIED and values this runtime does not know.
uint64_t dtypeSize(DType dtype);

// Short lower-case name ("f32", "bf16", ...); "dtype(N)" for an unknown value N.
std::string dtypeName(DType dtype);

// The first element among `count` elements of `dtype` at `data` that is NaN or, unless `nanOnly`,
// infinite: its index and "NaN", "inf" or "-inf". nullopt when every element is finite, and for
// dtypes other than f32, f64, f16 and bf16.
struct NonFinite {
  uint64_t index = 0;
  std::string text;
};
std::optional<NonFinite> findNonFinite(const void *data, uint64_t count, DType dtype,
                                       bool nanOnly = false);

} // namespace slrt
