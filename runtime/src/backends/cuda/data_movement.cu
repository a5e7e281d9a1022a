// Kernels that move elements without computing on them (any dtype, by element size), and the
// gradients of those that select: SLICE_GRAD, GATHER_GRAD. One thread per result element.
#include <cstring>

#include "backends/cuda/cuda_device.cuh"

namespace slrt::cuda {
namespace {

// y[i] = x[sum_d i_d * strides[d]]: a transpose, slice or broadcast read of x, written densely.
template <typename T> __global__ void stridedCopyKernel(const T *x, T *y, int64_t n, Strided<1> s) {
  SLRT_GRID_LOOP(i, n) {
    int64_t at[1];
    s.at(i, at);
    y[i] = x[at[0]];
  }
}

void stridedCopy(Context &ctx, const Tensor &x, int64_t base, const std::vector<int64_t> &strides,
                 const Tensor &y) {
  int64_t n = y.numel();
  Strided<1> s = makeStrided<1>(y.shape, {strides});
  withElementBits(y.elementSize, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "strided copy", stridedCopyKernel<T>, blocksFor(n), kThreads, 0, x.as<T>() + base,
           y.as<T>(), n, s);
  });
}

// Where SLICE read: the element offset of the first element and the strides of the walk.
void sliceWalk(const Dims &starts, const Dims &steps, const Dims &wholeShape,
               const Dims &sliceShape, int64_t &base, std::vector<int64_t> &strides) {
  std::vector<int64_t> dense = denseStrides(wholeShape);
  base = 0;
  strides.clear();
  for (size_t d = 0; d < dense.size(); ++d) {
    // Where the slice is empty nothing is read, and a start one past the end is allowed.
    if (sliceShape[d] > 0)
      base += starts[d] * dense[d];
    strides.push_back(steps[d] * dense[d]);
  }
}

template <typename T> __global__ void scatterKernel(const T *dy, T *dx, int64_t n, Strided<1> s) {
  SLRT_GRID_LOOP(i, n) {
    int64_t at[1];
    s.at(i, at);
    dx[at[0]] = dy[i];
  }
}

// --- GATHER -------------------------------------------------------------------------------------

template <typename I>
__global__ void findBadIndex(const I *indices, int64_t count, int64_t extent,
                             unsigned long long *firstBad) {
  SLRT_GRID_LOOP(i, count) {
    int64_t index = indices[i];
    int64_t row = index < 0 ? index + extent : index;
    if (row < 0 || row >= extent)
      atomicMin(firstBad, static_cast<unsigned long long>(i));
  }
}

// data [outer, extent, inner] and indices [count] give y [outer, count, inner].
template <typename T, typename I>
__global__ void gatherKernel(const T *data, const I *indices, T *y, int64_t total, int64_t count,
                             int64_t extent, int64_t inner) {
  SLRT_GRID_LOOP(i, total) {
    int64_t c = i % inner, item = i / inner;
    int64_t k = item % count, o = item / count;
    int64_t index = indices[k];
    int64_t row = index < 0 ? index + extent : index;
    y[i] = data[(o * extent + row) * inner + c];
  }
}

// ddata [outer, extent, inner]: element (o, a, c) sums dy[o, k, c] over the indices k of row a, in
// index order (first[a] .. first[a + 1] of order), so repeated indices accumulate
// deterministically.
template <typename T>
__global__ void gatherGradKernel(const T *dy, const int64_t *first, const int64_t *order, T *ddata,
                                 int64_t total, int64_t count, int64_t extent, int64_t inner) {
  SLRT_GRID_LOOP(i, total) {
    int64_t c = i % inner, item = i / inner;
    int64_t a = item % extent, o = item / extent;
    double acc = 0;
    for (int64_t at = first[a]; at < first[a + 1]; ++at)
      acc += load(dy[(o * count + order[at]) * inner + c]);
    ddata[i] = store<T>(acc);
  }
}

template <typename F> void withIndexType(Element element, F f) {
  if (element == Element::kI32)
    return f(int32_t{});
  return f(int64_t{});
}

// The value of element `i` of an i64 or i32 index tensor on the device.
int64_t indexAt(Context &ctx, const Tensor &indices, uint64_t i) {
  int64_t value = 0;
  if (indices.element == Element::kI32) {
    int32_t narrow = 0;
    ctx.readBack(&narrow, indices.as<int32_t>() + i, sizeof narrow);
    value = narrow;
  } else {
    ctx.readBack(&value, indices.as<int64_t>() + i, sizeof value);
  }
  return value;
}

// Every index is checked before anything is written; the error names the first bad one, in the
// CPU backend's words.
void checkIndices(Context &ctx, const Tensor &indices, int64_t extent, int64_t axis,
                  const Tensor &data) {
  int64_t count = indices.numel();
  ctx.resetCheck();
  withIndexType(indices.element, [&](auto type) {
    using I = decltype(type);
    launch(ctx, "findBadIndex", findBadIndex<I>, blocksFor(count), kThreads, 0, indices.as<I>(),
           count, extent, ctx.checkWords());
  });
  Context::Check check = ctx.readCheck();
  if (check.failed())
    throw makeError("index ", indexAt(ctx, indices, check.firstBad), " (element ", check.firstBad,
                    " of the indices ", formatShape(indices.shape), ") is out of range for axis ",
                    axis, " of the data ", formatShape(data.shape));
}

// --- CONCAT, TRILU, TAKE_ROWS -------------------------------------------------------------------

// Operand rows of `piece` elements go to columns [offset, offset + piece) of y's rows.
template <typename T>
__global__ void concatPiece(const T *x, T *y, int64_t total, int64_t piece, int64_t rowElements,
                            int64_t offset) {
  SLRT_GRID_LOOP(i, total) { y[(i / piece) * rowElements + offset + i % piece] = x[i]; }
}

// Keeps element (i, j) of each [m, n] matrix where j - i >= k (upper) or j - i <= k (lower); k is
// clamped so that nothing overflows. All-zero bits are zero in every dtype.
template <typename T>
__global__ void triluKernel(const T *x, T *y, int64_t total, int64_t m, int64_t n, int64_t k,
                            bool upper) {
  SLRT_GRID_LOOP(e, total) {
    int64_t j = e % n, i = (e / n) % m;
    bool keep = upper ? j - i >= k : j - i <= k;
    y[e] = keep ? x[e] : T(0);
  }
}

__global__ void findBadRow(const int64_t *index, int64_t count, int64_t rows,
                           unsigned long long *firstBad) {
  SLRT_GRID_LOOP(b, count) {
    if (index[b] < 0 || index[b] >= rows)
      atomicMin(firstBad, static_cast<unsigned long long>(b));
  }
}

template <typename T>
__global__ void takeRowsKernel(const T *x, const int64_t *index, T *y, int64_t total, int64_t rows,
                               int64_t width) {
  SLRT_GRID_LOOP(i, total) {
    int64_t b = i / width, c = i % width;
    y[i] = x[(b * rows + index[b]) * width + c];
  }
}

// Element i of k and v: [B, Hkv, T, D] order, or [B, T, Hkv, D] with `bshd`.
template <typename T>
__global__ void kvWriteKernel(T *cache, const T *k, const T *v, const int64_t *start, int64_t total,
                              int64_t heads, int64_t count, int64_t dim, int64_t capacity,
                              bool bshd) {
  SLRT_GRID_LOOP(i, total) {
    int64_t d = i % dim, t, h;
    if (bshd) {
      h = (i / dim) % heads;
      t = (i / (dim * heads)) % count;
    } else {
      t = (i / dim) % count;
      h = (i / (dim * count)) % heads;
    }
    int64_t b = i / (dim * count * heads);
    int64_t s = (start ? start[b] : 0) + t;
    cache[(((b * 2 + 0) * heads + h) * capacity + s) * dim + d] = k[i];
    cache[(((b * 2 + 1) * heads + h) * capacity + s) * dim + d] = v[i];
  }
}

} // namespace

// Result dimension i is operand dimension perm[i].
void transpose(Context &ctx, const Dims &perm, const Tensor &x, const Tensor &y) {
  std::vector<int64_t> dense = denseStrides(x.shape), strides;
  for (int64_t axis : perm)
    strides.push_back(dense[static_cast<size_t>(axis)]);
  stridedCopy(ctx, x, 0, strides, y);
}

void slice(Context &ctx, const Dims &starts, const Dims &steps, const Tensor &x, const Tensor &y) {
  int64_t base;
  std::vector<int64_t> strides;
  sliceWalk(starts, steps, x.shape, y.shape, base, strides);
  stridedCopy(ctx, x, base, strides, y);
}

// dx is zeros with dy written back where SLICE read; the positions are distinct (no step is 0).
void sliceGrad(Context &ctx, const Dims &starts, const Dims &steps, const Tensor &dy,
               const Tensor &dx) {
  SLRT_CUDA_CHECK(
      cudaMemsetAsync(dx.data, 0, static_cast<size_t>(dx.numel()) * dx.elementSize, ctx.stream()));
  int64_t base;
  std::vector<int64_t> strides;
  sliceWalk(starts, steps, dx.shape, dy.shape, base, strides);
  int64_t n = dy.numel();
  Strided<1> s = makeStrided<1>(dy.shape, {strides});
  withElementBits(dx.elementSize, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "sliceGrad", scatterKernel<T>, blocksFor(n), kThreads, 0, dy.as<T>(),
           dx.as<T>() + base, n, s);
  });
}

void expand(Context &ctx, const Tensor &x, const Tensor &y) {
  stridedCopy(ctx, x, 0, broadcastStrides(x.shape, y.shape), y);
}

void gather(Context &ctx, int64_t axis, const Tensor &data, const Tensor &indices,
            const Tensor &y) {
  size_t a = static_cast<size_t>(axis);
  int64_t extent = data.shape[a], inner = product(data.shape, a + 1, data.shape.size());
  int64_t count = indices.numel(), total = y.numel();
  checkIndices(ctx, indices, extent, axis, data);
  withElementBits(y.elementSize, [&](auto type) {
    using T = decltype(type);
    withIndexType(indices.element, [&](auto indexType) {
      using I = decltype(indexType);
      launch(ctx, "gather", gatherKernel<T, I>, blocksFor(total), kThreads, 0, data.as<T>(),
             indices.as<I>(), y.as<T>(), total, count, extent, inner);
    });
  });
}

// The indices come to the host (they are few: token ids) to be checked and counting-sorted by
// row, exactly as the CPU backend does; the sums then run on the device in index order.
void gatherGrad(Context &ctx, int64_t axis, const Tensor &indices, const Tensor &dy,
                const Tensor &ddata) {
  size_t a = static_cast<size_t>(axis);
  int64_t extent = ddata.shape[a], inner = product(ddata.shape, a + 1, ddata.shape.size());
  int64_t count = indices.numel(), total = ddata.numel();
  std::vector<int64_t> rows(static_cast<size_t>(count));
  if (indices.element == Element::kI32) {
    std::vector<int32_t> narrow(rows.size());
    ctx.readBack(narrow.data(), indices.data, narrow.size() * sizeof(int32_t));
    std::copy(narrow.begin(), narrow.end(), rows.begin());
  } else {
    ctx.readBack(rows.data(), indices.data, rows.size() * sizeof(int64_t));
  }
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = rows[static_cast<size_t>(i)];
    int64_t row = index < 0 ? index + extent : index;
    if (row < 0 || row >= extent)
      throw makeError("index ", index, " (element ", i, " of the indices ",
                      formatShape(indices.shape), ") is out of range for axis ", axis,
                      " of the data ", formatShape(ddata.shape));
    rows[static_cast<size_t>(i)] = row;
  }
  // first[a] .. first[a + 1]: the positions in `order` of the indices of row a, in index order.
  std::vector<int64_t> first(static_cast<size_t>(extent) + 1, 0), order(rows.size());
  for (int64_t row : rows)
    ++first[static_cast<size_t>(row) + 1];
  for (size_t r = 0; r < static_cast<size_t>(extent); ++r)
    first[r + 1] += first[r];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t i = 0; i < count; ++i)
    order[static_cast<size_t>(next[static_cast<size_t>(rows[static_cast<size_t>(i)])]++)] = i;

  ScratchLayout layout;
  size_t firstAt = layout.add<int64_t>(extent + 1), orderAt = layout.add<int64_t>(count);
  std::byte *base = ctx.scratch(layout.bytes());
  auto *deviceFirst = reinterpret_cast<int64_t *>(base + firstAt);
  auto *deviceOrder = reinterpret_cast<int64_t *>(base + orderAt);
  // From pageable memory these return once the bytes are staged, so the vectors may go.
  SLRT_CUDA_CHECK(cudaMemcpyAsync(deviceFirst, first.data(), first.size() * sizeof(int64_t),
                                  cudaMemcpyHostToDevice, ctx.stream()));
  if (count > 0)
    SLRT_CUDA_CHECK(cudaMemcpyAsync(deviceOrder, order.data(), order.size() * sizeof(int64_t),
                                    cudaMemcpyHostToDevice, ctx.stream()));
  withFloatType(ddata.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "gatherGrad", gatherGradKernel<T>, blocksFor(total), kThreads, 0, dy.as<T>(),
           static_cast<const int64_t *>(deviceFirst), static_cast<const int64_t *>(deviceOrder),
           ddata.as<T>(), total, count, extent, inner);
  });
  // The staged uploads must be done before the vectors above are freed.
  ctx.synchronize();
}

// Each result row (the dimensions from axis on, flattened) is the operands' rows side by side.
void concat(Context &ctx, int64_t axis, const std::vector<Tensor> &operands, const Tensor &y) {
  size_t a = static_cast<size_t>(axis);
  int64_t outer = product(y.shape, 0, a);
  int64_t rowElements = product(y.shape, a, y.shape.size());
  int64_t offset = 0;
  for (const Tensor &x : operands) {
    int64_t piece = product(x.shape, a, x.shape.size());
    withElementBits(y.elementSize, [&](auto type) {
      using T = decltype(type);
      launch(ctx, "concat", concatPiece<T>, blocksFor(outer * piece), kThreads, 0, x.as<T>(),
             y.as<T>(), outer * piece, piece, rowElements, offset);
    });
    offset += piece;
  }
}

void trilu(Context &ctx, bool upper, int64_t k, const Tensor &x, const Tensor &y) {
  size_t rank = y.shape.size();
  int64_t m = y.shape[rank - 2], n = y.shape[rank - 1], total = y.numel();
  // Beyond these bounds every k behaves alike.
  k = std::clamp<int64_t>(k, -m - 1, n + 1);
  withElementBits(y.elementSize, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "trilu", triluKernel<T>, blocksFor(total), kThreads, 0, x.as<T>(), y.as<T>(), total,
           m, n, k, upper);
  });
}

void takeRows(Context &ctx, const Tensor &x, const Tensor &index, const Tensor &y) {
  int64_t batch = x.shape[0], rows = x.shape[1], width = x.shape[2], total = y.numel();
  ctx.resetCheck();
  launch(ctx, "findBadRow", findBadRow, blocksFor(batch), kThreads, 0, index.as<int64_t>(), batch,
         rows, ctx.checkWords());
  Context::Check check = ctx.readCheck();
  if (check.failed())
    throw makeError("index ", indexAt(ctx, index, check.firstBad), " (element ", check.firstBad,
                    " of the indices ", formatShape(index.shape), ") is out of range for the ",
                    rows, " rows of x ", formatShape(x.shape));
  withElementBits(y.elementSize, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "takeRows", takeRowsKernel<T>, blocksFor(total), kThreads, 0, x.as<T>(),
           index.as<int64_t>(), y.as<T>(), total, rows, width);
  });
}

void kvWrite(Context &ctx, bool bshd, const Tensor &cache, const Tensor &k, const Tensor &v,
             const Tensor *start) {
  int64_t batch = cache.shape[0], heads = cache.shape[2], capacity = cache.shape[3];
  int64_t dim = cache.shape[4], count = bshd ? k.shape[1] : k.shape[2];
  if (start) {
    // Checked on the host before anything is written, with the CPU backend's message.
    std::vector<int64_t> starts(static_cast<size_t>(batch));
    ctx.readBack(starts.data(), start->as<int64_t>(), starts.size() * sizeof(int64_t));
    for (int64_t b = 0; b < batch; ++b) {
      int64_t s = starts[static_cast<size_t>(b)];
      if (s < 0 || s > capacity - count)
        throw makeError("start ", s, " (element ", b, " of the starts ", formatShape(start->shape),
                        ") is outside [0, ", capacity - count, "]: ", count,
                        count == 1 ? " new position" : " new positions", " must fit the cache ",
                        formatShape(cache.shape), " of ", capacity, " positions");
    }
  }
  int64_t total = k.numel();
  withElementBits(cache.elementSize, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "kvWrite", kvWriteKernel<T>, blocksFor(total), kThreads, 0, cache.as<T>(),
           k.as<T>(), v.as<T>(), start ? start->as<int64_t>() : nullptr, total, heads, count, dim,
           capacity, bshd);
  });
}

} // namespace slrt::cuda
