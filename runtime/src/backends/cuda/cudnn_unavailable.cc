// Built instead of cudnn_attention.cc when the cuDNN frontend's headers were not found at configure
// time: every attention runs the reference kernels, and SLRT_CUDNN_ATTENTION=require says why not.
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cudnn_attention.h"
#include "slrt/error.h"

namespace slrt::cuda {
namespace {

bool unavailable() {
  const char *value = std::getenv("SLRT_CUDNN_ATTENTION");
  if (value && std::strcmp(value, "require") == 0)
    throw makeError("SLRT_CUDNN_ATTENTION=require, but this build has no cuDNN attention (the "
                    "cuDNN frontend's headers were not found when it was configured: "
                    "scripts/install-deps.sh fetches them)");
  return false;
}

} // namespace

struct CudnnAttention {};
void destroyCudnnAttention(CudnnAttention *state) noexcept { delete state; }

bool cudnnAttention(Context &, bool, float, bool, const Tensor &, const Tensor &,
                    const Tensor &, const Tensor *, const Tensor *, const Tensor &) {
  return unavailable();
}

bool cudnnAttentionGrad(Context &, bool, float, bool, const Tensor &, const Tensor &,
                        const Tensor &, const Tensor &, const Tensor *, const Tensor *,
                        const Tensor &, const Tensor &, const Tensor &) {
  return unavailable();
}

} // namespace slrt::cuda
