// Link pacing (slrt/paced_backend.h): the reservations a PacedBackend makes, on a clock the test
// moves, and the executor's copies going through it. No assertion here depends on how fast the
// machine is: the fake clock only moves when the test says, and the end-to-end test checks lower
// bounds that sleeping guarantees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/paced_backend.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Time stands still until advance(); sleeps are recorded, not slept.
class FakeClock : public LinkClock {
public:
  time_point now() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return now_;
  }
  void sleepUntil(time_point when) override {
    std::lock_guard<std::mutex> lock(mutex_);
    sleeps.push_back(when);
  }
  void advance(std::chrono::nanoseconds by) {
    std::lock_guard<std::mutex> lock(mutex_);
    now_ += by;
  }

  std::vector<time_point> sleeps;
  const time_point start = time_point() + 1h;

private:
  std::mutex mutex_;
  time_point now_ = start;
};

// Records the copies it is given, and the fake time of each.
class RecordingBackend : public Backend {
public:
  explicit RecordingBackend(FakeClock &clock) : clock_(clock) {}
  std::string name() const override { return "recording"; }
  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override {
    device_.resize(deviceArenaBytes);
    host_.resize(hostPoolBytes);
  }
  std::byte *deviceArena() override { return device_.data(); }
  std::byte *hostPool() override { return host_.data(); }
  void createEvents(size_t) override {}
  void resetEvents() override {}
  void recordEvent(uint32_t) override {}
  bool waitEvent(uint32_t, bool) override { return false; }
  void synchronize() override {}
  void execute(const sl::schedule::Kernel &, const std::vector<const TensorRef *> &,
               const std::vector<const TensorRef *> &) override {
    ++executed;
  }
  void copy(const TensorRef &src, const TensorRef &) override {
    copies.push_back({src.bytes, clock_.now()});
  }

  struct Copy {
    uint64_t bytes;
    LinkClock::time_point at;
  };
  std::vector<Copy> copies;
  int executed = 0;

private:
  FakeClock &clock_;
  std::vector<std::byte> device_, host_;
};

TensorRef ref(sl::schedule::MemorySpace space, uint64_t bytes) {
  return TensorRef{nullptr, space, sl::schedule::F32, {}, bytes};
}

// bytes / (gbps * 1e9) seconds, to the clock's nanosecond.
void expectAfter(LinkClock::time_point at, LinkClock::time_point from,
                 std::chrono::nanoseconds expected) {
  EXPECT_NEAR(static_cast<double>((at - from).count()), static_cast<double>(expected.count()), 1)
      << "ns after the start";
}

class PacedBackendTest : public ::testing::Test {
protected:
  FakeClock clock;
  RecordingBackend *inner = nullptr;
  std::unique_ptr<PacedBackend> paced;

  void pace(double gbps) {
    auto recording = std::make_unique<RecordingBackend>(clock);
    inner = recording.get();
    paced = std::make_unique<PacedBackend>(std::move(recording), gbps, clock);
  }
};

// 2 MB over a 4 GB/s link: the copy starts now and its thread waits until 500 us have passed.
TEST_F(PacedBackendTest, ACopyOfNBytesTakesNOverTheRate) {
  pace(4);
  paced->copy(ref(sl::schedule::HOST, 2000000), ref(sl::schedule::DEVICE, 2000000));
  ASSERT_EQ(inner->copies.size(), 1u);
  EXPECT_EQ(inner->copies[0].bytes, 2000000u);
  EXPECT_EQ(inner->copies[0].at, clock.start);
  ASSERT_EQ(clock.sleeps.size(), 2u);
  expectAfter(clock.sleeps[0], clock.start, 0ns);
  expectAfter(clock.sleeps[1], clock.start, 500us);
}

// Copies of one direction take turns on the link; the other direction is a link of its own;
// copies within a space are not paced at all; a link idle since its last copy starts the next
// one at once.
TEST_F(PacedBackendTest, EachDirectionIsOneLinkThatCopiesTakeTurnsOn) {
  pace(1);
  TensorRef host = ref(sl::schedule::HOST, 1000000), device = ref(sl::schedule::DEVICE, 1000000);
  paced->copy(host, device);
  paced->copy(host, device); // issued while the first still holds the link (time stood still)
  paced->copy(device, host);
  paced->copy(host, host);
  paced->copy(device, device);
  ASSERT_EQ(inner->copies.size(), 5u);
  ASSERT_EQ(clock.sleeps.size(), 6u);
  expectAfter(clock.sleeps[0], clock.start, 0ms);
  expectAfter(clock.sleeps[1], clock.start, 1ms);
  expectAfter(clock.sleeps[2], clock.start, 1ms); // the second waits for the first
  expectAfter(clock.sleeps[3], clock.start, 2ms);
  expectAfter(clock.sleeps[4], clock.start, 0ms); // device to host: free
  expectAfter(clock.sleeps[5], clock.start, 1ms);

  clock.advance(10ms);
  paced->copy(host, device);
  ASSERT_EQ(clock.sleeps.size(), 8u);
  expectAfter(clock.sleeps[6], clock.start, 10ms);
  expectAfter(clock.sleeps[7], clock.start, 11ms);
}

TEST_F(PacedBackendTest, ForwardsEverythingElse) {
  pace(1);
  EXPECT_EQ(paced->name(), "recording");
  EXPECT_EQ(&paced->inner(), inner);
  paced->allocate(64, 32);
  EXPECT_EQ(paced->deviceArena(), inner->deviceArena());
  EXPECT_EQ(paced->hostPool(), inner->hostPool());
  paced->execute(makeKernel(sl::schedule::RELU), {}, {});
  EXPECT_EQ(inner->executed, 1);
  EXPECT_FALSE(paced->timesKernels());
  EXPECT_THAT(errorOf([&] { paced->beginKernelTiming(1); }),
              HasSubstr("the recording backend does not time kernels"));
}

TEST(LinkPacingTest, BandwidthMustBeFiniteAndNotNegative) {
  for (double gbps : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    std::string message = errorOf([&] { withLinkPacing(createCpuBackend(), gbps); });
    EXPECT_THAT(message, HasSubstr("the link bandwidth must be a finite number of GB/s >= 0 (0: "
                                   "unthrottled), got "));
    EXPECT_EQ(errorOf([&] { PacedBackend(createCpuBackend(), gbps); }), message);
  }
  EXPECT_THAT(errorOf([&] { PacedBackend(createCpuBackend(), 0); }),
              HasSubstr("a paced link needs a bandwidth > 0 GB/s"));
  // 0 is no pacing: the backend itself.
  std::unique_ptr<Backend> cpu = createCpuBackend();
  Backend *raw = cpu.get();
  EXPECT_EQ(withLinkPacing(std::move(cpu), 0).get(), raw);
  EXPECT_NE(dynamic_cast<PacedBackend *>(withLinkPacing(createCpuBackend(), 2).get()), nullptr);
}

// The executor issues its copies to the backend it is given: on a paced one, each copy's time
// (busy seconds) includes its turn on the link.
TEST(PacedExecutorTest, CopiesArePacedToTheLinkBandwidth) {
  using namespace sl::schedule;
  // 1 MiB each way at 1 GB/s: each copy takes at least 1.048576 ms, however fast memcpy is. (A
  // lower bound: sleeping guarantees it, whatever the machine.)
  ScheduleBuilder b;
  constexpr int64_t kFloats = 1 << 18;
  uint32_t x = b.buffer("x", HOST, F32, {kFloats});
  uint32_t y = b.buffer("y", HOST, F32, {kFloats});
  uint32_t a = b.buffer("a", DEVICE, F32, {kFloats});
  b.input("x", x);
  b.output("y", y);
  b.schedule.set_num_events(1);
  b.kernel(COPY, "in", {x}, a).add_record_events(0);
  b.kernel(COPY, "out", {a}, y).add_wait_events(0);
  TempDir dir;
  writeSchedule(b.schedule, dir.file("copy.slsched"));
  LoadedSchedule loaded = loadSchedule(dir.file("copy.slsched"));
  PacedBackend backend(createCpuBackend(), 1);
  Executor executor(loaded, backend);
  std::mt19937 rng(1);
  HostTensor in = f32Tensor({kFloats}, randomFloats(rng, kFloats));
  std::vector<NamedTensor> out = executor.run({{"x", in}});
  EXPECT_EQ(out[0].tensor.data, in.data);
  const RunStats &stats = executor.stats();
  EXPECT_GE(stats.perStream[1].busySeconds, 1.048576e-3);
  EXPECT_GE(stats.perStream[2].busySeconds, 1.048576e-3);
  // The device-to-host copy waited for the host-to-device one, so the run took both.
  EXPECT_GE(stats.wallSeconds, 2 * 1.048576e-3);
}

} // namespace
} // namespace slrt::test
