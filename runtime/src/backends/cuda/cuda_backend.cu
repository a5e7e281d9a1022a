#include "slrt/cuda_backend.h"

#include <algorithm>
#include <climits>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "slrt/error.h"

namespace slrt {
namespace {

void check(cudaError_t status, const char *call) {
  if (status != cudaSuccess)
    throw makeError(call, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                    ")");
}

void check(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw makeError(call, " failed: ", cublasGetStatusName(status), " (",
                    cublasGetStatusString(status), ")");
}

// The call text goes into the message, so a failure names exactly what failed.
#define SLRT_CHECK(call) check((call), #call)

int cublasDim(int64_t dim, const char *what) {
  if (dim < 0 || dim > INT_MAX)
    throw makeError("CudaBackend::gemm: ", what, " = ", dim, " is outside cuBLAS's int range");
  return static_cast<int>(dim);
}

enum StreamRole { kCompute, kHostToDevice, kDeviceToHost, kCollective, kNumStreams };

} // namespace

int cudaDeviceCountOrZero() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
}

struct CudaBackend::Impl {
  int device = 0;
  cudaStream_t streams[kNumStreams] = {};
  cublasHandle_t cublas = nullptr;

  // Releases whatever was created; safe on a partly constructed Impl. Errors are ignored: this
  // runs from destructors and from the constructor's own failure path.
  ~Impl() {
    if (cublas)
      cublasDestroy(cublas);
    for (cudaStream_t stream : streams)
      if (stream)
        cudaStreamDestroy(stream);
  }
};

CudaBackend::CudaBackend(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  SLRT_CHECK(cudaSetDevice(device));
  for (cudaStream_t &stream : impl_->streams)
    SLRT_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  SLRT_CHECK(cublasCreate(&impl_->cublas));
  SLRT_CHECK(cublasSetStream(impl_->cublas, impl_->streams[kCompute]));
}

CudaBackend::~CudaBackend() = default;

uint64_t CudaBackend::freeDeviceMemory() {
  SLRT_CHECK(cudaSetDevice(impl_->device));
  size_t free = 0, total = 0;
  SLRT_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

void *CudaBackend::allocateDevice(size_t bytes) {
  void *pointer = nullptr;
  SLRT_CHECK(cudaMalloc(&pointer, bytes));
  return pointer;
}

void CudaBackend::freeDevice(void *pointer) noexcept { cudaFree(pointer); }

void CudaBackend::copyToDevice(void *device, const void *host, size_t bytes) {
  cudaStream_t stream = impl_->streams[kHostToDevice];
  SLRT_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
  SLRT_CHECK(cudaStreamSynchronize(stream));
}

void CudaBackend::copyToHost(void *host, const void *device, size_t bytes) {
  // The copy must see the results of GEMMs already enqueued on the compute stream.
  SLRT_CHECK(cudaStreamSynchronize(impl_->streams[kCompute]));
  cudaStream_t stream = impl_->streams[kDeviceToHost];
  SLRT_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  SLRT_CHECK(cudaStreamSynchronize(stream));
}

void CudaBackend::gemm(const CudaGemm &g) {
  int m = cublasDim(g.m, "m"), n = cublasDim(g.n, "n"), k = cublasDim(g.k, "k");
  // cuBLAS is column-major. A row-major matrix is the column-major view of its transpose, so
  // row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands, keep the
  // transpose flags, and use each matrix's row length as its leading dimension.
  // cuBLAS wants every leading dimension >= 1, even for empty matrices.
  int lda = std::max(1, cublasDim(g.transA ? g.m : g.k, "lda"));
  int ldb = std::max(1, cublasDim(g.transB ? g.k : g.n, "ldb"));
  int ldc = std::max(1, n);
  SLRT_CHECK(cublasGemmEx(impl_->cublas, g.transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                          g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &g.alpha, g.b, CUDA_R_32F,
                          ldb, g.a, CUDA_R_32F, lda, &g.beta, g.c, CUDA_R_32F, ldc,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::synchronize() {
  for (cudaStream_t stream : impl_->streams)
    SLRT_CHECK(cudaStreamSynchronize(stream));
}

} // namespace slrt
