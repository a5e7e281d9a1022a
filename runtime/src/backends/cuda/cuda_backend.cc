// The CUDA backend: memory, streams and the dispatch of schedule kernels to the launchers of
// cuda_kernels.h. Compiled by the host compiler; only the .cu files hold device code.
#include "slrt/cuda_backend.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cudnn_attention.h"
#include "backends/event_flags.h"
#include "kernel_table.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt {
namespace cuda {
namespace {

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw makeError(what, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                    ")");
}

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw makeError(what, " failed: ", cublasGetStatusName(status), " (",
                    cublasGetStatusString(status), ")");
}

// The call's text goes into the message, so a failure names exactly what failed.
#define SLRT_CHECK(call) check((call), #call)

// Device memory a run uses beyond its arena (sl-run's memory check counts it): per device stream
// thread, a cuBLAS handle's workspace (32 MiB on Hopper) and the context's scratch (cuBLASLt's
// 32 MiB workspace, attention and reduction temporaries); per run, the kernels' modules (loaded
// lazily), the CUDA context itself, cuDNN's graphs and the NCCL buffers. Measured on an H200
// (2026-11-26, bench/gpu/measure-working-memory.sh, bench/results/gpu-h200-2026-11-26.md): peak
// used memory less the arena was 577-681 MiB for the 7B-shaped probes (train with cuDNN attention
// on three device streams, inference), against 544 MiB estimated before; the fixed part is raised
// so that 3 streams count 800 MiB.
constexpr uint64_t kDeviceWorkingPerStreamBytes = uint64_t{96} << 20;
constexpr uint64_t kDeviceWorkingFixedBytes = uint64_t{512} << 20;

// SLRT_CUDA_SYNC=1: every execute and copy waits for its work before returning, as before the
// backend was asynchronous, so that a fault names its kernel and per-kernel times are the kernels'
// (debugging, profiling by op). Unset or 0: asynchronous.
bool syncEachCall() {
  const char *value = std::getenv("SLRT_CUDA_SYNC");
  if (!value || !*value || std::strcmp(value, "0") == 0)
    return false;
  if (std::strcmp(value, "1") == 0)
    return true;
  throw makeError("SLRT_CUDA_SYNC='", value, "' is not 0 or 1");
}

} // namespace

Context::Context(int device, bool tf32) : tf32_(tf32) {
  try {
    SLRT_CHECK(cudaSetDevice(device));
    SLRT_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SLRT_CHECK(cudaMalloc(&checkWords_, 2 * sizeof(unsigned long long)));
    SLRT_CHECK(cudaHostAlloc(&checkHost_, 2 * sizeof(unsigned long long), cudaHostAllocDefault));
  } catch (...) {
    release();
    throw;
  }
}

Context::~Context() { release(); }

// Errors are ignored: this runs from the destructor and from the constructor's failure path.
void Context::release() noexcept {
  destroyCudnnAttention(cudnnAttention);
  cudnnAttention = nullptr;
  destroyLtPlans(ltPlans);
  ltPlans = nullptr;
  if (cublasLt_)
    cublasLtDestroy(cublasLt_);
  if (cublas_)
    cublasDestroy(cublas_);
  if (scratch_ && stream_) {
    cudaFreeAsync(scratch_, stream_);
    cudaStreamSynchronize(stream_);
  }
  if (checkWords_)
    cudaFree(checkWords_);
  if (checkHost_)
    cudaFreeHost(checkHost_);
  if (stream_)
    cudaStreamDestroy(stream_);
  cublas_ = nullptr;
  cublasLt_ = nullptr;
  scratch_ = nullptr;
  checkWords_ = nullptr;
  checkHost_ = nullptr;
  stream_ = nullptr;
}

cublasHandle_t Context::cublas() {
  if (!cublas_) {
    SLRT_CHECK(cublasCreate(&cublas_));
    SLRT_CHECK(cublasSetStream(cublas_, stream_));
    // The default math mode computes fp32 GEMMs in fp32, so results agree with the CPU backend to
    // fp32 rounding; TF32 (sl-run --tf32) trades that for tensor cores.
    SLRT_CHECK(cublasSetMathMode(cublas_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  }
  return cublas_;
}

cublasLtHandle_t Context::cublasLt() {
  if (!cublasLt_)
    SLRT_CHECK(cublasLtCreate(&cublasLt_));
  return cublasLt_;
}

std::byte *Context::scratch(size_t bytes) {
  if (bytes > scratchBytes_) {
    // Stream-ordered: kernels queued before this use the old block until they finish; a
    // cudaFree/cudaMalloc here would synchronise the whole device (and, with NCCL kernels in
    // flight on another stream, could deadlock).
    size_t grown = std::max(bytes, 2 * scratchBytes_);
    if (scratch_)
      SLRT_CHECK(cudaFreeAsync(scratch_, stream_));
    scratch_ = nullptr;
    scratchBytes_ = 0;
    void *block = nullptr;
    SLRT_CHECK(cudaMallocAsync(&block, grown, stream_));
    scratch_ = static_cast<std::byte *>(block);
    scratchBytes_ = grown;
  }
  return scratch_;
}

void Context::synchronize() { SLRT_CHECK(cudaStreamSynchronize(stream_)); }

void Context::resetCheck() {
  SLRT_CHECK(cudaMemsetAsync(checkWords_, 0xff, sizeof(unsigned long long), stream_));
  SLRT_CHECK(cudaMemsetAsync(checkWords_ + 1, 0, sizeof(unsigned long long), stream_));
}

Context::Check Context::readCheck() {
  SLRT_CHECK(cudaMemcpyAsync(checkHost_, checkWords_, 2 * sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return {checkHost_[0], checkHost_[1]};
}

void Context::readBack(void *target, const void *source, size_t bytes) {
  SLRT_CHECK(cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToHost, stream_));
  synchronize();
}

namespace {

using namespace sl::schedule;

Tensor tensorOf(const TensorRef &ref) {
  Tensor t;
  t.data = ref.data;
  t.elementSize = static_cast<unsigned>(dtypeSize(ref.dtype));
  t.shape = ref.shape;
  switch (ref.dtype) {
  case F32:
    t.element = Element::kF32;
    break;
  case F64:
    t.element = Element::kF64;
    break;
  case BF16:
    t.element = Element::kBF16;
    break;
  case I64:
    t.element = Element::kI64;
    break;
  case I32:
    t.element = Element::kI32;
    break;
  case BOOL:
    t.element = Element::kBool;
    break;
  default:
    t.element = Element::kOther;
    break;
  }
  return t;
}

Dims dims(const google::protobuf::RepeatedField<int64_t> &values) {
  return Dims(values.begin(), values.end());
}

BinaryOp binaryOp(OpKind op) {
  switch (op) {
#define SL_BINARY_KERNEL(NAME, SL_OP, FUNCTION, ...)                                               \
  case NAME:                                                                                       \
    return BinaryOp::k##FUNCTION;
#include "schedule/kernel_table.def"
  default:
    throw makeError(OpKind_Name(op), " is not a binary op");
  }
}

UnaryOp unaryOp(OpKind op) {
  switch (op) {
#define SL_UNARY_KERNEL(NAME, SL_OP, FUNCTION, ...)                                                \
  case NAME:                                                                                       \
    return UnaryOp::k##FUNCTION;
#include "schedule/kernel_table.def"
  default:
    throw makeError(OpKind_Name(op), " is not a unary op");
  }
}

// Enqueues one verified compute kernel on ctx's stream, as CpuBackend::execute does on the host.
void run(Context &ctx, const Kernel &kernel, const std::vector<const TensorRef *> &operandRefs,
         const std::vector<const TensorRef *> &resultRefs) {
  std::vector<Tensor> in, out;
  for (const TensorRef *ref : operandRefs)
    in.push_back(tensorOf(*ref));
  for (const TensorRef *ref : resultRefs)
    out.push_back(tensorOf(*ref));
  const Tensor &y = out[0];
  auto optional = [&](size_t i) { return in.size() > i ? &in[i] : nullptr; };
  // The attention kernels' ALiBi slopes are their last operand.
  const bool alibi = kernel.has_attention() && kernel.attention().alibi();
  const Tensor *slopes = alibi ? &in.back() : nullptr;
  const bool bshd = kernel.has_attention() &&
                    kernel.attention().layout() == sl::schedule::AttentionAttributes::BSHD;
  const OpKind op = kernel.op();
  switch (kernelFamily(op)) {
  case KernelFamily::kBinary:
    return binary(ctx, binaryOp(op), in[0], in[1], y);
  case KernelFamily::kUnary: // only GELU has attributes (gelu.tanh)
    return unary(ctx, unaryOp(op), kernel.gelu().tanh(), in[0], y);
  case KernelFamily::kCompare:
    return compare(ctx, op == LESS, in[0], in[1], y);
  case KernelFamily::kReduce:
    return reduce(ctx, op == REDUCE_MEAN, dims(kernel.reduce().axes()), in[0], y);
  case KernelFamily::kOwn:
    break;
  }
  switch (op) {
  case MATMUL:
    return matmul(ctx, kernel.matmul().trans_a(), kernel.matmul().trans_b(), in[0], in[1], y);
  case GEMM: {
    const GemmAttributes &g = kernel.gemm();
    return gemm(ctx, g.trans_a(), g.trans_b(), g.alpha(), g.beta(), in[0], in[1], optional(2), y);
  }
  case WHERE:
    return where(ctx, in[0], in[1], in[2], y);
  case CAST:
    return cast(ctx, in[0], y);
  case SWIGLU:
    return swiglu(ctx, in[0], in[1], y);
  case ACCUMULATE:
    return accumulate(ctx, in[0], in[1], y);
  case SOFTMAX:
    return softmax(ctx, kernel.axis().axis(), in[0], y);
  case LAYER_NORM:
    return layerNorm(ctx, kernel.norm().axis(), kernel.norm().epsilon(), in[0], in[1], optional(2),
                     y);
  case RMS_NORM:
    return rmsNorm(ctx, kernel.norm().epsilon(), in[0], in[1], y);
  case TRANSPOSE:
    return transpose(ctx, dims(kernel.transpose().perm()), in[0], y);
  case GATHER:
    return gather(ctx, kernel.axis().axis(), in[0], in[1], y);
  case CONCAT:
    return concat(ctx, kernel.axis().axis(), in, y);
  case SLICE:
    return slice(ctx, dims(kernel.slice().starts()), dims(kernel.slice().steps()), in[0], y);
  case EXPAND:
    return expand(ctx, in[0], y);
  case TRILU:
    return trilu(ctx, kernel.trilu().upper(), kernel.trilu().k(), in[0], y);
  case CUMSUM:
    return cumSum(ctx, kernel.cumsum().axis(), kernel.cumsum().exclusive(),
                  kernel.cumsum().reverse(), in[0], y);
  case ROTARY:
    return rotary(ctx, kernel.rotary().interleaved(), false, in[0], in[1], in[2], y);
  case ATTENTION:
    return attention(ctx, kernel.attention().causal(), kernel.attention().scale(), bshd, in[0],
                     in[1], in[2], in.size() > (alibi ? 4u : 3u) ? &in[3] : nullptr, slopes, y);
  case DECODE_ATTENTION:
    return decodeAttention(ctx, kernel.attention().scale(), in[0], in[1], in[2], in[3], in[4],
                           slopes, y);
  case TAKE_ROWS:
    return takeRows(ctx, in[0], in[1], y);
  case KV_WRITE: // a cache on the device; one in the host pool runs on the host (execute)
    return kvWrite(ctx, kernel.kv_write().layout() == sl::schedule::AttentionAttributes::BSHD,
                   in[0], in[1], in[2], optional(3));
  case CROSS_ENTROPY:
    return crossEntropy(ctx, kernel.cross_entropy().ignore_index(), in[0], in[1], y);
  case CROSS_ENTROPY_GRAD:
    return crossEntropyGrad(ctx, kernel.cross_entropy().ignore_index(), in[0], in[1], in[2], y);
  case SOFTMAX_GRAD:
    return softmaxGrad(ctx, kernel.axis().axis(), in[0], in[1], y);
  case RMS_NORM_GRAD:
    return rmsNormGrad(ctx, kernel.norm().epsilon(), in[0], in[1], in[2], out[0], out[1]);
  case LAYER_NORM_GRAD:
    return layerNormGrad(ctx, kernel.norm().axis(), kernel.norm().epsilon(), in[0], in[1], in[2],
                         out[0], out[1], out[2]);
  case ROTARY_GRAD:
    return rotary(ctx, kernel.rotary().interleaved(), true, in[0], in[1], in[2], y);
  case ATTENTION_GRAD:
    return attentionGrad(ctx, kernel.attention().causal(), kernel.attention().scale(), bshd,
                         in[0], in[1], in[2], in[3],
                         in.size() > (alibi ? 5u : 4u) ? &in[4] : nullptr, slopes, out[0], out[1],
                         out[2]);
  case GELU_GRAD:
    return geluGrad(ctx, kernel.gelu().tanh(), in[0], in[1], y);
  case SWIGLU_GRAD:
    return swigluGrad(ctx, in[0], in[1], in[2], out[0], out[1]);
  case GATHER_GRAD:
    return gatherGrad(ctx, kernel.axis().axis(), in[0], in[1], y);
  case SLICE_GRAD:
    return sliceGrad(ctx, dims(kernel.slice().starts()), dims(kernel.slice().steps()), in[0], y);
  default:
    throw makeError("the CUDA backend cannot execute op ", OpKind_Name(kernel.op()),
                    " on device buffers");
  }
}

class CudaBackend final : public Backend {
public:
  CudaBackend(int device, bool tf32)
      : device_(device), tf32_(tf32), syncEachCall_(syncEachCall()), host_(createCpuBackend()) {
    SLRT_CHECK(cudaSetDevice(device_));
    // Creates the device's primary context now, so that a broken driver or device fails here.
    SLRT_CHECK(cudaFree(nullptr));
  }

  ~CudaBackend() override { release(); }

  std::string name() const override { return "cuda"; }

  // What sl-run checks the arena against before it allocates (slrt/memory_check.h).
  std::optional<uint64_t> deviceMemoryAvailable() const override {
    SLRT_CHECK(cudaSetDevice(device_));
    size_t free = 0, total = 0;
    SLRT_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<uint64_t>(free);
  }

  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override {
    release();
    SLRT_CHECK(cudaSetDevice(device_));
    if (deviceArenaBytes > 0) {
      void *arena = nullptr;
      cudaError_t status = cudaMalloc(&arena, deviceArenaBytes);
      if (status != cudaSuccess) {
        cudaGetLastError();
        throw makeError("cannot allocate the device arena of ", deviceArenaBytes,
                        " bytes on CUDA device ", device_, ": ", cudaGetErrorName(status), " (",
                        cudaGetErrorString(status), ")");
      }
      arena_ = static_cast<std::byte *>(arena);
    }
    if (hostPoolBytes > 0) {
      // Exactly the schedule's size, pinned so that copies run at full link speed.
      void *pool = nullptr;
      cudaError_t status = cudaHostAlloc(&pool, hostPoolBytes, cudaHostAllocDefault);
      if (status != cudaSuccess) {
        cudaGetLastError();
        throw makeError("cannot allocate the pinned host pool of ", hostPoolBytes,
                        " bytes: ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                        ")");
      }
      pool_ = static_cast<std::byte *>(pool);
    }
  }

  std::byte *deviceArena() override { return arena_; }
  // An empty pool still has an address, as the CPU backend's does.
  std::byte *hostPool() override { return pool_ ? pool_ : emptyPool_; }

  void execute(const Kernel &kernel, const std::vector<const TensorRef *> &operands,
               const std::vector<const TensorRef *> &results) override {
    // HOST_COMPUTE kernels (ACCUMULATE over the host pool, KV_WRITE) are the CPU backend's; the
    // executor has waited on the host for what they read.
    if (executesOnHost(results))
      return host_->execute(kernel, operands, results);
    Context &ctx = context();
    run(ctx, kernel, operands, results);
    if (syncEachCall_)
      ctx.synchronize();
  }

  // Both ends are the arena or the pinned pool, so the copy is a DMA in stream order and returns
  // at once; the executor's events keep either end from being reused before it is done.
  void copy(const TensorRef &src, const TensorRef &dst) override {
    // A copy exactly in place (the verifier allows it) has nothing to move.
    if (src.bytes == 0 || src.data == dst.data)
      return;
    Context &ctx = context();
    SLRT_CHECK(cudaMemcpyAsync(dst.data, src.data, src.bytes, cudaMemcpyDefault, ctx.stream()));
    if (syncEachCall_)
      ctx.synchronize();
  }

  // One cudaEvent_t per slot, without timing (cheaper to record and wait on).
  void createEvents(size_t count) override {
    SLRT_CHECK(cudaSetDevice(device_));
    destroyEvents();
    events_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      cudaEvent_t event = nullptr;
      SLRT_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      events_.push_back(event);
    }
    flags_.create(count);
  }

  void resetEvents() override { flags_.reset(); }

  void recordEvent(uint32_t slot) override {
    flags_.checkRecordable(slot);
    Context &ctx = context();
    SLRT_CHECK(cudaEventRecord(events_[slot], ctx.stream()));
    flags_.markRecorded(slot);
  }

  bool waitEvent(uint32_t slot, bool onHost) override {
    flags_.checkRecorded(slot);
    if (!onHost) {
      SLRT_CHECK(cudaStreamWaitEvent(context().stream(), events_[slot], 0));
      return false;
    }
    SLRT_CHECK(cudaSetDevice(device_));
    cudaError_t status = cudaEventQuery(events_[slot]);
    if (status == cudaSuccess)
      return false;
    if (status != cudaErrorNotReady)
      check(status, "cudaEventQuery(event)");
    SLRT_CHECK(cudaEventSynchronize(events_[slot]));
    return true;
  }

  // Waits for the calling thread's stream.
  void synchronize() override {
    // The lock only finds the context; waiting for the stream under it would serialise every
    // other thread's context() behind this wait. A context lives until release(), which runs
    // only when no stream thread is left.
    Context *ctx = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = contexts_.find(std::this_thread::get_id());
      if (found != contexts_.end())
        ctx = found->second.get();
    }
    if (ctx) {
      SLRT_CHECK(cudaSetDevice(device_));
      ctx->synchronize();
    }
  }

  uint64_t deviceWorkingBytes(unsigned deviceStreams) const override {
    return kDeviceWorkingFixedBytes + uint64_t{deviceStreams} * kDeviceWorkingPerStreamBytes;
  }

  // Kernels are timed with timing events: two per mark, recorded on the marking thread's stream
  // around its work, and a reference event recorded on an idle stream of the backend's own, so it
  // completes as soon as it is issued. Events of one device are comparable across streams. The
  // events are created here, between runs, and kept for the next ones: the marks cost one
  // cudaEventRecord each and nothing waits for them.
  bool timesKernels() const override { return true; }

  void beginKernelTiming(size_t marks) override {
    SLRT_CHECK(cudaSetDevice(device_));
    if (!timingStream_)
      SLRT_CHECK(cudaStreamCreateWithFlags(&timingStream_, cudaStreamNonBlocking));
    if (!timingReference_)
      SLRT_CHECK(cudaEventCreate(&timingReference_));
    while (timingEvents_.size() < 2 * marks) {
      cudaEvent_t event = nullptr;
      SLRT_CHECK(cudaEventCreate(&event));
      timingEvents_.push_back(event);
    }
    timingMarks_ = marks;
    SLRT_CHECK(cudaEventRecord(timingReference_, timingStream_));
  }

  void markKernelStart(uint32_t mark) override { recordMark(mark, false); }
  void markKernelEnd(uint32_t mark) override { recordMark(mark, true); }

  // Every stream has been synchronised, so every mark's events have completed; the reference's
  // stream has nothing else on it, so waiting for it waits for no work.
  std::vector<std::pair<double, double>> kernelTimes() override {
    SLRT_CHECK(cudaSetDevice(device_));
    SLRT_CHECK(cudaEventSynchronize(timingReference_));
    std::vector<std::pair<double, double>> times(timingMarks_);
    for (size_t mark = 0; mark < timingMarks_; ++mark) {
      float startMs = 0, durationMs = 0;
      SLRT_CHECK(cudaEventElapsedTime(&startMs, timingReference_, timingEvents_[2 * mark]));
      SLRT_CHECK(
          cudaEventElapsedTime(&durationMs, timingEvents_[2 * mark], timingEvents_[2 * mark + 1]));
      times[mark] = {startMs * 1e-3, durationMs * 1e-3};
    }
    return times;
  }

private:
  void recordMark(uint32_t mark, bool end) {
    if (mark >= timingMarks_)
      throw makeError("timing mark ", mark, " is out of range (", timingMarks_,
                      " marks in this run)");
    Context &ctx = context();
    SLRT_CHECK(cudaEventRecord(timingEvents_[2 * size_t{mark} + (end ? 1 : 0)], ctx.stream()));
  }

  // The calling thread's context, created on its first call.
  Context &context() {
    // The current device is per host thread (and a new thread may reuse an old one's id): every
    // thread that touches the device sets it here, by the one rule of slrt/device_rule.h.
    SLRT_CHECK(cudaSetDevice(device_));
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Context> &slot = contexts_[std::this_thread::get_id()];
    if (!slot)
      slot = std::make_unique<Context>(device_, tf32_);
    return *slot;
  }

  // Frees the contexts (a new allocate() starts a new executor, with new threads) and the memory.
  // Errors are ignored: this runs from the destructor too.
  void release() {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    destroyEvents();
    destroyTiming();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      contexts_.clear();
    }
    if (arena_)
      cudaFree(arena_);
    if (pool_)
      cudaFreeHost(pool_);
    arena_ = pool_ = nullptr;
  }

  // Errors are ignored: release() calls it too.
  void destroyEvents() noexcept {
    for (cudaEvent_t event : events_)
      cudaEventDestroy(event);
    events_.clear();
    flags_.create(0);
  }

  // Errors are ignored: release() calls it too.
  void destroyTiming() noexcept {
    for (cudaEvent_t event : timingEvents_)
      cudaEventDestroy(event);
    timingEvents_.clear();
    timingMarks_ = 0;
    if (timingReference_)
      cudaEventDestroy(timingReference_);
    timingReference_ = nullptr;
    if (timingStream_)
      cudaStreamDestroy(timingStream_);
    timingStream_ = nullptr;
  }

  int device_;
  bool tf32_;
  bool syncEachCall_;
  std::unique_ptr<Backend> host_;
  std::vector<cudaEvent_t> events_;
  EventFlags flags_;
  // Kernel timing: the reference's stream and event, two events per mark (start, end), and the
  // marks of the current run.
  cudaStream_t timingStream_ = nullptr;
  cudaEvent_t timingReference_ = nullptr;
  std::vector<cudaEvent_t> timingEvents_;
  size_t timingMarks_ = 0;
  std::byte *arena_ = nullptr;
  std::byte *pool_ = nullptr;
  alignas(64) std::byte emptyPool_[64] = {};
  std::mutex mutex_;
  std::unordered_map<std::thread::id, std::unique_ptr<Context>> contexts_;
};

} // namespace
} // namespace cuda

int cudaDeviceCountOrZero() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the error so later calls start clean
    return 0;
  }
  return count;
}

std::unique_ptr<Backend> createCudaBackend(int device, bool tf32) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw makeError(
        "the CUDA backend found no usable GPU (cudaGetDeviceCount: ", cudaGetErrorName(status),
        ", ", cudaGetErrorString(status), "); use --backend cpu on a machine without one");
  }
  if (count == 0)
    throw makeError("the CUDA backend found no CUDA device; use --backend cpu on a machine "
                    "without one");
  if (device < 0 || device >= count)
    throw makeError("CUDA device ", device, " does not exist (", count, " visible)");
  return std::make_unique<cuda::CudaBackend>(device, tf32);
}

} // namespace slrt
