// Kernels timed by the backend (ExecutorOptions::timeKernels, Backend::timesKernels): against a
// test backend that runs the CPU kernels and answers with synthetic times, the executor counts
// the backend's times for the kernels the backend runs on its streams (per op, per stream, the
// trace's kernel spans), host times for what the host runs, asks nothing of the backend without
// the option, keeps host times for a run that failed, and numbers its marks per program. Also
// the trace's separate track for the host waits of a device-timed stream.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/report.h"
#include "slrt/trace.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

// The CPU backend with the timing interface. Mark m starts kStartSeconds + m seconds after the
// reference and lasts secondsOf(its kernel's op): figures no host clock could produce for these
// tiny kernels, so a count that used them is told apart from one that used host time. A kernel it
// runs on the host (its results in the host pool) sleeps kHostKernelSeconds first, so its host
// time is at least that. It checks the protocol as it goes: each mark started and ended once, by
// one thread, around exactly one piece of work on the backend's streams, and nothing the host runs
// inside a mark; anything else goes to problems().
class TimingBackend final : public Backend {
public:
  static constexpr double kStartSeconds = 100;
  static constexpr double kHostKernelSeconds = 0.003;

  static double secondsOf(sl::schedule::OpKind op) {
    switch (op) {
    case sl::schedule::COPY:
      return 0.25;
    case sl::schedule::RELU:
      return 2;
    case sl::schedule::SIGMOID:
      return 8;
    default:
      return 1;
    }
  }

  std::string name() const override { return "timing-test"; }
  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override {
    cpu_->allocate(deviceArenaBytes, hostPoolBytes);
  }
  std::byte *deviceArena() override { return cpu_->deviceArena(); }
  std::byte *hostPool() override { return cpu_->hostPool(); }
  void createEvents(size_t count) override { cpu_->createEvents(count); }
  void resetEvents() override { cpu_->resetEvents(); }
  void recordEvent(uint32_t slot) override { cpu_->recordEvent(slot); }
  bool waitEvent(uint32_t slot, bool onHost) override { return cpu_->waitEvent(slot, onHost); }
  void synchronize() override { cpu_->synchronize(); }

  void execute(const sl::schedule::Kernel &kernel, const std::vector<const TensorRef *> &operands,
               const std::vector<const TensorRef *> &results) override {
    bool onHost = executesOnHost(results);
    work(kernel.op(), onHost);
    if (onHost)
      std::this_thread::sleep_for(std::chrono::duration<double>(kHostKernelSeconds));
    cpu_->execute(kernel, operands, results);
  }
  void copy(const TensorRef &src, const TensorRef &dst) override {
    work(sl::schedule::COPY, false);
    cpu_->copy(src, dst);
  }

  bool timesKernels() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    return true;
  }
  void beginKernelTiming(size_t marks) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    marks_.assign(marks, Mark());
    pending_.clear();
    runs_.push_back({marks, 0});
  }
  void markKernelStart(uint32_t mark) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    if (mark >= marks_.size())
      return problem("mark " + std::to_string(mark) + " started, out of range");
    Mark &m = marks_[mark];
    if (m.started)
      return problem("mark " + std::to_string(mark) + " started twice");
    if (pending_.count(std::this_thread::get_id()))
      return problem("mark " + std::to_string(mark) + " started inside another");
    m.started = true;
    m.thread = std::this_thread::get_id();
    pending_[m.thread] = mark;
  }
  void markKernelEnd(uint32_t mark) override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    if (mark >= marks_.size() || !marks_[mark].started || marks_[mark].ended ||
        marks_[mark].thread != std::this_thread::get_id() || marks_[mark].works != 1)
      return problem("mark " + std::to_string(mark) +
                     " ended without being started by this thread around one piece of work");
    marks_[mark].ended = true;
    pending_.erase(std::this_thread::get_id());
  }
  std::vector<std::pair<double, double>> kernelTimes() override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++calls_;
    ++runs_.back().timesAsked;
    std::vector<std::pair<double, double>> times;
    for (size_t i = 0; i < marks_.size(); ++i) {
      if (!marks_[i].ended)
        problem("times asked for, but mark " + std::to_string(i) + " never ended");
      times.push_back({kStartSeconds + static_cast<double>(i), secondsOf(marks_[i].op)});
    }
    if (dropATime && !times.empty())
      times.pop_back();
    return times;
  }

  // Per beginKernelTiming (the executor's creation, then each run): its marks, and how often
  // kernelTimes was called after it.
  struct Run {
    size_t marks;
    int timesAsked;
  };
  std::vector<Run> runs() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return runs_;
  }
  // Calls of the timing interface (timesKernels included).
  int calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  // The op of mark `mark`'s work in the last run.
  sl::schedule::OpKind opOf(uint32_t mark) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return marks_.at(mark).op;
  }
  // Work on the backend's streams (copies, device kernels) in all runs.
  size_t deviceWork() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return deviceWork_;
  }
  std::vector<std::string> problems() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return problems_;
  }

  // Returns one time fewer than there are marks.
  bool dropATime = false;

private:
  struct Mark {
    bool started = false, ended = false;
    std::thread::id thread;
    int works = 0;
    sl::schedule::OpKind op = sl::schedule::OP_KIND_UNSPECIFIED;
  };

  void work(sl::schedule::OpKind op, bool onHost) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto pending = pending_.find(std::this_thread::get_id());
    if (onHost) {
      if (pending != pending_.end())
        problem(sl::schedule::OpKind_Name(op) + " run on the host inside a mark");
      return;
    }
    ++deviceWork_;
    // Outside a timed run (no marks at all) device work is not marked.
    if (pending == pending_.end()) {
      if (!marks_.empty())
        problem(sl::schedule::OpKind_Name(op) + " issued outside a mark");
      return;
    }
    Mark &m = marks_[pending->second];
    ++m.works;
    m.op = op;
  }
  void problem(const std::string &what) { problems_.push_back(what); }

  std::unique_ptr<Backend> cpu_ = createCpuBackend();
  mutable std::mutex mutex_;
  mutable int calls_ = 0;
  std::vector<Mark> marks_;
  std::map<std::thread::id, uint32_t> pending_;
  std::vector<Run> runs_;
  size_t deviceWork_ = 0;
  std::vector<std::string> problems_;
};

// StreamedSchedule (test_support.h): five kernels on the backend's streams (three copies, RELU,
// SIGMOID) and one the host runs (ACCUMULATE into the host pool).
class ExecutorTimingTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string path = dir.file("streamed.slsched");
    writeSchedule(StreamedSchedule::build(), path);
    loaded = loadSchedule(path);
  }

  std::map<std::string, HostTensor> inputs(uint32_t seed) {
    std::mt19937 rng(seed);
    return {
        {"x", f32Tensor({StreamedSchedule::kSize}, randomFloats(rng, StreamedSchedule::kSize))}};
  }

  TempDir dir;
  LoadedSchedule loaded;
  TimingBackend backend;
};

TEST_F(ExecutorTimingTest, DeviceKernelsCountTheBackendsTimesHostKernelsTheHosts) {
  ExecutorOptions options;
  options.timeKernels = true;
  options.trace = true;
  Executor executor(loaded, backend, options);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  Executor reference(loaded, *cpu);
  // Twice: the second run prepares its marks again.
  for (uint32_t seed : {1u, 2u}) {
    std::vector<NamedTensor> out = executor.run(inputs(seed));
    std::vector<NamedTensor> expected = reference.run(inputs(seed));
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(out[i].tensor.data, expected[i].tensor.data) << out[i].name;
  }
  EXPECT_THAT(backend.problems(), ::testing::IsEmpty());
  // Once when the executor was created (so that no run creates what timing needs), then per run.
  ASSERT_EQ(backend.runs().size(), 3u);
  EXPECT_EQ(backend.runs()[0].marks, 5u);
  EXPECT_EQ(backend.runs()[0].timesAsked, 0);
  for (size_t run = 1; run < 3; ++run) {
    EXPECT_EQ(backend.runs()[run].marks, 5u);
    EXPECT_EQ(backend.runs()[run].timesAsked, 1);
  }

  const RunStats &stats = executor.stats();
  EXPECT_TRUE(stats.kernelsTimedOnDevice);
  EXPECT_DOUBLE_EQ(stats.perOp.at("COPY").seconds, 3 * 0.25);
  EXPECT_DOUBLE_EQ(stats.perOp.at("RELU").seconds, 2);
  EXPECT_DOUBLE_EQ(stats.perOp.at("SIGMOID").seconds, 8);
  EXPECT_EQ(stats.perOp.at("COPY").count, 3u);
  // The host ran ACCUMULATE: its host time, at least the backend's sleep, far from any synthetic
  // figure.
  double accumulate = stats.perOp.at("ACCUMULATE").seconds;
  EXPECT_GE(accumulate, TimingBackend::kHostKernelSeconds);
  EXPECT_LT(accumulate, 0.25);
  ASSERT_EQ(stats.perStream.size(), 4u);
  EXPECT_DOUBLE_EQ(stats.perStream[ScheduleBuilder::kCompute].busySeconds, 2 + 8);
  EXPECT_DOUBLE_EQ(stats.perStream[ScheduleBuilder::kHostToDevice].busySeconds, 0.25);
  EXPECT_DOUBLE_EQ(stats.perStream[ScheduleBuilder::kDeviceToHost].busySeconds, 2 * 0.25);
  EXPECT_DOUBLE_EQ(stats.perStream[StreamedSchedule::kHostCompute].busySeconds, accumulate);

  nlohmann::json report = makeReport(loaded, backend.name(), stats, {});
  EXPECT_EQ(report["op_seconds_clock"], "device");
  EXPECT_DOUBLE_EQ(report["ops"]["SIGMOID"]["seconds"].get<double>(), 8);

  // The last run's kernel spans: a device kernel's is its mark's, placed after the run's start by
  // its synthetic start (plus the little host time before the reference was taken), each mark
  // once; the host kernel's is its host time.
  const TraceSpan *lastRun = nullptr;
  for (const TraceSpan &span : executor.traceSpans())
    if (span.kind == TraceSpan::Kind::kRun && span.run == 1)
      lastRun = &span;
  ASSERT_NE(lastRun, nullptr);
  std::set<uint32_t> marksSeen;
  int hostSpans = 0;
  for (const TraceSpan &span : executor.traceSpans()) {
    if (span.kind != TraceSpan::Kind::kKernel || span.run != 1)
      continue;
    sl::schedule::OpKind op = loaded.schedule.kernels(span.kernel).op();
    if (op == sl::schedule::ACCUMULATE) {
      ++hostSpans;
      EXPECT_FALSE(span.deviceClock);
      EXPECT_GE(span.durationMicros, TimingBackend::kHostKernelSeconds * 1e6);
      EXPECT_LT(span.durationMicros, 0.25e6);
      EXPECT_GE(span.startMicros, lastRun->startMicros);
      continue;
    }
    EXPECT_TRUE(span.deviceClock) << "kernel " << span.kernel;
    EXPECT_DOUBLE_EQ(span.durationMicros, TimingBackend::secondsOf(op) * 1e6);
    double sinceReference =
        span.startMicros - lastRun->startMicros - TimingBackend::kStartSeconds * 1e6;
    // The synthetic starts are whole seconds apart; the reference is within the run.
    double mark = std::round(sinceReference / 1e6);
    EXPECT_GE(sinceReference, mark * 1e6);
    EXPECT_LE(sinceReference, mark * 1e6 + lastRun->durationMicros);
    ASSERT_GE(mark, 0);
    ASSERT_LT(mark, 5);
    EXPECT_TRUE(marksSeen.insert(static_cast<uint32_t>(mark)).second) << "mark " << mark;
    EXPECT_EQ(backend.opOf(static_cast<uint32_t>(mark)), op) << "kernel " << span.kernel;
  }
  EXPECT_EQ(marksSeen.size(), 5u);
  EXPECT_EQ(hostSpans, 1);
}

TEST_F(ExecutorTimingTest, WithoutTheOptionTheBackendIsAskedNothing) {
  ExecutorOptions options;
  options.trace = true;
  Executor executor(loaded, backend, options);
  executor.run(inputs(1));
  EXPECT_EQ(backend.calls(), 0);
  EXPECT_EQ(backend.deviceWork(), 5u);
  EXPECT_THAT(backend.problems(), ::testing::IsEmpty());
  const RunStats &stats = executor.stats();
  EXPECT_FALSE(stats.kernelsTimedOnDevice);
  // Host times of tiny kernels, not the synthetic seconds.
  EXPECT_LT(stats.perOp.at("SIGMOID").seconds, 1);
  EXPECT_EQ(makeReport(loaded, backend.name(), stats, {})["op_seconds_clock"], "host");
  for (const TraceSpan &span : executor.traceSpans())
    EXPECT_FALSE(span.deviceClock);
}

TEST_F(ExecutorTimingTest, ABackendThatDoesNotTimeKernelsCountsHostTimes) {
  std::unique_ptr<Backend> cpu = createCpuBackend();
  ExecutorOptions options;
  options.timeKernels = true;
  Executor executor(loaded, *cpu, options);
  executor.run(inputs(1));
  EXPECT_FALSE(executor.stats().kernelsTimedOnDevice);
  EXPECT_EQ(makeReport(loaded, cpu->name(), executor.stats(), {})["op_seconds_clock"], "host");
  EXPECT_EQ(errorOf([&] { cpu->beginKernelTiming(1); }), "the cpu backend does not time kernels");
}

TEST_F(ExecutorTimingTest, TooFewTimesAreAnError) {
  ExecutorOptions options;
  options.timeKernels = true;
  Executor executor(loaded, backend, options);
  backend.dropATime = true;
  EXPECT_EQ(errorOf([&] { executor.run(inputs(1)); }),
            "the timing-test backend gave 4 kernel times for the run's 5 timed kernels");
  EXPECT_FALSE(executor.stats().kernelsTimedOnDevice);
  backend.dropATime = false;
  executor.run(inputs(2));
  EXPECT_TRUE(executor.stats().kernelsTimedOnDevice);
}

TEST(ExecutorTimingFailureTest, AFailedRunIsNotAskedForTimesAndKeepsHostTimes) {
  TempDir dir;
  std::string path = dir.file("shift.slsched");
  writeSchedule(ShiftedLookup::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  TimingBackend backend;
  ExecutorOptions options;
  options.timeKernels = true;
  Executor executor(loaded, backend, options);
  EXPECT_THAT(errorOf([&] { executor.run({{"ids", i64Tensor({3}, {0, 3, 1})}}); }),
              HasSubstr("(GATHER): index 4"));
  ASSERT_EQ(backend.runs().size(), 2u);
  EXPECT_EQ(backend.runs()[1].timesAsked, 0);
  EXPECT_FALSE(executor.stats().kernelsTimedOnDevice);
  for (const auto &[op, stats] : executor.stats().perOp)
    EXPECT_LT(stats.seconds, 1) << op;

  std::vector<NamedTensor> out = executor.run({{"ids", i64Tensor({3}, {0, 2, 1})}});
  EXPECT_EQ(toFloats(out[0].tensor), (std::vector<float>{2, 3, 6, 7, 4, 5}));
  EXPECT_TRUE(executor.stats().kernelsTimedOnDevice);
  EXPECT_EQ(backend.runs().back().timesAsked, 1);
  EXPECT_THAT(backend.problems(), ::testing::IsEmpty());
}

TEST(ExecutorTimingProgramsTest, EachProgramMarksItsOwnKernels) {
  TinyGenerate model = TinyGenerate::build(11);
  TempDir dir;
  LoadedSchedule loaded = loadSchedule(model.write(dir.path()));
  TimingBackend backend;
  ExecutorOptions options;
  options.timeKernels = true;
  Executor executor(loaded, backend, options);
  uint32_t prefill = executor.programIndex("prefill"), decode = executor.programIndex("decode");
  size_t work = 0;
  executor.run({{"input_ids", i64Tensor({2, 4}, {3, 1, 4, 0, 5, 0, 0, 0})},
                {"last_index", i64Tensor({2}, {2, 0})}},
               prefill);
  size_t prefillWork = backend.deviceWork() - work;
  work = backend.deviceWork();
  executor.run({{"input_ids", i64Tensor({2, 1}, {7, 0})}, {"position", i64Tensor({2}, {3, 1})}},
               decode);
  size_t decodeWork = backend.deviceWork() - work;
  // Every piece of work on the backend's streams was one mark of its run (the KV_WRITEs into the
  // host cache ran on the host, outside the marks).
  EXPECT_THAT(backend.problems(), ::testing::IsEmpty());
  ASSERT_EQ(backend.runs().size(), 3u);
  EXPECT_EQ(backend.runs()[0].marks, std::max(prefillWork, decodeWork));
  EXPECT_EQ(backend.runs()[1].marks, prefillWork);
  EXPECT_EQ(backend.runs()[2].marks, decodeWork);
  EXPECT_LT(prefillWork, 11u);
  EXPECT_TRUE(executor.stats().kernelsTimedOnDevice);
  EXPECT_GE(executor.stats().perOp.at("KV_WRITE").seconds, TimingBackend::kHostKernelSeconds);
  EXPECT_LT(executor.stats().perOp.at("KV_WRITE").seconds, 0.25);
}

// A device-timed stream's waits are its host thread's: a track of their own, so that they do not
// overlap its kernels; a stream timed on the host keeps its waits on its own track.
TEST(ChromeTraceClockTest, HostWaitsOfADeviceTimedStreamGetATrackOfTheirOwn) {
  sl::schedule::Schedule schedule = StreamedSchedule::build();
  std::vector<TraceSpan> spans;
  TraceSpan kernel;
  kernel.kind = TraceSpan::Kind::kKernel;
  kernel.stream = ScheduleBuilder::kCompute;
  kernel.kernel = 1;
  kernel.durationMicros = 5;
  kernel.deviceClock = true;
  spans.push_back(kernel);
  TraceSpan wait;
  wait.kind = TraceSpan::Kind::kWait;
  wait.stream = ScheduleBuilder::kCompute;
  wait.kernel = 1;
  wait.durationMicros = 7;
  spans.push_back(wait);
  wait.stream = StreamedSchedule::kHostCompute;
  wait.kernel = 5;
  spans.push_back(wait);
  nlohmann::json trace =
      nlohmann::json::parse(chromeTraceJson(schedule, "s.slsched", spans, TraceSummary{1, 1}));
  EXPECT_EQ(trace["otherData"]["kernel_clock"], "device");
  std::map<int, std::string> tracks;
  std::vector<std::pair<std::string, int>> placed;
  for (const nlohmann::json &event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name")
      tracks[event["tid"].get<int>()] = event["args"]["name"];
    if (event["ph"] == "X")
      placed.push_back({event["cat"], event["tid"]});
  }
  // Four streams: tracks 1..4; the compute stream's waits on 5 + its id.
  EXPECT_EQ(tracks, (std::map<int, std::string>{{0, "runs"},
                                                {1, "compute"},
                                                {2, "h2d"},
                                                {3, "d2h"},
                                                {4, "host"},
                                                {5, "compute host waits"}}));
  EXPECT_EQ(placed,
            (std::vector<std::pair<std::string, int>>{{"RELU", 1}, {"wait", 5}, {"wait", 4}}));

  spans[0].deviceClock = false;
  trace = nlohmann::json::parse(chromeTraceJson(schedule, "s.slsched", spans, TraceSummary{1, 1}));
  EXPECT_EQ(trace["otherData"]["kernel_clock"], "host");
  std::vector<int> waitTracks;
  for (const nlohmann::json &event : trace["traceEvents"])
    if (event["ph"] == "X" && event["cat"] == "wait")
      waitTracks.push_back(event["tid"]);
  EXPECT_EQ(waitTracks, (std::vector<int>{1, 4}));
}

} // namespace
} // namespace slrt::test
