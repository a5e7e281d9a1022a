// The fused transformer kernels: scaled dot-product attention and rotary position embedding.
#include <cmath>
#include <limits>

#include "backends/cpu/attention_rows.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/rotary_pairs.h"

namespace slrt::cpu {
namespace {

// Blocked with GEMMs: for each (batch, head) and each block of kQueryBlock query rows, the
// block's scores P = Q K^T * scale against the keys the block may see come from one GEMM, are
// softmaxed in place (attention_rows.h) and Y = P V is a second GEMM. Only a [block, T] score tile
// per thread is ever stored. The (batch, head, block) items are independent, each computed by one
// thread with single-threaded GEMMs, so they split across threads without changing any result.
// As in PyTorch's softmax-then-matmul, a key a row does not see still enters its GEMM with weight
// 0, so an infinite value in such a key's V row makes the output NaN.
template <typename T>
void attentionAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *q = operands[0], *k = operands[1], *v = operands[2];
  const HeadStrides at(kernel);
  const AttentionSizes sizes(at, q, k, v);
  const int64_t batch = sizes.batch, heads = sizes.heads, s = sizes.s, d = sizes.d;
  const int64_t kvHeads = sizes.kvHeads, t = sizes.t, dv = sizes.dv, group = sizes.group;
  const int64_t ldq = sizes.ldq, ldy = sizes.ldy, ldk = sizes.ldk, ldv = sizes.ldv;
  const T scale = kernel.attention().scale();
  const ScoreTerms<T> terms = scoreTermsOf<T>(kernel, operands, 3);
  const T *pq = in<T>(q), *pk = in<T>(k), *pv = in<T>(v);
  T *py = out<T>(y);
  const int64_t blocks = (s + kQueryBlock - 1) / kQueryBlock;

  parallelFor(batch * heads * blocks, std::min(s, kQueryBlock) * t * (d + dv),
              [&](int64_t begin, int64_t end) {
                std::vector<T> p(static_cast<size_t>(std::min(s, kQueryBlock) * t));
                for (int64_t item = begin; item < end; ++item) {
                  const int64_t block = item % blocks, bh = item / blocks;
                  const int64_t h = bh % heads, b = bh / heads;
                  const int64_t i0 = block * kQueryBlock, rows = std::min(kQueryBlock, s - i0);
                  const T *qBlock = pq + at.row(b, h, i0, heads, s, d);
                  const T *kHead = pk + at.row(b, h / group, 0, kvHeads, t, d);
                  const T *vHead = pv + at.row(b, h / group, 0, kvHeads, t, dv);
                  T *yBlock = py + at.row(b, h, i0, heads, s, dv);
                  const int64_t keys = terms.keysOfBlock(i0, rows);
                  if (keys == 0) { // no row of the block sees a key: zeros
                    for (int64_t r = 0; r < rows; ++r)
                      std::fill(yBlock + r * ldy, yBlock + r * ldy + dv, T(0));
                    continue;
                  }
                  blasGemm(false, true, rows, keys, d, scale, qBlock, ldq, kHead, ldk, T(0),
                           p.data(), keys);
                  terms.softmaxRows(p.data(), b, h, i0, rows, keys, true);
                  blasGemm(false, false, rows, dv, keys, T(1), p.data(), keys, vHead, ldv, T(0),
                           yBlock, ldy);
                }
              });
}

// result = x * cos + rotate(x) * sin, rotate(x) being (-x[second], x[first]) on each pair.
template <typename T>
void rotaryAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  forEachRotaryPair<T>(kernel, operands[0], operands[1], operands[2], out<T>(y),
                       [](T a, T b, T c0, T c1, T s0, T s1) {
                         return std::array<T, 2>{a * c0 - b * s0, b * c1 + a * s1};
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
