// kernelFlops against counts made by hand and, for attention, against a brute-force count of the
// query-key pairs a query may see.
#include "slrt/kernel_flops.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace {

using sl::schedule::AttentionAttributes;
using sl::schedule::Kernel;
using sl::schedule::Schedule;

uint32_t addBuffer(Schedule &s, std::vector<int64_t> shape) {
  sl::schedule::Buffer *b = s.add_buffers();
  b->set_id(static_cast<uint32_t>(s.buffers_size() - 1));
  b->set_dtype(sl::schedule::BF16);
  for (int64_t d : shape)
    b->add_shape(d);
  return b->id();
}

Kernel &addKernel(Schedule &s, sl::schedule::OpKind op, std::vector<uint32_t> operands,
                  uint32_t result) {
  Kernel *k = s.add_kernels();
  k->set_op(op);
  for (uint32_t o : operands)
    k->add_operands(o);
  k->add_results(result);
  return *k;
}

// The pairs (s, t) with t <= s + T - S, counted one by one.
double causalPairs(int64_t queries, int64_t keys) {
  double n = 0;
  for (int64_t s = 0; s < queries; ++s)
    for (int64_t t = 0; t < keys; ++t)
      n += t <= s + keys - queries ? 1 : 0;
  return n;
}

TEST(KernelFlops, MatmulCountsTwoPerMultiplyAddWithEitherOperandTransposed) {
  Schedule s;
  uint32_t a = addBuffer(s, {2, 3, 5}), b = addBuffer(s, {5, 7}), c = addBuffer(s, {2, 3, 7});
  EXPECT_EQ(slrt::kernelFlops(s, addKernel(s, sl::schedule::MATMUL, {a, b}, c)), 2.0 * 42 * 5);
  // A stored [5, 3] and read transposed: K is its second-to-last dimension.
  uint32_t at = addBuffer(s, {5, 3}), y = addBuffer(s, {3, 7});
  Kernel &transposed = addKernel(s, sl::schedule::MATMUL, {at, b}, y);
  transposed.mutable_matmul()->set_trans_a(true);
  EXPECT_EQ(slrt::kernelFlops(s, transposed), 2.0 * 21 * 5);
  // B transposed changes nothing: K comes from A.
  uint32_t bt = addBuffer(s, {7, 5}), y2 = addBuffer(s, {2, 3, 7});
  Kernel &transposedB = addKernel(s, sl::schedule::MATMUL, {a, bt}, y2);
  transposedB.mutable_matmul()->set_trans_b(true);
  EXPECT_EQ(slrt::kernelFlops(s, transposedB), 2.0 * 42 * 5);
}

TEST(KernelFlops, GemmCountsItsProductNotTheBias) {
  Schedule s;
  uint32_t a = addBuffer(s, {6, 4}), b = addBuffer(s, {4, 9}), bias = addBuffer(s, {9}),
           y = addBuffer(s, {6, 9});
  Kernel &gemm = addKernel(s, sl::schedule::GEMM, {a, b, bias}, y);
  gemm.mutable_gemm()->set_beta(1);
  EXPECT_EQ(slrt::kernelFlops(s, gemm), 2.0 * 54 * 4);
  uint32_t at = addBuffer(s, {4, 6}), y2 = addBuffer(s, {6, 9});
  Kernel &transposed = addKernel(s, sl::schedule::GEMM, {at, b}, y2);
  transposed.mutable_gemm()->set_trans_a(true);
  EXPECT_EQ(slrt::kernelFlops(s, transposed), 2.0 * 54 * 4);
}

// Scores (D) and the weighted sum (Dv) over the pairs; the gradient's five products 3 D + 2 Dv.
// Causal with more keys than queries (a prefill after a cache), in both layouts, and GQA (the
// query heads count).
TEST(KernelFlops, AttentionCountsThePairsAQueryMaySee) {
  const int64_t batch = 2, heads = 4, kvHeads = 2, queries = 5, keys = 9, d = 8, dv = 6;
  for (bool causal : {false, true})
    for (bool bshd : {false, true}) {
      Schedule s;
      auto shape = [&](int64_t h, int64_t rows, int64_t dim) {
        return bshd ? std::vector<int64_t>{batch, rows, h, dim}
                    : std::vector<int64_t>{batch, h, rows, dim};
      };
      uint32_t q = addBuffer(s, shape(heads, queries, d)),
               k = addBuffer(s, shape(kvHeads, keys, d)),
               v = addBuffer(s, shape(kvHeads, keys, dv)),
               y = addBuffer(s, shape(heads, queries, dv));
      double pairs = causal ? causalPairs(queries, keys) : double(queries * keys);
      for (auto op : {sl::schedule::ATTENTION, sl::schedule::ATTENTION_GRAD}) {
        Kernel &kernel = addKernel(s, op, {q, k, v}, y);
        kernel.mutable_attention()->set_causal(causal);
        kernel.mutable_attention()->set_layout(bshd ? AttentionAttributes::BSHD
                                                    : AttentionAttributes::BHSD);
        double perPair = op == sl::schedule::ATTENTION ? d + dv : 3 * d + 2 * dv;
        EXPECT_EQ(slrt::kernelFlops(s, kernel), 2.0 * batch * heads * pairs * perPair)
            << "causal " << causal << ", bshd " << bshd << ", op " << op;
      }
    }
  EXPECT_EQ(causalPairs(5, 9), 35.0); // rows see 5, 6, 7, 8, 9 keys
  EXPECT_EQ(causalPairs(4, 4), 10.0);
}

TEST(KernelFlops, OtherKernelsCountNothing) {
  Schedule s;
  uint32_t x = addBuffer(s, {4, 4}), y = addBuffer(s, {4, 4});
  EXPECT_EQ(slrt::kernelFlops(s, addKernel(s, sl::schedule::ADD, {x, x}, y)), 0.0);
  EXPECT_EQ(slrt::kernelFlops(s, addKernel(s, sl::schedule::COPY, {x}, y)), 0.0);
  // A malformed kernel (the verifier refuses it before a run) counts nothing rather than reading
  // past its operands.
  Kernel &bare = addKernel(s, sl::schedule::ATTENTION, {x}, y);
  EXPECT_EQ(slrt::kernelFlops(s, bare), 0.0);
  EXPECT_EQ(slrt::kernelFlops(s, addKernel(s, sl::schedule::ATTENTION, {x, x, x}, y)), 0.0);
}

} // namespace
