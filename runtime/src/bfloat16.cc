#include "slrt/bfloat16.h"

#include "backends/cpu/parallel.h"

namespace slrt {

// Element conversions are a few instructions each: threads pay off from some 32K elements on
// (cpu::kParallelWork), and the result never depends on how the range was split.
void widenBfloat16(const uint16_t *from, float *to, uint64_t count) {
  cpu::parallelFor(static_cast<int64_t>(count), 1, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i)
      to[i] = bfloat16ToFloat(from[i]);
  });
}

void roundToBfloat16(const float *from, uint16_t *to, uint64_t count) {
  cpu::parallelFor(static_cast<int64_t>(count), 1, [&](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i)
      to[i] = floatToBfloat16(from[i]);
  });
}

} // namespace slrt
