// The interface every backend (cpu, cuda) implements for the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.pb.h"
#include "slrt/error.h"
#include "slrt/shape.h"

namespace slrt {

// A buffer as a backend sees it: where its bytes are (in the memory space `space`, so `data` may be
// a device address) and what they hold.
struct TensorRef {
  std::byte *data = nullptr;
  sl::schedule::MemorySpace space = sl::schedule::MEMORY_SPACE_UNSPECIFIED;
  sl::schedule::DType dtype = sl::schedule::DTYPE_UNSPECIFIED;
  Shape shape;
  uint64_t bytes = 0;
};

class Backend {
public:
  virtual ~Backend() = default;

  // The name sl-run's --backend takes ("cpu", "cuda").
  virtual std::string name() const = 0;

  // Bytes of device memory free for the arena now, asked before allocate(); nullopt where the arena
  // is host memory (the CPU backend), whose free memory the caller measures itself
  // (slrt/memory_check.h). A CUDA backend answers with cudaMemGetInfo's free bytes.
  virtual std::optional<uint64_t> deviceMemoryAvailable() const { return std::nullopt; }

  // Device memory a run with `deviceStreams` device stream threads needs beyond its arena
  // (library workspaces, scratch, loaded kernels), which sl-run's memory check adds to the arena.
  // 0 where the arena is host memory.
  virtual uint64_t deviceWorkingBytes(unsigned deviceStreams) const {
    (void)deviceStreams;
    return 0;
  }

  // Allocates the device arena and the host pool, once, before anything else. Either may be 0
  // bytes.
  virtual void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) = 0;

  // Base addresses of the two memory spaces. The host pool is always addressable by the host; the
  // device arena only by the backend (on the CPU backend it is RAM too).
  virtual std::byte *deviceArena() = 0;
  virtual std::byte *hostPool() = 0;

  // The device model. The executor calls from one host thread per schedule stream, and each such
  // thread has a stream of the backend's own (a CUDA stream; on the CPU backend, the thread
  // itself). execute and copy issue their work on the calling thread's stream and may return
  // before it is done (the CUDA backend does, unless SLRT_CUDA_SYNC=1); the work of one stream
  // completes in the order it was issued. Streams are ordered by events, one per slot
  // (createEvents), each recorded at most once per run:
  //  - recordEvent(slot) issues a record on the calling thread's stream: the event completes once
  //    everything issued on that stream before it has. The slot counts as recorded as soon as
  //    the record is issued (when recordEvent returns), never before.
  //  - waitEvent(slot, onHost = false) makes the work the calling thread issues next start after
  //    the event has completed, without blocking the thread; waitEvent(slot, true) blocks the
  //    thread until the event has completed, and is what a caller does before it reads or writes
  //    on the host what other streams' work touches. It returns whether the thread blocked.
  //    A slot not recorded since the last resetEvents is an Error, never a silent no-op (as
  //    cudaStreamWaitEvent on a never-recorded event would be): a caller orders its records
  //    before its waits on the host (the executor keeps host-side flags for that and blocks on
  //    them first).
  //  - synchronize() blocks until the calling thread's stream has finished what was issued on it,
  //    and raises the first error of that work that surfaced only then (an asynchronous fault).
  // The verifier guarantees that concurrent kernels do not touch the same bytes with one of them
  // writing unless events order them, so a backend needs no locking of its own beyond that.
  //
  // Event slots 0 .. count-1, none recorded; after allocate() (a later allocate() may drop them).
  virtual void createEvents(size_t count) = 0;
  // Every slot unrecorded again; called between runs, when no stream has work in flight.
  virtual void resetEvents() = 0;
  virtual void recordEvent(uint32_t slot) = 0;
  virtual bool waitEvent(uint32_t slot, bool onHost) = 0;
  virtual void synchronize() = 0;

  // Runs one compute kernel (any op but COPY and OPTIMIZER_STEP, which the executor handles). A
  // kernel whose results are HOST buffers (executesOnHost: ACCUMULATE of a HOST_COMPUTE stream, a
  // KV_WRITE into a host cache) comes here too: every backend runs it on the host, and it has
  // completed when execute returns; the caller has waited on the host (waitEvent(slot, true) and
  // synchronize) for the work that wrote what it reads. The caller has verified the kernel against
  // its operands and results (verifySchedule), so shapes and dtypes are trusted here. Failures
  // that depend on the data are Errors raised before anything is written (a device backend reads
  // its checks back first); their messages do not name the kernel (the executor does).
  //
  // Where the schedule contract is silent, every backend computes alike:
  //  - SOFTMAX and ATTENTION subtract the row maximum before exponentiating; a row with no
  //    finite score (every element -inf, or, for ATTENTION, no key the causal rule and the mask
  //    allow) is zeros, not NaN;
  //  - i64 ADD, SUB, MUL and NEG wrap around on overflow, DIV truncates toward zero and
  //    INT64_MIN / -1 is INT64_MIN; a zero divisor is an Error;
  //  - CAST from a float to an integer truncates toward zero, saturates out of range and gives 0
  //    for NaN; integer narrowing wraps; anything to bool is x != 0 (NaN is true);
  //  - a BOOL element is a byte, true when non-zero; kernels write 0 or 1;
  //  - a GATHER index outside [-n, n) for an axis of n is an Error, and so are a KV_WRITE start,
  //    a DECODE_ATTENTION length and a TAKE_ROWS index out of the range the contract gives;
  //  - DECODE_ATTENTION subtracts the maximum score too; its row is never empty (the new token
  //    always sees itself), and a NaN or infinite score makes it NaN.
  virtual void execute(const sl::schedule::Kernel &kernel,
                       const std::vector<const TensorRef *> &operands,
                       const std::vector<const TensorRef *> &results) = 0;

  // Copies src.bytes bytes from src to dst, in whichever spaces they are, on the calling
  // thread's stream.
  virtual void copy(const TensorRef &src, const TensorRef &dst) = 0;

  // Timing kernels where they run, for a backend whose execute and copy return before their work
  // is done (so that host clocks around the calls measure only the issuing). Optional: a backend
  // that does not time kernels (the CPU backend, whose calls are the work) answers false to
  // timesKernels, and the executor then asks nothing else of it. A run that times kernels:
  //  - beginKernelTiming(marks), called between runs (no stream has work in flight), prepares marks
  //    0 .. marks-1 for the run about to start and takes the run's time reference now. Whatever
  //    it allocates it allocates here, so that the marks themselves cost no allocation (the
  //    executor calls it once more when it is created, with the most marks any run will use, so
  //    that no run pays for it).
  //  - markKernelStart(mark) and markKernelEnd(mark) issue, on the calling thread's stream, the
  //    start and the end of mark `mark` around one kernel's work (each mark started and ended
  //    once, by one thread); they add no synchronisation.
  //  - kernelTimes(), called once every stream has been synchronised after a run in which every
  //    mark was ended, gives per mark its start, in seconds after the reference, and its duration
  //    in seconds: when the stream reached the start and how long it took from there to the end
  //    (on CUDA, cudaEventElapsedTime of timing events: about 0.5 us resolution).
  // A run that fails is not asked for its times.
  virtual bool timesKernels() const { return false; }
  virtual void beginKernelTiming(size_t marks) {
    (void)marks;
    noKernelTiming();
  }
  virtual void markKernelStart(uint32_t mark) {
    (void)mark;
    noKernelTiming();
  }
  virtual void markKernelEnd(uint32_t mark) {
    (void)mark;
    noKernelTiming();
  }
  virtual std::vector<std::pair<double, double>> kernelTimes() { noKernelTiming(); }

private:
  [[noreturn]] void noKernelTiming() const {
    throw makeError("the ", name(), " backend does not time kernels");
  }
};

// Whether Backend::execute runs a kernel with these results on the host, synchronously: one that
// writes the host pool.
inline bool executesOnHost(const std::vector<const TensorRef *> &results) {
  return !results.empty() && results[0]->space == sl::schedule::HOST;
}

// The reference backend: fp32 on the host (f64 too, for checking), OpenBLAS for the GEMMs, both
// memory spaces in RAM.
std::unique_ptr<Backend> createCpuBackend();

// How a backend computes where the schedule leaves it a choice.
struct BackendOptions {
  // f32 GEMMs on tensor cores in TF32 (inputs rounded to a 10-bit mantissa, f32 accumulation):
  // several times faster on a GPU, less exact. Off by default. The CUDA backend only; the CPU
  // backend computes f32 GEMMs in f32 whatever it says.
  bool tf32 = false;
};

// The backend sl-run's --backend names: "cpu", or "cuda" (slrt/cuda_backend.h). Throws Error for
// an unknown name, for "cuda" in a build without CUDA and where no GPU is visible. Defined in the
// slrt_backends library, so that only what names backends links the CUDA one.
std::unique_ptr<Backend> createBackend(const std::string &name,
                                       const BackendOptions &options = {});

} // namespace slrt
