// The runtime's distributed pieces without MPI: ranks are threads of this process, joined by an
// in-process Communicator. The executor's shard loading and collective kernels, the verifier's
// rules for sharded schedules, sharded checkpoints (save, load, consolidate, a failed save) and
// each rank's rows of a step's batch. python/tests/test_distributed.py runs the same code under
// mpirun with the MPI plugin.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "slrt/atomic_file.h"
#include "slrt/checkpoint.h"
#include "slrt/comm.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/read_file.h"
#include "slrt/rank_agreement.h"
#include "slrt/safetensors.h"
#include "slrt/schedule_loader.h"
#include "slrt/schedule_verifier.h"
#include "slrt/token_data.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

// Where the ranks of one job meet: every collective is an exchange of each rank's bytes.
class Hub {
public:
  explicit Hub(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }

  // Every rank's `bytes` bytes, in rank order, once every rank has given its own. Error after 10 s
  // without the others (a test that lost a rank).
  std::vector<std::byte> exchange(int rank, const void *data, size_t bytes,
                                  const std::string &what) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto *begin = static_cast<const std::byte *>(data);
    slots_[static_cast<size_t>(rank)].assign(begin, begin + bytes);
    uint64_t generation = generation_;
    if (++arrived_ == size_) {
      result_.clear();
      for (const std::vector<std::byte> &slot : slots_)
        result_.insert(result_.end(), slot.begin(), slot.end());
      arrived_ = 0;
      ++generation_;
      done_.notify_all();
    } else if (!done_.wait_for(lock, std::chrono::seconds(10),
                               [&] { return generation_ != generation; })) {
      throw makeError(what, " did not complete: a rank is missing");
    }
    return result_;
  }

private:
  int size_;
  std::mutex mutex_;
  std::condition_variable done_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::vector<std::byte>> slots_;
  std::vector<std::byte> result_;
};

class ThreadComm : public Communicator {
public:
  ThreadComm(Hub &hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  std::string name() const override { return "threads"; }

  void allGather(const float *shard, float *whole, size_t count,
                 const std::string &what) override {
    std::vector<std::byte> all = hub_.exchange(rank_, shard, count * sizeof(float), what);
    std::memcpy(whole, all.data(), all.size());
  }
  void reduceScatter(const float *whole, float *shard, size_t count,
                     const std::string &what) override {
    size_t n = count * static_cast<size_t>(size());
    std::vector<std::byte> all = hub_.exchange(rank_, whole, n * sizeof(float), what);
    const float *values = reinterpret_cast<const float *>(all.data());
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < size(); ++r)
        sum += values[static_cast<size_t>(r) * n + static_cast<size_t>(rank_) * count + i];
      shard[i] = sum;
    }
  }
  void allReduceSum(double *values, size_t count, const std::string &what) override {
    std::vector<std::byte> all = hub_.exchange(rank_, values, count * sizeof(double), what);
    const double *each = reinterpret_cast<const double *>(all.data());
    for (size_t i = 0; i < count; ++i) {
      values[i] = 0;
      for (int r = 0; r < size(); ++r)
        values[i] += each[static_cast<size_t>(r) * count + i];
    }
  }
  void allGatherBytes(const void *mine, void *all, size_t bytes, const std::string &what) override {
    std::vector<std::byte> gathered = hub_.exchange(rank_, mine, bytes, what);
    std::memcpy(all, gathered.data(), gathered.size());
  }
  void barrier(const std::string &what) override { hub_.exchange(rank_, nullptr, 0, what); }
  [[noreturn]] void abort(int) override { throw std::logic_error("abort"); }

private:
  Hub &hub_;
  int rank_;
};

// Runs `body(rank, comm)` on `world` threads and rethrows the first exception.
void onRanks(int world, const std::function<void(int, Communicator &)> &body) {
  Hub hub(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ThreadComm comm(hub, r);
      try {
        body(r, comm);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
}

// Two ranks. Shard "g" holds w f32 [3] at element 0 and b f32 [2] at element 4 (parameters start
// at multiples of 4), padded to 8 elements: 4 per rank. The schedule copies the rank's shard to
// the device, all-gathers it and writes the whole to output "gathered"; and it reduce-scatters
// input "g" [8] into output "scattered" [4].
struct ShardedFixture {
  static constexpr uint32_t kWorld = 2;
  std::vector<float> w = {1.5f, -2.0f, 3.25f}, b = {0.5f, 7.0f};
  Schedule schedule;
  uint32_t gatherKernel = 0;

  ShardedFixture() {
    ScheduleBuilder s;
    uint32_t hostShard = s.buffer("shard of g", HOST, F32, {4});
    uint32_t deviceShard = s.buffer("shard on device", DEVICE, F32, {4});
    uint32_t whole = s.buffer("gathered on device", DEVICE, F32, {8});
    uint32_t gathered = s.buffer("gathered", HOST, F32, {8});
    uint32_t g = s.buffer("g", HOST, F32, {8});
    uint32_t gDevice = s.buffer("g on device", DEVICE, F32, {8});
    uint32_t part = s.buffer("scattered on device", DEVICE, F32, {4});
    uint32_t scattered = s.buffer("scattered", HOST, F32, {4});
    Stream *collective = s.schedule.add_streams();
    collective->set_id(3);
    collective->set_kind(COLLECTIVE);
    s.kernel(COPY, "shard to device", {hostShard}, deviceShard).add_record_events(0);
    Kernel &gather = s.kernel(ALL_GATHER, "all-gather g", {deviceShard}, whole);
    gather.set_stream(3);
    gather.add_wait_events(0);
    gather.add_record_events(1);
    gatherKernel = static_cast<uint32_t>(s.schedule.kernels_size() - 1);
    s.kernel(COPY, "gathered to host", {whole}, gathered).add_wait_events(1);
    s.kernel(COPY, "g to device", {g}, gDevice).add_record_events(2);
    Kernel &scatter = s.kernel(REDUCE_SCATTER, "reduce-scatter g", {gDevice}, part);
    scatter.set_stream(3);
    scatter.add_wait_events(2);
    scatter.add_record_events(3);
    s.kernel(COPY, "scattered to host", {part}, scattered).add_wait_events(3);
    s.schedule.set_num_events(4);
    s.input("g", g);
    s.output("gathered", gathered);
    s.output("scattered", scattered);
    s.schedule.set_world(kWorld);
    Shard *shard = s.schedule.add_shards();
    shard->set_name("g");
    shard->set_buffer(hostShard);
    shard->set_elements(8);
    auto parameter = [&](const std::string &name, int64_t count, uint64_t fileOffset,
                         uint64_t shardOffset) {
      Parameter *p = s.schedule.add_parameters();
      p->set_name(name);
      p->set_file("params.bin");
      p->set_file_offset(fileOffset);
      p->set_bytes(static_cast<uint64_t>(count) * sizeof(float));
      p->set_dtype(F32);
      p->add_shape(count);
      p->set_shard(0);
      p->set_shard_offset(shardOffset);
    };
    parameter("w", 3, 0, 0);
    parameter("b", 2, 16, 4);
    schedule = s.schedule;
  }

  std::string write(const std::string &dir) const {
    std::string bytes(24, '\0');
    std::memcpy(bytes.data(), w.data(), 12);
    std::memcpy(bytes.data() + 16, b.data(), 8);
    writeBytes(dir + "/params.bin", bytes);
    writeSchedule(schedule, dir + "/sharded.slsched");
    return dir + "/sharded.slsched";
  }
};

std::vector<float> outputOf(const std::vector<NamedTensor> &outputs, const std::string &name) {
  for (const NamedTensor &out : outputs)
    if (out.name == name)
      return toFloats(out.tensor);
  throw std::runtime_error("no output " + name);
}

TEST(DistributedExecutor, LoadsEachRanksPartAndRunsTheCollectives) {
  ShardedFixture fixture;
  TempDir dir;
  LoadedSchedule loaded = loadSchedule(fixture.write(dir.path()));
  std::vector<std::vector<float>> g = {{1, 2, 3, 4, 5, 6, 7, 8},
                                       {0.5f, 0.25f, -1, -2, 10, 20, 30, 40}};
  std::vector<std::vector<float>> gathered(2), scattered(2), shards(2);
  std::vector<uint64_t> collectiveBytes(2);
  onRanks(2, [&](int rank, Communicator &comm) {
    std::unique_ptr<Backend> backend = createCpuBackend();
    ExecutorOptions options;
    options.comm = &comm;
    Executor executor(loaded, *backend, options);
    const TensorRef &shard = executor.shardBuffer(0);
    const float *values = reinterpret_cast<const float *>(shard.data);
    shards[static_cast<size_t>(rank)].assign(values, values + 4);
    std::vector<NamedTensor> out = executor.run({{"g", f32Tensor({8}, g[static_cast<size_t>(rank)])}});
    gathered[static_cast<size_t>(rank)] = outputOf(out, "gathered");
    scattered[static_cast<size_t>(rank)] = outputOf(out, "scattered");
    collectiveBytes[static_cast<size_t>(rank)] = executor.stats().bytesCollective;
    EXPECT_EQ(executor.stats().parameterBytesRead, rank == 0 ? 12u : 8u);
  });
  // Rank 0 holds w and the padding after it, rank 1 b and the padding after it.
  EXPECT_THAT(shards[0], ::testing::ElementsAre(1.5f, -2.0f, 3.25f, 0.0f));
  EXPECT_THAT(shards[1], ::testing::ElementsAre(0.5f, 7.0f, 0.0f, 0.0f));
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(gathered[r], ::testing::ElementsAre(1.5f, -2.0f, 3.25f, 0, 0.5f, 7.0f, 0, 0));
    // Per collective the whole vector: 8 floats gathered, 8 reduce-scattered.
    EXPECT_EQ(collectiveBytes[r], 64u);
  }
  EXPECT_THAT(scattered[0], ::testing::ElementsAre(1.5f, 2.25f, 2.0f, 2.0f));
  EXPECT_THAT(scattered[1], ::testing::ElementsAre(15.0f, 26.0f, 37.0f, 48.0f));
}

TEST(DistributedExecutor, NeedsAsManyRanksAsTheSchedule) {
  ShardedFixture fixture;
  TempDir dir;
  LoadedSchedule loaded = loadSchedule(fixture.write(dir.path()));
  std::unique_ptr<Backend> backend = createCpuBackend();
  try {
    Executor executor(loaded, *backend);
    FAIL() << "a schedule of 2 ranks ran without a communicator";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("the schedule is for 2 ranks (compiled with world=2), but this "
                                    "is a run of one rank; launch it with mpirun -np 2"));
  }
  try {
    onRanks(3, [&](int, Communicator &comm) {
      ExecutorOptions options;
      options.comm = &comm;
      std::unique_ptr<Backend> own = createCpuBackend();
      Executor executor(loaded, *own, options);
    });
    FAIL() << "a schedule of 2 ranks ran on 3";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("but the job has 3 ranks"));
  }
}

void expectRefused(const Schedule &schedule, const std::string &message) {
  try {
    verifySchedule(schedule);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr(message));
  }
}

TEST(ShardedScheduleVerifier, AcceptsTheFixtureAndRefusesEachMistake) {
  ShardedFixture fixture;
  EXPECT_NO_THROW(verifySchedule(fixture.schedule));
  {
    Schedule s = fixture.schedule;
    s.mutable_shards(0)->set_elements(7);
    expectRefused(s, "shard 0 'g' has 7 elements, not a positive multiple of the 2 ranks");
  }
  {
    Schedule s = fixture.schedule;
    s.mutable_parameters(1)->set_shard_offset(2);
    expectRefused(s, "parameter 'b' overlaps parameter 'w' in shard 'g'");
  }
  {
    Schedule s = fixture.schedule;
    s.mutable_parameters(1)->set_shard_offset(7);
    expectRefused(s, "parameter 'b' (elements 7 to 9) does not fit in shard 'g' of 8 elements");
  }
  {
    Schedule s = fixture.schedule;
    s.mutable_parameters(0)->set_shard(1);
    expectRefused(s, "parameter 'w' is in shard 1, but the schedule has 1 shards");
  }
  {
    Schedule s = fixture.schedule;
    s.mutable_kernels(static_cast<int>(fixture.gatherKernel))->set_stream(0);
    expectRefused(s, "collectives run on a COLLECTIVE stream");
  }
  {
    Schedule s = fixture.schedule;
    s.set_world(4);
    expectRefused(s, "shard 0 'g' is bound to buffer 0 'shard of g' (f32 [4]), but one rank's "
                     "part is f32 [2]");
  }
  {
    // The gathered vector must hold every rank's shard.
    Schedule s = fixture.schedule;
    Kernel *gather = s.mutable_kernels(static_cast<int>(fixture.gatherKernel));
    gather->set_results(0, 6); // "scattered on device", f32 [4]
    expectRefused(s, "kernel 1 'all-gather g' (ALL_GATHER): result buffer 6 'scattered on device' "
                     "has 16 bytes, but 2 ranks' shards of buffer 1 'shard on device' take 32");
  }
  {
    // An f32 file for a bf16 parameter is converted at load only where the parameter has a buffer
    // of its own: sharded parameters are f32.
    Schedule s = fixture.schedule;
    s.mutable_parameters(0)->set_dtype(BF16);
    s.mutable_parameters(0)->set_file_dtype(F32);
    expectRefused(s, "parameter 'w' has file_dtype f32 and dtype bf16, but a schedule of world 2 "
                     "shards its parameters as f32: only unsharded parameters are converted at "
                     "load");
  }
  {
    // file_dtype equal to the dtype is no conversion.
    Schedule s = fixture.schedule;
    s.mutable_parameters(0)->set_file_dtype(F32);
    EXPECT_NO_THROW(verifySchedule(s));
  }
  {
    // One rank: no shards, and so no collectives.
    Schedule s = fixture.schedule;
    s.set_world(1);
    expectRefused(s, "the schedule has 1 shards, but shards are for schedules of world > 1");
  }
}

TEST(ShardedScheduleVerifier, OneRankHasNoCollectives) {
  ScheduleBuilder s;
  uint32_t x = s.buffer("x", HOST, F32, {4});
  uint32_t d = s.buffer("x on device", DEVICE, F32, {4});
  uint32_t all = s.buffer("all", DEVICE, F32, {8});
  Stream *collective = s.schedule.add_streams();
  collective->set_id(3);
  collective->set_kind(COLLECTIVE);
  s.kernel(COPY, "in", {x}, d).add_record_events(0);
  Kernel &gather = s.kernel(ALL_GATHER, "gather", {d}, all);
  gather.set_stream(3);
  gather.add_wait_events(0);
  s.schedule.set_num_events(1);
  s.input("x", x);
  expectRefused(s.schedule, "kernel 1 'gather' (ALL_GATHER): a schedule of one rank (world 0) has "
                            "no collectives");
}

// Two ranks' parts of shards "a" (8 elements) and "b" (4), parameters p [2, 3] in a and q [2] in b.
ShardedLayout checkpointLayout() {
  return {2, {{"a", 8}, {"b", 4}}, {{"p", {2, 3}, 0, 0}, {"q", {2}, 1, 0}}};
}

TrainingCheckpoint partOf(int rank, uint64_t step) {
  TrainingCheckpoint part;
  part.step = step;
  part.modelFingerprint = "fp";
  part.dataPosition = 42;
  part.rank = static_cast<uint32_t>(rank);
  part.world = 2;
  float base = static_cast<float>(100 * rank + step);
  auto values = [&](size_t n, float offset) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i)
      v[i] = base + offset + static_cast<float>(i);
    return v;
  };
  part.parameters.push_back({"a", {4}, values(4, 0), values(4, 10), values(4, 20)});
  part.parameters.push_back({"b", {2}, values(2, 30), values(2, 40), values(2, 50)});
  return part;
}

// The part files the index at `index` names, as paths.
std::vector<std::string> partsOf(const std::string &index) {
  std::string dir = std::filesystem::path(index).parent_path().string() + "/";
  std::vector<std::string> parts;
  nlohmann::json json = nlohmann::json::parse(readFile(index));
  for (const nlohmann::json &file : json["files"])
    parts.push_back(dir + file.get<std::string>());
  return parts;
}

// Every file of `dir` and its bytes.
std::map<std::string, std::string> snapshot(const std::string &dir) {
  std::map<std::string, std::string> files;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    files[entry.path().filename().string()] =
        entry.is_regular_file() ? readFile(entry.path().string()) : "(not a file)";
  return files;
}

std::vector<std::string> namesOf(const std::map<std::string, std::string> &files) {
  std::vector<std::string> names;
  for (const auto &[name, bytes] : files)
    names.push_back(name);
  return names;
}

// An index is JSON from its first byte; a safetensors file starts with its header's length, whose
// low byte may well be '{' (a header of 123 bytes): only the start of a file is read to tell.
TEST(ShardedCheckpoint, IndexIsToldFromSafetensorsByItsStart) {
  TempDir dir;
  std::string header = "{\"__metadata__\":{\"a\":\"" + std::string(98, 'x') + "\"}}";
  ASSERT_EQ(header.size(), 123u);
  std::string safetensors(8, '\0');
  safetensors[0] = '{'; // 123, little-endian
  writeFileAtomically(dir.path() + "/brace.safetensors", safetensors + header);
  EXPECT_FALSE(isShardedCheckpointIndex(dir.path() + "/brace.safetensors"));
  writeFileAtomically(dir.path() + "/index", "  {\"format\": \"x\"}");
  EXPECT_TRUE(isShardedCheckpointIndex(dir.path() + "/index"));
  // Unreadable: not an index, so the safetensors reader names the problem.
  EXPECT_FALSE(isShardedCheckpointIndex(dir.path() + "/absent"));
}

TEST(ShardedCheckpoint, EveryRanksPartThenTheIndex) {
  TempDir dir;
  std::string index = dir.path() + "/ckpt";
  ShardedLayout layout = checkpointLayout();
  onRanks(2, [&](int rank, Communicator &comm) {
    saveShardedCheckpoint(index, partOf(rank, 7), layout, comm);
  });
  EXPECT_TRUE(isShardedCheckpointIndex(index));
  nlohmann::json json = nlohmann::json::parse(readFile(index));
  EXPECT_EQ(json["format"], "speedloader.sharded_checkpoint");
  EXPECT_EQ(json["step"], 7);
  EXPECT_EQ(json["world"], 2);
  // The parts carry the step and the save id in their names.
  std::string id = json["save_id"];
  EXPECT_EQ(id.size(), 16u);
  EXPECT_EQ(json["files"], nlohmann::json({"ckpt.step7." + id + ".rank0-of-2.safetensors",
                                           "ckpt.step7." + id + ".rank1-of-2.safetensors"}));
  EXPECT_THAT(namesOf(snapshot(dir.path())),
              ::testing::UnorderedElementsAre("ckpt", json["files"][0], json["files"][1]));

  for (uint32_t rank = 0; rank < 2; ++rank) {
    TrainingCheckpoint loaded = loadShardedCheckpoint(index, "fp", layout, rank);
    TrainingCheckpoint expected = partOf(static_cast<int>(rank), 7);
    EXPECT_EQ(loaded.step, 7u);
    EXPECT_EQ(loaded.dataPosition, 42u);
    ASSERT_EQ(loaded.parameters.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(loaded.parameters[i].master, expected.parameters[i].master);
      EXPECT_EQ(loaded.parameters[i].adamM, expected.parameters[i].adamM);
      EXPECT_EQ(loaded.parameters[i].adamV, expected.parameters[i].adamV);
    }
  }

  // Whole: p is elements 0-5 of a (rank 0's four, then rank 1's first two), q elements 0-1 of b.
  TrainingCheckpoint whole =
      consolidateShardedCheckpoint(index, "fp", {{"p", {2, 3}}, {"q", {2}}});
  EXPECT_EQ(whole.step, 7u);
  ASSERT_EQ(whole.parameters.size(), 2u);
  EXPECT_THAT(whole.parameters[0].master, ::testing::ElementsAre(7, 8, 9, 10, 107, 108));
  EXPECT_THAT(whole.parameters[0].adamV, ::testing::ElementsAre(27, 28, 29, 30, 127, 128));
  EXPECT_THAT(whole.parameters[1].adamM, ::testing::ElementsAre(47, 48));
  // The consolidated checkpoint is an ordinary one: a run of one rank resumes it.
  saveCheckpoint(dir.path() + "/whole.safetensors", whole);
  TrainingCheckpoint reread =
      loadCheckpoint(dir.path() + "/whole.safetensors", "fp", {{"p", {2, 3}}, {"q", {2}}});
  EXPECT_EQ(reread.parameters[1].master, whole.parameters[1].master);
}

// A re-save at the same step whose rank 1 fails (here its part does not match its shape; in
// test_distributed.py the SL_TEST_FAIL_CHECKPOINT_PART hook) leaves the previous index and its
// parts byte for byte, and removes the parts this save wrote.
TEST(ShardedCheckpoint, AFailedSaveLeavesThePreviousCheckpointAsItWas) {
  TempDir dir;
  std::string index = dir.path() + "/ckpt";
  ShardedLayout layout = checkpointLayout();
  onRanks(2, [&](int rank, Communicator &comm) {
    saveShardedCheckpoint(index, partOf(rank, 7), layout, comm);
  });
  std::map<std::string, std::string> before = snapshot(dir.path());
  std::vector<std::string> messages(2);
  onRanks(2, [&](int rank, Communicator &comm) {
    TrainingCheckpoint part = partOf(rank, 7);
    part.parameters[0].master[0] = 1e6f; // what the old index's parts must not be given
    if (rank == 1)
      part.parameters[1].adamV.pop_back();
    try {
      saveShardedCheckpoint(index, part, layout, comm);
    } catch (const Error &e) {
      messages[static_cast<size_t>(rank)] = e.what();
    }
  });
  for (const std::string &message : messages) {
    EXPECT_THAT(message, HasSubstr("was not written: rank(s) 1 could not write their part"));
    EXPECT_THAT(message, HasSubstr("this save's parts were removed, so the previous checkpoint "
                                   "at " + index + " (if any) and every file it names are as "
                                   "they were"));
  }
  EXPECT_EQ(snapshot(dir.path()), before);
  EXPECT_EQ(loadShardedCheckpoint(index, "fp", layout, 0).parameters[0].master,
            partOf(0, 7).parameters[0].master);

  // The testing hook fails rank 0 the same way.
  {
    ScopedEnv fail("SL_TEST_FAIL_CHECKPOINT_PART", "0");
    onRanks(2, [&](int rank, Communicator &comm) {
      try {
        saveShardedCheckpoint(index, partOf(rank, 8), layout, comm);
        ADD_FAILURE() << "rank " << rank << " saved";
      } catch (const Error &e) {
        EXPECT_THAT(e.what(), HasSubstr("rank(s) 0 could not write their part"));
        if (rank == 0) {
          EXPECT_THAT(e.what(), HasSubstr("SL_TEST_FAIL_CHECKPOINT_PART fails rank 0's part"));
        }
      }
    });
    EXPECT_EQ(snapshot(dir.path()), before);
  }
  {
    ScopedEnv fail("SL_TEST_FAIL_CHECKPOINT_PART", "one");
    onRanks(2, [&](int rank, Communicator &comm) {
      try {
        saveShardedCheckpoint(index, partOf(rank, 8), layout, comm);
        ADD_FAILURE() << "rank " << rank << " saved";
      } catch (const Error &e) {
        EXPECT_THAT(e.what(), HasSubstr("rank(s) 0, 1 could not write their part "
                                        "(SL_TEST_FAIL_CHECKPOINT_PART='one' is not a rank)"));
      }
    });
    EXPECT_EQ(snapshot(dir.path()), before);
  }
}

// An index that cannot be written (a directory is in its way) leaves none of this save's parts.
TEST(ShardedCheckpoint, AnIndexThatCannotBeWrittenTakesItsPartsAlong) {
  TempDir dir;
  std::string index = dir.path() + "/ckpt";
  std::filesystem::create_directory(index);
  std::vector<std::string> messages(2);
  onRanks(2, [&](int rank, Communicator &comm) {
    try {
      saveShardedCheckpoint(index, partOf(rank, 7), checkpointLayout(), comm);
    } catch (const Error &e) {
      messages[static_cast<size_t>(rank)] = e.what();
    }
  });
  for (const std::string &message : messages)
    EXPECT_THAT(message, HasSubstr("the checkpoint index " + index + " was not written"));
  EXPECT_THAT(messages[0], HasSubstr("cannot write"));
  EXPECT_THAT(namesOf(snapshot(dir.path())), ::testing::ElementsAre("ckpt"));
}

// A re-save, at the same step or another, replaces the checkpoint: the new index names new parts,
// and the old parts go once it is in place. Parts named before save ids go too; files that are
// not named like this index's parts stay, whatever the old index lists.
TEST(ShardedCheckpoint, AReSaveRemovesThePartsOfTheIndexItReplaced) {
  TempDir dir;
  std::string index = dir.path() + "/ckpt";
  ShardedLayout layout = checkpointLayout();
  auto save = [&](uint64_t step) {
    onRanks(2, [&](int rank, Communicator &comm) {
      saveShardedCheckpoint(index, partOf(rank, step), layout, comm);
    });
  };
  save(7);
  std::vector<std::string> first = partsOf(index);
  save(7);
  std::vector<std::string> second = partsOf(index);
  EXPECT_NE(first, second);
  EXPECT_THAT(namesOf(snapshot(dir.path())),
              ::testing::UnorderedElementsAre(
                  "ckpt", std::filesystem::path(second[0]).filename().string(),
                  std::filesystem::path(second[1]).filename().string()));
  EXPECT_EQ(loadShardedCheckpoint(index, "fp", layout, 1).parameters[1].adamM,
            partOf(1, 7).parameters[1].adamM);

  // An index as written before save ids, its parts named without one: read as before, and its
  // parts removed by the next save.
  nlohmann::json old = nlohmann::json::parse(readFile(index));
  old.erase("save_id");
  old["files"] = {"ckpt.step7.rank0-of-2.safetensors", "ckpt.step7.rank1-of-2.safetensors"};
  std::filesystem::rename(second[0], dir.path() + "/ckpt.step7.rank0-of-2.safetensors");
  std::filesystem::rename(second[1], dir.path() + "/ckpt.step7.rank1-of-2.safetensors");
  writeFileAtomically(index, old.dump());
  EXPECT_EQ(loadShardedCheckpoint(index, "fp", layout, 0).parameters[0].master,
            partOf(0, 7).parameters[0].master);
  save(9);
  std::vector<std::string> third = partsOf(index);
  auto name = [](const std::string &path) { return std::filesystem::path(path).filename().string(); };
  EXPECT_THAT(namesOf(snapshot(dir.path())),
              ::testing::UnorderedElementsAre("ckpt", name(third[0]), name(third[1])));

  // An index that lists a file not named like a part (edited by hand): that file stays.
  nlohmann::json edited = nlohmann::json::parse(readFile(index));
  edited["files"][1] = "precious.txt";
  writeFileAtomically(index, edited.dump());
  writeBytes(dir.path() + "/precious.txt", "keep me");
  save(10);
  std::vector<std::string> fourth = partsOf(index);
  EXPECT_THAT(namesOf(snapshot(dir.path())),
              ::testing::UnorderedElementsAre("ckpt", "precious.txt", name(fourth[0]),
                                              name(fourth[1])));
  EXPECT_EQ(readFile(dir.path() + "/precious.txt"), "keep me");

  // Parts of saves killed before their index was written (other save ids, other steps) are swept
  // by the next save that completes; a file that only looks alike is not.
  writeBytes(dir.path() + "/ckpt.step11.0123456789abcdef.rank0-of-2.safetensors", "orphan");
  writeBytes(dir.path() + "/ckpt.step12.fedcba9876543210.rank1-of-2.safetensors", "orphan");
  writeBytes(dir.path() + "/ckpt.step12.notes.txt", "keep me too");
  save(13);
  std::vector<std::string> fifth = partsOf(index);
  EXPECT_THAT(namesOf(snapshot(dir.path())),
              ::testing::UnorderedElementsAre("ckpt", "precious.txt", "ckpt.step12.notes.txt",
                                              name(fifth[0]), name(fifth[1])));
}

// A checkpoint of one rank, or a rank's part, given where an index belongs: the message says what
// the file is and the world sizes, not how JSON failed to parse it.
TEST(ShardedCheckpoint, AFileThatIsNoIndexIsNamedForWhatItIs) {
  TempDir dir;
  TrainingCheckpoint whole;
  whole.modelFingerprint = "fp";
  whole.parameters.push_back({"p", {2}, {1, 2}, {0, 0}, {0, 0}});
  std::string one = dir.path() + "/one.safetensors";
  saveCheckpoint(one, whole);
  try {
    loadShardedCheckpoint(one, "fp", checkpointLayout(), 0);
    FAIL() << "a checkpoint of one rank was resumed on two";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              one + ": this is the checkpoint of a run of one rank (world 1), not the index of a "
                    "sharded checkpoint, and this run has 2 ranks (world 2): resume it with a run "
                    "of one rank; a checkpoint is not re-sharded for another number of ranks");
  }
  try {
    consolidateShardedCheckpoint(one, "fp", {{"p", {2}}});
    FAIL() << "a checkpoint of one rank was consolidated";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("this is the checkpoint of a run of one rank, not the index of "
                                    "a sharded checkpoint: there is nothing to consolidate"));
  }
  std::string index = dir.path() + "/ckpt";
  onRanks(2, [&](int rank, Communicator &comm) {
    saveShardedCheckpoint(index, partOf(rank, 3), checkpointLayout(), comm);
  });
  EXPECT_EQ(shardedCheckpointWorld(index), 2u);
  try {
    loadShardedCheckpoint(partsOf(index)[1], "fp", checkpointLayout(), 1);
    FAIL() << "a part was read as an index";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("this is rank 1's part of a checkpoint sharded over 2 ranks, "
                                    "not its index: give the index (the file --save named)"));
  }
  std::vector<float> values = {1, 2};
  writeSafetensors(dir.path() + "/plain.safetensors", {{"w", sl::schedule::F32, {2}, values.data()}});
  try {
    consolidateShardedCheckpoint(dir.path() + "/plain.safetensors", "fp", {{"w", {2}}});
    FAIL() << "plain weights were read as an index";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("not a sharded checkpoint index (a safetensors file, but not a "
                                    "SpeedLoader checkpoint)"));
  }
  writeBytes(dir.path() + "/text", "hello");
  try {
    loadShardedCheckpoint(dir.path() + "/text", "fp", checkpointLayout(), 0);
    FAIL() << "text was read as an index";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("not a sharded checkpoint index (neither JSON nor a "
                                    "safetensors file)"));
  }
  try {
    loadShardedCheckpoint(dir.path() + "/absent", "fp", checkpointLayout(), 0);
    FAIL() << "a missing file was read as an index";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open"));
  }
}

TEST(ShardedCheckpoint, MismatchesAreNamed) {
  TempDir dir;
  std::string index = dir.path() + "/ckpt";
  ShardedLayout layout = checkpointLayout();
  onRanks(2, [&](int rank, Communicator &comm) {
    saveShardedCheckpoint(index, partOf(rank, 3), layout, comm);
  });
  ShardedLayout four = layout;
  four.world = 4;
  EXPECT_THROW(
      {
        try {
          loadShardedCheckpoint(index, "fp", four, 0);
        } catch (const Error &e) {
          EXPECT_THAT(e.what(), HasSubstr("the checkpoint is sharded over 2 ranks, this run has 4"));
          throw;
        }
      },
      Error);
  ShardedLayout moved = layout;
  moved.parameters[1].offset = 1;
  EXPECT_THROW(loadShardedCheckpoint(index, "fp", moved, 0), Error);
  EXPECT_THROW(loadShardedCheckpoint(index, "another model", layout, 0), Error);
  // A rank's file is not a checkpoint a run of one rank resumes.
  std::vector<std::string> step3 = partsOf(index);
  try {
    loadCheckpoint(step3[1], "fp", {{"a", {4}}, {"b", {2}}});
    FAIL() << "a rank's part was resumed as a whole checkpoint";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("this is rank 1's part of a checkpoint sharded over 2 ranks"));
  }
  // A part file that does not match its index (another step) is refused.
  std::filesystem::copy_file(step3[0], dir.path() + "/saved");
  onRanks(2, [&](int rank, Communicator &comm) {
    saveShardedCheckpoint(index, partOf(rank, 4), layout, comm);
  });
  std::filesystem::copy_file(dir.path() + "/saved", partsOf(index)[0],
                             std::filesystem::copy_options::overwrite_existing);
  try {
    loadShardedCheckpoint(index, "fp", layout, 0);
    FAIL() << "a part of step 3 was read for step 4";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("it is of step 3"));
  }
}

// Every rank gets every rank's record and stops with the same message when one differs.
TEST(RankAgreementExchange, EveryRankStopsOnADifferenceNamingIt) {
  std::vector<AgreementField> fields = {textField("schedule", "s"), numberField("--lr", 0.003)};
  onRanks(3, [&](int, Communicator &comm) { checkRanksAgree(fields, comm); });
  std::vector<std::string> messages(3);
  onRanks(3, [&](int rank, Communicator &comm) {
    std::vector<AgreementField> mine = fields;
    if (rank == 1)
      mine[1] = numberField("--lr", 0.001);
    try {
      checkRanksAgree(mine, comm);
    } catch (const Error &e) {
      messages[static_cast<size_t>(rank)] = e.what();
    }
  });
  for (const std::string &message : messages)
    EXPECT_EQ(message, "the ranks disagree (every rank must run the same schedule, model, data "
                       "and settings):\n  --lr: rank 1 has 0.001, ranks 0 and 2 have 0.003");
}

TEST(TokenDataRows, EachRankReadsItsRowsOfTheStep) {
  TempDir dir;
  std::vector<uint16_t> tokens(37);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint16_t>(i % 11);
  writeBytes(dir.path() + "/t.bin",
             std::string(reinterpret_cast<const char *>(tokens.data()), tokens.size() * 2));
  TokenData data = TokenData::open(dir.path() + "/t.bin", TokenDType::U16);
  for (uint64_t step : {0u, 1u, 5u}) {
    TokenBatch whole = data.batch(step, 4, 3, 11);
    for (int64_t rank = 0; rank < 2; ++rank) {
      TokenBatch rows = data.batchRows(step, 4, 3, 11, rank * 2, 2);
      ASSERT_EQ(rows.inputs.shape, (Shape{2, 3}));
      for (int64_t i = 0; i < 6; ++i) {
        EXPECT_EQ(rows.inputs.as<int64_t>()[i], whole.inputs.as<int64_t>()[rank * 6 + i]);
        EXPECT_EQ(rows.labels.as<int64_t>()[i], whole.labels.as<int64_t>()[rank * 6 + i]);
      }
    }
  }
  EXPECT_THROW(data.batchRows(0, 4, 3, 11, 3, 2), Error);
}

TEST(LaunchedWorldSize, ComesFromTheLaunchersEnvironment) {
  ScopedEnv ompi("OMPI_COMM_WORLD_SIZE", nullptr), pmi("PMI_SIZE", nullptr),
      mv2("MV2_COMM_WORLD_SIZE", nullptr);
  EXPECT_EQ(launchedWorldSize(), 1);
  // A run of one rank loads no plugin and gets no communicator.
  EXPECT_EQ(openCommunicator({}), nullptr);
  {
    ScopedEnv set("PMI_SIZE", "3");
    EXPECT_EQ(launchedWorldSize(), 3);
  }
  {
    ScopedEnv set("OMPI_COMM_WORLD_SIZE", "two");
    try {
      launchedWorldSize();
      FAIL() << "accepted a world size of 'two'";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("OMPI_COMM_WORLD_SIZE='two' ranks, which is not a positive "
                                      "integer"));
    }
  }
  {
    // Several ranks and no plugin: the message says what is missing.
    TempDir empty;
    ScopedEnv set("OMPI_COMM_WORLD_SIZE", "2");
    ScopedEnv dir("SL_COMM_PLUGIN_DIR", empty.path().c_str());
    try {
      openCommunicator({});
      FAIL() << "opened a communicator without a plugin";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("launched as one of 2 ranks, but the MPI plugin "
                                      "libslrt_mpi.so is not there (tried " +
                                      empty.path() + "/libslrt_mpi.so): this sl-run was built "
                                                     "without SL_ENABLE_MPI"));
    }
    // A file that is no plugin is named too.
    writeBytes(empty.path() + "/libslrt_mpi.so", "not a shared library");
    try {
      openCommunicator({});
      FAIL() << "loaded a file that is no plugin";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("cannot load the communicator plugin " + empty.path() +
                                      "/libslrt_mpi.so"));
    }
  }
  {
    // Checked before any plugin is loaded.
    ScopedEnv set("OMPI_COMM_WORLD_SIZE", "2");
    CommOptions options;
    options.timeoutSeconds = 0;
    try {
      openCommunicator(options);
      FAIL() << "accepted a collective timeout of 0 s";
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("the collective timeout must be positive"));
    }
  }
}

} // namespace
} // namespace slrt::test
