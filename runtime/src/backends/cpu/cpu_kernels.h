// The CPU backend's kernels, one function per op family. Each takes a verified kernel (so shapes,
// dtypes and attributes are trusted), its operands and its result. Floating-point kernels compute
// in the dtype of their buffers: F32 (the reference) or F64 (for float64 gradient checks), one
// template for both. They never see BF16 buffers, except the kernels that only move elements:
// CpuBackend::execute runs a bf16 kernel as the f32 one on widened copies (cpu_backend.cc).
// Errors that depend on the data (an index out of range, an integer division by zero) are thrown
// before anything is written, and do not name the kernel: the executor does.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "backends/element_bits.h"
#include "slrt/backend.h"
#include "slrt/error.h"

namespace slrt::cpu {

using Operands = std::vector<const TensorRef *>;
using Results = std::vector<const TensorRef *>;
using sl::schedule::Kernel;

template <typename T> const T *in(const TensorRef *t) {
  return reinterpret_cast<const T *>(t->data);
}
template <typename T> T *out(const TensorRef *t) { return reinterpret_cast<T *>(t->data); }

// BOOL elements are bytes; any non-zero byte reads as true, and kernels write 0 or 1.
struct BoolByte {
  uint8_t value;
};

using slrt::withElementBits;

// "the CPU float kernels compute f32 or f64, not bf16": a dtype that reached a float kernel
// unconverted (a bug in the dispatch, never a schedule's fault: the verifier admits the dtypes).
Error floatTypeError(sl::schedule::DType dtype);

// Calls f(T{}) with the C++ type of a floating-point kernel's dtype: double for F64, float for
// F32. The float kernels are the reference numerics; the double instantiations of the same
// templates exist so that gradients can be checked against finite differences in float64. BF16
// kernels never get here: CpuBackend::execute runs them as F32 kernels on widened copies.
template <typename F> void withFloatType(sl::schedule::DType dtype, F f) {
  if (dtype == sl::schedule::F64)
    return f(double{});
  if (dtype == sl::schedule::F32)
    return f(float{});
  throw floatTypeError(dtype);
}

// Written so that exp never overflows: for x < 0 use e^x / (1 + e^x). SIGMOID, SILU, SWIGLU and
// SWIGLU_GRAD share it.
template <typename T> T sigmoid(T x) {
  if (x >= 0)
    return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

// elementwise.cc: ADD, SUB, MUL, DIV, POW, the unary ops, EQUAL, LESS, WHERE, CAST, GELU, SWIGLU.
void binary(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void unary(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void compare(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void where(const Operands &operands, const TensorRef *y);
void cast(const Operands &operands, const TensorRef *y);
void swiglu(const Operands &operands, const TensorRef *y);
// ACCUMULATE: y = a + b elementwise, one shape, exactly in place allowed.
void accumulate(const Operands &operands, const TensorRef *y);

// reduction.cc: REDUCE_MEAN, REDUCE_SUM, SOFTMAX, LAYER_NORM, RMS_NORM, CUMSUM.
void reduce(const Kernel &kernel, const Operands &operands, const TensorRef *y);
// f32, f64 (sums in double) or i64 (wrapping).
void cumSum(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void softmax(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void layerNorm(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void rmsNorm(const Kernel &kernel, const Operands &operands, const TensorRef *y);

// data_movement.cc: TRANSPOSE, GATHER, CONCAT, SLICE, EXPAND, TRILU (any dtype).
void transpose(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void gather(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void concat(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void slice(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void expand(const Operands &operands, const TensorRef *y);
void trilu(const Kernel &kernel, const Operands &operands, const TensorRef *y);

// linear_algebra.cc: MATMUL, GEMM (OpenBLAS).
// Row-major C = alpha * op(A) op(B) + beta * C through OpenBLAS (single-threaded, in fixed
// blocks on the OpenMP pool: linear_algebra.cc), for the
// kernels built on GEMMs: cblas_sgemm for float, cblas_dgemm for double.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
           int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void dgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
           int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
inline void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
                     const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                     int64_t ldc) {
  sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
inline void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, double alpha,
                     const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                     double *c, int64_t ldc) {
  dgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
// MATMUL honours the kernel's transpose flags (absent: none).
void matmul(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void gemm(const Kernel &kernel, const Operands &operands, const TensorRef *y);

// Where the rows of ATTENTION's and ATTENTION_GRAD's per-head tensors lie in either
// attention.layout: row (b, h, i) of a [B, H, S, W] (BHSD) or [B, S, H, W] (BSHD) tensor. Every
// row is W contiguous elements; only where the rows start differs.
struct HeadStrides {
  explicit HeadStrides(const Kernel &kernel)
      : bshd(kernel.attention().layout() == sl::schedule::AttentionAttributes::BSHD) {}
  bool bshd;
  int64_t heads(const TensorRef *x) const { return x->shape[bshd ? 2 : 1]; }
  int64_t seq(const TensorRef *x) const { return x->shape[bshd ? 1 : 2]; }
  // Elements from row (b, h, i) to row (b, h, i + 1).
  int64_t rowStride(int64_t heads, int64_t width) const { return bshd ? heads * width : width; }
  // The offset of row (b, h, i) of a tensor with `heads` heads of `seq` rows `width` wide.
  int64_t row(int64_t b, int64_t h, int64_t i, int64_t heads, int64_t seq, int64_t width) const {
    return bshd ? ((b * seq + i) * heads + h) * width : ((b * heads + h) * seq + i) * width;
  }
};

// The sizes ATTENTION and ATTENTION_GRAD read off q [B, H, S, D], k [B, Hkv, T, D] and
// v [B, Hkv, T, Dv] (or their BSHD order), and the GEMMs' leading dimensions: a head's rows are
// this far apart (D or H * D).
struct AttentionSizes {
  AttentionSizes(const HeadStrides &at, const TensorRef *q, const TensorRef *k, const TensorRef *v)
      : batch(q->shape[0]), heads(at.heads(q)), s(at.seq(q)), d(q->shape[3]),
        kvHeads(at.heads(k)), t(at.seq(k)), dv(v->shape[3]), group(heads / kvHeads),
        ldq(at.rowStride(heads, d)), ldy(at.rowStride(heads, dv)), ldk(at.rowStride(kvHeads, d)),
        ldv(at.rowStride(kvHeads, dv)) {}
  int64_t batch, heads, s, d, kvHeads, t, dv, group; // group: query heads per key/value head
  int64_t ldq, ldy, ldk, ldv;
};

// attention.cc: ATTENTION, ROTARY (ATTENTION in either attention.layout).
void attention(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void rotary(const Kernel &kernel, const Operands &operands, const TensorRef *y);

// generation.cc: KV_WRITE (y is operand 0's very buffer; any dtype), DECODE_ATTENTION, TAKE_ROWS
// (any dtype).
// A start, length or index out of range is an Error, raised before anything is written.
void kvWrite(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void decodeAttention(const Kernel &kernel, const Operands &operands, const TensorRef *y);
void takeRows(const Operands &operands, const TensorRef *y);

// loss.cc: CROSS_ENTROPY.
void crossEntropy(const Kernel &kernel, const Operands &operands, const TensorRef *y);

// gradients.cc: the backward kernels, each with every result of its op in the contract's order.
void crossEntropyGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void softmaxGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void rmsNormGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void layerNormGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void rotaryGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void attentionGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void geluGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void swigluGrad(const Kernel &kernel, const Operands &operands, const Results &results);
void gatherGrad(const Kernel &kernel, const Operands &operands, const Results &results);
// SLICE_GRAD moves elements (any dtype).
void sliceGrad(const Kernel &kernel, const Operands &operands, const Results &results);

} // namespace slrt::cpu
