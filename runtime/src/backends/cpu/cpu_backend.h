// The CPU backend: the reference for numerics. Both memory spaces are 64-byte aligned RAM, every
// kernel runs synchronously on the calling thread (the executor calls from one thread per stream:
// kernels keep their scratch memory on their own stack or heap, and share no mutable state) and
// computes in fp32 (sums, norms and softmax denominators accumulate in double; i64 where the op
// allows it) or, for float64 schedules (gradient checks), every float op in double from the same
// kernel templates, GEMMs go through OpenBLAS, and the other kernels split large tensors across OpenMP
// threads without letting the thread count change any result. The kernels themselves are in
// cpu_kernels.h.
#pragma once

#include <cstdlib>
#include <memory>

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
  void synchronize() override {}

private:
  struct FreeDeleter {
    void operator()(std::byte *p) const { std::free(p); }
  };
  using Memory = std::unique_ptr<std::byte, FreeDeleter>;
  static Memory allocateAligned(uint64_t bytes, const char *what);

  Memory arena_;
  Memory pool_;
};

} // namespace slrt
