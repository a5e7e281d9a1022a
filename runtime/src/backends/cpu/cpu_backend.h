// The CPU backend: the reference for numerics. Both memory spaces are 64-byte aligned RAM, every
// kernel and copy runs synchronously on the calling thread (the executor calls from one thread per
// stream: kernels keep their scratch memory on their own stack or heap, and share no mutable
// state), so a thread is its own stream and an event has completed once it is recorded: events
// are only the flags of event_flags.h, which make a wait on an unrecorded slot an Error as on
// CUDA (the executor blocks on its own host-side flags until the record is issued). It computes
// in fp32 (sums, norms and softmax denominators accumulate in double; i64 where the op
// allows it; exp in softmax rows, the cross-entropy, SiLU, sigmoid and SwiGLU is the vectorised
// one of vector_math.h) or, for float64 schedules (gradient checks), every float op in double
// from the same kernel templates, GEMMs go through OpenBLAS (attention's too: score and value
// GEMMs over tiles of query rows), and the other kernels split large tensors across OpenMP
// threads without letting the thread count change any result. The kernels themselves are in
// cpu_kernels.h.
//
// bf16 kernels (sl-opt precision=bf16) compute exactly as their f32 kernels on the operands widened
// to f32, each result rounded once to bf16 (round to nearest even, slrt/bfloat16.h): the reference
// the CUDA backend's bf16 kernels are checked against. The widened copies live in scratch memory
// kept per calling thread (so per schedule stream) and reused from kernel to kernel. Kernels that
// only move elements (TRANSPOSE, GATHER, CONCAT, SLICE, EXPAND, TRILU, WHERE, TAKE_ROWS, KV_WRITE,
// SLICE_GRAD) move the bf16 bits as they are.
#pragma once

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "backends/event_flags.h"
#include "slrt/backend.h"

namespace slrt {

class CpuBackend final : public Backend {
public:
  std::string name() const override { return "cpu"; }
  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override;
  std::byte *deviceArena() override { return arena_.get(); }
  std::byte *hostPool() override { return pool_.get(); }
  void execute(const sl::schedule::Kernel &kernel, const std::vector<const TensorRef *> &operands,
               const std::vector<const TensorRef *> &results) override;
  void copy(const TensorRef &src, const TensorRef &dst) override;
  void createEvents(size_t count) override { events_.create(count); }
  void resetEvents() override { events_.reset(); }
  void recordEvent(uint32_t slot) override {
    events_.checkRecordable(slot);
    events_.markRecorded(slot);
  }
  // Whatever preceded the record ran before it on the recording thread: nothing to wait for.
  bool waitEvent(uint32_t slot, bool) override {
    events_.checkRecorded(slot);
    return false;
  }
  void synchronize() override {}

private:
  struct FreeDeleter {
    void operator()(std::byte *p) const { std::free(p); }
  };
  using Memory = std::unique_ptr<std::byte, FreeDeleter>;
  static Memory allocateAligned(uint64_t bytes, const char *what);

  // f32 room for the widened buffers of a bf16 kernel; grows to the largest kernel's need.
  struct Scratch {
    std::unique_ptr<float[]> data;
    uint64_t capacity = 0;
    float *reserve(uint64_t count);
  };
  Scratch &scratch(); // the calling thread's
  void executeWidened(const sl::schedule::Kernel &kernel,
                      const std::vector<const TensorRef *> &operands,
                      const std::vector<const TensorRef *> &results);
  void dispatch(const sl::schedule::Kernel &kernel, const std::vector<const TensorRef *> &operands,
                const std::vector<const TensorRef *> &results);

  Memory arena_;
  Memory pool_;
  EventFlags events_;
  std::mutex scratchMutex_;
  // Node-based: a thread's Scratch stays where it is while other threads add theirs.
  std::unordered_map<std::thread::id, Scratch> scratch_;
};

} // namespace slrt
