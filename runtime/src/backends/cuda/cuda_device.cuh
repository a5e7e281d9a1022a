// Device-side helpers shared by the CUDA backend's .cu files: launch checks and geometry, strided
// indexing with broadcasting, block reductions, the math the CPU kernels use, and the type
// dispatch.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include "backends/element_bits.h"

#include "backends/cuda/cuda_kernels.h"
#include "slrt/error.h"

namespace slrt::cuda {

// --- errors and launches ------------------------------------------------------------------------

inline void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw makeError(what, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                    ")");
}

#define SLRT_CUDA_CHECK(call) ::slrt::cuda::check((call), #call)

constexpr int kThreads = 256;
// Grid-stride loops cover the rest; this many blocks fill any GPU.
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

inline unsigned blocksFor(int64_t items, int threads = kThreads) {
  return static_cast<unsigned>(std::min<int64_t>((items + threads - 1) / threads, kMaxBlocks));
}
inline unsigned blocksForRows(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, kMaxBlocks));
}

// Launches `kernel` on the context's stream and checks the launch (a bad configuration fails here;
// a fault while it runs surfaces at the stream's synchronize, which every kernel ends with). An
// empty grid launches nothing.
template <typename... Params, typename... Args>
void launch(Context &ctx, const char *name, void (*kernel)(Params...), unsigned blocks,
            unsigned threads, size_t sharedBytes, Args &&...args) {
  if (blocks == 0)
    return;
  kernel<<<blocks, threads, sharedBytes, ctx.stream()>>>(std::forward<Args>(args)...);
  check(cudaGetLastError(), name);
}

// Dynamic shared memory above the default 48 KiB needs an opt-in per kernel; the kernels here stay
// under it and say so when a shape would not.
inline void checkSharedBytes(size_t bytes, const char *what) {
  constexpr size_t kLimit = 48 * 1024;
  if (bytes > kLimit)
    throw makeError("the CUDA backend's ", what, " kernel needs ", bytes,
                    " bytes of shared memory for this shape, more than the ", kLimit,
                    " it is written for");
}

#define SLRT_GRID_LOOP(i, n)                                                                       \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n);           \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// --- strided indexing ---------------------------------------------------------------------------

constexpr int kMaxRank = 8;

// Element i of a row-major walk over `shape` sits at offset sum_d index_d * strides[k][d] in tensor
// k (0 strides on broadcast dimensions, permuted for a transpose, scaled for a slice). Dimensions
// that every tensor walks contiguously are merged on the host, so the divisions are few.
template <int N> struct Strided {
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};

  __device__ __forceinline__ void at(int64_t i, int64_t (&offsets)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k)
      offsets[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t index = i % shape[d];
      i /= shape[d];
#pragma unroll
      for (int k = 0; k < N; ++k)
        offsets[k] += index * strides[k][d];
    }
  }
};

template <int N>
Strided<N> makeStrided(const Dims &shape, const std::array<std::vector<int64_t>, N> &strides) {
  // Drop size-1 dimensions, then merge d into d - 1 wherever every tensor steps over d - 1 exactly
  // as far as over all of d.
  Dims dims;
  std::array<std::vector<int64_t>, N> steps;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !dims.empty();
    for (int k = 0; k < N && merge; ++k)
      merge = steps[k].back() == strides[k][d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (int k = 0; k < N; ++k)
        steps[k].back() = strides[k][d];
      continue;
    }
    dims.push_back(shape[d]);
    for (int k = 0; k < N; ++k)
      steps[k].push_back(strides[k][d]);
  }
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw makeError("the CUDA backend indexes tensors of at most ", kMaxRank,
                    " non-contiguous dimensions; ", formatShape(shape), " has ", dims.size());
  Strided<N> s;
  s.rank = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    s.shape[d] = dims[d];
    for (int k = 0; k < N; ++k)
      s.strides[k][d] = steps[k][d];
  }
  return s;
}

inline std::vector<int64_t> denseStrides(const Dims &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0; stride *= shape[d])
    strides[d] = stride;
  return strides;
}

inline int64_t product(const Dims &shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d)
    p *= shape[d];
  return p;
}

// --- math, as the CPU kernels compute it --------------------------------------------------------

namespace dm {
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ double erf(double x) { return ::erf(x); }
__device__ __forceinline__ float erfc(float x) { return ::erfcf(x); }
__device__ __forceinline__ double erfc(double x) { return ::erfc(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float cos(float x) { return ::cosf(x); }
__device__ __forceinline__ double cos(double x) { return ::cos(x); }
__device__ __forceinline__ float sin(float x) { return ::sinf(x); }
__device__ __forceinline__ double sin(double x) { return ::sin(x); }
__device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }
__device__ __forceinline__ bool isnan(float x) { return ::isnan(x); }
__device__ __forceinline__ bool isnan(double x) { return ::isnan(x); }
template <typename T> __device__ __forceinline__ T infinity() {
  if constexpr (std::is_same_v<T, float>)
    return CUDART_INF_F;
  else
    return CUDART_INF;
}
template <typename T> __device__ __forceinline__ T quietNan() {
  if constexpr (std::is_same_v<T, float>)
    return CUDART_NAN_F;
  else
    return CUDART_NAN;
}
} // namespace dm

// --- block reductions ---------------------------------------------------------------------------
// Every thread of the block calls these with its partial value and gets the block's total. The
// block size is a multiple of 32. Each starts with a barrier, so a call may follow another (or
// writes to shared memory the previous call's readers still need) directly.

template <typename T> __device__ __forceinline__ T warpSum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The CPU kernels' std::max(max, x): a NaN never replaces the running maximum.
template <typename T> __device__ __forceinline__ T maxIgnoringNan(T a, T b) {
  return a < b ? b : a;
}

template <typename T> __device__ __forceinline__ T warpMax(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = maxIgnoringNan(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <typename T> __device__ T blockSum(T v) {
  __shared__ T partial[32];
  v = warpSum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = v;
  __syncthreads();
  unsigned lane = threadIdx.x & 31;
  v = lane < (blockDim.x >> 5) ? partial[lane] : T(0);
  return warpSum(v);
}

template <typename T> __device__ T blockMax(T v) {
  __shared__ T partial[32];
  v = warpMax(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = v;
  __syncthreads();
  unsigned lane = threadIdx.x & 31;
  v = lane < (blockDim.x >> 5) ? partial[lane] : -dm::infinity<T>();
  return warpMax(v);
}

// As cpu_kernels.h: exp never overflows.
template <typename T> __device__ __forceinline__ T sigmoid(T x) {
  if (x >= T(0))
    return T(1) / (T(1) + dm::exp(-x));
  T e = dm::exp(x);
  return e / (T(1) + e);
}

// --- storage and compute types ------------------------------------------------------------------
// A float kernel is written once over its storage type S (float, double or bf16) and computes in
// Compute<S>: float for f32 and bf16, double for f64. It reads an element with load(), which widens
// bf16 exactly, and writes one with store<S>(), which rounds a float to the nearest bf16 (ties to
// even) once; a double (a sum kept in double) is first rounded to float, so that a bf16 result is
// the f32 kernel's result rounded to bf16, as the CPU backend defines it. For every other type
// both are the identity (store a static_cast), so integer kernels use them too.

using bf16 = __nv_bfloat16;

template <typename S> struct ComputeOf { using type = S; };
template <> struct ComputeOf<bf16> { using type = float; };
template <typename S> using Compute = typename ComputeOf<S>::type;

template <typename T> __device__ __forceinline__ T load(T v) { return v; }
__device__ __forceinline__ float load(bf16 v) { return __bfloat162float(v); }

template <typename S, typename V> __device__ __forceinline__ S store(V v) {
  if constexpr (std::is_same_v<S, bf16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else
    return static_cast<S>(v);
}

// --- type dispatch ------------------------------------------------------------------------------

// f(S{}) with the storage type of a float kernel's buffers: double for f64, bf16 for bf16 (computed
// in float), float for f32.
template <typename F> void withFloatType(Element element, F f) {
  switch (element) {
  case Element::kF64:
    return f(double{});
  case Element::kBF16:
    return f(bf16{});
  case Element::kF32:
    return f(float{});
  default:
    throw makeError("the CUDA backend's float kernels compute f32, f64 or bf16 only");
  }
}

using slrt::withElementBits;

} // namespace slrt::cuda
