// The check sl-run makes before it allocates anything: what a run needs against the memory free
// (/proc/meminfo, the memory cgroup, the device), with the testing hooks.
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/backend.h"
#include "slrt/device_rule.h"
#include "slrt/error.h"
#include "slrt/memory_check.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

sl::schedule::Schedule trainSchedule() {
  sl::schedule::Schedule s;
  s.set_kind("train");
  s.set_device_arena_bytes(1000);
  s.set_host_pool_bytes(500);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 3}, std::vector<int64_t>{3}}) {
    sl::schedule::Parameter *p = s.add_parameters();
    p->set_dtype(sl::schedule::F32);
    for (int64_t dim : shape)
      p->add_shape(dim);
  }
  return s;
}

TEST(MemoryNeedTest, CountsTheArenaPoolAndWhatTheRunKeepsBeside) {
  sl::schedule::Schedule s = trainSchedule();
  // 15 parameter values: 60 bytes a copy, AdamW keeps three.
  MemoryNeed need = runMemoryNeed(s, {/*training=*/true});
  EXPECT_EQ(need.deviceArena, 1000u);
  ASSERT_EQ(need.host.size(), 2u);
  EXPECT_EQ(need.host[0].what, "host pool");
  EXPECT_EQ(need.host[0].bytes, 500u);
  EXPECT_EQ(need.host[1].bytes, 180u);
  // A save copies and encodes the state; a resume reads it once.
  need = runMemoryNeed(s, {true, /*resume=*/true, /*save=*/true});
  ASSERT_EQ(need.host.size(), 3u);
  EXPECT_EQ(need.host[2].what, "checkpoint being saved");
  EXPECT_EQ(need.host[2].bytes, 360u);
  need = runMemoryNeed(s, {true, /*resume=*/true});
  EXPECT_EQ(need.host[2].bytes, 180u);

  // Inference: the outputs copied out once by default, not at all when they are read where they
  // lie, 1 + W times on W ranks.
  sl::schedule::Schedule infer;
  infer.set_host_pool_bytes(64);
  sl::schedule::Buffer *y = infer.add_buffers();
  y->set_bytes(24);
  infer.add_outputs()->set_buffer(0);
  need = runMemoryNeed(infer, {});
  ASSERT_EQ(need.host.size(), 2u);
  EXPECT_EQ(need.host[1].bytes, 24u);
  RunMemoryOptions copies;
  copies.outputCopies = 3;
  EXPECT_EQ(runMemoryNeed(infer, copies).host[1].bytes, 72u);
  copies.outputCopies = 0;
  EXPECT_EQ(runMemoryNeed(infer, copies).host.size(), 1u);
}

TEST(MemoryNeedTest, HugeParametersSaturate) {
  sl::schedule::Schedule s = trainSchedule();
  sl::schedule::Parameter *p = s.mutable_parameters(0);
  p->set_shape(0, int64_t{1} << 40);
  p->set_shape(1, int64_t{1} << 40);
  MemoryNeed need = runMemoryNeed(s, {true, false, true});
  EXPECT_EQ(need.host[1].bytes, std::numeric_limits<uint64_t>::max());
  EXPECT_THAT(errorOf([&] {
                checkMemoryFits("x.slsched", need, {1000, "test"});
              }),
              HasSubstr("needs 16.00 EiB (18446744073709551615 bytes) of host memory"));
}

// Budgets one byte short fail, exact ones pass; the message has both numbers and their parts.
TEST(MemoryFitsTest, HostMemoryBoundaryIsExact) {
  MemoryNeed need = runMemoryNeed(trainSchedule(), {true});
  // CPU backend: the arena is host memory too. 500 + 1000 + 180.
  MemoryAvailable exact{1680, "MemAvailable in /proc/meminfo"};
  EXPECT_NO_THROW(checkMemoryFits("t.slsched", need, exact));
  MemoryAvailable short1{1679, "MemAvailable in /proc/meminfo"};
  EXPECT_EQ(errorOf([&] { checkMemoryFits("t.slsched", need, short1); }),
            "t.slsched: the run needs 1.64 KiB (1680 bytes) of host memory (host pool 500 B, "
            "device arena (host memory on this backend) 1000 B, AdamW state (master weights and "
            "two moments) 180 B), but only 1.64 KiB (1679 bytes) is available (MemAvailable in "
            "/proc/meminfo); free some, or compile the model for less (a smaller batch, or sl-opt "
            "--sl-train=\"... host-memory=BYTES\")");
}

TEST(MemoryFitsTest, ASeparateDeviceHoldsTheArenaAlone) {
  MemoryNeed need = runMemoryNeed(trainSchedule(), {true});
  MemoryAvailable available{680, "host", 1000, "free on the cuda device"};
  EXPECT_NO_THROW(checkMemoryFits("t.slsched", need, available));
  available.deviceBytes = 999;
  EXPECT_EQ(errorOf([&] { checkMemoryFits("t.slsched", need, available); }),
            "t.slsched: the device arena needs 1000 B (1000 bytes) of device memory, but only 999 "
            "B (999 bytes) is available (free on the cuda device); compile the model for a "
            "smaller device budget (sl-opt --sl-train=\"... device-memory=BYTES\") or free the "
            "device");
  available = {679, "host", 1000, "free on the cuda device"};
  EXPECT_THAT(errorOf([&] { checkMemoryFits("t.slsched", need, available); }),
              AllOf(HasSubstr("needs 680 B (680 bytes) of host memory (host pool 500 B, AdamW"),
                    HasSubstr("only 679 B (679 bytes) is available (host)")));
}

// What the backend uses beside the arena counts against the free device memory with it.
TEST(MemoryFitsTest, DeviceWorkingMemoryCountsWithTheArena) {
  MemoryNeed need = runMemoryNeed(trainSchedule(), {true});
  need.deviceWorking = 100;
  MemoryAvailable available{680, "host", 1100, "free on the cuda device"};
  EXPECT_NO_THROW(checkMemoryFits("t.slsched", need, available));
  available.deviceBytes = 1099;
  EXPECT_THAT(errorOf([&] { checkMemoryFits("t.slsched", need, available); }),
              AllOf(HasSubstr("the device arena needs 1000 B (1000 bytes) of device memory, plus "
                              "100 B (100 bytes) the backend uses beside it"),
                    HasSubstr("only 1.07 KiB (1099 bytes) is available")));
}

TEST(MemoryFitsTest, DeviceStreamsAreAllButHostCompute) {
  sl::schedule::Schedule s = trainSchedule();
  for (auto kind : {sl::schedule::COMPUTE, sl::schedule::HOST_TO_DEVICE,
                    sl::schedule::DEVICE_TO_HOST, sl::schedule::HOST_COMPUTE,
                    sl::schedule::COLLECTIVE})
    s.add_streams()->set_kind(kind);
  EXPECT_EQ(deviceStreamCount(s), 4u);
  EXPECT_EQ(createCpuBackend()->deviceWorkingBytes(4), 0u);
}

TEST(DeviceRuleTest, RanksOfANodeTakeItsDevicesInTurn) {
  EXPECT_EQ(deviceOfLocalRank(0, 4), 0);
  EXPECT_EQ(deviceOfLocalRank(3, 4), 3);
  EXPECT_EQ(deviceOfLocalRank(5, 4), 1);
  EXPECT_EQ(deviceOfLocalRank(2, 0), 0);
  ::unsetenv("MPI_LOCALRANKID");
  ::unsetenv("MV2_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("SLURM_LOCALID");
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2", 1);
  EXPECT_EQ(launcherLocalRank(), 2);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2x", 1);
  EXPECT_EQ(launcherLocalRank(), std::nullopt);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(launcherLocalRank(), std::nullopt);
}

// A fake /proc and /sys/fs/cgroup under a directory of the test's own.
class HostMemoryTest : public ::testing::Test {
protected:
  void file(const std::string &relative, const std::string &contents) {
    std::filesystem::path path = std::filesystem::path(dir.path()) / relative;
    std::filesystem::create_directories(path.parent_path());
    writeBytes(path.string(), contents);
  }
  void meminfo(const std::string &availableKib) {
    file("proc/meminfo",
         "MemTotal:       24684092 kB\nMemFree:         1000000 kB\n" +
             (availableKib.empty() ? std::string() : "MemAvailable:   " + availableKib + " kB\n") +
             "Buffers:          123456 kB\n");
  }
  TempDir dir;
};

TEST_F(HostMemoryTest, MemAvailableWithoutACgroupLimit) {
  meminfo("2000000");
  MemoryAvailable m = availableHostMemory(dir.path());
  EXPECT_EQ(m.hostBytes, 2000000ull * 1024);
  EXPECT_EQ(m.hostSource, "MemAvailable in " + dir.path() + "/proc/meminfo");
  EXPECT_FALSE(m.deviceBytes);
  // v2 without a limit, v1 with one of "unlimited" (2^63 rounded down to a page).
  file("sys/fs/cgroup/memory.max", "max\n");
  file("sys/fs/cgroup/memory.current", "5000\n");
  file("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  file("sys/fs/cgroup/memory/memory.usage_in_bytes", "5000\n");
  EXPECT_EQ(availableHostMemory(dir.path()).hostBytes, 2000000ull * 1024);
}

TEST_F(HostMemoryTest, OldKernelsHaveOnlyMemFree) {
  meminfo("");
  MemoryAvailable m = availableHostMemory(dir.path());
  EXPECT_EQ(m.hostBytes, 1000000ull * 1024);
  EXPECT_THAT(m.hostSource, StartsWith("MemFree in "));
}

// A container's limit leaves less room than the machine has; reclaimable file cache does not
// count as used.
TEST_F(HostMemoryTest, ACgroupLimitLowersIt) {
  meminfo("2000000");
  file("sys/fs/cgroup/memory.max", "1000000\n");
  file("sys/fs/cgroup/memory.current", "700000\n");
  file("sys/fs/cgroup/memory.stat", "anon 500000\nfile 200000\ninactive_file 100000\n");
  MemoryAvailable m = availableHostMemory(dir.path());
  EXPECT_EQ(m.hostBytes, 400000u);
  EXPECT_EQ(m.hostSource, "the memory cgroup's memory.max less its memory.current");

  std::filesystem::remove_all(dir.path() + "/sys");
  file("sys/fs/cgroup/memory/memory.limit_in_bytes", "1000000\n");
  file("sys/fs/cgroup/memory/memory.usage_in_bytes", "1200000\n");
  m = availableHostMemory(dir.path());
  EXPECT_EQ(m.hostBytes, 0u);
  EXPECT_EQ(m.hostSource,
            "the memory cgroup's memory.limit_in_bytes less its memory.usage_in_bytes");
}

TEST_F(HostMemoryTest, UnreadableMeminfoIsAnError) {
  EXPECT_THAT(errorOf([&] { availableHostMemory(dir.path()); }),
              HasSubstr("/proc/meminfo: cannot open, so the free memory is unknown"));
  file("proc/meminfo", "MemTotal: 5 kB\n");
  EXPECT_THAT(errorOf([&] { availableHostMemory(dir.path()); }),
              HasSubstr("has neither MemAvailable nor MemFree"));
}

// The real machine: some memory is free, and the CPU backend has no device memory of its own.
TEST(AvailableMemoryTest, MeasuresThisMachine) {
  ::unsetenv("SL_TEST_HOST_MEMORY_AVAILABLE");
  ::unsetenv("SL_TEST_DEVICE_MEMORY_AVAILABLE");
  std::unique_ptr<Backend> cpu = createCpuBackend();
  MemoryAvailable m = availableMemory(*cpu);
  EXPECT_GT(m.hostBytes, 0u);
  EXPECT_FALSE(m.deviceBytes);
}

TEST(AvailableMemoryTest, TestingHooksReplaceTheMeasurement) {
  std::unique_ptr<Backend> cpu = createCpuBackend();
  ::setenv("SL_TEST_HOST_MEMORY_AVAILABLE", "12345", 1);
  ::setenv("SL_TEST_DEVICE_MEMORY_AVAILABLE", "678", 1);
  MemoryAvailable m = availableMemory(*cpu);
  EXPECT_EQ(m.hostBytes, 12345u);
  EXPECT_EQ(m.hostSource, "SL_TEST_HOST_MEMORY_AVAILABLE");
  ASSERT_TRUE(m.deviceBytes);
  EXPECT_EQ(*m.deviceBytes, 678u);
  ::setenv("SL_TEST_HOST_MEMORY_AVAILABLE", "12 GiB", 1);
  EXPECT_EQ(errorOf([&] { availableMemory(*cpu); }),
            "SL_TEST_HOST_MEMORY_AVAILABLE='12 GiB' is not a byte count (a non-negative integer)");
  ::unsetenv("SL_TEST_HOST_MEMORY_AVAILABLE");
  ::unsetenv("SL_TEST_DEVICE_MEMORY_AVAILABLE");
}

} // namespace
} // namespace slrt::test
