// What ATTENTION and ATTENTION_GRAD share: the keys a block of query rows may see, and the softmax
// of a block of scores in place. Both kernels compute a [rows, keys] score tile with one GEMM,
// turn it into probabilities here and go on with GEMMs.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vector_math.h"

namespace slrt::cpu {

// Query rows per tile. Fixed, so each row's sums are the same calls whatever the thread count.
inline constexpr int64_t kQueryBlock = 64;

// The additive parts of one head's scores and the causal rule. Query s may attend key t iff
// t <= s + T - S (when causal) and the mask does not make the score -inf. ALiBi adds
// slopes[h] * (t - (s + T - S)) to the score.
template <typename T> struct ScoreTerms {
  int64_t s = 0, t = 0;
  bool causal = false;
  const T *mask = nullptr; // broadcast to [B, H, S, T] by maskStrides
  std::vector<int64_t> maskStrides;
  const T *slopes = nullptr;

  // Keys [0, visible) pass the causal rule for query row i; the bound may be <= 0 when S > T.
  int64_t visible(int64_t i) const { return causal ? std::clamp<int64_t>(i + t - s + 1, 0, t) : t; }
  // The keys any of query rows [i0, i0 + rows) may see: a tile needs no more columns.
  int64_t keysOfBlock(int64_t i0, int64_t rows) const { return visible(i0 + rows - 1); }

  // Rows i0.. of `p` ([rows, keys], leading dimension `keys`) hold head (b, h)'s scaled scores
  // q k^T * scale. Adds the mask and the ALiBi bias and replaces each row by its softmax over the
  // keys it may see, with zeros beyond them. A row whose scores are all -inf (or that sees no
  // key) becomes zeros, or NaN where one of its scores is NaN and `nanFillsEmptyRows` (the
  // forward's rule: a NaN propagates; the gradient of such a row is zero). A NaN score in a
  // row with a finite maximum makes the row NaN, as exp(NaN) does.
  void softmaxRows(T *p, int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t keys,
                   bool nanFillsEmptyRows) const {
    constexpr T kMinusInf = -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      T *row = p + r * keys;
      const int64_t seen = std::min(visible(i), keys);
      const T *mRow =
          mask ? mask + b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] : nullptr;
      const T slope = slopes ? slopes[h] : T(0);
      const int64_t position = i + t - s; // the query's own key position
      T max = kMinusInf;
      for (int64_t j = 0; j < seen; ++j) {
        if (mRow)
          row[j] += mRow[j * maskStrides[3]];
        if (slopes)
          row[j] += slope * static_cast<T>(j - position);
        max = std::max(max, row[j]);
      }
      if (max == kMinusInf) {
        T fill = T(0);
        if (nanFillsEmptyRows)
          for (int64_t j = 0; j < seen; ++j)
            if (std::isnan(row[j]))
              fill = row[j];
        std::fill(row, row + keys, fill);
        continue;
      }
      double sum = 0;
      if constexpr (std::is_same_v<T, float>) {
        sum = vec::expShifted(row, max, row, seen);
      } else {
        for (int64_t j = 0; j < seen; ++j)
          sum += (row[j] = std::exp(row[j] - max));
      }
      const T inv = static_cast<T>(1.0 / sum);
      for (int64_t j = 0; j < seen; ++j)
        row[j] *= inv;
      std::fill(row + seen, row + keys, T(0));
    }
  }
};

// The ScoreTerms of an ATTENTION or ATTENTION_GRAD kernel: operands q, k, v (and dy), then the
// optional mask, then the ALiBi slopes when the kernel says so.
template <typename T>
ScoreTerms<T> scoreTermsOf(const Kernel &kernel, const Operands &operands, size_t fixedOperands) {
  const HeadStrides at(kernel);
  const TensorRef *q = operands[0], *k = operands[1];
  const bool alibi = kernel.attention().alibi();
  const TensorRef *mask =
      operands.size() > fixedOperands + (alibi ? 1u : 0u) ? operands[fixedOperands] : nullptr;
  ScoreTerms<T> terms;
  terms.s = at.seq(q);
  terms.t = at.seq(k);
  terms.causal = kernel.attention().causal();
  if (mask) {
    terms.mask = in<T>(mask);
    terms.maskStrides = broadcastStrides(mask->shape, {q->shape[0], at.heads(q), terms.s, terms.t});
  }
  if (alibi)
    terms.slopes = in<T>(operands.back());
  return terms;
}

} // namespace slrt::cpu
