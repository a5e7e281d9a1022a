// MATMUL and GEMM through OpenBLAS: sgemm for f32, dgemm for f64. OpenBLAS runs single-threaded;
// a large GEMM is split into blocks of rows (or of columns, for few rows) that the CPU backend's
// one OpenMP pool runs in parallel. Two pools (OpenBLAS's pthreads and OpenMP's) spinning on the
// same cores starved each other: a resident generation schedule on 2 cores decoded 8x slower
// with OpenBLAS threaded than single-threaded (bench/results/generation-cpu.md).
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <mutex>

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

// Row-major Y = alpha op(A) op(B) + beta Y as blocks of Y's rows, or of its columns when it has
// few rows, each one single-threaded BLAS call on the backend's OpenMP pool. The blocks depend on
// the shape alone, never on the thread count, so each element comes from the same call whatever
// the number of threads, and the results do not depend on it. A large extent goes in kBlocks
// blocks (even work for 1, 2, 4 or 8 threads), rounded to 16 rows or columns and no smaller than
// kRowBlock rows or kColumnBlock columns. Every row block packs all of op(B) again, so fewer,
// larger blocks waste less: in the CPU training benchmark (bench/cpu_training.py, one thread)
// OpenBLAS's packing of op(B) took 10.5% of the step's cycles with 64-row blocks, 8.3% with these.
// A product of fewer than kSplitWork multiply-adds is one call: splitting it costs more than a
// second thread gains.
constexpr int64_t kBlocks = 8, kRowBlock = 64, kColumnBlock = 256;
constexpr int64_t kSplitWork = int64_t{1} << 22;

int64_t blockOf(int64_t extent, int64_t least) {
  int64_t even = (extent + kBlocks - 1) / kBlocks;
  return std::max(least, (even + 15) / 16 * 16);
}

template <typename T, typename Blas>
void blockedGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                 int64_t lda, const T *b, int64_t ldb, T beta, T *y, int64_t ldy, Blas blas) {
  static std::once_flag single;
  std::call_once(single, [] { openblas_set_num_threads(1); });
  auto call = [&](int64_t rows, int64_t cols, const T *aBlock, const T *bBlock, T *yBlock) {
    blas(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
         blasDim(rows), blasDim(cols), blasDim(k), alpha, aBlock, blasDim(lda), bBlock,
         blasDim(ldb), beta, yBlock, blasDim(ldy));
  };
  if (m <= 0 || n <= 0)
    return;
  if (k == 0) {
    // An empty sum: Y = beta Y. BLAS implementations disagree on whether k == 0 writes Y at all.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        y[i * ldy + j] = beta == T(0) ? T(0) : beta * y[i * ldy + j];
    return;
  }
  bool byRows = m >= 2 * kRowBlock || m >= n;
  int64_t extent = byRows ? m : n;
  int64_t block = m * n > kSplitWork / k ? blockOf(extent, byRows ? kRowBlock : kColumnBlock)
                                         : extent;
  int64_t blocks = (extent + block - 1) / block;
  int64_t blockWork = block * (byRows ? n : m) * std::max<int64_t>(1, k);
  parallelFor(blocks, blockWork, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      int64_t begin = i * block, size = std::min(block, extent - begin);
      if (byRows)
        call(size, n, a + (transA ? begin : begin * lda), b, y + begin * ldy);
      else
        call(m, size, a, b + (transB ? begin * ldb : begin), y + begin);
    }
  });
}

} // namespace

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
           int64_t lda, const float *b, int64_t ldb, float beta, float *y, int64_t ldy) {
  blockedGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, y, ldy, cblas_sgemm);
}

void dgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, double alpha,
           const double *a, int64_t lda, const double *b, int64_t ldb, double beta, double *y,
           int64_t ldy) {
  blockedGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, y, ldy, cblas_dgemm);
}

namespace {

// numpy.matmul: rank-1 operands are promoted to matrices, batch dimensions broadcast. With the
// transpose flags (version 5) an operand is stored with its last two dimensions swapped, and BLAS
// reads it transposed: its leading dimension stays its stored row length.
template <typename T>
void matmulAs(const Kernel &kernel, const Operands &operands, const TensorRef *yRef) {
  bool transA = kernel.matmul().trans_a(), transB = kernel.matmul().trans_b();
  const TensorRef *aRef = operands[0], *bRef = operands[1];
  Shape a = aRef->shape.size() == 1 ? Shape{1, aRef->shape[0]} : aRef->shape;
  Shape b = bRef->shape.size() == 1 ? Shape{bRef->shape[0], 1} : bRef->shape;
  int64_t lda = a.back(), ldb = b.back();
  int64_t m = transA ? a.back() : a[a.size() - 2], k = transA ? a[a.size() - 2] : a.back();
  int64_t n = transB ? b[b.size() - 2] : b.back();
  Shape aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
  const T *aData = in<T>(aRef), *bData = in<T>(bRef);
  T *y = out<T>(yRef);
  int64_t total = elementCount(yRef->shape);
  if (total == 0)
    return;
  if (k == 0) {
    // An empty sum; BLAS implementations disagree on whether k == 0 writes C at all.
    std::fill(y, y + total, T(0));
    return;
  }
  if (elementCount(bBatch) == 1 && !transA) {
    // The common case (activations times a weight): every batch of A shares B, and A's batches
    // are contiguous rows, so one GEMM of (batch * m) rows does it.
    blasGemm(false, transB, elementCount(aBatch) * m, n, k, T(1), aData, lda, bData, ldb, T(0), y,
             n);
    return;
  }
  Shape batch = *broadcastShapes(aBatch, bBatch);
  forEachElement<2>(batch, {broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch)},
                    [&](int64_t i, const std::array<int64_t, 2> &matrix) {
                      blasGemm(transA, transB, m, n, k, T(1), aData + matrix[0] * m * k, lda,
                               bData + matrix[1] * k * n, ldb, T(0), y + i * m * n, n);
                    });
}

// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to Y. alpha and
// beta are float attributes whatever the dtype.
template <typename T>
void gemmAs(const Kernel &kernel, const Operands &operands, const TensorRef *yRef) {
  const sl::schedule::GemmAttributes &attrs = kernel.gemm();
  const TensorRef *aRef = operands[0], *bRef = operands[1];
  int64_t m = yRef->shape[0], n = yRef->shape[1];
  int64_t k = attrs.trans_a() ? aRef->shape[0] : aRef->shape[1];
  T *y = out<T>(yRef);
  if (m == 0 || n == 0)
    return;
  // Y starts as C broadcast, so that BLAS adds beta * Y in place. Without C, or with beta 0, BLAS
  // overwrites Y and C is never read.
  T beta = T(0);
  if (operands.size() == 3 && attrs.beta() != 0.0f) {
    const T *c = in<T>(operands[2]);
    forEachElement<1>(yRef->shape, {broadcastStrides(operands[2]->shape, yRef->shape)},
                      [&](int64_t i, const std::array<int64_t, 1> &at) { y[i] = c[at[0]]; });
    beta = attrs.beta();
  }
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      y[i] = beta == T(0) ? T(0) : beta * y[i];
    return;
  }
  blasGemm(attrs.trans_a(), attrs.trans_b(), m, n, k, T(attrs.alpha()), in<T>(aRef),
           aRef->shape[1], in<T>(bRef), bRef->shape[1], beta, y, n);
}

} // namespace

void matmul(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { matmulAs<decltype(type)>(kernel, operands, y); });
}

void gemm(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { gemmAs<decltype(type)>(kernel, operands, y); });
}

} // namespace slrt::cpu
