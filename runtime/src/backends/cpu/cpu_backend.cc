#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "backends/cpu/cpu_kernels.h"
#include "kernel_table.h"
#include "slrt/bfloat16.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt {
namespace {

using sl::schedule::Kernel;

constexpr uint64_t kAlignment = 64;

bool anyBfloat16(const std::vector<const TensorRef *> &refs) {
  for (const TensorRef *ref : refs)
    if (ref->dtype == sl::schedule::BF16)
      return true;
  return false;
}

uint64_t elementsOf(const TensorRef &ref) { return ref.bytes / dtypeSize(ref.dtype); }

} // namespace

namespace cpu {

Error floatTypeError(sl::schedule::DType dtype) {
  return makeError("the CPU backend's float kernels compute f32 or f64, not ", dtypeName(dtype));
}

} // namespace cpu

float *CpuBackend::Scratch::reserve(uint64_t count) {
  // Never empty, so that even a kernel of empty tensors gets valid pointers.
  count = std::max<uint64_t>(count, 1);
  if (count > capacity) {
    data.reset(); // the old room first: it is not copied
    capacity = 0;
    data.reset(count > UINT64_MAX / sizeof(float) ? nullptr : new (std::nothrow) float[count]);
    if (!data)
      throw makeError("cannot allocate ", count * sizeof(float),
                      " bytes of scratch for the f32 copies of a bf16 kernel's buffers (out of "
                      "memory)");
    capacity = count;
  }
  return data.get();
}

CpuBackend::Scratch &CpuBackend::scratch() {
  std::lock_guard<std::mutex> lock(scratchMutex_);
  return scratch_[std::this_thread::get_id()];
}

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
  if (!movesElementsOnly(kernel.op()) && (anyBfloat16(operands) || anyBfloat16(results)))
    return executeWidened(kernel, operands, results);
  dispatch(kernel, operands, results);
}

// A bf16 kernel is, by definition, its f32 kernel run on the bf16 operands widened to f32 (exact),
// each result rounded once to bf16 (to nearest even). Every bf16 buffer gets a slot of this
// thread's scratch: operands are widened into theirs, results computed into theirs and rounded
// back. A result that is exactly an operand (ACCUMULATE into its addend, any in-place kernel)
// shares the operand's slot, so the f32 kernel runs in place on it just as an f32 kernel would on
// the buffer; an operand given twice is widened once. Other dtypes (labels, indices, lengths, a
// CAST's other side, a comparison's bool result) pass through as they are.
void CpuBackend::executeWidened(const Kernel &kernel, const std::vector<const TensorRef *> &operands,
                                const std::vector<const TensorRef *> &results) {
  struct Slot {
    const std::byte *data;
    uint64_t bytes;
    uint64_t offset; // in floats, into the scratch
  };
  std::vector<Slot> slots;
  std::vector<int> operandSlot(operands.size(), -1), resultSlot(results.size(), -1);
  uint64_t total = 0;
  // The same bytes get the same slot: an operand given twice, a result exactly in place on an
  // operand (two results never share bytes, nor overlap an operand otherwise: the verifier).
  auto slotOf = [&](const TensorRef &ref) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].data == ref.data && slots[i].bytes == ref.bytes)
        return static_cast<int>(i);
    slots.push_back({ref.data, ref.bytes, total});
    total += elementsOf(ref);
    return static_cast<int>(slots.size() - 1);
  };
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i]->dtype == sl::schedule::BF16)
      operandSlot[i] = slotOf(*operands[i]);
  size_t operandSlots = slots.size();
  for (size_t r = 0; r < results.size(); ++r)
    if (results[r]->dtype == sl::schedule::BF16)
      resultSlot[r] = slotOf(*results[r]);

  float *base = scratch().reserve(total);
  std::vector<TensorRef> wide(operands.size() + results.size());
  std::vector<const TensorRef *> wideOperands, wideResults;
  auto widened = [&](const TensorRef *ref, int slot, TensorRef &into) -> const TensorRef * {
    if (slot < 0)
      return ref;
    uint64_t count = elementsOf(*ref);
    into = TensorRef{reinterpret_cast<std::byte *>(base + slots[static_cast<size_t>(slot)].offset),
                     ref->space, sl::schedule::F32, ref->shape, count * sizeof(float)};
    return &into;
  };
  std::vector<bool> filled(operandSlots, false);
  for (size_t i = 0; i < operands.size(); ++i) {
    int slot = operandSlot[i];
    wideOperands.push_back(widened(operands[i], slot, wide[i]));
    if (slot >= 0 && !filled[static_cast<size_t>(slot)]) {
      widenBfloat16(reinterpret_cast<const uint16_t *>(operands[i]->data),
                    base + slots[static_cast<size_t>(slot)].offset, elementsOf(*operands[i]));
      filled[static_cast<size_t>(slot)] = true;
    }
  }
  for (size_t r = 0; r < results.size(); ++r)
    wideResults.push_back(widened(results[r], resultSlot[r], wide[operands.size() + r]));

  dispatch(kernel, wideOperands, wideResults);

  for (size_t r = 0; r < results.size(); ++r)
    if (resultSlot[r] >= 0)
      roundToBfloat16(base + slots[static_cast<size_t>(resultSlot[r])].offset,
                      reinterpret_cast<uint16_t *>(results[r]->data), elementsOf(*results[r]));
}

void CpuBackend::dispatch(const Kernel &kernel, const std::vector<const TensorRef *> &operands,
                          const std::vector<const TensorRef *> &results) {
  using namespace sl::schedule;
  const TensorRef *y = results[0];
  switch (kernelFamily(kernel.op())) {
  case KernelFamily::kBinary:
    return cpu::binary(kernel, operands, y);
  case KernelFamily::kUnary:
    return cpu::unary(kernel, operands, y);
  case KernelFamily::kCompare:
    return cpu::compare(kernel, operands, y);
  case KernelFamily::kReduce:
    return cpu::reduce(kernel, operands, y);
  case KernelFamily::kOwn:
    break;
  }
  switch (kernel.op()) {
  case MATMUL:
    return cpu::matmul(kernel, operands, y);
  case GEMM:
    return cpu::gemm(kernel, operands, y);
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
  case CUMSUM:
    return cpu::cumSum(kernel, operands, y);
  case ROTARY:
    return cpu::rotary(kernel, operands, y);
  case ATTENTION:
    return cpu::attention(kernel, operands, y);
  case KV_WRITE:
    return cpu::kvWrite(kernel, operands, y);
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
