// The fused transformer kernels: scaled dot-product attention and rotary position embedding.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"

namespace slrt::cpu {

// One query row at a time: its T scores, their softmax and the weighted sum of V rows. A thread
// holds one [T] score row and one [Dv] accumulator, never an [S, T] block, and rows are
// independent, so they split across threads without changing any result.
//
// Query s may attend key t iff t <= s + T - S (when causal) and the mask does not make the score
// -inf. A row with no such key (S > T under the causal rule, or a mask of -inf) is zeros.
void attention(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *q = operands[0], *k = operands[1], *v = operands[2];
  const TensorRef *mask = operands.size() > 3 ? operands[3] : nullptr;
  int64_t batch = q->shape[0], heads = q->shape[1], s = q->shape[2], d = q->shape[3];
  int64_t kvHeads = k->shape[1], t = k->shape[2], dv = v->shape[3];
  int64_t group = heads / kvHeads;
  float scale = kernel.attention().scale();
  bool causal = kernel.attention().causal();
  std::vector<int64_t> maskStrides =
      mask ? broadcastStrides(mask->shape, {batch, heads, s, t}) : std::vector<int64_t>(4, 0);
  const float *pq = in<float>(q), *pk = in<float>(k), *pv = in<float>(v);
  const float *pm = mask ? in<float>(mask) : nullptr;
  float *py = out<float>(y);
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

  parallelFor(batch * heads * s, t * (d + dv) + dv, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(static_cast<size_t>(t));
    std::vector<double> acc(static_cast<size_t>(dv));
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row % s, bh = row / s, h = bh % heads, b = bh / heads;
      int64_t kvHead = b * kvHeads + h / group;
      const float *qRow = pq + row * d;
      const float *kHead = pk + kvHead * t * d, *vHead = pv + kvHead * t * dv;
      float *yRow = py + row * dv;
      // Keys [0, visible) pass the causal rule; the bound may be <= 0 when S > T.
      int64_t visible = causal ? std::clamp<int64_t>(i + t - s + 1, 0, t) : t;
      const float *mRow =
          pm ? pm + b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] : nullptr;

      float max = kMinusInf;
      for (int64_t j = 0; j < visible; ++j) {
        const float *kRow = kHead + j * d;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < d; ++c)
          dot += qRow[c] * kRow[c];
        float score = dot * scale + (mRow ? mRow[j * maskStrides[3]] : 0.0f);
        scores[static_cast<size_t>(j)] = score;
        max = std::max(max, score);
      }
      if (max == kMinusInf) {
        // Nothing to attend to: zeros, unless a score is NaN, which propagates.
        float fill = 0.0f;
        for (int64_t j = 0; j < visible; ++j)
          if (std::isnan(scores[static_cast<size_t>(j)]))
            fill = scores[static_cast<size_t>(j)];
        std::fill(yRow, yRow + dv, fill);
        continue;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      double sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        float p = std::exp(scores[static_cast<size_t>(j)] - max);
        if (p == 0.0f)
          continue;
        sum += p;
        const float *vRow = vHead + j * dv;
        for (int64_t c = 0; c < dv; ++c)
          acc[static_cast<size_t>(c)] += double(p) * vRow[c];
      }
      for (int64_t c = 0; c < dv; ++c)
        yRow[c] = static_cast<float>(acc[static_cast<size_t>(c)] / sum);
    }
  });
}

// result = x * cos + rotate(x) * sin. Each pair (j, partner(j)) is read whole before either slot
// is written, so the kernel runs exactly in place.
void rotary(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
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
  const float *px = in<float>(x), *pc = in<float>(cosRef), *ps = in<float>(sinRef);
  float *py = out<float>(y);
  bool interleaved = kernel.rotary().interleaved();
  parallelForEachElement<2>(rowShape, {cosStrides, sinStrides}, 3 * dim,
                            [&](int64_t row, const std::array<int64_t, 2> &at) {
                              const float *xr = px + row * dim, *cr = pc + at[0], *sr = ps + at[1];
                              float *yr = py + row * dim;
                              for (int64_t j = 0; j < half; ++j) {
                                // rotate(x) is (-x[second], x[first]) on each pair: (2j, 2j+1)
                                // interleaved, (j, j+D/2) for rotate-half.
                                int64_t first = interleaved ? 2 * j : j,
                                        second = interleaved ? 2 * j + 1 : j + half;
                                float a = xr[first], b = xr[second];
                                float c0 = cr[first * cosStep], c1 = cr[second * cosStep];
                                float s0 = sr[first * sinStep], s1 = sr[second * sinStep];
                                yr[first] = a * c0 - b * s0;
                                yr[second] = b * c1 + a * s1;
                              }
                            });
}

} // namespace slrt::cpu
