// Reductions and the row-local ops built on them (softmax, the norms) with their gradients. Sums
// accumulate in double as on the CPU backend, whatever the storage (f32, f64, or bf16 read through
// load() and written once through store(): cuda_device.cuh); a block takes a row (or an output
// element), its threads stride over the row and combine their partial sums with a block reduction.
//
// Row kernels read what they need of a row, reduce (the reduction's barriers order every read of
// the row before any write), then each thread writes only the elements it alone reads in that last
// pass: so they run exactly in place, as the schedule contract allows.
#include "backends/cuda/cuda_device.cuh"

namespace slrt::cuda {
namespace {

constexpr int kRowThreads = 256;
// A reduction of at most this many elements per output goes one thread per output; longer ones
// get a block each.
constexpr int64_t kThreadReduction = 64;

// --- REDUCE_MEAN / REDUCE_SUM -------------------------------------------------------------------

template <typename T>
__global__ void reduceByBlock(const T *x, T *y, int64_t outputs, int64_t count, Strided<1> kept,
                              Strided<1> reduced, bool mean) {
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    int64_t base[1];
    kept.at(o, base);
    double sum = 0;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      int64_t at[1];
      reduced.at(r, at);
      sum += load(x[base[0] + at[0]]);
    }
    sum = blockSum(sum);
    if (threadIdx.x == 0)
      y[o] = store<T>(mean ? sum / static_cast<double>(count) : sum);
  }
}

template <typename T>
__global__ void reduceByThread(const T *x, T *y, int64_t outputs, int64_t count, Strided<1> kept,
                               Strided<1> reduced, bool mean) {
  SLRT_GRID_LOOP(o, outputs) {
    int64_t base[1];
    kept.at(o, base);
    double sum = 0;
    for (int64_t r = 0; r < count; ++r) {
      int64_t at[1];
      reduced.at(r, at);
      sum += load(x[base[0] + at[0]]);
    }
    // The mean of nothing is 0 / 0 = NaN, as on the CPU backend.
    y[o] = store<T>(mean ? sum / static_cast<double>(count) : sum);
  }
}

// --- SOFTMAX ------------------------------------------------------------------------------------

// Rows of `extent` elements spaced `inner` apart: row r starts at (r / inner) * extent * inner +
// r % inner.
__device__ __forceinline__ int64_t rowStart(int64_t row, int64_t extent, int64_t inner) {
  return (row / inner) * extent * inner + row % inner;
}

template <typename S>
__global__ void softmaxKernel(const S *x, S *y, int64_t rows, int64_t extent, int64_t inner) {
  using T = Compute<S>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S *xr = x + rowStart(row, extent, inner);
    S *yr = y + rowStart(row, extent, inner);
    T max = -dm::infinity<T>();
    for (int64_t j = threadIdx.x; j < extent; j += blockDim.x)
      max = maxIgnoringNan(max, load(xr[j * inner]));
    max = blockMax(max);
    if (max == -dm::infinity<T>()) {
      // Only -inf and NaN elements: NaN stays NaN, -inf gets no weight.
      for (int64_t j = threadIdx.x; j < extent; j += blockDim.x) {
        T v = load(xr[j * inner]);
        yr[j * inner] = store<S>(dm::isnan(v) ? v : T(0));
      }
      continue;
    }
    double sum = 0;
    for (int64_t j = threadIdx.x; j < extent; j += blockDim.x)
      sum += dm::exp(load(xr[j * inner]) - max);
    sum = blockSum(sum);
    double scale = 1.0 / sum;
    for (int64_t j = threadIdx.x; j < extent; j += blockDim.x)
      yr[j * inner] = store<S>(static_cast<double>(dm::exp(load(xr[j * inner]) - max)) * scale);
  }
}

// dx = y * (dy - sum(dy * y)) along the row.
template <typename T>
__global__ void softmaxGradKernel(const T *y, const T *dy, T *dx, int64_t rows, int64_t extent,
                                  int64_t inner) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t start = rowStart(row, extent, inner);
    const T *yr = y + start, *dyr = dy + start;
    T *dxr = dx + start;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < extent; j += blockDim.x)
      sum += static_cast<double>(load(dyr[j * inner])) * load(yr[j * inner]);
    sum = blockSum(sum);
    for (int64_t j = threadIdx.x; j < extent; j += blockDim.x)
      dxr[j * inner] = store<T>(load(yr[j * inner]) * (load(dyr[j * inner]) - sum));
  }
}

struct Rows {
  int64_t outer = 1, extent = 1, inner = 1;
  int64_t count() const { return outer * inner; }
};

Rows rowsAround(const Dims &shape, int64_t axis) {
  Rows rows;
  for (size_t d = 0; d < shape.size(); ++d)
    (static_cast<int64_t>(d) < axis    ? rows.outer
     : static_cast<int64_t>(d) == axis ? rows.extent
                                       : rows.inner) *= shape[d];
  return rows;
}

// --- CUMSUM -------------------------------------------------------------------------------------

// One thread per line along the axis, summing in order as the CPU backend does: into double for
// the float dtypes (bf16 widened by load(), rounded once by store()), wrapping uint64_t for i64.
template <typename S, typename Acc>
__global__ void cumSumKernel(const S *x, S *y, int64_t lines, int64_t extent, int64_t inner,
                             bool exclusive, bool reverse) {
  SLRT_GRID_LOOP(line, lines) {
    int64_t start = rowStart(line, extent, inner);
    Acc sum = 0;
    for (int64_t step = 0; step < extent; ++step) {
      int64_t at = start + (reverse ? extent - 1 - step : step) * inner;
      Acc value = static_cast<Acc>(load(x[at]));
      if (!exclusive)
        sum += value;
      y[at] = store<S>(sum);
      if (exclusive)
        sum += value;
    }
  }
}

// --- norms --------------------------------------------------------------------------------------

// dense[i] = values[broadcast position of i]: a norm's scale or bias laid out as the normalised
// dimensions, as the CPU backend's expandTo.
template <typename T>
__global__ void expandKernel(const T *values, T *dense, int64_t n, Strided<1> s) {
  SLRT_GRID_LOOP(i, n) {
    int64_t at[1];
    s.at(i, at);
    dense[i] = values[at[0]];
  }
}

template <typename T> T *expandTo(Context &ctx, const Tensor &values, const Dims &shape, T *dense) {
  int64_t n = product(shape, 0, shape.size());
  launch(ctx, "expand", expandKernel<T>, blocksFor(n), kThreads, 0, values.as<T>(), dense, n,
         makeStrided<1>(shape, {broadcastStrides(values.shape, shape)}));
  return dense;
}

template <typename T>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias, T *y, int64_t rows,
                                int64_t n, double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    // Two passes (mean, then squared deviations) avoid the cancellation of E[x^2] - E[x]^2.
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += load(xr[j]);
    double mean = blockSum(sum) / static_cast<double>(n);
    double squares = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      squares += (load(xr[j]) - mean) * (load(xr[j]) - mean);
    double rstd = 1.0 / ::sqrt(blockSum(squares) / static_cast<double>(n) + epsilon);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = store<T>((load(xr[j]) - mean) * rstd * load(scale[j]) + load(bias[j]));
  }
}

template <typename T>
__global__ void rmsNormKernel(const T *x, const T *scale, T *y, int64_t rows, int64_t n,
                              double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    T *yr = y + r * n;
    double squares = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      squares += static_cast<double>(load(xr[j])) * load(xr[j]);
    double rms = 1.0 / ::sqrt(blockSum(squares) / static_cast<double>(n) + epsilon);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      yr[j] = store<T>(load(xr[j]) * rms * load(scale[j]));
  }
}

// Per row: 1 / sqrt(var + epsilon) and, for LayerNorm (mean != nullptr), the mean; RMSNorm's
// "variance" is mean(x^2).
template <typename T>
__global__ void normStats(const T *x, double *mean, double *rstd, int64_t rows, int64_t n,
                          double epsilon) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n;
    double m = 0, squares = 0;
    if (mean) {
      double sum = 0;
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        sum += load(xr[j]);
      m = blockSum(sum) / static_cast<double>(n);
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        squares += (load(xr[j]) - m) * (load(xr[j]) - m);
    } else {
      for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        squares += static_cast<double>(load(xr[j])) * load(xr[j]);
    }
    squares = blockSum(squares);
    if (threadIdx.x == 0) {
      if (mean)
        mean[r] = m;
      rstd[r] = 1.0 / ::sqrt(squares / static_cast<double>(n) + epsilon);
    }
  }
}

// The parameter gradients of a [rows, n] norm: dscale[j] = sum_r dy * xhat (xhat = (x - mean) *
// rstd for LayerNorm, x * rstd for RMSNorm) and, where dbias is given, dbias[j] = sum_r dy. Two
// stages, each summing in a fixed order, so the bits are the same on every run and GPU:
//  1. normColumnPartials: a block of 32 x 8 threads takes 32 columns of one chunk of kChunkRows
//     rows (a warp reads 32 neighbouring elements of a row: coalesced); thread (c, t) sums rows
//     t, t + 8, ... of the chunk in order, then thread (c, 0) adds the 8 sums in order into the
//     chunk's partial sum of column c;
//  2. normColumnFinish: one thread per column adds the chunks' partial sums in chunk order.
// A [4096 x 4096] gradient is 128 x 128 blocks instead of 16 blocks walking 4096 rows each.
constexpr int kColumnTile = 32;
constexpr int kColumnRowThreads = 8;
constexpr int64_t kChunkRows = 64;

struct ColumnChunks {
  int64_t rows = 0, chunks = 0;
};

// Rows per chunk (at least kChunkRows; more when the grid's y dimension would pass 65535) and the
// number of chunks.
ColumnChunks columnChunks(int64_t rows) {
  ColumnChunks c;
  c.rows = std::max<int64_t>(kChunkRows, (rows + 65534) / 65535);
  c.chunks = (rows + c.rows - 1) / c.rows;
  return c;
}

template <typename T>
__global__ void normColumnPartials(const T *x, const T *dy, const double *mean,
                                   const double *rstd, double *partialScale, double *partialBias,
                                   int64_t rows, int64_t n, int64_t chunkRows) {
  __shared__ double scaleSums[kColumnRowThreads][kColumnTile];
  __shared__ double biasSums[kColumnRowThreads][kColumnTile];
  int64_t j = static_cast<int64_t>(blockIdx.x) * kColumnTile + threadIdx.x;
  int64_t begin = static_cast<int64_t>(blockIdx.y) * chunkRows;
  int64_t end = begin + chunkRows < rows ? begin + chunkRows : rows;
  double s = 0, b = 0;
  if (j < n)
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnRowThreads) {
      double d = load(dy[r * n + j]);
      if (mean)
        s += d * ((load(x[r * n + j]) - mean[r]) * rstd[r]);
      else
        s += d * load(x[r * n + j]) * rstd[r];
      b += d;
    }
  scaleSums[threadIdx.y][threadIdx.x] = s;
  biasSums[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    double ts = 0, tb = 0;
    for (int t = 0; t < kColumnRowThreads; ++t) {
      ts += scaleSums[t][threadIdx.x];
      tb += biasSums[t][threadIdx.x];
    }
    partialScale[blockIdx.y * n + j] = ts;
    if (partialBias)
      partialBias[blockIdx.y * n + j] = tb;
  }
}

template <typename T>
__global__ void normColumnFinish(const double *partialScale, const double *partialBias, T *dscale,
                                 T *dbias, int64_t chunks, int64_t n) {
  SLRT_GRID_LOOP(j, n) {
    double s = 0, b = 0;
    for (int64_t c = 0; c < chunks; ++c) {
      s += partialScale[c * n + j];
      if (partialBias)
        b += partialBias[c * n + j];
    }
    dscale[j] = store<T>(s);
    if (dbias)
      dbias[j] = store<T>(b);
  }
}

// Both stages on the context's stream; `partialScale` (and `partialBias` when dbias is given) hold
// columnChunks(rows).chunks x n doubles of scratch.
template <typename T>
void normColumnSums(Context &ctx, const char *name, const T *x, const T *dy, const double *mean,
                    const double *rstd, double *partialScale, double *partialBias, T *dscale,
                    T *dbias, int64_t rows, int64_t n) {
  if (n == 0)
    return;
  ColumnChunks c = columnChunks(rows);
  if (c.chunks > 0) {
    dim3 grid(static_cast<unsigned>((n + kColumnTile - 1) / kColumnTile),
              static_cast<unsigned>(c.chunks));
    dim3 block(kColumnTile, kColumnRowThreads);
    normColumnPartials<T><<<grid, block, 0, ctx.stream()>>>(x, dy, mean, rstd, partialScale,
                                                             dbias ? partialBias : nullptr, rows,
                                                             n, c.rows);
    check(cudaGetLastError(), name);
  }
  launch(ctx, name, normColumnFinish<T>, blocksFor(n), kThreads, 0,
         static_cast<const double *>(partialScale),
         static_cast<const double *>(dbias ? partialBias : nullptr), dscale, dbias, c.chunks, n);
}

// dx = r * g * dy - x * r^3 / n * sum(dy * g * x).
template <typename T>
__global__ void rmsNormDx(const T *x, const T *scale, const T *dy, const double *rstd, T *dx,
                          int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n, *dyr = dy + r * n;
    T *dxr = dx + r * n;
    double rs = rstd[r];
    double projection = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      projection += static_cast<double>(load(dyr[j])) * load(scale[j]) * load(xr[j]);
    projection = blockSum(projection);
    double c = rs * rs * rs * projection / static_cast<double>(n);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      dxr[j] = store<T>(rs * load(scale[j]) * load(dyr[j]) - load(xr[j]) * c);
  }
}

// With a = g * dy: dx = rstd * (a - mean(a) - xhat * mean(a * xhat)).
template <typename T>
__global__ void layerNormDx(const T *x, const T *scale, const T *dy, const double *mean,
                            const double *rstd, T *dx, int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *xr = x + r * n, *dyr = dy + r * n;
    T *dxr = dx + r * n;
    double m = mean[r], rs = rstd[r];
    double sumA = 0, sumAXhat = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      double a = static_cast<double>(load(scale[j])) * load(dyr[j]);
      sumA += a;
      sumAXhat += a * (load(xr[j]) - m) * rs;
    }
    double meanA = blockSum(sumA) / static_cast<double>(n);
    double meanAXhat = blockSum(sumAXhat) / static_cast<double>(n);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      double a = static_cast<double>(load(scale[j])) * load(dyr[j]);
      dxr[j] = store<T>(rs * (a - meanA - (load(xr[j]) - m) * rs * meanAXhat));
    }
  }
}

// The normalised dimensions (from `axis` on) of x and how many rows of them there are.
struct NormRows {
  Dims normalized;
  int64_t n, rows;
};

NormRows normRows(const Tensor &x, int64_t axis) {
  NormRows r;
  r.normalized.assign(x.shape.begin() + axis, x.shape.end());
  r.n = product(r.normalized, 0, r.normalized.size());
  r.rows = r.n == 0 ? 0 : x.numel() / r.n;
  return r;
}

} // namespace

void reduce(Context &ctx, bool mean, const Dims &axes, const Tensor &x, const Tensor &y) {
  std::vector<bool> reduced(x.shape.size(), axes.empty());
  for (int64_t axis : axes)
    reduced[static_cast<size_t>(axis)] = true;
  std::vector<int64_t> strides = denseStrides(x.shape);
  Dims keptShape, reducedShape;
  std::vector<int64_t> keptStrides, reducedStrides;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    (reduced[d] ? reducedShape : keptShape).push_back(x.shape[d]);
    (reduced[d] ? reducedStrides : keptStrides).push_back(strides[d]);
  }
  int64_t outputs = product(keptShape, 0, keptShape.size());
  int64_t count = product(reducedShape, 0, reducedShape.size());
  Strided<1> kept = makeStrided<1>(keptShape, {keptStrides});
  Strided<1> over = makeStrided<1>(reducedShape, {reducedStrides});
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    if (count <= kThreadReduction)
      launch(ctx, "reduce", reduceByThread<T>, blocksFor(outputs), kThreads, 0, x.as<T>(),
             y.as<T>(), outputs, count, kept, over, mean);
    else
      launch(ctx, "reduce", reduceByBlock<T>, blocksForRows(outputs), kRowThreads, 0, x.as<T>(),
             y.as<T>(), outputs, count, kept, over, mean);
  });
}

void cumSum(Context &ctx, int64_t axis, bool exclusive, bool reverse, const Tensor &x,
            const Tensor &y) {
  Rows rows = rowsAround(x.shape, axis);
  if (y.element == Element::kI64)
    return launch(ctx, "cumSum", cumSumKernel<int64_t, uint64_t>, blocksFor(rows.count()),
                  kThreads, 0, x.as<int64_t>(), y.as<int64_t>(), rows.count(), rows.extent,
                  rows.inner, exclusive, reverse);
  withFloatType(y.element, [&](auto type) {
    using S = decltype(type);
    launch(ctx, "cumSum", cumSumKernel<S, double>, blocksFor(rows.count()), kThreads, 0, x.as<S>(),
           y.as<S>(), rows.count(), rows.extent, rows.inner, exclusive, reverse);
  });
}

void softmax(Context &ctx, int64_t axis, const Tensor &x, const Tensor &y) {
  Rows rows = rowsAround(x.shape, axis);
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "softmax", softmaxKernel<T>, blocksForRows(rows.count()), kRowThreads, 0, x.as<T>(),
           y.as<T>(), rows.count(), rows.extent, rows.inner);
  });
}

void softmaxGrad(Context &ctx, int64_t axis, const Tensor &y, const Tensor &dy, const Tensor &dx) {
  Rows rows = rowsAround(y.shape, axis);
  withFloatType(dx.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "softmaxGrad", softmaxGradKernel<T>, blocksForRows(rows.count()), kRowThreads, 0,
           y.as<T>(), dy.as<T>(), dx.as<T>(), rows.count(), rows.extent, rows.inner);
  });
}

void layerNorm(Context &ctx, int64_t axis, double epsilon, const Tensor &x, const Tensor &scale,
               const Tensor *bias, const Tensor &y) {
  NormRows r = normRows(x, axis);
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    ScratchLayout layout;
    size_t scaleAt = layout.add<T>(r.n), biasAt = layout.add<T>(r.n);
    std::byte *base = ctx.scratch(layout.bytes());
    T *denseScale = expandTo(ctx, scale, r.normalized, reinterpret_cast<T *>(base + scaleAt));
    T *denseBias = reinterpret_cast<T *>(base + biasAt);
    if (bias)
      expandTo(ctx, *bias, r.normalized, denseBias);
    else
      SLRT_CUDA_CHECK(cudaMemsetAsync(denseBias, 0, r.n * sizeof(T), ctx.stream()));
    launch(ctx, "layerNorm", layerNormKernel<T>, blocksForRows(r.rows), kRowThreads, 0, x.as<T>(),
           denseScale, denseBias, y.as<T>(), r.rows, r.n, epsilon);
  });
}

void rmsNorm(Context &ctx, double epsilon, const Tensor &x, const Tensor &scale, const Tensor &y) {
  int64_t n = x.shape.back(), rows = n == 0 ? 0 : x.numel() / n;
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "rmsNorm", rmsNormKernel<T>, blocksForRows(rows), kRowThreads, 0, x.as<T>(),
           scale.as<T>(), y.as<T>(), rows, n, epsilon);
  });
}

// dscale is summed (and rstd found) before dx is written, so dx may be exactly x or dy; with one
// row it may be exactly scale, which each thread reads before writing the same element.
void rmsNormGrad(Context &ctx, double epsilon, const Tensor &x, const Tensor &scale,
                 const Tensor &dy, const Tensor &dx, const Tensor &dscale) {
  int64_t n = x.shape.back(), rows = n == 0 ? 0 : x.numel() / n;
  withFloatType(dx.element, [&](auto type) {
    using T = decltype(type);
    ScratchLayout layout;
    size_t rstdAt = layout.add<double>(rows),
           partialAt = layout.add<double>(columnChunks(rows).chunks * n);
    std::byte *base = ctx.scratch(layout.bytes());
    double *rstd = reinterpret_cast<double *>(base + rstdAt);
    launch(ctx, "rmsNormGrad stats", normStats<T>, blocksForRows(rows), kRowThreads, 0, x.as<T>(),
           static_cast<double *>(nullptr), rstd, rows, n, epsilon);
    normColumnSums<T>(ctx, "rmsNormGrad dscale", x.as<T>(), dy.as<T>(), nullptr, rstd,
                      reinterpret_cast<double *>(base + partialAt), nullptr, dscale.as<T>(),
                      nullptr, rows, n);
    launch(ctx, "rmsNormGrad dx", rmsNormDx<T>, blocksForRows(rows), kRowThreads, 0, x.as<T>(),
           scale.as<T>(), dy.as<T>(), rstd, dx.as<T>(), rows, n);
  });
}

void layerNormGrad(Context &ctx, int64_t axis, double epsilon, const Tensor &x, const Tensor &scale,
                   const Tensor &dy, const Tensor &dx, const Tensor &dscale, const Tensor &dbias) {
  NormRows r = normRows(x, axis);
  withFloatType(dx.element, [&](auto type) {
    using T = decltype(type);
    ScratchLayout layout;
    int64_t partials = columnChunks(r.rows).chunks * r.n;
    size_t scaleAt = layout.add<T>(r.n), meanAt = layout.add<double>(r.rows),
           rstdAt = layout.add<double>(r.rows), partialScaleAt = layout.add<double>(partials),
           partialBiasAt = layout.add<double>(partials);
    std::byte *base = ctx.scratch(layout.bytes());
    // A dense copy of scale, taken first: dx may be exactly scale.
    T *denseScale = expandTo(ctx, scale, r.normalized, reinterpret_cast<T *>(base + scaleAt));
    double *mean = reinterpret_cast<double *>(base + meanAt);
    double *rstd = reinterpret_cast<double *>(base + rstdAt);
    launch(ctx, "layerNormGrad stats", normStats<T>, blocksForRows(r.rows), kRowThreads, 0,
           x.as<T>(), mean, rstd, r.rows, r.n, epsilon);
    normColumnSums<T>(ctx, "layerNormGrad dscale", x.as<T>(), dy.as<T>(), mean, rstd,
                      reinterpret_cast<double *>(base + partialScaleAt),
                      reinterpret_cast<double *>(base + partialBiasAt), dscale.as<T>(),
                      dbias.as<T>(), r.rows, r.n);
    launch(ctx, "layerNormGrad dx", layerNormDx<T>, blocksForRows(r.rows), kRowThreads, 0,
           x.as<T>(), static_cast<const T *>(denseScale), dy.as<T>(),
           static_cast<const double *>(mean), static_cast<const double *>(rstd), dx.as<T>(), r.rows,
           r.n);
  });
}

} // namespace slrt::cuda
