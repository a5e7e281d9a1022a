// The CUDA backend (built only with SL_ENABLE_CUDA). Plumbing for now: streams, a cuBLAS handle and
// one GEMM; it does not execute schedules yet. Including this header needs no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace slrt {

// The number of CUDA devices, or 0 when there is no driver, no device or any other CUDA error.
// Never throws, so tests and tools can ask before touching CUDA.
int cudaDeviceCountOrZero() noexcept;

// Row-major fp32 GEMM on the device: C[m,n] = alpha * op(A) * op(B) + beta * C, where op(A) is
// [m,k] (A is stored [k,m] when transA) and op(B) is [k,n] (B is stored [n,k] when transB).
struct CudaGemm {
  int64_t m = 0, n = 0, k = 0;
  const float *a = nullptr;
  const float *b = nullptr;
  float *c = nullptr;
  float alpha = 1.0f;
  float beta = 0.0f;
  bool transA = false;
  bool transB = false;
};

class CudaBackend {
public:
  // Selects `device` and creates the compute, host-to-device, device-to-host and collective streams
  // and a cuBLAS handle bound to the compute stream. Throws Error naming the failing call.
  explicit CudaBackend(int device = 0);
  ~CudaBackend();
  CudaBackend(const CudaBackend &) = delete;
  CudaBackend &operator=(const CudaBackend &) = delete;

  // Free bytes on the device now (cudaMemGetInfo): what Backend::deviceMemoryAvailable answers once
  // this class executes schedules, so that sl-run refuses an arena that cannot fit before it
  // starts.
  uint64_t freeDeviceMemory();

  void *allocateDevice(size_t bytes);
  void freeDevice(void *pointer) noexcept;

  // Blocking copies on the host-to-device and device-to-host streams. The executor will order its
  // copies with events instead; these exist for tests and tools.
  void copyToDevice(void *device, const void *host, size_t bytes);
  void copyToHost(void *host, const void *device, size_t bytes);

  // Enqueues the GEMM on the compute stream (cublasGemmEx, fp32 compute); does not wait for it.
  void gemm(const CudaGemm &gemm);

  // Waits for all four streams.
  void synchronize();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace slrt
