// Link pacing (sl-run --link-gbps) as a backend decorator: a Backend that runs everything on
// another and paces its host<->device copies to a bandwidth, to emulate a PCIe link on a backend
// whose copies are memcpys (the CPU backend), so that benchmarks see a link-bound run.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "slrt/backend.h"

namespace slrt {

// What pacing reads the time from and sleeps on: the steady clock, or a test's.
class LinkClock {
public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~LinkClock() = default;
  virtual time_point now() = 0;
  virtual void sleepUntil(time_point when) = 0;
};

// std::chrono::steady_clock and std::this_thread::sleep_until.
LinkClock &steadyLinkClock();

// Throws Error unless `gbps` is a finite number >= 0 (0: unthrottled).
void checkLinkGbps(double gbps);

// Forwards every call to `inner`, except that a copy between the host and the device reserves
// its direction of the link for bytes / (gbps * 1e9) seconds after whatever copy of the same
// direction (another stream's) holds it, waits for the reservation to begin, copies, and waits
// for it to end. Copies of one direction thus take turns and move at most gbps GB/s (1e9 bytes)
// together; the two directions are independent, as a PCIe link's are, and copies within one
// space are not paced. The wait is the calling thread's, so the executor counts it in the copy's
// time (busy seconds, trace span). Throws Error for a gbps that checkLinkGbps refuses or is 0.
// `clock` must outlive the backend.
class PacedBackend : public Backend {
public:
  PacedBackend(std::unique_ptr<Backend> inner, double gbps, LinkClock &clock = steadyLinkClock());

  double gbps() const { return gbps_; }
  Backend &inner() { return *inner_; }

  std::string name() const override { return inner_->name(); }
  std::optional<uint64_t> deviceMemoryAvailable() const override {
    return inner_->deviceMemoryAvailable();
  }
  uint64_t deviceWorkingBytes(unsigned deviceStreams) const override {
    return inner_->deviceWorkingBytes(deviceStreams);
  }
  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override {
    inner_->allocate(deviceArenaBytes, hostPoolBytes);
  }
  std::byte *deviceArena() override { return inner_->deviceArena(); }
  std::byte *hostPool() override { return inner_->hostPool(); }
  void createEvents(size_t count) override { inner_->createEvents(count); }
  void resetEvents() override { inner_->resetEvents(); }
  void recordEvent(uint32_t slot) override { inner_->recordEvent(slot); }
  bool waitEvent(uint32_t slot, bool onHost) override { return inner_->waitEvent(slot, onHost); }
  void synchronize() override { inner_->synchronize(); }
  void execute(const sl::schedule::Kernel &kernel, const std::vector<const TensorRef *> &operands,
               const std::vector<const TensorRef *> &results) override {
    inner_->execute(kernel, operands, results);
  }
  void copy(const TensorRef &src, const TensorRef &dst) override;
  bool timesKernels() const override { return inner_->timesKernels(); }
  void beginKernelTiming(size_t marks) override { inner_->beginKernelTiming(marks); }
  void markKernelStart(uint32_t mark) override { inner_->markKernelStart(mark); }
  void markKernelEnd(uint32_t mark) override { inner_->markKernelEnd(mark); }
  std::vector<std::pair<double, double>> kernelTimes() override { return inner_->kernelTimes(); }

private:
  std::unique_ptr<Backend> inner_;
  double gbps_;
  LinkClock &clock_;
  std::mutex mutex_;
  // When each direction (0: host to device, 1: device to host) is free again.
  LinkClock::time_point freeAt_[2];
};

// `backend` paced to `gbps` (a PacedBackend), or `backend` itself for 0. Throws Error for a gbps
// that checkLinkGbps refuses.
std::unique_ptr<Backend> withLinkPacing(std::unique_ptr<Backend> backend, double gbps);

} // namespace slrt
