// MATMUL and GEMM through OpenBLAS, which threads each GEMM itself.
#include <cblas.h>

#include <algorithm>
#include <climits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

// cblas takes int dimensions; the verifier bounds sizes by memory, not by INT_MAX.
int blasDim(int64_t dim) {
  if (dim > INT_MAX)
    throw makeError("dimension ", dim, " exceeds what the BLAS interface takes (", INT_MAX, ")");
  return static_cast<int>(dim);
}

} // namespace

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
           int64_t lda, const float *b, int64_t ldb, float beta, float *y, int64_t ldy) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              blasDim(m), blasDim(n), blasDim(k), alpha, a, blasDim(lda), b, blasDim(ldb), beta, y,
              blasDim(ldy));
}

// numpy.matmul: rank-1 operands are promoted to matrices, batch dimensions broadcast.
void matmul(const Operands &operands, const TensorRef *yRef) {
  const TensorRef *aRef = operands[0], *bRef = operands[1];
  Shape a = aRef->shape.size() == 1 ? Shape{1, aRef->shape[0]} : aRef->shape;
  Shape b = bRef->shape.size() == 1 ? Shape{bRef->shape[0], 1} : bRef->shape;
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  Shape aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
  const float *aData = in<float>(aRef), *bData = in<float>(bRef);
  float *y = out<float>(yRef);
  int64_t total = elementCount(yRef->shape);
  if (total == 0)
    return;
  if (k == 0) {
    // An empty sum; BLAS implementations disagree on whether k == 0 writes C at all.
    std::fill(y, y + total, 0.0f);
    return;
  }
  if (elementCount(bBatch) == 1) {
    // The common case (activations times a weight): every batch of A shares B, and A's batches
    // are contiguous, so one GEMM of (batch * m) rows does it.
    sgemm(false, false, elementCount(aBatch) * m, n, k, 1.0f, aData, k, bData, n, 0.0f, y, n);
    return;
  }
  Shape batch = *broadcastShapes(aBatch, bBatch);
  forEachElement<2>(batch, {broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch)},
                    [&](int64_t i, const std::array<int64_t, 2> &matrix) {
                      sgemm(false, false, m, n, k, 1.0f, aData + matrix[0] * m * k, k,
                            bData + matrix[1] * k * n, n, 0.0f, y + i * m * n, n);
                    });
}

// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to Y.
void gemm(const Kernel &kernel, const Operands &operands, const TensorRef *yRef) {
  const sl::schedule::GemmAttributes &attrs = kernel.gemm();
  const TensorRef *aRef = operands[0], *bRef = operands[1];
  int64_t m = yRef->shape[0], n = yRef->shape[1];
  int64_t k = attrs.trans_a() ? aRef->shape[0] : aRef->shape[1];
  float *y = out<float>(yRef);
  if (m == 0 || n == 0)
    return;
  // Y starts as C broadcast, so that BLAS adds beta * Y in place. Without C, or with beta 0, BLAS
  // overwrites Y and C is never read.
  float beta = 0.0f;
  if (operands.size() == 3 && attrs.beta() != 0.0f) {
    const float *c = in<float>(operands[2]);
    forEachElement<1>(yRef->shape, {broadcastStrides(operands[2]->shape, yRef->shape)},
                      [&](int64_t i, const std::array<int64_t, 1> &at) { y[i] = c[at[0]]; });
    beta = attrs.beta();
  }
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      y[i] = beta == 0.0f ? 0.0f : beta * y[i];
    return;
  }
  sgemm(attrs.trans_a(), attrs.trans_b(), m, n, k, attrs.alpha(), in<float>(aRef), aRef->shape[1],
        in<float>(bRef), bRef->shape[1], beta, y, n);
}

} // namespace slrt::cpu
