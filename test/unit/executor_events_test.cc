// The device model of slrt/backend.h: the CPU backend's event slots, and the executor's use of
// events against a backend that really runs asynchronously (QueuedBackend below: the CPU kernels
// on a worker thread per stream, each item delayed at random), so that a wait the executor leaves
// out, a host kernel run before the work it reads, or an output read before its stream is drained
// gives a wrong result instead of passing by the CPU backend's synchronous luck. Also: an error in
// one stream ends the run without a hang, every stream drained first.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "backends/event_flags.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/generator.h"
#include "slrt/token_data.h"
#include "slrt/trainer.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

// --- the CPU backend's events --------------------------------------------------------------------

TEST(CpuBackendEvents, AWaitNeedsARecordInThisRun) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  backend->allocate(64, 64);
  backend->createEvents(2);
  // Never a silent no-op: on the device, on the host, or out of range.
  EXPECT_EQ(errorOf([&] { backend->waitEvent(1, false); }),
            "a wait for event slot 1, which has not been recorded in this run (its record must be "
            "issued before the wait)");
  EXPECT_THAT(errorOf([&] { backend->waitEvent(1, true); }), HasSubstr("not been recorded"));
  EXPECT_EQ(errorOf([&] { backend->recordEvent(2); }), "event slot 2 is out of range (2 slots)");
  EXPECT_EQ(errorOf([&] { backend->waitEvent(7, true); }), "event slot 7 is out of range (2 slots)");

  backend->recordEvent(1);
  // A synchronous backend never blocks: the recording thread finished the work before it.
  EXPECT_FALSE(backend->waitEvent(1, false));
  EXPECT_FALSE(backend->waitEvent(1, true));
  EXPECT_EQ(errorOf([&] { backend->recordEvent(1); }), "event slot 1 is recorded twice in one run");
  EXPECT_THAT(errorOf([&] { backend->waitEvent(0, false); }), HasSubstr("slot 0"));

  // A record on one thread is seen by a wait on another.
  std::thread([&] { backend->recordEvent(0); }).join();
  EXPECT_FALSE(backend->waitEvent(0, false));

  backend->resetEvents();
  EXPECT_THAT(errorOf([&] { backend->waitEvent(1, false); }), HasSubstr("not been recorded"));
  backend->recordEvent(1);
  EXPECT_FALSE(backend->waitEvent(1, true));
  backend->synchronize();
}

// --- an asynchronous backend ---------------------------------------------------------------------

// Each thread that calls it gets a stream: a queue that a worker thread of its own runs in order,
// sleeping a random 0-300 us before each item, so that work completes well after it was issued and
// in varying orders across streams. Kernels and copies run there with the CPU backend's kernels;
// a record is a queued item that completes its event; a wait on a stream is a queued item that
// blocks that stream's worker, one on the host blocks the caller. As on CUDA, a kernel that fails
// on the stream reports when the stream is synchronised (records still complete, so no other stream
// hangs), and a kernel that writes the host pool runs on the calling thread, which must have
// drained its own stream first (Error otherwise: that is the executor's job).
class QueuedBackend final : public Backend {
public:
  explicit QueuedBackend(uint32_t seed) : cpu_(createCpuBackend()), seed_(seed) {}
  ~QueuedBackend() override {
    for (auto &[id, lane] : lanes_) {
      {
        std::lock_guard<std::mutex> lock(lane->mutex);
        lane->stop = true;
      }
      lane->changed.notify_all();
      lane->worker.join();
    }
  }

  std::string name() const override { return "queued"; }
  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override {
    cpu_->allocate(deviceArenaBytes, hostPoolBytes);
  }
  std::byte *deviceArena() override { return cpu_->deviceArena(); }
  std::byte *hostPool() override { return cpu_->hostPool(); }

  void execute(const sl::schedule::Kernel &kernel, const std::vector<const TensorRef *> &operands,
               const std::vector<const TensorRef *> &results) override {
    if (executesOnHost(results)) {
      if (!lane().idle())
        throw Error("a kernel writing the host pool was issued while its own stream had work in "
                    "flight");
      return cpu_->execute(kernel, operands, results);
    }
    lane().push([this, &kernel, operands, results] { cpu_->execute(kernel, operands, results); });
  }

  void copy(const TensorRef &src, const TensorRef &dst) override {
    lane().push([this, src, dst] { cpu_->copy(src, dst); });
  }

  void createEvents(size_t count) override {
    flags_.create(count);
    std::lock_guard<std::mutex> lock(eventsMutex_);
    done_.assign(count, false);
  }

  void resetEvents() override {
    if (!drained())
      throw Error("events reset while a stream had work in flight");
    flags_.reset();
    std::lock_guard<std::mutex> lock(eventsMutex_);
    done_.assign(done_.size(), false);
  }

  void recordEvent(uint32_t slot) override {
    flags_.checkRecordable(slot);
    lane().push(
        [this, slot] {
          {
            std::lock_guard<std::mutex> lock(eventsMutex_);
            done_[slot] = true;
          }
          eventDone_.notify_all();
        },
        /*evenAfterAnError=*/true);
    flags_.markRecorded(slot);
  }

  bool waitEvent(uint32_t slot, bool onHost) override {
    flags_.checkRecorded(slot);
    if (!onHost) {
      lane().push([this, slot] { awaitDone(slot); }, true);
      return false;
    }
    return awaitDone(slot);
  }

  void synchronize() override {
    Lane &mine = lane();
    std::unique_lock<std::mutex> lock(mine.mutex);
    mine.changed.wait(lock, [&] { return mine.items.empty() && !mine.busy; });
    if (std::exception_ptr error = std::exchange(mine.error, nullptr))
      std::rethrow_exception(error);
  }

  // Whether every stream has finished what was issued on it.
  bool drained() {
    std::lock_guard<std::mutex> lock(lanesMutex_);
    for (auto &[id, lane] : lanes_)
      if (!lane->idle())
        return false;
    return true;
  }

private:
  struct Item {
    std::function<void()> run;
    bool evenAfterAnError;
  };
  struct Lane {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Item> items;
    bool busy = false, stop = false;
    std::exception_ptr error; // the first, until synchronize() reports it
    std::mt19937 rng;
    std::thread worker;

    bool idle() {
      std::lock_guard<std::mutex> lock(mutex);
      return items.empty() && !busy;
    }
    void push(std::function<void()> run, bool evenAfterAnError = false) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        items.push_back({std::move(run), evenAfterAnError});
      }
      changed.notify_all();
    }
    void loop() {
      std::unique_lock<std::mutex> lock(mutex);
      for (;;) {
        changed.wait(lock, [&] { return stop || !items.empty(); });
        if (stop)
          return;
        Item item = std::move(items.front());
        items.pop_front();
        busy = true;
        bool skip = error && !item.evenAfterAnError;
        auto delay = std::chrono::microseconds(rng() % 300);
        lock.unlock();
        std::this_thread::sleep_for(delay);
        std::exception_ptr failed;
        if (!skip) {
          try {
            item.run();
          } catch (...) {
            failed = std::current_exception();
          }
        }
        lock.lock();
        if (failed && !error)
          error = failed;
        busy = false;
        changed.notify_all();
      }
    }
  };

  Lane &lane() {
    std::lock_guard<std::mutex> lock(lanesMutex_);
    std::unique_ptr<Lane> &slot = lanes_[std::this_thread::get_id()];
    if (!slot) {
      slot = std::make_unique<Lane>();
      slot->rng.seed(seed_ + static_cast<uint32_t>(lanes_.size()));
      slot->worker = std::thread([lane = slot.get()] { lane->loop(); });
    }
    return *slot;
  }

  bool awaitDone(uint32_t slot) {
    std::unique_lock<std::mutex> lock(eventsMutex_);
    bool blocked = !done_[slot];
    eventDone_.wait(lock, [&] { return done_[slot]; });
    return blocked;
  }

  std::unique_ptr<Backend> cpu_;
  uint32_t seed_;
  EventFlags flags_;
  std::mutex eventsMutex_;
  std::condition_variable eventDone_;
  std::vector<bool> done_;
  std::mutex lanesMutex_;
  std::unordered_map<std::thread::id, std::unique_ptr<Lane>> lanes_;
};

// --- the executor on it --------------------------------------------------------------------------

std::vector<NamedTensor> runOn(Backend &backend, const LoadedSchedule &loaded,
                               const std::map<std::string, HostTensor> &inputs) {
  Executor executor(loaded, backend);
  return executor.run(inputs);
}

void expectSameOutputs(const std::vector<NamedTensor> &got, const std::vector<NamedTensor> &want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].tensor.data, want[i].tensor.data) << "output " << want[i].name;
  }
}

// Streams that overlap, a device buffer reused on one stream, copies to the host and a host
// ACCUMULATE that must wait for them: bit for bit the CPU backend's outputs, run after run.
TEST(AsynchronousBackend, StreamedScheduleMatchesTheCpuBackend) {
  TempDir dir;
  std::string path = dir.file("streamed.slsched");
  writeSchedule(StreamedSchedule::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  QueuedBackend queued(1);
  Executor executor(loaded, queued);
  std::mt19937 rng(7);
  for (int run = 0; run < 20; ++run) {
    std::map<std::string, HostTensor> x = {
        {"x", f32Tensor({StreamedSchedule::kSize}, randomFloats(rng, StreamedSchedule::kSize))}};
    expectSameOutputs(executor.run(x), runOn(*cpu, loaded, x));
    EXPECT_TRUE(queued.drained()) << "run " << run;
  }
}

TEST(AsynchronousBackend, HandBuiltSchedulesMatchTheCpuBackend) {
  TempDir dir;
  std::unique_ptr<Backend> cpu = createCpuBackend();
  QueuedBackend queued(2);
  std::mt19937 rng(3);
  TinyMlp mlp = TinyMlp::build(5);
  LoadedSchedule mlpSchedule = loadSchedule(mlp.write(dir.path()));
  std::map<std::string, HostTensor> x = {
      {"x", f32Tensor({TinyMlp::kBatch, TinyMlp::kIn},
                      randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn))}};
  expectSameOutputs(runOn(queued, mlpSchedule, x), runOn(*cpu, mlpSchedule, x));

  TinyAttention block = TinyAttention::build(6);
  LoadedSchedule blockSchedule = loadSchedule(block.write(dir.path()));
  std::map<std::string, HostTensor> ids = {
      {"ids", i64Tensor({1, TinyAttention::kSeq}, {3, -1, 0, 5})}};
  expectSameOutputs(runOn(queued, blockSchedule, ids), runOn(*cpu, blockSchedule, ids));
}

// The host AdamW reads the gradients in the host pool and writes the weights the next step's
// copies read: the trainer's losses and weights are the CPU backend's exactly.
TEST(AsynchronousBackend, TrainingMatchesTheCpuBackend) {
  TempDir dir;
  TinyTrain model = TinyTrain::build(17, 2, 3, 3);
  model.addOptimizerSteps({{0}, {1}});
  LoadedSchedule loaded = loadSchedule(model.write(dir.path()));
  std::vector<uint16_t> tokens(200);
  std::mt19937 rng(9);
  for (uint16_t &t : tokens)
    t = static_cast<uint16_t>(rng() % TinyTrain::kNanToken);
  std::string tokensPath = dir.file("tokens.bin");
  writeBytes(tokensPath, std::string(reinterpret_cast<const char *>(tokens.data()),
                                     tokens.size() * sizeof(uint16_t)));
  TrainerOptions options;
  options.adamw.lr = 1e-2;
  options.vocabSize = TinyTrain::kVocab;
  std::unique_ptr<Backend> cpu = createCpuBackend();
  QueuedBackend queued(4);
  TokenData cpuData = TokenData::open(tokensPath, TokenDType::U16);
  TokenData queuedData = TokenData::open(tokensPath, TokenDType::U16);
  Trainer onCpu(loaded, *cpu, cpuData, options);
  Trainer onQueued(loaded, queued, queuedData, options);
  for (int step = 1; step <= 5; ++step)
    EXPECT_EQ(onQueued.step().loss, onCpu.step().loss) << "step " << step;
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(onQueued.optimizer().weights(i), onCpu.optimizer().weights(i)) << "parameter " << i;
}

// Prefill and decode: KV_WRITE into the host cache on the host, after the copies it reads.
TEST(AsynchronousBackend, GenerationMatchesTheCpuBackend) {
  TempDir dir;
  TinyGenerate model = TinyGenerate::build(5);
  LoadedSchedule loaded = loadSchedule(model.write(dir.path()));
  std::vector<Prompt> prompts = {{{3, 1, 4, 1}, std::nullopt, 1}, {{5}, std::nullopt, 2},
                                 {{9, 2}, std::nullopt, 3}};
  std::unique_ptr<Backend> cpu = createCpuBackend();
  QueuedBackend queued(5);
  std::vector<GeneratedSequence> want = Generator(loaded, *cpu, {}).generate(prompts);
  std::vector<GeneratedSequence> got = Generator(loaded, queued, {}).generate(prompts);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "prompt " << i;
}

// A kernel that fails on its stream reports only when the stream is drained, after its run's
// other streams have finished (nothing hangs: the records after it still complete); the
// executor and the backend run again.
TEST(AsynchronousBackend, AKernelThatFailsOnItsStreamEndsTheRun) {
  TempDir dir;
  std::string path = dir.file("shift.slsched");
  writeSchedule(ShiftedLookup::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  QueuedBackend queued(6);
  Executor executor(loaded, queued);
  EXPECT_THAT(errorOf([&] { executor.run({{"ids", i64Tensor({3}, {0, 3, 1})}}); }),
              ::testing::MatchesRegex("stream [0-9]+, finishing the work issued before its run "
                                      "ended: index 4 \\(element 1 of the indices \\[3\\]\\) "
                                      "is out of range for axis 0 of the data \\[4, 2\\]"));
  EXPECT_TRUE(queued.drained());
  std::vector<NamedTensor> out = executor.run({{"ids", i64Tensor({3}, {0, 2, 1})}});
  EXPECT_EQ(toFloats(out[0].tensor), (std::vector<float>{2, 3, 6, 7, 4, 5}));
}

// --- errors on a synchronous backend -------------------------------------------------------------

// The CPU backend, with an error injected into one call and a log of the threads that drained.
class FaultyBackend final : public Backend {
public:
  std::string name() const override { return "faulty"; }
  void allocate(uint64_t deviceArenaBytes, uint64_t hostPoolBytes) override {
    cpu_->allocate(deviceArenaBytes, hostPoolBytes);
  }
  std::byte *deviceArena() override { return cpu_->deviceArena(); }
  std::byte *hostPool() override { return cpu_->hostPool(); }
  void execute(const sl::schedule::Kernel &kernel, const std::vector<const TensorRef *> &operands,
               const std::vector<const TensorRef *> &results) override {
    if (kernel.name() == failKernel)
      throw Error("injected fault");
    cpu_->execute(kernel, operands, results);
  }
  void copy(const TensorRef &src, const TensorRef &dst) override { cpu_->copy(src, dst); }
  void createEvents(size_t count) override { cpu_->createEvents(count); }
  void resetEvents() override {
    std::lock_guard<std::mutex> lock(mutex_);
    drainedBy.clear();
    cpu_->resetEvents();
  }
  void recordEvent(uint32_t slot) override { cpu_->recordEvent(slot); }
  bool waitEvent(uint32_t slot, bool onHost) override { return cpu_->waitEvent(slot, onHost); }
  void synchronize() override {
    std::lock_guard<std::mutex> lock(mutex_);
    drainedBy.insert(std::this_thread::get_id());
    if (failSynchronize && failSynchronize-- == 1)
      throw Error("asynchronous fault");
  }

  std::string failKernel;
  int failSynchronize = 0; // the failSynchronize'th synchronize() from now fails
  std::set<std::thread::id> drainedBy;

private:
  std::unique_ptr<Backend> cpu_ = createCpuBackend();
  std::mutex mutex_;
};

// The first kernel fails; the streams that wait for its event (transitively: all three others)
// wake and stop, and each drains its stream before the error is reported.
TEST(ExecutorErrors, AFailingStreamStopsTheOthersAfterEveryStreamIsDrained) {
  TempDir dir;
  std::string path = dir.file("streamed.slsched");
  writeSchedule(StreamedSchedule::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  FaultyBackend backend;
  backend.failKernel = "relu";
  Executor executor(loaded, backend);
  std::map<std::string, HostTensor> x = {
      {"x", f32Tensor({StreamedSchedule::kSize}, {1, -2, 3, -4, 5})}};
  EXPECT_EQ(errorOf([&] { executor.run(x); }), "kernel 1 'relu' (RELU): injected fault");
  EXPECT_EQ(backend.drainedBy.size(), 4u);
  backend.failKernel.clear();
  EXPECT_EQ(executor.run(x).size(), 2u);
  EXPECT_EQ(backend.drainedBy.size(), 4u);
}

// An error that surfaces only when a stream is drained (an asynchronous fault) ends the run,
// names the stream, and leaves the executor usable.
TEST(ExecutorErrors, AFaultFoundWhenDrainingIsReported) {
  TempDir dir;
  std::string path = dir.file("shift.slsched");
  writeSchedule(ShiftedLookup::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  FaultyBackend backend;
  Executor executor(loaded, backend);
  backend.failSynchronize = 1;
  EXPECT_THAT(errorOf([&] { executor.run({{"ids", i64Tensor({3}, {0, 2, 1})}}); }),
              ::testing::MatchesRegex(
                  "stream [0-9]+, finishing the work issued before its run ended: asynchronous "
                  "fault"));
  std::vector<NamedTensor> out = executor.run({{"ids", i64Tensor({3}, {0, 2, 1})}});
  EXPECT_EQ(toFloats(out[0].tensor), (std::vector<float>{2, 3, 6, 7, 4, 5}));
}

} // namespace
} // namespace slrt::test
