#include "backends/cpu/cpu_backend.h"

#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "slrt/error.h"

namespace slrt {
namespace {

using sl::schedule::Kernel;

constexpr uint64_t kAlignment = 64;

} // namespace

CpuBackend::Memory CpuBackend::allocateAligned(uint64_t bytes, const char *what) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte space still gets a valid pointer.
  uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes)
    throw makeError("cannot allocate a ", what, " of ", bytes, " bytes");
  void *p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!p)
    throw makeError("cannot allocate a ", what, " of ", bytes, " bytes (out of memory)");
  // Touch every page now (as cudaMalloc and cudaHostAlloc hand out backed memory), so that no
  // kernel or copy of a run pays the first-touch page faults and timings show the steady state;
  // the zeros also make the contents of never-written bytes deterministic.
  std::memset(p, 0, rounded);
  return Memory(static_cast<std::byte *>(p));
}

void CpuBackend::allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) {
  arena_ = allocateAligned(deviceArenaBytes, "device arena");
  pool_ = allocateAligned(hostPoolBytes, "host pool");
}

void CpuBackend::execute(const Kernel &kernel, const std::vector<const TensorRef *> &operands,
                         const std::vector<const TensorRef *> &results) {
  using namespace sl::schedule;
  const TensorRef *y = results[0];
  switch (kernel.op()) {
  case MATMUL:
    return cpu::matmul(operands, y);
  case GEMM:
    return cpu::gemm(kernel, operands, y);
  case ADD:
  case SUB:
  case MUL:
  case DIV:
  case POW:
    return cpu::binary(kernel, operands, y);
  case RELU:
  case SIGMOID:
  case SILU:
  case SQRT:
  case RECIPROCAL:
  case NEG:
  case EXP:
  case ERF:
  case TANH:
  case GELU:
    return cpu::unary(kernel, operands, y);
  case EQUAL:
  case LESS:
    return cpu::compare(kernel, operands, y);
  case WHERE:
    return cpu::where(operands, y);
  case CAST:
    return cpu::cast(operands, y);
  case SWIGLU:
    return cpu::swiglu(operands, y);
  case ACCUMULATE:
    return cpu::accumulate(operands, y);
  case SOFTMAX:
    return cpu::softmax(kernel, operands, y);
  case REDUCE_MEAN:
  case REDUCE_SUM:
    return cpu::reduce(kernel, operands, y);
  case LAYER_NORM:
    return cpu::layerNorm(kernel, operands, y);
  case RMS_NORM:
    return cpu::rmsNorm(kernel, operands, y);
  case TRANSPOSE:
    return cpu::transpose(kernel, operands, y);
  case GATHER:
    return cpu::gather(kernel, operands, y);
  case CONCAT:
    return cpu::concat(kernel, operands, y);
  case SLICE:
    return cpu::slice(kernel, operands, y);
  case EXPAND:
    return cpu::expand(operands, y);
  case TRILU:
    return cpu::trilu(kernel, operands, y);
  case ROTARY:
    return cpu::rotary(kernel, operands, y);
  case ATTENTION:
    return cpu::attention(kernel, operands, y);
  case KV_WRITE:
    return cpu::kvWrite(operands, y);
  case DECODE_ATTENTION:
    return cpu::decodeAttention(kernel, operands, y);
  case TAKE_ROWS:
    return cpu::takeRows(operands, y);
  case CROSS_ENTROPY:
    return cpu::crossEntropy(kernel, operands, y);
  case CROSS_ENTROPY_GRAD:
    return cpu::crossEntropyGrad(kernel, operands, results);
  case SOFTMAX_GRAD:
    return cpu::softmaxGrad(kernel, operands, results);
  case RMS_NORM_GRAD:
    return cpu::rmsNormGrad(kernel, operands, results);
  case LAYER_NORM_GRAD:
    return cpu::layerNormGrad(kernel, operands, results);
  case ROTARY_GRAD:
    return cpu::rotaryGrad(kernel, operands, results);
  case ATTENTION_GRAD:
    return cpu::attentionGrad(kernel, operands, results);
  case GELU_GRAD:
    return cpu::geluGrad(kernel, operands, results);
  case SWIGLU_GRAD:
    return cpu::swigluGrad(kernel, operands, results);
  case GATHER_GRAD:
    return cpu::gatherGrad(kernel, operands, results);
  case SLICE_GRAD:
    return cpu::sliceGrad(kernel, operands, results);
  default:
    throw makeError("the CPU backend cannot execute op ", OpKind_Name(kernel.op()));
  }
}

void CpuBackend::copy(const TensorRef &src, const TensorRef &dst) {
  // memmove: the verifier allows a copy exactly in place.
  std::memmove(dst.data, src.data, src.bytes);
}

std::unique_ptr<Backend> createCpuBackend() { return std::make_unique<CpuBackend>(); }

} // namespace slrt
