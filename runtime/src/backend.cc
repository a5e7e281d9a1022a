#include "slrt/backend.h"

#include <cstdlib>

#include "slrt/device_rule.h"
#include "slrt/error.h"

#ifdef SLRT_WITH_CUDA
#include "slrt/cuda_backend.h"
#endif

namespace slrt {
namespace {

#ifdef SLRT_WITH_CUDA
// One GPU per rank, by the rule of slrt/device_rule.h (the NCCL communicator checks that MPI's
// count of the node's ranks agrees with the launcher's).
int localDevice() {
  return deviceOfLocalRank(launcherLocalRank().value_or(0), cudaDeviceCountOrZero());
}
#endif

} // namespace

std::unique_ptr<Backend> createBackend(const std::string &name, const BackendOptions &options) {
  if (name == "cpu")
    return createCpuBackend();
  if (name == "cuda") {
#ifdef SLRT_WITH_CUDA
    return createCudaBackend(localDevice(), options.tf32);
#else
    throw Error("this build has no CUDA backend (configure with -DSL_ENABLE_CUDA=ON where the CUDA "
                "toolkit is installed); use --backend cpu");
#endif
  }
  throw makeError("unknown backend '", name, "' (available: cpu, cuda)");
}

} // namespace slrt
