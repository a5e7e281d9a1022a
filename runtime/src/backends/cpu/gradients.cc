// The backward kernels. Each computes, in fp32 with double accumulators, the transpose of its
// forward's derivative applied to the incoming gradient dy.
//
// Threads split the work over items that own what they write: rows for the row-local ops, columns
// for the parameter gradients of the norms (each sums its rows in row order), data rows for
// GATHER_GRAD (each sums its indices in index order), query rows for dq and key rows for dk and dv
// in ATTENTION_GRAD. Nothing is summed across threads, so results do not depend on the thread
// count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

using namespace sl::schedule;

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d)
    p *= shape[d];
  return p;
}

// Where the norms are a [rows, n] matrix of x: sums `term(r, j)` over the rows for every column j
// into out[j], in row order. Threads take disjoint runs of columns and walk the rows with them, so
// every read stays within a row's contiguous run.
template <typename Term> void sumColumns(int64_t rows, int64_t n, float *out, Term term) {
  parallelFor(n, 2 * rows, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(end - begin), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = begin; j < end; ++j)
        acc[static_cast<size_t>(j - begin)] += term(r, j);
    for (int64_t j = begin; j < end; ++j)
      out[j] = static_cast<float>(acc[static_cast<size_t>(j - begin)]);
  });
}

float dot(const float *a, const float *b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c)
    sum += a[c] * b[c];
  return sum;
}

} // namespace

// dlogits = (softmax(row) - onehot(label)) * dloss / count for each counted row, zeros for ignored
// rows; with every label ignored (a NaN loss) the gradient is all zeros, as PyTorch's.
void crossEntropyGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *labelsRef = operands[0], *logitsRef = operands[2];
  const int64_t vocab = logitsRef->shape.back();
  const int64_t rows = elementCount(labelsRef->shape);
  const int64_t *labels = in<int64_t>(labelsRef);
  const float *logits = in<float>(logitsRef);
  float *dlogits = out<float>(results[0]);
  const int64_t ignore = kernel.cross_entropy().ignore_index();

  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignore)
      continue;
    if (labels[r] < 0 || labels[r] >= vocab)
      throw makeError("label ", labels[r], " at position ", r, " is outside the vocabulary [0, ",
                      vocab, ")");
    ++counted;
  }
  // Read before anything is written: dlogits may be exactly dloss when the logits are one element.
  double factor = counted == 0 ? 0.0 : double(*in<float>(operands[1])) / double(counted);

  parallelFor(rows, 4 * vocab, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *row = logits + r * vocab;
      float *grad = dlogits + r * vocab;
      if (labels[r] == ignore) {
        std::fill(grad, grad + vocab, 0.0f);
        continue;
      }
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t v = 0; v < vocab; ++v)
        max = std::max(max, double(row[v]));
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp(double(row[v]) - max);
      // Each logit is read before its own slot is written, so this runs in place.
      for (int64_t v = 0; v < vocab; ++v) {
        double p = std::exp(double(row[v]) - max) / sum;
        grad[v] = static_cast<float>((p - (v == labels[r] ? 1.0 : 0.0)) * factor);
      }
    }
  });
}

// dx = y * (dy - sum(dy * y)) along the axis. A fully masked row (y all zeros) gets zeros.
void softmaxGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *yRef = operands[0];
  Rows rows = rowsAround(yRef->shape, static_cast<size_t>(kernel.axis().axis()));
  const float *py = in<float>(yRef), *pdy = in<float>(operands[1]);
  float *pdx = out<float>(results[0]);
  int64_t extent = rows.extent, inner = rows.inner;
  parallelFor(rows.outer * inner, 4 * extent, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t start = (row / inner) * extent * inner + row % inner;
      const float *yr = py + start, *dyr = pdy + start;
      float *dxr = pdx + start;
      double sum = 0;
      for (int64_t j = 0; j < extent; ++j)
        sum += double(dyr[j * inner]) * yr[j * inner];
      for (int64_t j = 0; j < extent; ++j)
        dxr[j * inner] = static_cast<float>(yr[j * inner] * (dyr[j * inner] - sum));
    }
  });
}

// y = x * r * g with r = 1 / sqrt(mean(x^2) + epsilon) per row:
//   dx = r * g * dy - x * r^3 / n * sum(dy * g * x),  dscale = sum over rows of dy * x * r.
// dscale is summed before dx is written, so dx may be exactly x or dy.
void rmsNormGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *x = operands[0];
  int64_t n = x->shape.back(), rows = n == 0 ? 0 : elementCount(x->shape) / n;
  const float *px = in<float>(x), *pdy = in<float>(operands[2]);
  // A copy: dx may be exactly scale when there is one row.
  std::vector<float> scale(in<float>(operands[1]), in<float>(operands[1]) + n);
  float *pdx = out<float>(results[0]), *pdscale = out<float>(results[1]);
  double epsilon = kernel.norm().epsilon();

  std::vector<double> rstd(static_cast<size_t>(rows));
  parallelFor(rows, 2 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = px + r * n;
      double squares = 0;
      for (int64_t j = 0; j < n; ++j)
        squares += double(xr[j]) * xr[j];
      rstd[static_cast<size_t>(r)] = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);
    }
  });
  sumColumns(rows, n, pdscale, [&](int64_t r, int64_t j) {
    return double(pdy[r * n + j]) * px[r * n + j] * rstd[static_cast<size_t>(r)];
  });
  parallelFor(rows, 5 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = px + r * n, *dyr = pdy + r * n;
      float *dxr = pdx + r * n;
      double rs = rstd[static_cast<size_t>(r)];
      double projection = 0;
      for (int64_t j = 0; j < n; ++j)
        projection += double(dyr[j]) * scale[static_cast<size_t>(j)] * xr[j];
      double c = rs * rs * rs * projection / static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j)
        dxr[j] = static_cast<float>(rs * scale[static_cast<size_t>(j)] * dyr[j] - xr[j] * c);
    }
  });
}

// y = xhat * g + b with xhat = (x - mean) * rstd over the normalised dimensions; with a = g * dy:
//   dx = rstd * (a - mean(a) - xhat * mean(a * xhat)),
//   dscale = sum over rows of dy * xhat, dbias = sum over rows of dy,
// the parameter gradients of the normalised dimensions' shape (whatever scale broadcast from).
void layerNormGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *x = operands[0];
  size_t axis = static_cast<size_t>(kernel.norm().axis());
  Shape normalized(x->shape.begin() + static_cast<std::ptrdiff_t>(axis), x->shape.end());
  int64_t n = elementCount(normalized), rows = n == 0 ? 0 : elementCount(x->shape) / n;
  std::vector<float> scale = expandTo(operands[1], normalized);
  const float *px = in<float>(x), *pdy = in<float>(operands[2]);
  float *pdx = out<float>(results[0]), *pdscale = out<float>(results[1]);
  float *pdbias = out<float>(results[2]);
  double epsilon = kernel.norm().epsilon();

  std::vector<double> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  parallelFor(rows, 3 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = px + r * n;
      // Two passes, as the forward: no cancellation in E[x^2] - E[x]^2.
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += xr[j];
      double m = sum / static_cast<double>(n);
      double squares = 0;
      for (int64_t j = 0; j < n; ++j)
        squares += (xr[j] - m) * (xr[j] - m);
      mean[static_cast<size_t>(r)] = m;
      rstd[static_cast<size_t>(r)] = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);
    }
  });
  sumColumns(rows, n, pdscale, [&](int64_t r, int64_t j) {
    size_t row = static_cast<size_t>(r);
    return double(pdy[r * n + j]) * ((px[r * n + j] - mean[row]) * rstd[row]);
  });
  sumColumns(rows, n, pdbias, [&](int64_t r, int64_t j) { return double(pdy[r * n + j]); });
  parallelFor(rows, 8 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *xr = px + r * n, *dyr = pdy + r * n;
      float *dxr = pdx + r * n;
      double m = mean[static_cast<size_t>(r)], rs = rstd[static_cast<size_t>(r)];
      double sumA = 0, sumAXhat = 0;
      for (int64_t j = 0; j < n; ++j) {
        double a = double(scale[static_cast<size_t>(j)]) * dyr[j];
        sumA += a;
        sumAXhat += a * (xr[j] - m) * rs;
      }
      double meanA = sumA / static_cast<double>(n), meanAXhat = sumAXhat / static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j) {
        double a = double(scale[static_cast<size_t>(j)]) * dyr[j];
        dxr[j] = static_cast<float>(rs * (a - meanA - (xr[j] - m) * rs * meanAXhat));
      }
    }
  });
}

// The forward maps each pair (a, b) to (a c0 - b s0, b c1 + a s1); its transpose maps (d0, d1) to
// (d0 c0 + d1 s1, d1 c1 - d0 s0). Pair-local, so it runs exactly in place on dy.
void rotaryGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *dy = operands[0], *cosRef = operands[1], *sinRef = operands[2];
  int64_t dim = dy->shape.back(), half = dim / 2;
  if (dim == 0)
    return;
  Shape rowShape(dy->shape.begin(), dy->shape.end() - 1);
  std::vector<int64_t> cosStrides = broadcastStrides(cosRef->shape, dy->shape);
  std::vector<int64_t> sinStrides = broadcastStrides(sinRef->shape, dy->shape);
  int64_t cosStep = cosStrides.back(), sinStep = sinStrides.back();
  cosStrides.pop_back();
  sinStrides.pop_back();
  const float *pdy = in<float>(dy), *pc = in<float>(cosRef), *ps = in<float>(sinRef);
  float *pdx = out<float>(results[0]);
  bool interleaved = kernel.rotary().interleaved();
  parallelForEachElement<2>(rowShape, {cosStrides, sinStrides}, 3 * dim,
                            [&](int64_t row, const std::array<int64_t, 2> &at) {
                              const float *dyr = pdy + row * dim, *cr = pc + at[0],
                                          *sr = ps + at[1];
                              float *dxr = pdx + row * dim;
                              for (int64_t j = 0; j < half; ++j) {
                                int64_t first = interleaved ? 2 * j : j,
                                        second = interleaved ? 2 * j + 1 : j + half;
                                float d0 = dyr[first], d1 = dyr[second];
                                float c0 = cr[first * cosStep], c1 = cr[second * cosStep];
                                float s0 = sr[first * sinStep], s1 = sr[second * sinStep];
                                dxr[first] = d0 * c0 + d1 * s1;
                                dxr[second] = d1 * c1 - d0 * s0;
                              }
                            });
}

// With p = softmax(scores) per query row, dp_j = dy . v_j, delta = sum_j p_j dp_j and
// ds_j = p_j (dp_j - delta):
//   dq = scale * sum_j ds_j k_j,  dk_j = scale * sum_i ds_ij q_i,  dv_j = sum_i p_ij dy_i,
// dk and dv summing over every query row (of every query head of the group) that sees key j.
//
// Two passes, neither storing an [S, T] block. Pass 1 runs over query rows: it recomputes the
// row's scores, keeps its max, 1 / sum and delta, and writes dq. Pass 2 runs over key rows: it
// recomputes each p_ij from the kept statistics and accumulates dk_j and dv_j in a fixed order
// (query head, then query row), so no thread adds into another's rows. A query row that sees no
// key contributes nothing and gets dq = 0.
// Blocked with GEMMs, FlashAttention-style: for each (batch, key/value head) and each of its query
// heads, query rows go in blocks of kQueryBlock; a block's scores P (rows x T) are recomputed with
// one GEMM, softmaxed in place, and
//   dP = dY V^T,  dS = P * (dP - rowsum(P * dP)) * scale,
//   dQ = dS K,    dK += dS^T Q,    dV += P^T dY
// are GEMMs too. Only a [block, T] score tile is ever stored. The pairs and blocks go in a fixed
// order and OpenBLAS threads each GEMM by output tiles, so the sums do not depend on the thread
// count.
void attentionGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *q = operands[0], *k = operands[1], *v = operands[2], *dy = operands[3];
  const TensorRef *mask = operands.size() > 4 ? operands[4] : nullptr;
  const int64_t batch = q->shape[0], heads = q->shape[1], s = q->shape[2], d = q->shape[3];
  const int64_t kvHeads = k->shape[1], t = k->shape[2], dv = v->shape[3];
  const int64_t group = heads / kvHeads;
  const float scale = kernel.attention().scale();
  const bool causal = kernel.attention().causal();
  std::vector<int64_t> maskStrides =
      mask ? broadcastStrides(mask->shape, {batch, heads, s, t}) : std::vector<int64_t>(4, 0);
  const float *pq = in<float>(q), *pk = in<float>(k), *pv = in<float>(v), *pdy = in<float>(dy);
  const float *pm = mask ? in<float>(mask) : nullptr;
  float *pdq = out<float>(results[0]), *pdk = out<float>(results[1]);
  float *pdv = out<float>(results[2]);
  constexpr int64_t kQueryBlock = 64;

  std::vector<float> p(static_cast<size_t>(kQueryBlock * t));
  std::vector<float> dp(static_cast<size_t>(kQueryBlock * t));
  {
    for (int64_t item = 0; item < batch * kvHeads; ++item) {
      const int64_t b = item / kvHeads, kvHead = item % kvHeads;
      const float *kHead = pk + item * t * d, *vHead = pv + item * t * dv;
      float *dkHead = pdk + item * t * d, *dvHead = pdv + item * t * dv;
      std::fill(dkHead, dkHead + t * d, 0.0f);
      std::fill(dvHead, dvHead + t * dv, 0.0f);
      for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
        const int64_t bh = b * heads + h;
        const float *qHead = pq + bh * s * d, *dyHead = pdy + bh * s * dv;
        float *dqHead = pdq + bh * s * d;
        for (int64_t i0 = 0; i0 < s; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, s - i0);
          // Scores of the block: P = Q K^T * scale (+ mask), then each row's softmax.
          cpu::sgemm(false, true, rows, t, d, scale, qHead + i0 * d, d, kHead, d, 0.0f,
                           p.data(), t);
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = i0 + r;
            float *row = p.data() + r * t;
            const int64_t visible = causal ? std::clamp<int64_t>(i + t - s + 1, 0, t) : t;
            const float *mRow =
                pm ? pm + b * maskStrides[0] + h * maskStrides[1] + i * maskStrides[2] : nullptr;
            float max = kMinusInf;
            for (int64_t j = 0; j < visible; ++j) {
              if (mRow)
                row[j] += mRow[j * maskStrides[3]];
              max = std::max(max, row[j]);
            }
            if (max == kMinusInf) { // sees no key: no gradient
              std::fill(row, row + t, 0.0f);
              continue;
            }
            double sum = 0;
            for (int64_t j = 0; j < visible; ++j)
              sum += (row[j] = std::exp(row[j] - max));
            const float inv = static_cast<float>(1.0 / sum);
            for (int64_t j = 0; j < visible; ++j)
              row[j] *= inv;
            std::fill(row + visible, row + t, 0.0f);
          }
          // dP = dY V^T; then dS = P * (dP - rowsum(P * dP)) * scale, in place of dP.
          cpu::sgemm(false, true, rows, t, dv, 1.0f, dyHead + i0 * dv, dv, vHead, dv, 0.0f,
                           dp.data(), t);
          for (int64_t r = 0; r < rows; ++r) {
            const float *pRow = p.data() + r * t;
            float *dRow = dp.data() + r * t;
            double delta = 0;
            for (int64_t j = 0; j < t; ++j)
              delta += double(pRow[j]) * dRow[j];
            for (int64_t j = 0; j < t; ++j)
              dRow[j] = pRow[j] * (dRow[j] - static_cast<float>(delta)) * scale;
          }
          cpu::sgemm(false, false, rows, d, t, 1.0f, dp.data(), t, kHead, d, 0.0f,
                           dqHead + i0 * d, d);
          cpu::sgemm(true, false, t, d, rows, 1.0f, dp.data(), t, qHead + i0 * d, d, 1.0f,
                           dkHead, d);
          cpu::sgemm(true, false, t, dv, rows, 1.0f, p.data(), t, dyHead + i0 * dv, dv,
                           1.0f, dvHead, dv);
        }
      }
    }
  }
}

// dx = dy * gelu'(x). Exact: Phi(x) + x phi(x), with Phi from erfc so that it keeps its digits
// for negative x. Tanh form, with u = sqrt(2/pi) (x + 0.044715 x^3): 0.5 (1 + tanh u) = s(2u)
// and 1 - tanh^2 u = 4 s(2u) s(-2u) for the sigmoid s, so the derivative
// s(2u) + 2 x s(2u) s(-2u) sqrt(2/pi) (1 + 3 * 0.044715 x^2) never subtracts nearly equal terms.
void geluGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const float *px = in<float>(operands[0]), *pdy = in<float>(operands[1]);
  float *pdx = out<float>(results[0]);
  bool tanhApproximation = kernel.gelu().tanh();
  parallelFor(elementCount(operands[0]->shape), 8, [&](int64_t begin, int64_t end) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
    constexpr float kSqrtHalf = 0.7071067811865476f, kInvSqrt2Pi = 0.3989422804014327f;
    for (int64_t i = begin; i < end; ++i) {
      float x = px[i], derivative;
      if (tanhApproximation) {
        float u = kSqrt2OverPi * (x + kCubic * x * x * x);
        float s = sigmoid(2.0f * u);
        derivative = s * (1.0f + 2.0f * x * sigmoid(-2.0f * u) * kSqrt2OverPi *
                                     (1.0f + 3.0f * kCubic * x * x));
      } else {
        derivative = 0.5f * std::erfc(-x * kSqrtHalf) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
      }
      pdx[i] = pdy[i] * derivative;
    }
  });
}

// y = silu(gate) * up: dgate = dy * up * sigmoid(gate) (1 + gate (1 - sigmoid(gate))),
// dup = dy * silu(gate). Each element's operands are read before either result is written.
void swigluGrad(const Kernel &, const Operands &operands, const Results &results) {
  const float *gate = in<float>(operands[0]), *up = in<float>(operands[1]);
  const float *pdy = in<float>(operands[2]);
  float *dgate = out<float>(results[0]), *dup = out<float>(results[1]);
  parallelFor(elementCount(operands[0]->shape), 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float g = gate[i], u = up[i], d = pdy[i];
      float sg = sigmoid(g);
      dgate[i] = d * u * (sg * (1.0f + g * (1.0f - sg)));
      dup[i] = d * (g * sg);
    }
  });
}

// ddata [pre..., A, post...] from dy [pre..., K..., post...]: data row a (for each pre) sums the
// dy rows of the indices equal to a, in index order. Each data row is one item, so repeated
// indices accumulate without two threads touching one row.
void gatherGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *indices = operands[0], *dy = operands[1], *ddata = results[0];
  size_t axis = static_cast<size_t>(kernel.axis().axis());
  int64_t outer = product(ddata->shape, 0, axis), extent = ddata->shape[axis];
  int64_t inner = product(ddata->shape, axis + 1, ddata->shape.size());
  int64_t count = elementCount(indices->shape);
  // Every index is checked before anything is written, as GATHER does.
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = indices->dtype == I64 ? in<int64_t>(indices)[i] : in<int32_t>(indices)[i];
    int64_t row = index < 0 ? index + extent : index;
    if (row < 0 || row >= extent)
      throw makeError("index ", index, " (element ", i, " of the indices ",
                      formatShape(indices->shape), ") is out of range for axis ", axis,
                      " of the data ", formatShape(ddata->shape));
    rows[static_cast<size_t>(i)] = row;
  }
  // The positions of the indices of each data row, in index order (a counting sort).
  std::vector<int64_t> first(static_cast<size_t>(extent) + 1, 0), order(static_cast<size_t>(count));
  for (int64_t row : rows)
    ++first[static_cast<size_t>(row) + 1];
  for (size_t a = 0; a < static_cast<size_t>(extent); ++a)
    first[a + 1] += first[a];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  for (int64_t i = 0; i < count; ++i)
    order[static_cast<size_t>(next[static_cast<size_t>(rows[static_cast<size_t>(i)])]++)] = i;

  const float *pdy = in<float>(dy);
  float *pdata = out<float>(ddata);
  int64_t perRow = extent == 0 ? 0 : count / extent;
  parallelFor(outer * extent, inner * (perRow + 1), [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(inner));
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / extent, a = item % extent;
      float *target = pdata + item * inner;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t at = first[static_cast<size_t>(a)]; at < first[static_cast<size_t>(a) + 1];
           ++at) {
        const float *source = pdy + (o * count + order[static_cast<size_t>(at)]) * inner;
        for (int64_t c = 0; c < inner; ++c)
          acc[static_cast<size_t>(c)] += source[c];
      }
      for (int64_t c = 0; c < inner; ++c)
        target[c] = static_cast<float>(acc[static_cast<size_t>(c)]);
    }
  });
}

// dx is zeros with dy written back where SLICE read it. The slice's positions are distinct (no
// step is 0), so the scatter needs no accumulation and splits across threads freely.
void sliceGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *dy = operands[0], *dx = results[0];
  const float *pdy = in<float>(dy);
  float *pdx = out<float>(dx);
  parallelFor(elementCount(dx->shape), 1,
              [&](int64_t begin, int64_t end) { std::fill(pdx + begin, pdx + end, 0.0f); });
  std::vector<int64_t> dxStrides = denseStrides(dx->shape), strides;
  int64_t base = 0;
  const SliceAttributes &attrs = kernel.slice();
  for (size_t d = 0; d < dxStrides.size(); ++d) {
    // Where the slice is empty nothing is written, and a start one past the end is allowed.
    if (dy->shape[d] > 0)
      base += attrs.starts(static_cast<int>(d)) * dxStrides[d];
    strides.push_back(attrs.steps(static_cast<int>(d)) * dxStrides[d]);
  }
  parallelForEachElement<1>(
      dy->shape, {strides}, 1,
      [&](int64_t i, const std::array<int64_t, 1> &at) { pdx[base + at[0]] = pdy[i]; });
}

} // namespace slrt::cpu
