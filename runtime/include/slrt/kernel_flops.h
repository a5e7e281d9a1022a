#pragma once
// Floating-point operations of a kernel, from the shapes of its buffers, for the report's
// per-op FLOPs (and so TFLOP/s per op kind against a roofline).

#include "schedule/schedule.pb.h"

namespace slrt {

// The multiply-adds of a kernel's matrix products, counted as 2 FLOPs each, as the usual
// TFLOP/s figures count them (PyTorch's, cuBLAS's, FlashAttention's):
// - MATMUL, GEMM: 2 x (elements of the result) x K; GEMM's beta x C is not counted.
// - ATTENTION: 2 x B x Hq x (query-key pairs) x (D + Dv): the scores and the weighted sum, over
//   the pairs a query may see (every pair, or under attention.causal those with
//   t <= s + T - S). The mask, the ALiBi slopes and the softmax are not counted.
// - ATTENTION_GRAD: the 5 products of the backward over the same pairs (the scores again, dv,
//   dp, dq, dk): 2 x B x Hq x pairs x (3 D + 2 Dv), 2.5 times the forward at D = Dv, the count
//   FlashAttention's benchmarks use. A backend that recomputes more (cuDNN's forward for its
//   statistics) does more work than this.
// Every other kernel: 0 (they are bound by memory, not by arithmetic).
double kernelFlops(const sl::schedule::Schedule &schedule, const sl::schedule::Kernel &kernel);

} // namespace slrt
