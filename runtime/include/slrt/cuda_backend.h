// The CUDA backend (built only with SL_ENABLE_CUDA; createBackend("cuda") returns it). Including
// this header needs no CUDA header.
#pragma once

#include <memory>

#include "slrt/backend.h"

namespace slrt {

// The number of CUDA devices, or 0 when there is no driver, no device or any other CUDA error.
// Never throws, so tests and tools can ask before touching CUDA.
int cudaDeviceCountOrZero() noexcept;

// The backend on CUDA device `device`: the device arena is one cudaMalloc of exactly the schedule's
// size, the host pool one cudaHostAlloc (pinned) of exactly its size. Each host thread that calls
// execute or copy (the executor runs one per schedule stream) gets a CUDA stream of its own and a
// cuBLAS handle on it; a call issues its work there and returns without waiting for it (except
// where a kernel reads a check back first, slrt/backend.h). Events are one cudaEvent_t per slot:
// recordEvent is cudaEventRecord on the calling thread's stream, waitEvent cudaStreamWaitEvent on
// it or, on the host, cudaEventSynchronize; synchronize() waits for the calling thread's stream.
// With SLRT_CUDA_SYNC=1 in the environment every execute and copy waits for its work before
// returning (a fault then names its kernel). It times kernels (Backend::timesKernels) with CUDA
// timing events recorded on the calling thread's stream around each kernel's work, so a
// kernel's time is the GPU's, however far ahead of it the host thread issues. Kernels on HOST
// buffers (ACCUMULATE of a HOST_COMPUTE stream, KV_WRITE) run on the host with the CPU backend's
// kernels. Throws Error when no device is visible or the device cannot be used, and for an
// SLRT_CUDA_SYNC other than 0 or 1. With `tf32`, f32 GEMMs (cuBLAS) run on tensor cores in TF32
// (CUBLAS_TF32_TENSOR_OP_MATH); without it they are computed in f32.
std::unique_ptr<Backend> createCudaBackend(int device = 0, bool tf32 = false);

} // namespace slrt
