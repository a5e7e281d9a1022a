// Reductions and the row-local ops built on them. Sums accumulate in double; each output element
// (or each fixed-size chunk of a long reduction) is summed by one thread in index order, and
// chunks are combined in chunk order, so results do not depend on the thread count.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vector_math.h"

namespace slrt::cpu {
namespace {

// Reduced elements per work item. Fixed (not derived from the thread count) so that the
// summation order, and with it the rounding, is the same however many threads run.
constexpr int64_t kReduceChunk = int64_t{1} << 14;

} // namespace

namespace {

template <typename T>
void reduceAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  const auto &axes = kernel.reduce().axes();
  std::vector<bool> reduced(x->shape.size(), axes.empty());
  for (int64_t axis : axes)
    reduced[static_cast<size_t>(axis)] = true;
  // Output elements walk the kept dimensions, and each sums over the reduced ones.
  std::vector<int64_t> strides = denseStrides(x->shape);
  Shape keptShape, reducedShape;
  std::vector<int64_t> keptStrides, reducedStrides;
  for (size_t d = 0; d < x->shape.size(); ++d) {
    (reduced[d] ? reducedShape : keptShape).push_back(x->shape[d]);
    (reduced[d] ? reducedStrides : keptStrides).push_back(strides[d]);
  }
  int64_t outputs = elementCount(keptShape), count = elementCount(reducedShape);
  int64_t chunks = (count + kReduceChunk - 1) / kReduceChunk;
  const T *px = in<T>(x);
  T *py = out<T>(y);
  bool mean = kernel.op() == sl::schedule::REDUCE_MEAN;
  if (chunks == 0) {
    // An empty sum is 0, and the mean of nothing is 0 / 0 = NaN, as in numpy.
    for (int64_t o = 0; o < outputs; ++o)
      py[o] = mean ? std::numeric_limits<T>::quiet_NaN() : T(0);
    return;
  }
  // Sums the reduced elements [begin, end) around the kept element at offset `base`.
  auto sumRange = [&](int64_t base, int64_t begin, int64_t end) {
    double sum = 0;
    forEachElementIn<1>(
        reducedShape, {reducedStrides}, begin, end,
        [&](int64_t, const std::array<int64_t, 1> &at) { sum += px[base + at[0]]; });
    return sum;
  };
  std::vector<double> partial(static_cast<size_t>(outputs * chunks));
  parallelFor(outputs * chunks, std::min(count, kReduceChunk), [&](int64_t begin, int64_t end) {
    if (chunks == 1) {
      // The common case, one item per output: walk the kept dimensions with one odometer.
      forEachElementIn<1>(keptShape, {keptStrides}, begin, end,
                          [&](int64_t o, const std::array<int64_t, 1> &at) {
                            partial[static_cast<size_t>(o)] = sumRange(at[0], 0, count);
                          });
      return;
    }
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / chunks, c = item % chunks;
      int64_t base = 0;
      forEachElementIn<1>(keptShape, {keptStrides}, o, o + 1,
                          [&](int64_t, const std::array<int64_t, 1> &at) { base = at[0]; });
      partial[static_cast<size_t>(item)] =
          sumRange(base, c * kReduceChunk, std::min(count, (c + 1) * kReduceChunk));
    }
  });
  for (int64_t o = 0; o < outputs; ++o) {
    double sum = 0;
    for (int64_t c = 0; c < chunks; ++c)
      sum += partial[static_cast<size_t>(o * chunks + c)];
    py[o] = static_cast<T>(mean ? sum / static_cast<double>(count) : sum);
  }
}

// One thread sums each line along the axis, in order (from its end with cumsum.reverse), into
// `Acc`: double for the float dtypes, uint64_t (wrapping) for i64.
template <typename T, typename Acc>
void cumSumAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  const sl::schedule::CumSumAttributes &attrs = kernel.cumsum();
  size_t axis = static_cast<size_t>(attrs.axis());
  int64_t length = x->shape[axis], outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d)
    outer *= x->shape[d];
  for (size_t d = axis + 1; d < x->shape.size(); ++d)
    inner *= x->shape[d];
  const T *px = in<T>(x);
  T *py = out<T>(y);
  parallelFor(outer * inner, length, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      int64_t base = line / inner * length * inner + line % inner;
      Acc sum = 0;
      for (int64_t step = 0; step < length; ++step) {
        int64_t at = base + (attrs.reverse() ? length - 1 - step : step) * inner;
        Acc value = static_cast<Acc>(px[at]);
        if (!attrs.exclusive())
          sum += value;
        py[at] = static_cast<T>(sum);
        if (attrs.exclusive())
          sum += value;
      }
    }
  });
}

// Subtracts the row maximum before exponentiating, so no exp overflows. A row whose every element
// is -inf (fully masked) becomes zeros rather than 0 / 0.
template <typename T>
void softmaxAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  Rows rows = rowsAround(x->shape, static_cast<size_t>(kernel.axis().axis()));
  const T *px = in<T>(x);
  T *py = out<T>(y);
  int64_t extent = rows.extent, inner = rows.inner;
  parallelFor(rows.outer * inner, 4 * extent, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t start = (row / inner) * extent * inner + row % inner;
      const T *xr = px + start;
      T *yr = py + start;
      T max = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < extent; ++j)
        max = std::max(max, xr[j * inner]);
      if (max == -std::numeric_limits<T>::infinity()) {
        // Only -inf and NaN elements: NaN stays NaN, -inf gets no weight.
        for (int64_t j = 0; j < extent; ++j)
          yr[j * inner] = std::isnan(xr[j * inner]) ? xr[j * inner] : T(0);
        continue;
      }
      // Each element is read before its own slot is written, so this runs in place.
      double sum = 0;
      bool vectorised = false;
      if constexpr (std::is_same_v<T, float>) {
        if (inner == 1) { // contiguous rows: the vectorised float exps (vector_math.h)
          sum = vec::expShifted(xr, max, yr, extent);
          vectorised = true;
        }
      }
      if (!vectorised) {
        for (int64_t j = 0; j < extent; ++j) {
          T e = std::exp(xr[j * inner] - max);
          yr[j * inner] = e;
          sum += e;
        }
      }
      double scale = 1.0 / sum;
      for (int64_t j = 0; j < extent; ++j)
        yr[j * inner] = static_cast<T>(yr[j * inner] * scale);
    }
  });
}

template <typename T>
void layerNormAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  size_t axis = static_cast<size_t>(kernel.norm().axis());
  Shape normalized(x->shape.begin() + static_cast<std::ptrdiff_t>(axis), x->shape.end());
  int64_t n = elementCount(normalized), rows = n == 0 ? 0 : elementCount(x->shape) / n;
  std::vector<T> scale = expandTo<T>(operands[1], normalized);
  std::vector<T> bias =
      operands.size() > 2 ? expandTo<T>(operands[2], normalized) : std::vector<T>(scale.size());
  double epsilon = kernel.norm().epsilon();
  const T *px = in<T>(x);
  T *py = out<T>(y);
  parallelFor(rows, 6 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = px + r * n;
      T *yr = py + r * n;
      // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += xr[j];
      double mean = sum / static_cast<double>(n);
      double squares = 0;
      for (int64_t j = 0; j < n; ++j)
        squares += (xr[j] - mean) * (xr[j] - mean);
      double rstd = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);
      for (int64_t j = 0; j < n; ++j)
        yr[j] = static_cast<T>((xr[j] - mean) * rstd * scale[j] + bias[j]);
    }
  });
}

template <typename T>
void rmsNormAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  int64_t n = x->shape.back(), rows = n == 0 ? 0 : elementCount(x->shape) / n;
  const T *px = in<T>(x), *scale = in<T>(operands[1]);
  T *py = out<T>(y);
  double epsilon = kernel.norm().epsilon();
  parallelFor(rows, 4 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = px + r * n;
      T *yr = py + r * n;
      double squares = 0;
      if constexpr (std::is_same_v<T, float>) {
        squares = vec::dotInDouble(xr, xr, n);
      } else {
        for (int64_t j = 0; j < n; ++j)
          squares += xr[j] * xr[j];
      }
      double rms = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);
      for (int64_t j = 0; j < n; ++j)
        yr[j] = static_cast<T>(xr[j] * rms * scale[j]);
    }
  });
}

} // namespace

void reduce(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { reduceAs<decltype(type)>(kernel, operands, y); });
}

void cumSum(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  if (y->dtype == sl::schedule::I64)
    return cumSumAs<int64_t, uint64_t>(kernel, operands, y);
  withFloatType(y->dtype, [&](auto type) { cumSumAs<decltype(type), double>(kernel, operands, y); });
}

void softmax(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { softmaxAs<decltype(type)>(kernel, operands, y); });
}

void layerNorm(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { layerNormAs<decltype(type)>(kernel, operands, y); });
}

void rmsNorm(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { rmsNormAs<decltype(type)>(kernel, operands, y); });
}

} // namespace slrt::cpu
