#include "slrt/kernel_flops.h"

#include <algorithm>
#include <cstdint>

#include "slrt/shape.h"

namespace slrt {
namespace {

using sl::schedule::Buffer;
using sl::schedule::Kernel;
using sl::schedule::Schedule;

const Buffer &operandOf(const Schedule &s, const Kernel &k, int i) {
  return s.buffers(static_cast<int>(k.operands(i)));
}

// The dimension `fromEnd` places before the last (0: the last) of a buffer of at least that rank,
// else 0 (a kernel the verifier would refuse counts nothing).
double dim(const Buffer &b, int fromEnd) {
  int rank = b.shape_size();
  return rank > fromEnd ? static_cast<double>(b.shape(rank - 1 - fromEnd)) : 0;
}

// Query-key pairs of one head of one sequence: S x T, or under causal those with t <= s + T - S.
double pairs(double queries, double keys, bool causal) {
  if (!causal)
    return queries * keys;
  auto s = static_cast<int64_t>(queries), t = static_cast<int64_t>(keys);
  double total = 0;
  for (int64_t row = 0; row < s; ++row)
    total += static_cast<double>(std::clamp<int64_t>(row + t - s + 1, 0, t));
  return total;
}

// 2 x B x Hq x pairs, the factor by which the per-pair head dimensions multiply.
double attentionScale(const Schedule &s, const Kernel &k) {
  if (k.operands_size() < 3)
    return 0;
  const Buffer &q = operandOf(s, k, 0), &key = operandOf(s, k, 1);
  if (q.shape_size() != 4 || key.shape_size() != 4)
    return 0;
  bool bshd = k.attention().layout() == sl::schedule::AttentionAttributes::BSHD;
  double batch = static_cast<double>(q.shape(0));
  double heads = static_cast<double>(q.shape(bshd ? 2 : 1));
  double queries = static_cast<double>(q.shape(bshd ? 1 : 2));
  double keys = static_cast<double>(key.shape(bshd ? 1 : 2));
  return 2 * batch * heads * pairs(queries, keys, k.attention().causal());
}

} // namespace

double kernelFlops(const Schedule &s, const Kernel &k) {
  switch (k.op()) {
  case sl::schedule::MATMUL:
  case sl::schedule::GEMM: {
    if (k.operands_size() < 2 || k.results_size() < 1)
      return 0;
    bool transA = k.op() == sl::schedule::MATMUL ? k.matmul().trans_a() : k.gemm().trans_a();
    double inner = dim(operandOf(s, k, 0), transA ? 1 : 0);
    uint64_t results =
        numel(toShape(s.buffers(static_cast<int>(k.results(0))).shape())).value_or(0);
    return 2 * static_cast<double>(results) * inner;
  }
  case sl::schedule::ATTENTION:
  case sl::schedule::ATTENTION_GRAD: {
    double scale = attentionScale(s, k);
    if (scale == 0)
      return 0;
    double d = dim(operandOf(s, k, 0), 0), dv = dim(operandOf(s, k, 2), 0);
    return scale * (k.op() == sl::schedule::ATTENTION ? d + dv : 3 * d + 2 * dv);
  }
  default:
    return 0;
  }
}

} // namespace slrt
