#include "slrt/backend.h"

#include "slrt/error.h"

#ifdef SLRT_WITH_CUDA
#include "slrt/cuda_backend.h"
#endif

namespace slrt {

std::unique_ptr<Backend> createBackend(const std::string &name) {
  if (name == "cpu")
    return createCpuBackend();
  if (name == "cuda") {
#ifdef SLRT_WITH_CUDA
    return createCudaBackend();
#else
    throw Error("this build has no CUDA backend (configure with -DSL_ENABLE_CUDA=ON where the CUDA "
                "toolkit is installed); use --backend cpu");
#endif
  }
  throw makeError("unknown backend '", name, "' (available: cpu, cuda)");
}

} // namespace slrt
