// Threading and strided iteration for the CPU kernels.
//
// Every kernel splits its work into independent items (elements, rows, output elements, fixed-size
// chunks of a long reduction), and each item is computed start to finish by one thread in a fixed
// order. Results therefore never depend on the number of threads: nothing is summed across threads
// in an order the scheduler picks.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/cpu/cpu_kernels.h"
#include "slrt/shape.h"

namespace slrt::cpu {

// Work of fewer element operations than this stays on the calling thread: starting a parallel
// region costs more than it saves on tiny tensors.
inline constexpr int64_t kParallelWork = int64_t{1} << 15;

inline int maxThreads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

inline int64_t elementCount(const Shape &shape) {
  return static_cast<int64_t>(numel(shape).value_or(0));
}

// Calls body(begin, end) on disjoint ranges that cover [0, count), in parallel when count times
// costPerItem (a rough number of element operations per item) is at least kParallelWork. `body`
// must not throw: kernels validate their data before they start.
template <typename Body> void parallelFor(int64_t count, int64_t costPerItem, Body body) {
  if (count <= 0)
    return;
  int threads = maxThreads();
  int64_t cost = std::max<int64_t>(costPerItem, 1);
  int64_t work = count > INT64_MAX / cost ? INT64_MAX : count * cost;
  if (threads <= 1 || work < kParallelWork) {
    body(int64_t{0}, count);
    return;
  }
  // A few chunks per thread balance uneven items; no chunk is smaller than kParallelWork.
  int64_t chunks = std::min<int64_t>({count, work / kParallelWork, int64_t{4} * threads});
  int64_t base = count / chunks, extra = count % chunks;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = c * base + std::min(c, extra);
    body(begin, begin + base + (c < extra ? 1 : 0));
  }
}

// Calls visit(i, offsets) for the elements [begin, end) of a row-major walk over `shape`, where
// offsets[k] is element i's position in tensor k read with per-dimension strides strides[k] (0 on
// broadcast dimensions, permuted for a transpose, scaled for a slice). An odometer keeps the
// offsets, so the inner loop is plain additions.
template <size_t N, typename Visit>
void forEachElementIn(const Shape &shape, const std::array<std::vector<int64_t>, N> &strides,
                      int64_t begin, int64_t end, Visit visit) {
  std::array<int64_t, N> at{};
  if (begin >= end)
    return;
  size_t rank = shape.size();
  if (rank == 0) {
    visit(int64_t{0}, at);
    return;
  }
  // The multi-index lives on the stack for the ranks tensors have; this runs once per row or
  // output element in some kernels, so it must not allocate.
  int64_t small[8] = {};
  std::vector<int64_t> large(rank > 8 ? rank : 0);
  int64_t *index = rank > 8 ? large.data() : small;
  int64_t rest = begin;
  for (size_t d = rank; d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
    for (size_t k = 0; k < N; ++k)
      at[k] += index[d] * strides[k][d];
  }
  size_t last = rank - 1;
  int64_t inner = shape[last];
  for (int64_t i = begin; i < end;) {
    int64_t run = std::min(inner - index[last], end - i);
    std::array<int64_t, N> o = at;
    for (int64_t j = 0; j < run; ++j) {
      visit(i + j, o);
      for (size_t k = 0; k < N; ++k)
        o[k] += strides[k][last];
    }
    i += run;
    if (i >= end)
      break;
    // The inner dimension is exhausted: back to its start, carry into the outer ones.
    for (size_t k = 0; k < N; ++k)
      at[k] -= index[last] * strides[k][last];
    index[last] = 0;
    for (size_t d = last; d-- > 0;) {
      for (size_t k = 0; k < N; ++k)
        at[k] += strides[k][d];
      if (++index[d] < shape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        at[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// forEachElementIn over the whole of `shape`, on the calling thread.
template <size_t N, typename Visit>
void forEachElement(const Shape &shape, const std::array<std::vector<int64_t>, N> &strides,
                    Visit visit) {
  forEachElementIn<N>(shape, strides, 0, elementCount(shape), visit);
}

// forEachElementIn over the whole of `shape`, split across threads when it is large.
template <size_t N, typename Visit>
void parallelForEachElement(const Shape &shape, const std::array<std::vector<int64_t>, N> &strides,
                            int64_t costPerElement, Visit visit) {
  parallelFor(elementCount(shape), costPerElement, [&](int64_t begin, int64_t end) {
    forEachElementIn<N>(shape, strides, begin, end, visit);
  });
}

// Row-major strides (in elements) of a dense tensor of `shape`.
inline std::vector<int64_t> denseStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0; stride *= shape[d])
    strides[d] = stride;
  return strides;
}

// Splits a tensor at `axis` into [outer, extent, inner]: softmax, the norms and their gradients
// work on rows of `extent` elements spaced `inner` apart.
struct Rows {
  int64_t outer = 1, extent = 1, inner = 1;
};

inline Rows rowsAround(const Shape &shape, size_t axis) {
  Rows rows;
  for (size_t d = 0; d < shape.size(); ++d)
    (d < axis ? rows.outer : d == axis ? rows.extent : rows.inner) *= shape[d];
  return rows;
}

// `values` (of element type T, broadcastable to `shape`) laid out densely as `shape`: scale and
// bias of a norm, expanded once so that the row loops index them directly.
template <typename T> std::vector<T> expandTo(const TensorRef *values, const Shape &shape) {
  std::vector<T> dense(static_cast<size_t>(elementCount(shape)));
  const T *source = in<T>(values);
  forEachElementIn<1>(
      shape, {broadcastStrides(values->shape, shape)}, 0, static_cast<int64_t>(dense.size()),
      [&](int64_t i, const std::array<int64_t, 1> &at) { dense[i] = source[at[0]]; });
  return dense;
}

} // namespace slrt::cpu
