// The CUDA backend's kernels, one launcher per op family, as cpu_kernels.h is for the CPU backend.
//
// This header is plain C++ and includes no protobuf header: cuda_backend.cc (g++) reads each
// schedule Kernel's attributes and calls these launchers, and the .cu files that implement them
// (nvcc) never parse the generated schedule code, which keeps their compile time down.
//
// Every launcher enqueues its work on ctx.stream() and returns without waiting, except where it
// must read something back first: data-dependent errors (an index out of range, an integer division
// by zero) are found by a checking kernel whose verdict is copied back before the kernel proper is
// launched, so that an Error is raised before anything is written, as on the CPU backend, with the
// CPU backend's message. Numerics follow the CPU kernels (runtime/src/backends/cpu/): fp32 (or
// fp64) elements, sums and softmax denominators in double, the same formulas in the same precision.
// bf16 buffers are computed exactly as f32 ones on their widened elements, each result rounded
// once to bf16 (load/store in cuda_device.cuh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace slrt {

// Declared in slrt/shape.h (defined in shape.cc); repeated here because that header includes
// protobuf's, which the .cu files keep out.
std::string formatShape(const std::vector<int64_t> &shape);
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &from,
                                      const std::vector<int64_t> &to);

namespace cuda {

using Dims = std::vector<int64_t>;

struct CudnnAttention; // cudnn_attention.h

// The element types the kernels compute on (bf16 stored, computed in fp32); kOther covers the
// dtypes that only move (f16), which the data-movement kernels handle by size.
enum class Element : uint8_t { kF32, kF64, kBF16, kI64, kI32, kBool, kOther };

// A buffer as the kernels see it: device memory (host memory for the pinned-pool copies), dense and
// row-major.
struct Tensor {
  std::byte *data = nullptr;
  Element element = Element::kOther;
  unsigned elementSize = 0;
  Dims shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  template <typename T> T *as() const { return reinterpret_cast<T *>(data); }
};

// What the kernels of one schedule stream share: its CUDA stream, its cuBLAS handle, scratch
// memory and the words that checking kernels report through. One per host thread that calls the
// backend (the executor runs each schedule stream on a thread of its own), so nothing in it is
// shared between threads. Defined in cuda_backend.cc.
class LtPlanCache;
// Frees a context's cuBLASLt plans (linear_algebra.cu); null is allowed.
void destroyLtPlans(LtPlanCache *plans) noexcept;

class Context {
public:
  // With `tf32`, the cuBLAS handle computes f32 GEMMs in TF32 on tensor cores.
  explicit Context(int device, bool tf32 = false);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  cudaStream_t stream() const { return stream_; }
  // Created on first use, bound to stream(), fp32 math (TF32 only when the context was made so).
  cublasHandle_t cublas();
  // Created on first use; cuBLASLt takes the stream with each call.
  cublasLtHandle_t cublasLt();
  // At least `bytes` of device memory for the kernels enqueued next on stream(), valid until the
  // next call. It grows (never shrinks) in stream order: the old block is freed and the new one
  // allocated with cudaFreeAsync/cudaMallocAsync on stream(), so kernels already queued finish
  // with the old block, no other stream or device-wide synchronisation is involved, and nothing
  // here depends on the stream being idle.
  // A launcher calls it at most once (a second call may free what the first returned while kernels
  // that use it are queued); ScratchLayout carves one allocation into several arrays.
  std::byte *scratch(size_t bytes);
  void synchronize();

  // cuDNN's attention state for this context (cudnn_attention.cc), created on first use; owned
  // here, destroyed before the stream.
  CudnnAttention *cudnnAttention = nullptr;
  // cuBLASLt's descriptors and chosen algorithm per GEMM shape (linear_algebra.cu), built on a
  // shape's first call; owned here.
  LtPlanCache *ltPlans = nullptr;

  // Validation: resetCheck() enqueues firstBad = UINT64_MAX and count = 0 in checkWords(); the
  // checking kernels atomicMin the position of a bad element into word 0 (and may atomicAdd a
  // count into word 1); readCheck() copies both back and waits.
  unsigned long long *checkWords() const { return checkWords_; }
  void resetCheck();
  struct Check {
    unsigned long long firstBad, count;
    bool failed() const { return firstBad != ~0ull; }
  };
  Check readCheck();
  // Copies `bytes` bytes from device address `source` to host memory (any) and waits.
  void readBack(void *target, const void *source, size_t bytes);

private:
  void release() noexcept;

  cudaStream_t stream_ = nullptr;
  bool tf32_ = false;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublasLt_ = nullptr;
  std::byte *scratch_ = nullptr;
  size_t scratchBytes_ = 0;
  unsigned long long *checkWords_ = nullptr;
  // Pinned host memory the two check words are read back into.
  unsigned long long *checkHost_ = nullptr;
};

// Carves one scratch() allocation into typed arrays: add() every array first, then base().
class ScratchLayout {
public:
  template <typename T> size_t add(int64_t count) {
    size_t offset = (bytes_ + 255) / 256 * 256;
    bytes_ = offset + static_cast<size_t>(count) * sizeof(T);
    return offset;
  }
  size_t bytes() const { return bytes_; }

private:
  size_t bytes_ = 0;
};

// elementwise.cu
// The element functions of the binary and unary families, one per row of the kernel table
// (schedule/kernel_table.def: k<FUNCTION> of each SL_BINARY_KERNEL and SL_UNARY_KERNEL row).
enum class BinaryOp {
#define SL_BINARY_KERNEL(NAME, SL_OP, FUNCTION, ...) k##FUNCTION,
#include "schedule/kernel_table.def"
};
enum class UnaryOp {
#define SL_UNARY_KERNEL(NAME, SL_OP, FUNCTION, ...) k##FUNCTION,
#include "schedule/kernel_table.def"
};
void binary(Context &ctx, BinaryOp op, const Tensor &a, const Tensor &b, const Tensor &y);
void unary(Context &ctx, UnaryOp op, bool geluTanh, const Tensor &x, const Tensor &y);
void compare(Context &ctx, bool less, const Tensor &a, const Tensor &b, const Tensor &y);
void where(Context &ctx, const Tensor &condition, const Tensor &x, const Tensor &otherwise,
           const Tensor &y);
void cast(Context &ctx, const Tensor &x, const Tensor &y);
void swiglu(Context &ctx, const Tensor &gate, const Tensor &up, const Tensor &y);
void accumulate(Context &ctx, const Tensor &a, const Tensor &b, const Tensor &y);
void geluGrad(Context &ctx, bool tanhApproximation, const Tensor &x, const Tensor &dy,
              const Tensor &dx);
void swigluGrad(Context &ctx, const Tensor &gate, const Tensor &up, const Tensor &dy,
                const Tensor &dgate, const Tensor &dup);
// y = x * scale elementwise (0 when scale is 0, whatever x holds): GEMM's k = 0 case.
void scale(Context &ctx, double factor, const Tensor &y);

// reduction.cu
void reduce(Context &ctx, bool mean, const Dims &axes, const Tensor &x, const Tensor &y);
// CUMSUM: f32, f64, bf16 (sums in double) or i64 (wrapping).
void cumSum(Context &ctx, int64_t axis, bool exclusive, bool reverse, const Tensor &x,
            const Tensor &y);
void softmax(Context &ctx, int64_t axis, const Tensor &x, const Tensor &y);
void softmaxGrad(Context &ctx, int64_t axis, const Tensor &y, const Tensor &dy, const Tensor &dx);
void layerNorm(Context &ctx, int64_t axis, double epsilon, const Tensor &x, const Tensor &scale,
               const Tensor *bias, const Tensor &y);
void layerNormGrad(Context &ctx, int64_t axis, double epsilon, const Tensor &x, const Tensor &scale,
                   const Tensor &dy, const Tensor &dx, const Tensor &dscale, const Tensor &dbias);
void rmsNorm(Context &ctx, double epsilon, const Tensor &x, const Tensor &scale, const Tensor &y);
void rmsNormGrad(Context &ctx, double epsilon, const Tensor &x, const Tensor &scale,
                 const Tensor &dy, const Tensor &dx, const Tensor &dscale);

// data_movement.cu (any dtype, by element size)
void transpose(Context &ctx, const Dims &perm, const Tensor &x, const Tensor &y);
void slice(Context &ctx, const Dims &starts, const Dims &steps, const Tensor &x, const Tensor &y);
void sliceGrad(Context &ctx, const Dims &starts, const Dims &steps, const Tensor &dy,
               const Tensor &dx);
void expand(Context &ctx, const Tensor &x, const Tensor &y);
void gather(Context &ctx, int64_t axis, const Tensor &data, const Tensor &indices, const Tensor &y);
void gatherGrad(Context &ctx, int64_t axis, const Tensor &indices, const Tensor &dy,
                const Tensor &ddata);
void concat(Context &ctx, int64_t axis, const std::vector<Tensor> &operands, const Tensor &y);
void trilu(Context &ctx, bool upper, int64_t k, const Tensor &x, const Tensor &y);
void takeRows(Context &ctx, const Tensor &x, const Tensor &index, const Tensor &y);
// KV_WRITE over device buffers (a cache kept on the device); `start` may be null.
void kvWrite(Context &ctx, bool bshd, const Tensor &cache, const Tensor &k, const Tensor &v,
             const Tensor *start);

// linear_algebra.cu (cuBLAS and cuBLASLt: fp32 math for f32 and bf16, fp64 for f64)
// MATMUL; transA / transB: the operand is stored with its last two dimensions swapped.
void matmul(Context &ctx, bool transA, bool transB, const Tensor &a, const Tensor &b,
            const Tensor &y);
void gemm(Context &ctx, bool transA, bool transB, float alpha, float beta, const Tensor &a,
          const Tensor &b, const Tensor *c, const Tensor &y);

// attention.cu. `mask` and the ALiBi `slopes` [Hq] may be null. With `bshd` (attention.layout
// BSHD) q, k, v, dy, y and the gradients are [B, S, H, D], else [B, H, S, D].
void attention(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
               const Tensor &k, const Tensor &v, const Tensor *mask, const Tensor *slopes,
               const Tensor &y);
void attentionGrad(Context &ctx, bool causal, float scale, bool bshd, const Tensor &q,
                   const Tensor &k, const Tensor &v, const Tensor &dy, const Tensor *mask,
                   const Tensor *slopes, const Tensor &dq, const Tensor &dk, const Tensor &dv);
void rotary(Context &ctx, bool interleaved, bool transpose, const Tensor &x, const Tensor &cos,
            const Tensor &sin, const Tensor &y);
void decodeAttention(Context &ctx, float scale, const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor &cache, const Tensor &length, const Tensor *slopes,
                     const Tensor &y);

// loss.cu
void crossEntropy(Context &ctx, int64_t ignoreIndex, const Tensor &logits, const Tensor &labels,
                  const Tensor &y);
void crossEntropyGrad(Context &ctx, int64_t ignoreIndex, const Tensor &labels, const Tensor &dloss,
                      const Tensor &logits, const Tensor &dlogits);

} // namespace cuda
} // namespace slrt
