#include "slrt/backend.h"

#include <cstdlib>

#include "slrt/error.h"

#ifdef SLRT_WITH_CUDA
#include "slrt/cuda_backend.h"
#endif

namespace slrt {
namespace {

#ifdef SLRT_WITH_CUDA
// One GPU per rank: the ranks of a node take its devices in turn, as the NCCL communicator plugin
// does (it counts the node's ranks with MPI; the launchers' environment says the same before MPI
// is loaded). A run of one rank uses device 0.
int localDevice() {
  int local = 0;
  for (const char *variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                               "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char *value = std::getenv(variable)) {
      local = std::atoi(value);
      break;
    }
  int devices = cudaDeviceCountOrZero();
  return devices > 0 && local > 0 ? local % devices : 0;
}
#endif

} // namespace

std::unique_ptr<Backend> createBackend(const std::string &name) {
  if (name == "cpu")
    return createCpuBackend();
  if (name == "cuda") {
#ifdef SLRT_WITH_CUDA
    return createCudaBackend(localDevice());
#else
    throw Error("this build has no CUDA backend (configure with -DSL_ENABLE_CUDA=ON where the CUDA "
                "toolkit is installed); use --backend cpu");
#endif
  }
  throw makeError("unknown backend '", name, "' (available: cpu, cuda)");
}

} // namespace slrt
