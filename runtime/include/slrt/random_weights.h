// Seeded random parameters in place of a model's files (sl-run --random-weights): for
// benchmarks of models whose weights do not exist or do not fit on the machine that compiled them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "slrt/dtype.h"

namespace slrt {

// The standard deviation of every random parameter.
inline constexpr float kRandomWeightStd = 0.02f;

// One parameter's destination: `count` elements of `dtype` at `data`.
struct RandomFill {
  std::string name;
  void *data = nullptr;
  uint64_t count = 0;
  DType dtype = sl::schedule::DTYPE_UNSPECIFIED;
};

// Fills each target with normal values of mean 0 and standard deviation kRandomWeightStd
// (Box-Muller over a counter-based hash), stored in its dtype (f32, f64, or bf16 rounded to
// nearest even). Element i of a parameter depends only on (seed, the parameter's name, i), so the
// values do not depend on `threads` (0: every hardware thread), on the order of `targets`, or on
// what else the schedule holds. Throws Error for a dtype other than f32, f64 and bf16, before
// writing anything.
void fillRandomWeights(const std::vector<RandomFill> &targets, uint64_t seed, unsigned threads = 0);

} // namespace slrt
