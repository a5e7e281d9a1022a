#include "backends/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>

#include "slrt/error.h"

namespace slrt {
namespace {

using sl::schedule::Kernel;

constexpr uint64_t kAlignment = 64;

const float *f32(const TensorRef *t) { return reinterpret_cast<const float *>(t->data); }
float *f32Out(const TensorRef *t) { return reinterpret_cast<float *>(t->data); }

int64_t count(const Shape &shape) { return static_cast<int64_t>(numel(shape).value_or(0)); }

// cblas takes int dimensions; the verifier bounds sizes by memory, not by INT_MAX.
int blasDim(int64_t dim, const char *op) {
  if (dim > INT_MAX)
    throw makeError(op, ": dimension ", dim, " exceeds what the BLAS interface takes (", INT_MAX,
                    ")");
  return static_cast<int>(dim);
}

// Calls visit(i, offsets) for each element i of a row-major tensor of shape `shape`, in order,
// where offsets[k] is that element's position in input k, read with per-dimension strides
// strides[k] (0 on broadcast dimensions, permuted for a transpose). An odometer over the outer
// dimensions keeps the offsets, so the inner loop is plain additions.
template <size_t N, typename Visit>
void forEachElement(const Shape &shape, const std::array<std::vector<int64_t>, N> &strides,
                    Visit visit) {
  int64_t total = count(shape);
  std::array<int64_t, N> offsets{};
  if (total == 0)
    return;
  if (shape.empty()) {
    visit(0, offsets);
    return;
  }
  size_t rank = shape.size();
  int64_t inner = shape[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  for (int64_t row = 0, rows = total / inner; row < rows; ++row) {
    std::array<int64_t, N> at = offsets;
    for (int64_t j = 0; j < inner; ++j) {
      visit(row * inner + j, at);
      for (size_t k = 0; k < N; ++k)
        at[k] += strides[k][rank - 1];
    }
    for (size_t d = rank - 1; d-- > 0;) {
      for (size_t k = 0; k < N; ++k)
        offsets[k] += strides[k][d];
      if (++index[d] < shape[d])
        break;
      for (size_t k = 0; k < N; ++k)
        offsets[k] -= strides[k][d] * shape[d];
      index[d] = 0;
    }
  }
}

// y = op(a, b) with numpy broadcasting of a and b to y's shape (which the verifier checked).
template <typename Op>
void broadcastBinary(const float *a, const Shape &aShape, const float *b, const Shape &bShape,
                     float *y, const Shape &yShape, Op op) {
  if (aShape == yShape && bShape == yShape) {
    for (int64_t i = 0, n = count(yShape); i < n; ++i)
      y[i] = op(a[i], b[i]);
    return;
  }
  forEachElement<2>(
      yShape, {broadcastStrides(aShape, yShape), broadcastStrides(bShape, yShape)},
      [&](int64_t i, const std::array<int64_t, 2> &at) { y[i] = op(a[at[0]], b[at[1]]); });
}

template <typename Op> void unary(const TensorRef *x, const TensorRef *y, Op op) {
  const float *in = f32(x);
  float *out = f32Out(y);
  for (int64_t i = 0, n = count(y->shape); i < n; ++i)
    out[i] = op(in[i]);
}

// Written so that exp never overflows: for x < 0 use e^x / (1 + e^x).
float sigmoid(float x) {
  if (x >= 0)
    return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
           int64_t lda, const float *b, int64_t ldb, float beta, float *y, int64_t ldy,
           const char *op) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              blasDim(m, op), blasDim(n, op), blasDim(k, op), alpha, a, blasDim(lda, op), b,
              blasDim(ldb, op), beta, y, blasDim(ldy, op));
}

// numpy.matmul: rank-1 operands are promoted to matrices, batch dimensions broadcast.
void matmul(const TensorRef *aRef, const TensorRef *bRef, const TensorRef *yRef) {
  Shape a = aRef->shape.size() == 1 ? Shape{1, aRef->shape[0]} : aRef->shape;
  Shape b = bRef->shape.size() == 1 ? Shape{bRef->shape[0], 1} : bRef->shape;
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  Shape aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
  const float *aData = f32(aRef), *bData = f32(bRef);
  float *y = f32Out(yRef);
  int64_t total = count(yRef->shape);
  if (total == 0)
    return;
  if (k == 0) {
    // An empty sum; BLAS implementations disagree on whether k == 0 writes C at all.
    std::fill(y, y + total, 0.0f);
    return;
  }
  if (count(bBatch) == 1) {
    // The common case (activations times a weight): every batch of A shares B, and A's batches
    // are contiguous, so one GEMM of (batch * m) rows does it.
    sgemm(false, false, count(aBatch) * m, n, k, 1.0f, aData, k, bData, n, 0.0f, y, n, "MATMUL");
    return;
  }
  Shape batch = *broadcastShapes(aBatch, bBatch);
  forEachElement<2>(batch, {broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch)},
                    [&](int64_t i, const std::array<int64_t, 2> &matrix) {
                      sgemm(false, false, m, n, k, 1.0f, aData + matrix[0] * m * k, k,
                            bData + matrix[1] * k * n, n, 0.0f, y + i * m * n, n, "MATMUL");
                    });
}

// ONNX Gemm: Y = alpha * op(A) * op(B) + beta * C, C unidirectionally broadcast to Y.
void gemm(const Kernel &kernel, const std::vector<const TensorRef *> &operands,
          const TensorRef *yRef) {
  const sl::schedule::GemmAttributes &attrs = kernel.gemm();
  const TensorRef *aRef = operands[0], *bRef = operands[1];
  int64_t m = yRef->shape[0], n = yRef->shape[1];
  int64_t k = attrs.trans_a() ? aRef->shape[0] : aRef->shape[1];
  float *y = f32Out(yRef);
  if (m == 0 || n == 0)
    return;
  // Y starts as C broadcast, so that BLAS adds beta * Y in place. Without C, or with beta 0, BLAS
  // overwrites Y and C is never read.
  float beta = 0.0f;
  if (operands.size() == 3 && attrs.beta() != 0.0f) {
    const float *c = f32(operands[2]);
    forEachElement<1>(yRef->shape, {broadcastStrides(operands[2]->shape, yRef->shape)},
                      [&](int64_t i, const std::array<int64_t, 1> &at) { y[i] = c[at[0]]; });
    beta = attrs.beta();
  }
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      y[i] = beta == 0.0f ? 0.0f : beta * y[i];
    return;
  }
  sgemm(attrs.trans_a(), attrs.trans_b(), m, n, k, attrs.alpha(), f32(aRef), aRef->shape[1],
        f32(bRef), bRef->shape[1], beta, y, n, "GEMM");
}

// Result dimension i is operand dimension perm[i]: walk the result in order, reading the operand
// with its strides permuted the same way.
void transpose(const Kernel &kernel, const TensorRef *xRef, const TensorRef *yRef) {
  const auto &perm = kernel.transpose().perm();
  const Shape &x = xRef->shape;
  std::vector<int64_t> xStrides(x.size());
  int64_t stride = 1;
  for (size_t d = x.size(); d-- > 0; stride *= x[d])
    xStrides[d] = stride;
  std::vector<int64_t> strides;
  for (int64_t axis : perm)
    strides.push_back(xStrides[static_cast<size_t>(axis)]);
  const float *in = f32(xRef);
  float *out = f32Out(yRef);
  forEachElement<1>(yRef->shape, {strides},
                    [&](int64_t i, const std::array<int64_t, 1> &at) { out[i] = in[at[0]]; });
}

} // namespace

CpuBackend::Memory CpuBackend::allocateAligned(uint64_t bytes, const char *what) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte space still gets a valid pointer.
  uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes)
    throw makeError("cannot allocate a ", what, " of ", bytes, " bytes");
  void *p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!p)
    throw makeError("cannot allocate a ", what, " of ", bytes, " bytes (out of memory)");
  return Memory(static_cast<std::byte *>(p));
}

void CpuBackend::allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) {
  arena_ = allocateAligned(deviceArenaBytes, "device arena");
  pool_ = allocateAligned(hostPoolBytes, "host pool");
}

void CpuBackend::execute(const Kernel &kernel, const std::vector<const TensorRef *> &operands,
                         const std::vector<const TensorRef *> &results) {
  for (const std::vector<const TensorRef *> *tensors : {&operands, &results})
    for (const TensorRef *t : *tensors)
      if (t->dtype != sl::schedule::F32)
        throw makeError("the CPU backend computes only f32 (", kernel.name(), ")");
  const TensorRef *y = results[0];
  switch (kernel.op()) {
  case sl::schedule::MATMUL:
    return matmul(operands[0], operands[1], y);
  case sl::schedule::GEMM:
    return gemm(kernel, operands, y);
  case sl::schedule::ADD:
    return broadcastBinary(f32(operands[0]), operands[0]->shape, f32(operands[1]),
                           operands[1]->shape, f32Out(y), y->shape,
                           [](float a, float b) { return a + b; });
  case sl::schedule::MUL:
    return broadcastBinary(f32(operands[0]), operands[0]->shape, f32(operands[1]),
                           operands[1]->shape, f32Out(y), y->shape,
                           [](float a, float b) { return a * b; });
  case sl::schedule::RELU:
    return unary(operands[0], y, [](float x) { return x > 0.0f ? x : 0.0f; });
  case sl::schedule::SIGMOID:
    return unary(operands[0], y, sigmoid);
  case sl::schedule::SILU:
    return unary(operands[0], y, [](float x) { return x * sigmoid(x); });
  case sl::schedule::TRANSPOSE:
    return transpose(kernel, operands[0], y);
  default:
    throw makeError("the CPU backend cannot execute op ", sl::schedule::OpKind_Name(kernel.op()),
                    " (", kernel.name(), ")");
  }
}

void CpuBackend::copy(const TensorRef &src, const TensorRef &dst) {
  // memmove: the verifier allows a copy exactly in place.
  std::memmove(dst.data, src.data, src.bytes);
}

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace slrt
