// What ROTARY and ROTARY_GRAD share: the walk over every (first, second) pair of every row of a
// [..., D] tensor with the cos and sin values of both positions. Each pair is read whole before
// either slot is written, so both kernels run exactly in place.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"

namespace slrt::cpu {

// For each row of `x` and each pair (a, b) = (x[first], x[second]) — (2j, 2j+1) interleaved,
// (j, j+D/2) for rotate-half — writes `rotate(a, b, c0, c1, s0, s1)`'s two values to the same
// slots of `out`, where c0, s0 and c1, s1 are cos and sin (broadcast to x's shape) at first and
// second.
template <typename T, typename Rotate>
void forEachRotaryPair(const Kernel &kernel, const TensorRef *x, const TensorRef *cosRef,
                       const TensorRef *sinRef, T *out, Rotate rotate) {
  int64_t dim = x->shape.back(), half = dim / 2;
  if (dim == 0)
    return;
  // Rows of x are contiguous; cos and sin rows start where their broadcast strides say.
  Shape rowShape(x->shape.begin(), x->shape.end() - 1);
  std::vector<int64_t> cosStrides = broadcastStrides(cosRef->shape, x->shape);
  std::vector<int64_t> sinStrides = broadcastStrides(sinRef->shape, x->shape);
  int64_t cosStep = cosStrides.back(), sinStep = sinStrides.back();
  cosStrides.pop_back();
  sinStrides.pop_back();
  const T *px = in<T>(x), *pc = in<T>(cosRef), *ps = in<T>(sinRef);
  bool interleaved = kernel.rotary().interleaved();
  parallelForEachElement<2>(rowShape, {cosStrides, sinStrides}, 3 * dim,
                            [&](int64_t row, const std::array<int64_t, 2> &at) {
                              const T *xr = px + row * dim, *cr = pc + at[0], *sr = ps + at[1];
                              T *outRow = out + row * dim;
                              for (int64_t j = 0; j < half; ++j) {
                                int64_t first = interleaved ? 2 * j : j,
                                        second = interleaved ? 2 * j + 1 : j + half;
                                std::array<T, 2> rotated =
                                    rotate(xr[first], xr[second], cr[first * cosStep],
                                           cr[second * cosStep], sr[first * sinStep],
                                           sr[second * sinStep]);
                                outRow[first] = rotated[0];
                                outRow[second] = rotated[1];
                              }
                            });
}

} // namespace slrt::cpu
