// Attention (forward, backward, one-token decoding) and rotary position embedding.
//
// Attention never holds an [S, T] block: a thread block takes one query row (one key row for the
// key/value gradients), finds the row's softmax maximum in a first pass over the keys, then streams
// the keys in tiles of one score per thread, the probabilities of a tile shared for the weighted
// sum over the value columns. Scores are computed in the buffers' precision (fp32 for bf16 buffers,
// whose elements are widened as they are read: load() and store(), cuda_device.cuh) and sums in
// double, as the CPU backend does; accumulation runs in key order, so results do not depend on the
// launch.
#include "backends/cuda/cuda_device.cuh"
#include "backends/cuda/cudnn_attention.h"

namespace slrt::cuda {
namespace {

constexpr int kAttentionThreads = 128;

struct AttentionShape {
  int64_t batch, heads, s, d, kvHeads, t, dv;
  // attention.layout BSHD: q, k, v, dy, the result and the gradients are [B, S, H, W], else
  // [B, H, S, W]. Rows are W contiguous elements either way; only where they start differs.
  bool bshd;
  __host__ __device__ int64_t group() const { return heads / kvHeads; }
  // The offset of row (b, h, i) of a tensor with `hs` heads of `rows` rows `width` wide.
  __host__ __device__ int64_t at(int64_t b, int64_t h, int64_t i, int64_t hs, int64_t rows,
                                 int64_t width) const {
    return bshd ? ((b * rows + i) * hs + h) * width : ((b * hs + h) * rows + i) * width;
  }
  // Elements between rows i and i + 1 of one head.
  __host__ __device__ int64_t step(int64_t hs, int64_t width) const {
    return bshd ? hs * width : width;
  }
};

// Strides of the optional mask broadcast to the scores [B, Hq, S, T].
struct MaskStrides {
  int64_t b = 0, h = 0, s = 0, t = 0;
};

// In the compute type of b's storage; a is either storage or a row already widened.
template <typename A, typename B>
__device__ __forceinline__ Compute<B> dot(const A *a, const B *b, int64_t n) {
  Compute<B> sum = 0;
  for (int64_t c = 0; c < n; ++c)
    sum += load(a[c]) * load(b[c]);
  return sum;
}

// Keys [0, visible) of query row i pass the causal rule; the bound may be 0 when S > T.
__device__ __forceinline__ int64_t visibleKeys(bool causal, int64_t i, int64_t s, int64_t t) {
  if (!causal)
    return t;
  return max(int64_t{0}, min(t, i + t - s + 1));
}

// Shared memory: a double array of `doubles`, then T (compute type) arrays.
template <typename T> size_t sharedBytes(int64_t doubles, int64_t ts) {
  return static_cast<size_t>(doubles) * sizeof(double) + static_cast<size_t>(ts) * sizeof(T);
}

// What query row `row` of [B, Hq, S] reads, for the forward kernel and the query gradient: its
// key/value head (grouped-query), its mask row, its ALiBi slope, its own key position and how many
// keys it may see.
template <typename S> struct QueryRow {
  int64_t b, h, i;
  const S *kHead, *vHead;
  int64_t kStep, vStep;
  int64_t visible;
  const S *mask; // the mask's row, or null
  Compute<S> slope;
  int64_t position;

  __device__ QueryRow(int64_t row, const S *k, const S *v, const S *maskBase, const S *slopes,
                      const AttentionShape &sh, const MaskStrides &ms, bool causal)
      : b(row / sh.s / sh.heads), h(row / sh.s % sh.heads), i(row % sh.s),
        kHead(k + sh.at(b, h / sh.group(), 0, sh.kvHeads, sh.t, sh.d)),
        vHead(v + sh.at(b, h / sh.group(), 0, sh.kvHeads, sh.t, sh.dv)),
        kStep(sh.step(sh.kvHeads, sh.d)), vStep(sh.step(sh.kvHeads, sh.dv)),
        visible(visibleKeys(causal, i, sh.s, sh.t)),
        mask(maskBase ? maskBase + b * ms.b + h * ms.h + i * ms.s : nullptr),
        slope(slopes ? load(slopes[h]) : Compute<S>(0)), position(i + sh.t - sh.s) {}

  // The offset of this row in a [B, Hq, S, width] tensor (q, dy, the result, dq).
  __device__ int64_t at(const AttentionShape &sh, int64_t width) const {
    return sh.at(b, h, i, sh.heads, sh.s, width);
  }
  // The score of key j, given the row of q already widened into `qs`.
  __device__ Compute<S> score(const Compute<S> *qs, int64_t j, const AttentionShape &sh,
                              const MaskStrides &ms, Compute<S> scale, bool alibi) const {
    Compute<S> x = dot(qs, kHead + j * kStep, sh.d) * scale;
    x += mask ? load(mask[j * ms.t]) : Compute<S>(0);
    return alibi ? x + slope * static_cast<Compute<S>>(j - position) : x;
  }
};

// --- ATTENTION ----------------------------------------------------------------------------------

// softmax(q k^T * scale + mask + alibi) v per query row; a row that may see no key is zeros (NaN
// when a score is NaN).
template <typename S>
__global__ void attentionKernel(const S *q, const S *k, const S *v, const S *mask, const S *slopes,
                                S *y, AttentionShape sh, MaskStrides ms, Compute<S> scale,
                                bool causal) {
  using T = Compute<S>;
  extern __shared__ double shared[];
  double *acc = shared;                       // [dv]
  T *qs = reinterpret_cast<T *>(acc + sh.dv); // [d]
  T *tile = qs + sh.d;                        // [blockDim]
  __shared__ double total;
  const int64_t rows = sh.batch * sh.heads * sh.s;
  const int tid = threadIdx.x, threads = blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const QueryRow<S> r(row, k, v, mask, slopes, sh, ms, causal);
    const S *vHead = r.vHead;
    const int64_t vStep = r.vStep, visible = r.visible;
    const S *qRow = q + r.at(sh, sh.d);
    S *yRow = y + r.at(sh, sh.dv);
    __syncthreads(); // the previous row is done with shared memory
    for (int64_t c = tid; c < sh.d; c += threads)
      qs[c] = load(qRow[c]);
    __syncthreads();
    auto score = [&](int64_t j) { return r.score(qs, j, sh, ms, scale, slopes != nullptr); };

    T rowMax = -dm::infinity<T>();
    for (int64_t j = tid; j < visible; j += threads)
      rowMax = maxIgnoringNan(rowMax, score(j));
    rowMax = blockMax(rowMax);
    if (rowMax == -dm::infinity<T>()) {
      int nan = 0;
      for (int64_t j = tid; j < visible; j += threads)
        nan |= dm::isnan(score(j)) ? 1 : 0;
      T fill = blockSum(nan) != 0 ? dm::quietNan<T>() : T(0);
      for (int64_t c = tid; c < sh.dv; c += threads)
        yRow[c] = store<S>(fill);
      continue;
    }
    for (int64_t c = tid; c < sh.dv; c += threads)
      acc[c] = 0;
    double sum = 0; // thread 0's: the denominator, summed in key order
    for (int64_t j0 = 0; j0 < visible; j0 += threads) {
      int64_t j = j0 + tid;
      tile[tid] = j < visible ? dm::exp(score(j) - rowMax) : T(0);
      __syncthreads();
      int64_t count = min(static_cast<int64_t>(threads), visible - j0);
      if (tid == 0)
        for (int64_t jj = 0; jj < count; ++jj)
          if (tile[jj] != T(0))
            sum += tile[jj];
      for (int64_t c = tid; c < sh.dv; c += threads) {
        double a = acc[c];
        for (int64_t jj = 0; jj < count; ++jj) {
          T p = tile[jj];
          if (p != T(0))
            a += static_cast<double>(p) * load(vHead[(j0 + jj) * vStep + c]);
        }
        acc[c] = a;
      }
      __syncthreads();
    }
    if (tid == 0)
      total = sum;
    __syncthreads();
    for (int64_t c = tid; c < sh.dv; c += threads)
      yRow[c] = store<S>(acc[c] / total);
  }
}

// --- ATTENTION_GRAD -----------------------------------------------------------------------------
// With p = softmax(scores) per query row, dp_j = dy . v_j, delta = sum_j p_j dp_j and
// ds_j = p_j (dp_j - delta) scale:
//   dq = sum_j ds_j k_j,  dk_j = sum_i ds_ij q_i,  dv_j = sum_i p_ij dy_i,
// dk and dv summing over every query row (of every query head of the group) that sees key j. The
// first kernel takes query rows: it finds each row's max, 1 / sum and delta (kept for the second)
// and writes dq. The second takes key rows and recomputes p_ij and ds_ij from the kept statistics.
// p and ds are rounded as the CPU backend's blocked GEMMs round them.

struct RowStats {
  void *max, *inverse, *delta; // compute-type arrays [B * Hq * S]
};

template <typename S>
__global__ void attentionGradQuery(const S *q, const S *k, const S *v, const S *dy, const S *mask,
                                   const S *slopes, S *dq, RowStats stats, AttentionShape sh,
                                   MaskStrides ms, Compute<S> scale, bool causal) {
  using T = Compute<S>;
  extern __shared__ double shared[];
  double *acc = shared;                      // [d]
  T *qs = reinterpret_cast<T *>(acc + sh.d); // [d]
  T *dys = qs + sh.d;                        // [dv]
  T *tile = dys + sh.dv;                     // [blockDim]
  T *rowMaxOut = static_cast<T *>(stats.max), *inverseOut = static_cast<T *>(stats.inverse);
  T *deltaOut = static_cast<T *>(stats.delta);
  const int64_t rows = sh.batch * sh.heads * sh.s;
  const int tid = threadIdx.x, threads = blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const QueryRow<S> r(row, k, v, mask, slopes, sh, ms, causal);
    const S *kHead = r.kHead, *vHead = r.vHead;
    const int64_t kStep = r.kStep, vStep = r.vStep, visible = r.visible;
    const S *qRow = q + r.at(sh, sh.d);
    const S *dyRow = dy + r.at(sh, sh.dv);
    S *dqRow = dq + r.at(sh, sh.d);
    __syncthreads();
    for (int64_t c = tid; c < sh.d; c += threads)
      qs[c] = load(qRow[c]);
    for (int64_t c = tid; c < sh.dv; c += threads)
      dys[c] = load(dyRow[c]);
    __syncthreads();
    auto score = [&](int64_t j) { return r.score(qs, j, sh, ms, scale, slopes != nullptr); };

    T rowMax = -dm::infinity<T>();
    for (int64_t j = tid; j < visible; j += threads)
      rowMax = maxIgnoringNan(rowMax, score(j));
    rowMax = blockMax(rowMax);
    if (rowMax == -dm::infinity<T>()) {
      // Sees no key: no gradient, and nothing for the key rows.
      for (int64_t c = tid; c < sh.d; c += threads)
        dqRow[c] = store<S>(T(0));
      if (tid == 0) {
        rowMaxOut[row] = rowMax;
        inverseOut[row] = T(0);
        deltaOut[row] = T(0);
      }
      continue;
    }
    double sum = 0;
    for (int64_t j = tid; j < visible; j += threads)
      sum += dm::exp(score(j) - rowMax);
    T inverse = static_cast<T>(1.0 / blockSum(sum));
    auto probability = [&](int64_t j) { return dm::exp(score(j) - rowMax) * inverse; };
    double deltaSum = 0;
    for (int64_t j = tid; j < visible; j += threads)
      deltaSum += static_cast<double>(probability(j)) * dot(dys, vHead + j * vStep, sh.dv);
    T delta = static_cast<T>(blockSum(deltaSum));

    for (int64_t c = tid; c < sh.d; c += threads)
      acc[c] = 0;
    for (int64_t j0 = 0; j0 < visible; j0 += threads) {
      int64_t j = j0 + tid;
      T ds = T(0);
      if (j < visible)
        ds = probability(j) * (dot(dys, vHead + j * vStep, sh.dv) - delta) * scale;
      tile[tid] = ds;
      __syncthreads();
      int64_t count = min(static_cast<int64_t>(threads), visible - j0);
      for (int64_t c = tid; c < sh.d; c += threads) {
        double a = acc[c];
        for (int64_t jj = 0; jj < count; ++jj)
          a += static_cast<double>(tile[jj]) * load(kHead[(j0 + jj) * kStep + c]);
        acc[c] = a;
      }
      __syncthreads();
    }
    for (int64_t c = tid; c < sh.d; c += threads)
      dqRow[c] = store<S>(acc[c]);
    if (tid == 0) {
      rowMaxOut[row] = rowMax;
      inverseOut[row] = inverse;
      deltaOut[row] = delta;
    }
  }
}

template <typename S>
__global__ void attentionGradKey(const S *q, const S *k, const S *v, const S *dy, const S *mask,
                                 const S *slopes, S *dk, S *dv, RowStats stats, AttentionShape sh,
                                 MaskStrides ms, Compute<S> scale, bool causal) {
  using T = Compute<S>;
  extern __shared__ double shared[];
  double *accK = shared;                       // [d]
  double *accV = accK + sh.d;                  // [dv]
  T *ks = reinterpret_cast<T *>(accV + sh.dv); // [d]
  T *vs = ks + sh.d;                           // [dv]
  T *pTile = vs + sh.dv;                       // [blockDim]
  T *dsTile = pTile + blockDim.x;              // [blockDim]
  const T *rowMax = static_cast<const T *>(stats.max);
  const T *inverse = static_cast<const T *>(stats.inverse);
  const T *delta = static_cast<const T *>(stats.delta);
  const int64_t keyRows = sh.batch * sh.kvHeads * sh.t;
  const int tid = threadIdx.x, threads = blockDim.x;
  for (int64_t keyRow = blockIdx.x; keyRow < keyRows; keyRow += gridDim.x) {
    int64_t j = keyRow % sh.t, item = keyRow / sh.t;
    int64_t kvHead = item % sh.kvHeads, b = item / sh.kvHeads;
    const int64_t kAt = sh.at(b, kvHead, j, sh.kvHeads, sh.t, sh.d);
    const int64_t vAt = sh.at(b, kvHead, j, sh.kvHeads, sh.t, sh.dv);
    const int64_t qStep = sh.step(sh.heads, sh.d), dyStep = sh.step(sh.heads, sh.dv);
    __syncthreads();
    for (int64_t c = tid; c < sh.d; c += threads) {
      ks[c] = load(k[kAt + c]);
      accK[c] = 0;
    }
    for (int64_t c = tid; c < sh.dv; c += threads) {
      vs[c] = load(v[vAt + c]);
      accV[c] = 0;
    }
    __syncthreads();
    // Query rows i see key j when j < visibleKeys(i): i >= j + S - T under the causal rule.
    int64_t first = causal ? max(int64_t{0}, j + sh.s - sh.t) : 0;
    for (int64_t h = kvHead * sh.group(); h < (kvHead + 1) * sh.group(); ++h) {
      int64_t bh = b * sh.heads + h; // the statistics' row is bh * S + i in either layout
      const S *qHead = q + sh.at(b, h, 0, sh.heads, sh.s, sh.d);
      const S *dyHead = dy + sh.at(b, h, 0, sh.heads, sh.s, sh.dv);
      const S *mRows = mask ? mask + b * ms.b + h * ms.h + j * ms.t : nullptr;
      const T slope = slopes ? load(slopes[h]) : T(0);
      for (int64_t i0 = first; i0 < sh.s; i0 += threads) {
        int64_t i = i0 + tid, row = bh * sh.s + i;
        T p = T(0), ds = T(0);
        if (i < sh.s && rowMax[row] != -dm::infinity<T>()) {
          T score = scale * dot(qHead + i * qStep, ks, sh.d) + (mRows ? load(mRows[i * ms.s]) : T(0));
          if (slopes)
            score += slope * static_cast<T>(j - (i + sh.t - sh.s));
          p = dm::exp(score - rowMax[row]) * inverse[row];
          ds = p * (dot(dyHead + i * dyStep, vs, sh.dv) - delta[row]) * scale;
        }
        pTile[tid] = p;
        dsTile[tid] = ds;
        __syncthreads();
        int64_t count = min(static_cast<int64_t>(threads), sh.s - i0);
        const S *qRows = qHead + i0 * qStep, *dyRows = dyHead + i0 * dyStep;
        for (int64_t c = tid; c < sh.d; c += threads) {
          double a = accK[c];
          for (int64_t ii = 0; ii < count; ++ii)
            a += static_cast<double>(dsTile[ii]) * load(qRows[ii * qStep + c]);
          accK[c] = a;
        }
        for (int64_t c = tid; c < sh.dv; c += threads) {
          double a = accV[c];
          for (int64_t ii = 0; ii < count; ++ii)
            a += static_cast<double>(pTile[ii]) * load(dyRows[ii * dyStep + c]);
          accV[c] = a;
        }
        __syncthreads();
      }
    }
    for (int64_t c = tid; c < sh.d; c += threads)
      dk[kAt + c] = store<S>(accK[c]);
    for (int64_t c = tid; c < sh.dv; c += threads)
      dv[vAt + c] = store<S>(accV[c]);
  }
}

// --- DECODE_ATTENTION ---------------------------------------------------------------------------

__global__ void findBadLength(const int64_t *length, int64_t batch, int64_t capacity,
                              unsigned long long *firstBad) {
  SLRT_GRID_LOOP(b, batch) {
    if (length[b] < 0 || length[b] > capacity)
      atomicMin(firstBad, static_cast<unsigned long long>(b));
  }
}

// One block per (sequence, query head): the cached keys [0, length) then the token's own, their
// softmax (maximum first) and the weighted sum of the values, as the CPU backend; ALiBi adds
// slopes[h] * (j - length), the token being at position length.
template <typename S>
__global__ void decodeAttentionKernel(const S *q, const S *k, const S *v, const S *cache,
                                      const int64_t *length, const S *slopes, S *y, int64_t batch,
                                      int64_t heads, int64_t kvHeads, int64_t capacity, int64_t d,
                                      Compute<S> scale) {
  using T = Compute<S>;
  extern __shared__ double shared[];
  double *acc = shared;                   // [d]
  T *qs = reinterpret_cast<T *>(acc + d); // [d]
  T *tile = qs + d;                       // [blockDim]
  __shared__ double total;
  const int tid = threadIdx.x, threads = blockDim.x;
  int64_t group = heads / kvHeads;
  for (int64_t bh = blockIdx.x; bh < batch * heads; bh += gridDim.x) {
    int64_t b = bh / heads, h = bh % heads, kvHead = h / group;
    int64_t cached = length[b];
    // cache [B, 2, Hkv, C, D]: keys at (b, 0, kvHead), values at (b, 1, kvHead).
    const S *keys = cache + ((b * 2 + 0) * kvHeads + kvHead) * capacity * d;
    const S *values = cache + ((b * 2 + 1) * kvHeads + kvHead) * capacity * d;
    const S *newKey = k + (b * kvHeads + kvHead) * d, *newValue = v + (b * kvHeads + kvHead) * d;
    auto keyRow = [&](int64_t j) { return j < cached ? keys + j * d : newKey; };
    auto valueRow = [&](int64_t j) { return j < cached ? values + j * d : newValue; };
    __syncthreads();
    for (int64_t c = tid; c < d; c += threads) {
      qs[c] = load(q[bh * d + c]);
      acc[c] = 0;
    }
    __syncthreads();
    const T slope = slopes ? load(slopes[h]) : T(0);
    auto score = [&](int64_t j) {
      T x = dot(qs, keyRow(j), d) * scale;
      return slopes ? x + slope * static_cast<T>(j - cached) : x;
    };
    T rowMax = -dm::infinity<T>();
    for (int64_t j = tid; j <= cached; j += threads)
      rowMax = maxIgnoringNan(rowMax, score(j));
    rowMax = blockMax(rowMax);
    double sum = 0;
    for (int64_t j0 = 0; j0 <= cached; j0 += threads) {
      int64_t j = j0 + tid;
      tile[tid] = j <= cached ? dm::exp(score(j) - rowMax) : T(0);
      __syncthreads();
      int64_t count = min(static_cast<int64_t>(threads), cached + 1 - j0);
      if (tid == 0)
        for (int64_t jj = 0; jj < count; ++jj)
          sum += tile[jj];
      for (int64_t c = tid; c < d; c += threads) {
        double a = acc[c];
        for (int64_t jj = 0; jj < count; ++jj)
          a += static_cast<double>(tile[jj]) * load(valueRow(j0 + jj)[c]);
        acc[c] = a;
      }
      __syncthreads();
    }
    if (tid == 0)
      total = sum;
    __syncthreads();
    for (int64_t c = tid; c < d; c += threads)
      y[bh * d + c] = store<S>(acc[c] / total);
  }
}

// --- ROTARY, ROTARY_GRAD ------------------------------------------------------------------------

// Each pair (first, second) of a row: rotate(x) is (-x[second], x[first]) on it, with the pairs
// (2j, 2j+1) interleaved and (j, j + D/2) for rotate-half. The forward maps (a, b) to
// (a c0 - b s0, b c1 + a s1); its transpose (the gradient) maps (a, b) to (a c0 + b s1,
// b c1 - a s0). A pair is read whole before either slot is written: exactly in place is safe.
template <typename S>
__global__ void rotaryKernel(const S *x, const S *cos, const S *sin, S *y, int64_t pairs,
                             int64_t half, int64_t dim, Strided<2> rows, int64_t cosStep,
                             int64_t sinStep, bool interleaved, bool transpose) {
  using T = Compute<S>;
  SLRT_GRID_LOOP(i, pairs) {
    int64_t row = i / half, j = i % half;
    int64_t at[2];
    rows.at(row, at);
    const S *xr = x + row * dim, *cr = cos + at[0], *sr = sin + at[1];
    S *yr = y + row * dim;
    int64_t first = interleaved ? 2 * j : j, second = interleaved ? 2 * j + 1 : j + half;
    T a = load(xr[first]), b = load(xr[second]);
    T c0 = load(cr[first * cosStep]), c1 = load(cr[second * cosStep]);
    T s0 = load(sr[first * sinStep]), s1 = load(sr[second * sinStep]);
    if (transpose) {
      yr[first] = store<S>(a * c0 + b * s1);
      yr[second] = store<S>(b * c1 - a * s0);
    } else {
      yr[first] = store<S>(a * c0 - b * s0);
      yr[second] = store<S>(b * c1 + a * s1);
    }
  }
}

AttentionShape attentionShape(const Tensor &q, const Tensor &k, const Tensor &v, bool bshd) {
  const int heads = bshd ? 2 : 1, seq = bshd ? 1 : 2;
  return {q.shape[0], q.shape[heads], q.shape[seq],  q.shape[3],
          k.shape[heads], k.shape[seq], v.shape[3], bshd};
}

MaskStrides maskStrides(const Tensor *mask, const AttentionShape &sh) {
  if (!mask)
    return {};
  std::vector<int64_t> s = broadcastStrides(mask->shape, {sh.batch, sh.heads, sh.s, sh.t});
  return {s[0], s[1], s[2], s[3]};
}

} // namespace

void attention(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
               const Tensor &k, const Tensor &v, const Tensor *mask, const Tensor *slopes,
               const Tensor &y) {
  if (cudnnAttention(ctx, causal, scale, bshd, q, k, v, mask, slopes, y))
    return;
  AttentionShape sh = attentionShape(q, k, v, bshd);
  MaskStrides ms = maskStrides(mask, sh);
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    size_t bytes = sharedBytes<Compute<T>>(sh.dv, sh.d + kAttentionThreads);
    checkSharedBytes(bytes, "attention");
    launch(ctx, "attention", attentionKernel<T>, blocksForRows(sh.batch * sh.heads * sh.s),
           kAttentionThreads, bytes, q.as<T>(), k.as<T>(), v.as<T>(),
           mask ? mask->as<T>() : static_cast<T *>(nullptr),
           slopes ? slopes->as<T>() : static_cast<T *>(nullptr), y.as<T>(), sh, ms,
           static_cast<Compute<T>>(scale), causal);
  });
}

void attentionGrad(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
                   const Tensor &k, const Tensor &v, const Tensor &dy, const Tensor *mask,
                   const Tensor *slopes, const Tensor &dq, const Tensor &dk, const Tensor &dv) {
  if (cudnnAttentionGrad(ctx, causal, scale, bshd, q, k, v, dy, mask, slopes, dq, dk, dv))
    return;
  AttentionShape sh = attentionShape(q, k, v, bshd);
  MaskStrides ms = maskStrides(mask, sh);
  int64_t queryRows = sh.batch * sh.heads * sh.s;
  withFloatType(dq.element, [&](auto type) {
    using T = decltype(type);
    using C = Compute<T>;
    ScratchLayout layout;
    size_t maxAt = layout.add<C>(queryRows), inverseAt = layout.add<C>(queryRows),
           deltaAt = layout.add<C>(queryRows);
    std::byte *base = ctx.scratch(layout.bytes());
    RowStats stats{base + maxAt, base + inverseAt, base + deltaAt};
    const T *maskData = mask ? mask->as<T>() : nullptr;
    const T *slopeData = slopes ? slopes->as<T>() : nullptr;
    size_t queryBytes = sharedBytes<C>(sh.d, sh.d + sh.dv + kAttentionThreads);
    size_t keyBytes = sharedBytes<C>(sh.d + sh.dv, sh.d + sh.dv + 2 * kAttentionThreads);
    checkSharedBytes(std::max(queryBytes, keyBytes), "attention gradient");
    launch(ctx, "attentionGrad (query rows)", attentionGradQuery<T>, blocksForRows(queryRows),
           kAttentionThreads, queryBytes, q.as<T>(), k.as<T>(), v.as<T>(), dy.as<T>(), maskData,
           slopeData, dq.as<T>(), stats, sh, ms, static_cast<C>(scale), causal);
    launch(ctx, "attentionGrad (key rows)", attentionGradKey<T>,
           blocksForRows(sh.batch * sh.kvHeads * sh.t), kAttentionThreads, keyBytes, q.as<T>(),
           k.as<T>(), v.as<T>(), dy.as<T>(), maskData, slopeData, dk.as<T>(), dv.as<T>(), stats,
           sh, ms, static_cast<C>(scale), causal);
  });
}

void decodeAttention(Context &ctx, float scale, const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor &cache, const Tensor &length, const Tensor *slopes,
                     const Tensor &y) {
  int64_t batch = q.shape[0], heads = q.shape[1], d = q.shape[3], kvHeads = k.shape[1];
  int64_t capacity = cache.shape[3];
  ctx.resetCheck();
  launch(ctx, "findBadLength", findBadLength, blocksFor(batch), kThreads, 0, length.as<int64_t>(),
         batch, capacity, ctx.checkWords());
  Context::Check check = ctx.readCheck();
  if (check.failed()) {
    int64_t bad = 0;
    ctx.readBack(&bad, length.as<int64_t>() + check.firstBad, sizeof bad);
    throw makeError("length ", bad, " (element ", check.firstBad, " of the lengths ",
                    formatShape(length.shape), ") is out of range for the cache ",
                    formatShape(cache.shape), " of ", capacity, " positions");
  }
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    size_t bytes = sharedBytes<Compute<T>>(d, d + kAttentionThreads);
    checkSharedBytes(bytes, "decode attention");
    launch(ctx, "decodeAttention", decodeAttentionKernel<T>, blocksForRows(batch * heads),
           kAttentionThreads, bytes, q.as<T>(), k.as<T>(), v.as<T>(), cache.as<T>(),
           length.as<int64_t>(), slopes ? slopes->as<T>() : static_cast<T *>(nullptr), y.as<T>(),
           batch, heads, kvHeads, capacity, d, static_cast<Compute<T>>(scale));
  });
}

void rotary(Context &ctx, bool interleaved, bool transpose, const Tensor &x, const Tensor &cos,
            const Tensor &sin, const Tensor &y) {
  int64_t dim = x.shape.back(), half = dim / 2;
  if (dim == 0)
    return;
  // Rows of x are contiguous; cos and sin rows start where their broadcast strides say.
  Dims rowShape(x.shape.begin(), x.shape.end() - 1);
  std::vector<int64_t> cosStrides = broadcastStrides(cos.shape, x.shape);
  std::vector<int64_t> sinStrides = broadcastStrides(sin.shape, x.shape);
  int64_t cosStep = cosStrides.back(), sinStep = sinStrides.back();
  cosStrides.pop_back();
  sinStrides.pop_back();
  Strided<2> rows = makeStrided<2>(rowShape, {cosStrides, sinStrides});
  int64_t pairs = product(rowShape, 0, rowShape.size()) * half;
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "rotary", rotaryKernel<T>, blocksFor(pairs), kThreads, 0, x.as<T>(), cos.as<T>(),
           sin.as<T>(), y.as<T>(), pairs, half, dim, rows, cosStep, sinStep, interleaved,
           transpose);
  });
}

} // namespace slrt::cuda
