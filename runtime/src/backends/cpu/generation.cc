// The generation kernels: writing new keys and values into a KV cache, attention of one new token
// over its cache, and per-sequence row selection.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

// cache [B, 2, Hkv, C, D]: the first element of row (b, kv, h, position).
int64_t cacheRow(const Shape &cache, int64_t b, int64_t kv, int64_t h, int64_t position) {
  return (((b * 2 + kv) * cache[2] + h) * cache[3] + position) * cache[4];
}

// cache[b, 0, h, s + t] = k[b, h, t] and cache[b, 1, h, s + t] = v[b, h, t]: for each (b, h) two
// contiguous runs of T rows. Every other cache element is left as it is.
// With `bshd`, k and v are [B, T, Hkv, D]: row t of head h is at (b * T + t) * Hkv + h, so each
// (b, h) gathers T rows of D elements instead of copying one run.
template <typename T>
void kvWriteAs(const Operands &operands, const TensorRef *cache,
               const std::vector<int64_t> &start, bool bshd) {
  const TensorRef *k = operands[1], *v = operands[2];
  int64_t batch = cache->shape[0], heads = cache->shape[2], d = cache->shape[4];
  int64_t t = bshd ? k->shape[1] : k->shape[2];
  T *pc = out<T>(cache);
  const T *pk = in<T>(k), *pv = in<T>(v);
  uint64_t runBytes = static_cast<uint64_t>(t * d) * sizeof(T);
  uint64_t rowBytes = static_cast<uint64_t>(d) * sizeof(T);
  parallelFor(batch * heads, 2 * t * d, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      int64_t b = bh / heads, h = bh % heads, s = start[static_cast<size_t>(b)];
      if (runBytes == 0)
        continue;
      T *keys = pc + cacheRow(cache->shape, b, 0, h, s);
      T *values = pc + cacheRow(cache->shape, b, 1, h, s);
      if (!bshd) {
        std::memcpy(keys, pk + bh * t * d, runBytes);
        std::memcpy(values, pv + bh * t * d, runBytes);
        continue;
      }
      for (int64_t p = 0; p < t; ++p) {
        int64_t row = ((b * t + p) * heads + h) * d;
        std::memcpy(keys + p * d, pk + row, rowBytes);
        std::memcpy(values + p * d, pv + row, rowBytes);
      }
    }
  });
}

// One (sequence, query head) at a time: the scores over the `length` cached keys and the new key,
// their softmax (the maximum subtracted first) and the weighted sum of the values, accumulated in
// double as ATTENTION does; ALiBi adds slopes[h] * (j - length), the new token being at position
// `length`. Items are independent, so they split across threads without changing any result.
template <typename T>
void decodeAttentionAs(const Kernel &kernel, const Operands &operands, const TensorRef *y,
                       const std::vector<int64_t> &lengths) {
  const TensorRef *q = operands[0], *k = operands[1], *v = operands[2], *cache = operands[3];
  int64_t batch = q->shape[0], heads = q->shape[1], d = q->shape[3];
  int64_t kvHeads = k->shape[1], capacity = cache->shape[3];
  int64_t group = heads / kvHeads;
  T scale = kernel.attention().scale();
  const T *pq = in<T>(q), *pk = in<T>(k), *pv = in<T>(v), *pc = in<T>(cache);
  const T *ps = kernel.attention().alibi() ? in<T>(operands[5]) : nullptr;
  T *py = out<T>(y);

  parallelFor(batch * heads, (capacity + 1) * 2 * d, [&](int64_t begin, int64_t end) {
    std::vector<T> scores;
    std::vector<double> acc(static_cast<size_t>(d));
    for (int64_t bh = begin; bh < end; ++bh) {
      int64_t b = bh / heads, h = bh % heads, kvHead = h / group;
      int64_t length = lengths[static_cast<size_t>(b)];
      const T *qRow = pq + bh * d;
      const T *keys = pc + cacheRow(cache->shape, b, 0, kvHead, 0);
      const T *values = pc + cacheRow(cache->shape, b, 1, kvHead, 0);
      const T *newKey = pk + (b * kvHeads + kvHead) * d;
      const T *newValue = pv + (b * kvHeads + kvHead) * d;
      // Positions [0, length) are the cache's, position `length` the new token's.
      auto keyRow = [&](int64_t j) { return j < length ? keys + j * d : newKey; };
      auto valueRow = [&](int64_t j) { return j < length ? values + j * d : newValue; };
      scores.resize(static_cast<size_t>(length + 1));
      const T slope = ps ? ps[h] : T(0);
      T max = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j <= length; ++j) {
        const T *kRow = keyRow(j);
        T dot = T(0);
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < d; ++c)
          dot += qRow[c] * kRow[c];
        T score = dot * scale;
        if (ps)
          score += slope * static_cast<T>(j - length);
        scores[static_cast<size_t>(j)] = score;
        max = std::max(max, score);
      }
      // The token's own score is always there, so there is no empty row. A NaN score, or an
      // infinite maximum (from infinite inputs), makes the row NaN through exp and the sum.
      T *yRow = py + bh * d;
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0;
      for (int64_t j = 0; j <= length; ++j) {
        T p = std::exp(scores[static_cast<size_t>(j)] - max);
        sum += p;
        const T *vRow = valueRow(j);
        for (int64_t c = 0; c < d; ++c)
          acc[static_cast<size_t>(c)] += double(p) * vRow[c];
      }
      for (int64_t c = 0; c < d; ++c)
        yRow[c] = static_cast<T>(acc[static_cast<size_t>(c)] / sum);
    }
  });
}

} // namespace

void kvWrite(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *cache = operands[0], *k = operands[1];
  bool bshd = kernel.kv_write().layout() == sl::schedule::AttentionAttributes::BSHD;
  int64_t batch = cache->shape[0], capacity = cache->shape[3];
  int64_t count = bshd ? k->shape[1] : k->shape[2];
  // Every start is checked before anything is written, so the error names the first bad one and
  // the cache is untouched.
  std::vector<int64_t> start(static_cast<size_t>(batch), 0);
  if (operands.size() > 3) {
    const int64_t *ps = in<int64_t>(operands[3]);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t s = ps[b];
      if (s < 0 || s > capacity - count)
        throw makeError("start ", s, " (element ", b, " of the starts ",
                        formatShape(operands[3]->shape), ") is outside [0, ", capacity - count,
                        "]: ", count, count == 1 ? " new position" : " new positions",
                        " must fit the cache ", formatShape(cache->shape), " of ", capacity,
                        " positions");
      start[static_cast<size_t>(b)] = s;
    }
  }
  // y is the very buffer of operand 0: the kernel writes the cache in place, moving elements
  // without looking at them (any dtype of the element sizes, bf16 included).
  withElementBits(dtypeSize(y->dtype),
                  [&](auto type) { kvWriteAs<decltype(type)>(operands, y, start, bshd); });
}

void decodeAttention(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *cache = operands[3], *length = operands[4];
  int64_t batch = cache->shape[0], capacity = cache->shape[3];
  std::vector<int64_t> lengths(static_cast<size_t>(batch));
  const int64_t *pl = in<int64_t>(length);
  for (int64_t b = 0; b < batch; ++b) {
    if (pl[b] < 0 || pl[b] > capacity)
      throw makeError("length ", pl[b], " (element ", b, " of the lengths ",
                      formatShape(length->shape), ") is out of range for the cache ",
                      formatShape(cache->shape), " of ", capacity, " positions");
    lengths[static_cast<size_t>(b)] = pl[b];
  }
  withFloatType(y->dtype, [&](auto type) {
    decodeAttentionAs<decltype(type)>(kernel, operands, y, lengths);
  });
}

void takeRows(const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0], *index = operands[1];
  int64_t batch = x->shape[0], rows = x->shape[1];
  uint64_t rowBytes = static_cast<uint64_t>(x->shape[2]) * dtypeSize(x->dtype);
  const int64_t *pi = in<int64_t>(index);
  for (int64_t b = 0; b < batch; ++b)
    if (pi[b] < 0 || pi[b] >= rows)
      throw makeError("index ", pi[b], " (element ", b, " of the indices ",
                      formatShape(index->shape), ") is out of range for the ", rows, " rows of x ",
                      formatShape(x->shape));
  if (rowBytes == 0)
    return;
  for (int64_t b = 0; b < batch; ++b)
    std::memcpy(y->data + static_cast<uint64_t>(b) * rowBytes,
                x->data + static_cast<uint64_t>(b * rows + pi[b]) * rowBytes, rowBytes);
}

} // namespace slrt::cpu
