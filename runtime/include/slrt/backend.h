// The interface every backend (cpu, cuda) implements for the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "schedule/schedule.pb.h"
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

  // The name sl-run's --backend takes ("cpu").
  virtual std::string name() const = 0;

  // Allocates the device arena and the host pool, once, before anything else. Either may be 0
  // bytes.
  virtual void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) = 0;

  // Base addresses of the two memory spaces. The host pool is always addressable by the host; the
  // device arena only by the backend (on the CPU backend it is RAM too).
  virtual std::byte *deviceArena() = 0;
  virtual std::byte *hostPool() = 0;

  // Runs one compute kernel (any op but COPY). The caller has verified the kernel against its
  // operands and results (verifySchedule), so shapes and dtypes are trusted here.
  virtual void execute(const sl::schedule::Kernel &kernel,
                       const std::vector<const TensorRef *> &operands,
                       const std::vector<const TensorRef *> &results) = 0;

  // Copies src.bytes bytes from src to dst, in whichever spaces they are.
  virtual void copy(const TensorRef &src, const TensorRef &dst) = 0;

  // Returns when everything issued so far has completed.
  virtual void synchronize() = 0;
};

// The reference backend: fp32 on the host, OpenBLAS for the GEMMs, both memory spaces in RAM.
std::unique_ptr<Backend> createCpuBackend();

// The backend sl-run's --backend names. Throws Error for an unknown name, and for "cuda", which
// does not execute schedules yet.
std::unique_ptr<Backend> createBackend(const std::string &name);

} // namespace slrt
