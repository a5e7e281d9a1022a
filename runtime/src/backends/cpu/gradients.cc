// The backward kernels. Each computes, in its dtype (fp32, or fp64 for gradient checks) with double
// accumulators, the transpose of its forward's derivative applied to the incoming gradient dy.
//
// Threads split the work over items that own what they write: rows for the row-local ops, columns
// for the parameter gradients of the norms (each sums its rows in row order), data rows for
// GATHER_GRAD (each sums its indices in index order), query rows for dq and key rows for dk and dv
// in ATTENTION_GRAD. Nothing is summed across threads, so results do not depend on the thread
// count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/rotary_pairs.h"
#include "backends/cpu/vector_math.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

using namespace sl::schedule;

// The constants of GELU_GRAD are written once as doubles; rounded to float they are exactly the
// float literals the f32 kernel has always used.
static_assert(float(0.7978845608028654) == 0.7978845608028654f &&
              float(0.044715) == 0.044715f && float(0.7071067811865476) == 0.7071067811865476f &&
              float(0.3989422804014327) == 0.3989422804014327f);

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d)
    p *= shape[d];
  return p;
}

// Where the norms are a [rows, n] matrix of x: sums `term(r, j)` over the rows for every column j
// into out[j], in row order. Threads take disjoint runs of columns and walk the rows with them, so
// every read stays within a row's contiguous run.
template <typename T, typename Term> void sumColumns(int64_t rows, int64_t n, T *out, Term term) {
  parallelFor(n, 2 * rows, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(end - begin), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = begin; j < end; ++j)
        acc[static_cast<size_t>(j - begin)] += term(r, j);
    for (int64_t j = begin; j < end; ++j)
      out[j] = static_cast<T>(acc[static_cast<size_t>(j - begin)]);
  });
}


// dlogits = (softmax(row) - onehot(label)) * dloss / count for each counted row, zeros for ignored
// rows; with every label ignored (a NaN loss) the gradient is all zeros, as PyTorch's.
template <typename T>
void crossEntropyGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *labelsRef = operands[0], *logitsRef = operands[2];
  const int64_t vocab = logitsRef->shape.back();
  const int64_t rows = elementCount(labelsRef->shape);
  const int64_t *labels = in<int64_t>(labelsRef);
  const T *logits = in<T>(logitsRef);
  T *dlogits = out<T>(results[0]);
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
  double factor = counted == 0 ? 0.0 : double(*in<T>(operands[1])) / double(counted);

  parallelFor(rows, 4 * vocab, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *row = logits + r * vocab;
      T *grad = dlogits + r * vocab;
      if (labels[r] == ignore) {
        std::fill(grad, grad + vocab, T(0));
        continue;
      }
      T max = -std::numeric_limits<T>::infinity();
      for (int64_t v = 0; v < vocab; ++v)
        max = std::max(max, row[v]);
      const int64_t label = labels[r];
      if constexpr (std::is_same_v<T, float>) {
        // The vectorised float exps (vector_math.h), summed in double, written straight into
        // the gradient (in place on the logits too), then scaled there.
        double sum = vec::expShifted(row, max, grad, vocab);
        const double scale = factor / sum;
        const double labelP = double(grad[label]) / sum;
        for (int64_t v = 0; v < vocab; ++v)
          grad[v] = static_cast<float>(double(grad[v]) * scale);
        grad[label] = static_cast<float>((labelP - 1.0) * factor);
      } else {
        double sum = 0;
        for (int64_t v = 0; v < vocab; ++v)
          sum += std::exp(row[v] - max);
        // Each logit is read before its own slot is written, so this runs in place.
        for (int64_t v = 0; v < vocab; ++v) {
          double p = std::exp(row[v] - max) / sum;
          grad[v] = static_cast<T>((p - (v == label ? 1.0 : 0.0)) * factor);
        }
      }
    }
  });
}

// dx = y * (dy - sum(dy * y)) along the axis. A fully masked row (y all zeros) gets zeros.
template <typename T>
void softmaxGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *yRef = operands[0];
  Rows rows = rowsAround(yRef->shape, static_cast<size_t>(kernel.axis().axis()));
  const T *py = in<T>(yRef), *pdy = in<T>(operands[1]);
  T *pdx = out<T>(results[0]);
  int64_t extent = rows.extent, inner = rows.inner;
  parallelFor(rows.outer * inner, 4 * extent, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t start = (row / inner) * extent * inner + row % inner;
      const T *yr = py + start, *dyr = pdy + start;
      T *dxr = pdx + start;
      double sum = 0;
      for (int64_t j = 0; j < extent; ++j)
        sum += double(dyr[j * inner]) * yr[j * inner];
      for (int64_t j = 0; j < extent; ++j)
        dxr[j * inner] = static_cast<T>(yr[j * inner] * (dyr[j * inner] - sum));
    }
  });
}

// y = x * r * g with r = 1 / sqrt(mean(x^2) + epsilon) per row:
//   dx = r * g * dy - x * r^3 / n * sum(dy * g * x),  dscale = sum over rows of dy * x * r.
// dscale is summed before dx is written, so dx may be exactly x or dy.
template <typename T>
void rmsNormGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *x = operands[0];
  int64_t n = x->shape.back(), rows = n == 0 ? 0 : elementCount(x->shape) / n;
  const T *px = in<T>(x), *pdy = in<T>(operands[2]);
  // A copy: dx may be exactly scale when there is one row.
  std::vector<T> scale(in<T>(operands[1]), in<T>(operands[1]) + n);
  T *pdx = out<T>(results[0]), *pdscale = out<T>(results[1]);
  double epsilon = kernel.norm().epsilon();

  std::vector<double> rstd(static_cast<size_t>(rows));
  parallelFor(rows, 2 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = px + r * n;
      double squares = 0;
      if constexpr (std::is_same_v<T, float>) {
        squares = vec::dotInDouble(xr, xr, n);
      } else {
        for (int64_t j = 0; j < n; ++j)
          squares += xr[j] * xr[j];
      }
      rstd[static_cast<size_t>(r)] = 1.0 / std::sqrt(squares / static_cast<double>(n) + epsilon);
    }
  });
  sumColumns(rows, n, pdscale, [&](int64_t r, int64_t j) {
    return double(pdy[r * n + j]) * px[r * n + j] * rstd[static_cast<size_t>(r)];
  });
  parallelFor(rows, 5 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = px + r * n, *dyr = pdy + r * n;
      T *dxr = pdx + r * n;
      double rs = rstd[static_cast<size_t>(r)];
      double projection = 0;
      if constexpr (std::is_same_v<T, float>) {
        projection = vec::dot3InDouble(dyr, scale.data(), xr, n);
      } else {
        for (int64_t j = 0; j < n; ++j)
          projection += dyr[j] * scale[static_cast<size_t>(j)] * xr[j];
      }
      double c = rs * rs * rs * projection / static_cast<double>(n);
      for (int64_t j = 0; j < n; ++j)
        dxr[j] = static_cast<T>(rs * scale[static_cast<size_t>(j)] * dyr[j] - xr[j] * c);
    }
  });
}

// y = xhat * g + b with xhat = (x - mean) * rstd over the normalised dimensions; with a = g * dy:
//   dx = rstd * (a - mean(a) - xhat * mean(a * xhat)),
//   dscale = sum over rows of dy * xhat, dbias = sum over rows of dy,
// the parameter gradients of the normalised dimensions' shape (whatever scale broadcast from).
template <typename T>
void layerNormGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *x = operands[0];
  size_t axis = static_cast<size_t>(kernel.norm().axis());
  Shape normalized(x->shape.begin() + static_cast<std::ptrdiff_t>(axis), x->shape.end());
  int64_t n = elementCount(normalized), rows = n == 0 ? 0 : elementCount(x->shape) / n;
  std::vector<T> scale = expandTo<T>(operands[1], normalized);
  const T *px = in<T>(x), *pdy = in<T>(operands[2]);
  T *pdx = out<T>(results[0]), *pdscale = out<T>(results[1]);
  T *pdbias = out<T>(results[2]);
  double epsilon = kernel.norm().epsilon();

  std::vector<double> mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows));
  parallelFor(rows, 3 * n, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T *xr = px + r * n;
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
      const T *xr = px + r * n, *dyr = pdy + r * n;
      T *dxr = pdx + r * n;
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
        dxr[j] = static_cast<T>(rs * (a - meanA - (xr[j] - m) * rs * meanAXhat));
      }
    }
  });
}

// The forward maps each pair (a, b) to (a c0 - b s0, b c1 + a s1); its transpose maps (d0, d1) to
// (d0 c0 + d1 s1, d1 c1 - d0 s0).
template <typename T>
void rotaryGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  forEachRotaryPair<T>(kernel, operands[0], operands[1], operands[2], out<T>(results[0]),
                       [](T d0, T d1, T c0, T c1, T s0, T s1) {
                         return std::array<T, 2>{d0 * c0 + d1 * s1, d1 * c1 - d0 * s0};
                       });
}

// With p = softmax(scores) per query row, dp_j = dy . v_j, delta = sum_j p_j dp_j and
// ds_j = p_j (dp_j - delta):
//   dq = scale * sum_j ds_j k_j,  dk_j = scale * sum_i ds_ij q_i,  dv_j = sum_i p_ij dy_i,
// dk and dv summing over every query row (of every query head of the group) that sees key j.
// Blocked with GEMMs, FlashAttention-style: for each (batch, key/value head) and each of its query
// heads, query rows go in blocks of kQueryBlock; a block's scores P against the keys the block may
// see (all T, or the causal prefix) are recomputed with one GEMM, softmaxed in place
// (attention_rows.h), and
//   dP = dY V^T,  dS = P * (dP - rowsum(P * dP)) * scale,
//   dQ = dS K,    dK += dS^T Q,    dV += P^T dY
// are GEMMs too; in layout BSHD a head's rows are H * D apart, the GEMMs' leading dimension.
// Only a [block, T] score tile per thread is ever stored. A (batch, key/value head) item owns its
// dK and dV rows and its query heads' dQ rows, so items run on different threads; within an item
// the heads and blocks go in a fixed order. With fewer items than threads, the items run one after
// another and each GEMM is split across the threads instead, in fixed blocks (linear_algebra.cc).
// Either way every sum is the same calls in the same order, whatever the thread count.
template <typename T>
void attentionGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *q = operands[0], *k = operands[1], *v = operands[2], *dy = operands[3];
  const HeadStrides at(kernel);
  const AttentionSizes sizes(at, q, k, v);
  const int64_t batch = sizes.batch, heads = sizes.heads, s = sizes.s, d = sizes.d;
  const int64_t kvHeads = sizes.kvHeads, t = sizes.t, dv = sizes.dv, group = sizes.group;
  const int64_t ldq = sizes.ldq, ldy = sizes.ldy, ldk = sizes.ldk, ldv = sizes.ldv;
  const T scale = kernel.attention().scale();
  const ScoreTerms<T> terms = scoreTermsOf<T>(kernel, operands, 4);
  const T *pq = in<T>(q), *pk = in<T>(k), *pv = in<T>(v), *pdy = in<T>(dy);
  T *pdq = out<T>(results[0]), *pdk = out<T>(results[1]);
  T *pdv = out<T>(results[2]);
  const int64_t tile = std::min(s, kQueryBlock) * t;

  auto item = [&](int64_t index, T *p, T *dp) {
    const int64_t b = index / kvHeads, kvHead = index % kvHeads;
    const int64_t kAt = at.row(b, kvHead, 0, kvHeads, t, d);
    const int64_t vAt = at.row(b, kvHead, 0, kvHeads, t, dv);
    const T *kHead = pk + kAt, *vHead = pv + vAt;
    T *dkHead = pdk + kAt, *dvHead = pdv + vAt;
    for (int64_t j = 0; j < t; ++j) {
      std::fill(dkHead + j * ldk, dkHead + j * ldk + d, T(0));
      std::fill(dvHead + j * ldv, dvHead + j * ldv + dv, T(0));
    }
    for (int64_t h = kvHead * group; h < (kvHead + 1) * group; ++h) {
      const int64_t qAt = at.row(b, h, 0, heads, s, d), yAt = at.row(b, h, 0, heads, s, dv);
      const T *qHead = pq + qAt, *dyHead = pdy + yAt;
      T *dqHead = pdq + qAt;
      for (int64_t i0 = 0; i0 < s; i0 += kQueryBlock) {
        const int64_t rows = std::min(kQueryBlock, s - i0);
        const int64_t keys = terms.keysOfBlock(i0, rows);
        if (keys == 0) { // no row of the block sees a key: no gradient
          for (int64_t r = 0; r < rows; ++r)
            std::fill(dqHead + (i0 + r) * ldq, dqHead + (i0 + r) * ldq + d, T(0));
          continue;
        }
        blasGemm(false, true, rows, keys, d, scale, qHead + i0 * ldq, ldq, kHead, ldk, T(0), p,
                 keys);
        terms.softmaxRows(p, b, h, i0, rows, keys, false);
        // dP = dY V^T; then dS = P * (dP - rowsum(P * dP)) * scale, in place of dP.
        blasGemm(false, true, rows, keys, dv, T(1), dyHead + i0 * ldy, ldy, vHead, ldv, T(0), dp,
                 keys);
        for (int64_t r = 0; r < rows; ++r) {
          const T *pRow = p + r * keys;
          T *dRow = dp + r * keys;
          T delta;
          if constexpr (std::is_same_v<T, float>) {
            delta = static_cast<T>(vec::dotInDouble(pRow, dRow, keys));
          } else {
            double sum = 0;
            for (int64_t j = 0; j < keys; ++j)
              sum += pRow[j] * dRow[j];
            delta = sum;
          }
          for (int64_t j = 0; j < keys; ++j)
            dRow[j] = pRow[j] * (dRow[j] - delta) * scale;
        }
        blasGemm(false, false, rows, d, keys, T(1), dp, keys, kHead, ldk, T(0), dqHead + i0 * ldq,
                 ldq);
        blasGemm(true, false, keys, d, rows, T(1), dp, keys, qHead + i0 * ldq, ldq, T(1), dkHead,
                 ldk);
        blasGemm(true, false, keys, dv, rows, T(1), p, keys, dyHead + i0 * ldy, ldy, T(1), dvHead,
                 ldv);
      }
    }
  };

  const int64_t items = batch * kvHeads;
  if (items >= maxThreads()) {
    parallelFor(items, group * s * t * (2 * d + 3 * dv), [&](int64_t begin, int64_t end) {
      std::vector<T> p(static_cast<size_t>(tile)), dp(static_cast<size_t>(tile));
      for (int64_t index = begin; index < end; ++index)
        item(index, p.data(), dp.data());
    });
    return;
  }
  std::vector<T> p(static_cast<size_t>(tile)), dp(static_cast<size_t>(tile));
  for (int64_t index = 0; index < items; ++index)
    item(index, p.data(), dp.data());
}

// dx = dy * gelu'(x). Exact: Phi(x) + x phi(x), with Phi from erfc so that it keeps its digits
// for negative x. Tanh form, with u = sqrt(2/pi) (x + 0.044715 x^3): 0.5 (1 + tanh u) = s(2u)
// and 1 - tanh^2 u = 4 s(2u) s(-2u) for the sigmoid s, so the derivative
// s(2u) + 2 x s(2u) s(-2u) sqrt(2/pi) (1 + 3 * 0.044715 x^2) never subtracts nearly equal terms.
template <typename T>
void geluGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const T *px = in<T>(operands[0]), *pdy = in<T>(operands[1]);
  T *pdx = out<T>(results[0]);
  bool tanhApproximation = kernel.gelu().tanh();
  parallelFor(elementCount(operands[0]->shape), 8, [&](int64_t begin, int64_t end) {
    constexpr T kSqrt2OverPi = T(0.7978845608028654), kCubic = T(0.044715);
    constexpr T kSqrtHalf = T(0.7071067811865476), kInvSqrt2Pi = T(0.3989422804014327);
    for (int64_t i = begin; i < end; ++i) {
      T x = px[i], derivative;
      if (tanhApproximation) {
        T u = kSqrt2OverPi * (x + kCubic * x * x * x);
        T s = sigmoid(T(2) * u);
        derivative = s * (T(1) + T(2) * x * sigmoid(T(-2) * u) * kSqrt2OverPi *
                                     (T(1) + T(3) * kCubic * x * x));
      } else {
        derivative =
            T(0.5) * std::erfc(-x * kSqrtHalf) + x * kInvSqrt2Pi * std::exp(T(-0.5) * x * x);
      }
      pdx[i] = pdy[i] * derivative;
    }
  });
}

// y = silu(gate) * up: dgate = dy * up * sigmoid(gate) (1 + gate (1 - sigmoid(gate))),
// dup = dy * silu(gate). Each element's operands are read before either result is written.
template <typename T>
void swigluGradAs(const Kernel &, const Operands &operands, const Results &results) {
  const T *gate = in<T>(operands[0]), *up = in<T>(operands[1]);
  const T *pdy = in<T>(operands[2]);
  T *dgate = out<T>(results[0]), *dup = out<T>(results[1]);
  parallelFor(elementCount(operands[0]->shape), 8, [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<T, float>) {
      vec::swigluGrad(gate + begin, up + begin, pdy + begin, dgate + begin, dup + begin,
                      end - begin);
    } else {
      for (int64_t i = begin; i < end; ++i) {
        T g = gate[i], u = up[i], d = pdy[i];
        T sg = sigmoid(g);
        dgate[i] = d * u * (sg * (T(1) + g * (T(1) - sg)));
        dup[i] = d * (g * sg);
      }
    }
  });
}

// ddata [pre..., A, post...] from dy [pre..., K..., post...]: data row a (for each pre) sums the
// dy rows of the indices equal to a, in index order. Each data row is one item, so repeated
// indices accumulate without two threads touching one row.
template <typename T>
void gatherGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
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

  const T *pdy = in<T>(dy);
  T *pdata = out<T>(ddata);
  int64_t perRow = extent == 0 ? 0 : count / extent;
  parallelFor(outer * extent, inner * (perRow + 1), [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(inner));
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / extent, a = item % extent;
      T *target = pdata + item * inner;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t at = first[static_cast<size_t>(a)]; at < first[static_cast<size_t>(a) + 1];
           ++at) {
        const T *source = pdy + (o * count + order[static_cast<size_t>(at)]) * inner;
        for (int64_t c = 0; c < inner; ++c)
          acc[static_cast<size_t>(c)] += source[c];
      }
      for (int64_t c = 0; c < inner; ++c)
        target[c] = static_cast<T>(acc[static_cast<size_t>(c)]);
    }
  });
}

// dx is zeros with dy written back where SLICE read it. The slice's positions are distinct (no
// step is 0), so the scatter needs no accumulation and splits across threads freely.
template <typename T>
void sliceGradAs(const Kernel &kernel, const Operands &operands, const Results &results) {
  const TensorRef *dy = operands[0], *dx = results[0];
  const T *pdy = in<T>(dy);
  T *pdx = out<T>(dx);
  parallelFor(elementCount(dx->shape), 1,
              [&](int64_t begin, int64_t end) { std::fill(pdx + begin, pdx + end, T(0)); });
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

} // namespace

void crossEntropyGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { crossEntropyGradAs<decltype(type)>(kernel, operands, results); });
}

void softmaxGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { softmaxGradAs<decltype(type)>(kernel, operands, results); });
}

void rmsNormGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { rmsNormGradAs<decltype(type)>(kernel, operands, results); });
}

void layerNormGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { layerNormGradAs<decltype(type)>(kernel, operands, results); });
}

void rotaryGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { rotaryGradAs<decltype(type)>(kernel, operands, results); });
}

void attentionGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { attentionGradAs<decltype(type)>(kernel, operands, results); });
}

void geluGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { geluGradAs<decltype(type)>(kernel, operands, results); });
}

void swigluGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { swigluGradAs<decltype(type)>(kernel, operands, results); });
}

void gatherGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  withFloatType(results[0]->dtype,
                [&](auto type) { gatherGradAs<decltype(type)>(kernel, operands, results); });
}

void sliceGrad(const Kernel &kernel, const Operands &operands, const Results &results) {
  // Zeros and moved elements only: by element size, so bf16 moves without conversion (all-zero
  // bits are zero in every float dtype).
  withElementBits(dtypeSize(results[0]->dtype),
                  [&](auto type) { sliceGradAs<decltype(type)>(kernel, operands, results); });
}

} // namespace slrt::cpu
