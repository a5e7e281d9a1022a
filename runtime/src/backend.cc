#include "slrt/backend.h"

#include "slrt/error.h"

namespace slrt {

std::unique_ptr<Backend> createBackend(const std::string &name) {
  if (name == "cpu")
    return createCpuBackend();
  if (name == "cuda")
    throw Error("the CUDA backend does not execute schedules yet; use --backend cpu");
  throw makeError("unknown backend '", name, "' (available: cpu)");
}

} // namespace slrt
