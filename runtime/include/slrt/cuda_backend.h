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
// cuBLAS handle on it; a call issues its work there and waits for it before returning, so the
// executor's host-side events order the streams. Kernels on HOST buffers (ACCUMULATE of a
// HOST_COMPUTE stream, KV_WRITE) run on the host with the CPU backend's kernels. Throws Error when
// no device is visible or the device cannot be used.
std::unique_ptr<Backend> createCudaBackend(int device = 0);

} // namespace slrt
