#include "slrt/paced_backend.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "slrt/error.h"

namespace slrt {
namespace {

class SteadyLinkClock : public LinkClock {
public:
  time_point now() override { return std::chrono::steady_clock::now(); }
  void sleepUntil(time_point when) override { std::this_thread::sleep_until(when); }
};

} // namespace

LinkClock &steadyLinkClock() {
  static SteadyLinkClock clock;
  return clock;
}

void checkLinkGbps(double gbps) {
  if (!(gbps >= 0) || std::isinf(gbps))
    throw makeError("the link bandwidth must be a finite number of GB/s >= 0 (0: unthrottled), "
                    "got ",
                    gbps);
}

PacedBackend::PacedBackend(std::unique_ptr<Backend> inner, double gbps, LinkClock &clock)
    : inner_(std::move(inner)), gbps_(gbps), clock_(clock) {
  checkLinkGbps(gbps);
  if (gbps == 0)
    throw makeError("a paced link needs a bandwidth > 0 GB/s (0 is unthrottled: use the backend "
                    "itself)");
}

void PacedBackend::copy(const TensorRef &src, const TensorRef &dst) {
  if (src.space == dst.space) {
    inner_->copy(src, dst);
    return;
  }
  auto duration = std::chrono::duration_cast<LinkClock::time_point::duration>(
      std::chrono::duration<double>(static_cast<double>(src.bytes) / (gbps_ * 1e9)));
  LinkClock::time_point begin, end;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    LinkClock::time_point &freeAt = freeAt_[dst.space == sl::schedule::DEVICE ? 0 : 1];
    begin = std::max(clock_.now(), freeAt);
    end = begin + duration;
    freeAt = end;
  }
  clock_.sleepUntil(begin);
  inner_->copy(src, dst);
  clock_.sleepUntil(end);
}

std::unique_ptr<Backend> withLinkPacing(std::unique_ptr<Backend> backend, double gbps) {
  checkLinkGbps(gbps);
  if (gbps == 0)
    return backend;
  return std::make_unique<PacedBackend>(std::move(backend), gbps);
}

} // namespace slrt
