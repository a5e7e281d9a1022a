// The fused transformer kernels: scaled dot-product attention and rotary position embedding.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"

namespace slrt::cpu {
namespace {

// One query row at a time: its T scores, their softmax and the weighted sum of V rows. A thread
// holds one [T] score row and one [Dv] accumulator, never an [S, T] block, and rows are
// independent, so they split across threads without changing any result.
//
// Query s may attend key t iff t <= s + T - S (when causal) and the mask does not make the score
// -inf. A row with no such key (S > T under the causal rule, or a mask of -inf) is zeros. ALiBi
// adds slopes[h] * (t - (s + T - S)) to the score.
template <typename T>
void attentionAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *q = operands[0], *k = operands[1], *v = operands[2];
  const bool alibi = kernel.attention().alibi();
  const TensorRef *slopes = alibi ? operands.back() : nullptr;
  const TensorRef *mask = operands.size() > (alibi ? 4u : 3u) ? operands[3] : nullptr;
  const HeadStrides at(kernel);
  int64_t batch = q->shape[0], heads = at.heads(q), s = at.seq(q), d = q->shape[3];
  int64_t kvHeads = at.heads(k), t = at.seq(k), dv = v->shape[3];
  int64_t group = heads / kvHeads;
  T scale = kernel.attention().scale();
  bool causal = kernel.attention().causal();
  std::vector<int64_t> maskStrides =
      mask ? broadcastStrides(mask->shape, {batch, heads, s, t}) : std::vector<int64_t>(4, 0);
  const T *pq = in<T>(q), *pk = in<T>(k), *pv = in<T>(v);
  const T *pm = mask ? in<T>(mask) : nullptr;
  const T *ps = slopes ? in<T>(slopes) : nullptr;
  T *py = out<T>(y);
  constexpr T kMinusInf = -std::numeric_limits<T>::infinity();

  parallelFor(batch * heads * s, t * (d + dv) + dv, [&](int64_t begin, int64_t end) {
    std::vector<T> scores(static_cast<size_t>(t));
    std::vector<double> acc(static_cast<size_t>(dv));
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row % s, bh = row / s, h = bh % heads, b = bh / heads;
      const T *qRow = pq + at.row(b, h, i, heads, s, d);
      // Row j of the key/value head is j * kStep (vStep) past its row 0.
      const T *kHead = pk + at.row(b, h / group, 0, kvHeads, t, d);
      const T *vHead = pv + at.row(b, h / group, 0, kvHeads, t, dv);
      const int64_t kStep = at.rowStride(kvHeads, d), vStep = at.rowStride(kvHeads, dv);
      T *yRow = py + at.row(b, h, i, heads, s, dv);
      // Keys [0, visible) pass the causal rule; the bound may be <= 0 when S > T.
      int64_t visible = causal ? std::clamp<int64_t>(i + t - s + 1, 0, t) : t;
      const T *mRow =
          pm ? pm + b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] : nullptr;
      const T slope = ps ? ps[h] : T(0);
      const int64_t position = i + t - s; // the query's own key position

      T max = kMinusInf;
      for (int64_t j = 0; j < visible; ++j) {
        const T *kRow = kHead + j * kStep;
        T dot = T(0);
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < d; ++c)
          dot += qRow[c] * kRow[c];
        T score = dot * scale + (mRow ? mRow[j * maskStrides[3]] : T(0));
        if (ps)
          score += slope * static_cast<T>(j - position);
        scores[static_cast<size_t>(j)] = score;
        max = std::max(max, score);
      }
      if (max == kMinusInf) {
        // Nothing to attend to: zeros, unless a score is NaN, which propagates.
        T fill = T(0);
        for (int64_t j = 0; j < visible; ++j)
          if (std::isnan(scores[static_cast<size_t>(j)]))
            fill = scores[static_cast<size_t>(j)];
        std::fill(yRow, yRow + dv, fill);
        continue;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        T p = std::exp(scores[static_cast<size_t>(j)] - max);
        if (p == T(0))
          continue;
        sum += p;
        const T *vRow = vHead + j * vStep;
        for (int64_t c = 0; c < dv; ++c)
          acc[static_cast<size_t>(c)] += double(p) * vRow[c];
      }
      for (int64_t c = 0; c < dv; ++c)
        yRow[c] = static_cast<T>(acc[static_cast<size_t>(c)] / sum);
    }
  });
}

// result = x * cos + rotate(x) * sin. Each pair (j, partner(j)) is read whole before either slot
// is written, so the kernel runs exactly in place.
template <typename T>
void rotaryAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0], *cosRef = operands[1], *sinRef = operands[2];
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
  T *py = out<T>(y);
  bool interleaved = kernel.rotary().interleaved();
  parallelForEachElement<2>(rowShape, {cosStrides, sinStrides}, 3 * dim,
                            [&](int64_t row, const std::array<int64_t, 2> &at) {
                              const T *xr = px + row * dim, *cr = pc + at[0], *sr = ps + at[1];
                              T *yr = py + row * dim;
                              for (int64_t j = 0; j < half; ++j) {
                                // rotate(x) is (-x[second], x[first]) on each pair: (2j, 2j+1)
                                // interleaved, (j, j+D/2) for rotate-half.
                                int64_t first = interleaved ? 2 * j : j,
                                        second = interleaved ? 2 * j + 1 : j + half;
                                T a = xr[first], b = xr[second];
                                T c0 = cr[first * cosStep], c1 = cr[second * cosStep];
                                T s0 = sr[first * sinStep], s1 = sr[second * sinStep];
                                yr[first] = a * c0 - b * s0;
                                yr[second] = b * c1 + a * s1;
                              }
                            });
}

} // namespace

void attention(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { attentionAs<decltype(type)>(kernel, operands, y); });
}

void rotary(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { rotaryAs<decltype(type)>(kernel, operands, y); });
}

} // namespace slrt::cpu
