// MATMUL and GEMM through cuBLAS in the buffers' own precision: sgemm with fp32 compute (the
// handle's math mode keeps TF32 off, so results agree with the CPU backend to fp32 rounding) and
// dgemm for f64.
#include <climits>

#include "backends/cuda/cuda_device.cuh"

namespace slrt::cuda {
namespace {

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw makeError(what, " failed: ", cublasGetStatusName(status), " (",
                    cublasGetStatusString(status), ")");
}

int cublasInt(int64_t value, const char *what) {
  if (value < 0 || value > INT_MAX)
    throw makeError("GEMM ", what, " = ", value, " is outside what cuBLAS takes (", INT_MAX, ")");
  return static_cast<int>(value);
}

// Row-major C = alpha * op(A) op(B) + beta * C for `batch` matrices at the given element strides
// (0: one matrix shared by every batch). cuBLAS is column-major, and a row-major matrix is the
// column-major view of its transpose: C^T = op(B)^T op(A)^T, so the operands swap and keep their
// transpose flags, each with its row length as the leading dimension.
template <typename T>
void gemmBatched(Context &ctx, bool transA, bool transB, int64_t m, int64_t n, int64_t k, T alpha,
                 const T *a, int64_t lda, int64_t strideA, const T *b, int64_t ldb, int64_t strideB,
                 T beta, T *c, int64_t ldc, int64_t strideC, int64_t batch) {
  int im = cublasInt(m, "m"), in = cublasInt(n, "n"), ik = cublasInt(k, "k");
  int ia = std::max(1, cublasInt(lda, "lda")), ib = std::max(1, cublasInt(ldb, "ldb"));
  int ic = std::max(1, cublasInt(ldc, "ldc")), count = cublasInt(batch, "batch count");
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if constexpr (std::is_same_v<T, float>)
    check(cublasSgemmStridedBatched(ctx.cublas(), opB, opA, in, im, ik, &alpha, b, ib, strideB, a,
                                    ia, strideA, &beta, c, ic, strideC, count),
          "cublasSgemmStridedBatched");
  else
    check(cublasDgemmStridedBatched(ctx.cublas(), opB, opA, in, im, ik, &alpha, b, ib, strideB, a,
                                    ia, strideA, &beta, c, ic, strideC, count),
          "cublasDgemmStridedBatched");
}

Dims broadcastShape(const Dims &a, const Dims &b) {
  size_t rank = std::max(a.size(), b.size());
  Dims result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    result[i] = da == 1 ? db : da;
  }
  return result;
}

// numpy.matmul: rank-1 operands are promoted to matrices, batch dimensions broadcast.
template <typename T>
void matmulAs(Context &ctx, const Tensor &aRef, const Tensor &bRef, const Tensor &yRef) {
  Dims a = aRef.shape.size() == 1 ? Dims{1, aRef.shape[0]} : aRef.shape;
  Dims b = bRef.shape.size() == 1 ? Dims{bRef.shape[0], 1} : bRef.shape;
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  Dims aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
  const T *aData = aRef.as<T>(), *bData = bRef.as<T>();
  T *y = yRef.as<T>();
  if (yRef.numel() == 0)
    return;
  if (k == 0) {
    // An empty sum.
    SLRT_CUDA_CHECK(
        cudaMemsetAsync(y, 0, static_cast<size_t>(yRef.numel()) * sizeof(T), ctx.stream()));
    return;
  }
  int64_t aCount = product(aBatch, 0, aBatch.size()), bCount = product(bBatch, 0, bBatch.size());
  if (bCount == 1) {
    // Activations times a weight: A's batches are contiguous, so one GEMM of (batch * m) rows.
    return gemmBatched<T>(ctx, false, false, aCount * m, n, k, T(1), aData, k, 0, bData, n, 0, T(0),
                          y, n, 0, 1);
  }
  Dims batch = broadcastShape(aBatch, bBatch);
  int64_t count = product(batch, 0, batch.size());
  std::vector<int64_t> aStrides = broadcastStrides(aBatch, batch);
  std::vector<int64_t> bStrides = broadcastStrides(bBatch, batch);
  // Laid out densely over the batch (size-1 dimensions step nowhere, whatever their stride).
  std::vector<int64_t> dense = denseStrides(batch);
  auto isDense = [&](const std::vector<int64_t> &strides) {
    for (size_t d = 0; d < batch.size(); ++d)
      if (batch[d] != 1 && strides[d] != dense[d])
        return false;
    return true;
  };
  bool aDense = isDense(aStrides), bDense = isDense(bStrides);
  if ((aCount == 1 || aDense) && bDense)
    return gemmBatched<T>(ctx, false, false, m, n, k, T(1), aData, k, aCount == 1 ? 0 : m * k,
                          bData, n, k * n, T(0), y, n, m * n, count);
  // Batch dimensions that broadcast both ways: one GEMM per result matrix.
  std::vector<int64_t> index(batch.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t aAt = 0, bAt = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      aAt += index[d] * aStrides[d];
      bAt += index[d] * bStrides[d];
    }
    gemmBatched<T>(ctx, false, false, m, n, k, T(1), aData + aAt * m * k, k, 0, bData + bAt * k * n,
                   n, 0, T(0), y + i * m * n, n, 0, 1);
    for (size_t d = batch.size(); d-- > 0;) {
      if (++index[d] < batch[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace

void matmul(Context &ctx, const Tensor &a, const Tensor &b, const Tensor &y) {
  withFloatType(y.element, [&](auto type) { matmulAs<decltype(type)>(ctx, a, b, y); });
}

// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to Y. Y starts as
// C broadcast, so that cuBLAS adds beta * Y in place; without C, or with beta 0, cuBLAS overwrites
// Y and C is never read.
void gemm(Context &ctx, bool transA, bool transB, float alpha, float beta, const Tensor &a,
          const Tensor &b, const Tensor *c, const Tensor &y) {
  int64_t m = y.shape[0], n = y.shape[1];
  int64_t k = transA ? a.shape[0] : a.shape[1];
  if (m == 0 || n == 0)
    return;
  double betaUsed = 0;
  if (c && beta != 0.0f) {
    expand(ctx, *c, y);
    betaUsed = beta;
  }
  if (k == 0)
    return scale(ctx, betaUsed, y);
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    gemmBatched<T>(ctx, transA, transB, m, n, k, static_cast<T>(alpha), a.as<T>(), a.shape[1], 0,
                   b.as<T>(), b.shape[1], 0, static_cast<T>(betaUsed), y.as<T>(), n, 0, 1);
  });
}

} // namespace slrt::cuda
