// Parameter loading (slrt/parameter_loader.h) on its own: into plain host memory, no backend and
// no executor. The executor's tests cover the same reads through it (bf16 rounding, shards, NaN).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "slrt/dtype.h"
#include "slrt/parameter_loader.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

// Both spaces of `schedule` in RAM, as the CPU backend has them, and a ref per buffer.
struct Memory {
  explicit Memory(const sl::schedule::Schedule &schedule)
      : device(schedule.device_arena_bytes()), host(schedule.host_pool_bytes()) {
    for (const sl::schedule::Buffer &b : schedule.buffers())
      buffers.push_back(
          TensorRef{(b.space() == sl::schedule::DEVICE ? device.data() : host.data()) + b.offset(),
                    b.space(), b.dtype(), toShape(b.shape()), b.bytes()});
  }
  std::vector<float> floats(uint32_t id) const {
    const TensorRef &ref = buffers[id];
    std::vector<float> values(ref.bytes / sizeof(float));
    std::memcpy(values.data(), ref.data, ref.bytes);
    return values;
  }
  std::vector<std::byte> device, host;
  std::vector<TensorRef> buffers;
};

TEST(ParameterLoaderTest, ReadsEveryParameterIntoItsBuffer) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(7);
  LoadedSchedule loaded = loadSchedule(mlp.write(dir.path()));
  Memory memory(loaded.schedule);
  EXPECT_EQ(loadParameters(loaded, memory.buffers, 0, std::nullopt), 128u + 32 + 96 + 12);
  EXPECT_EQ(memory.floats(TinyMlp::W1), mlp.w1);
  EXPECT_EQ(memory.floats(TinyMlp::B1), mlp.b1);
  EXPECT_EQ(memory.floats(TinyMlp::W2), mlp.w2);
  EXPECT_EQ(memory.floats(TinyMlp::B2), mlp.b2);
}

// The file is read when the executor is created, after loadSchedule checked its size: a file cut
// short since is an error, never a zero-filled weight.
TEST(ParameterLoaderTest, AFileCutShortAfterLoadingIsAnError) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(7);
  LoadedSchedule loaded = loadSchedule(mlp.write(dir.path()));
  std::filesystem::resize_file(dir.file("tiny_mlp.params"), 100);
  Memory memory(loaded.schedule);
  EXPECT_THAT(errorOf([&] { loadParameters(loaded, memory.buffers, 0, std::nullopt); }),
              HasSubstr("tiny_mlp.params: file ended early (it changed after the schedule was "
                        "loaded)"));
}

// Random weights never open the files, and a seed gives the same weights every time.
TEST(ParameterLoaderTest, RandomWeightsReadNoFile) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(7);
  std::string path = mlp.write(dir.path());
  LoadedSchedule loaded = loadSchedule(path);
  std::filesystem::remove(dir.file("tiny_mlp.params"));
  Memory first(loaded.schedule), second(loaded.schedule);
  EXPECT_EQ(loadParameters(loaded, first.buffers, 0, 3), 0u);
  EXPECT_EQ(loadParameters(loaded, second.buffers, 0, 3), 0u);
  EXPECT_EQ(first.floats(TinyMlp::W1), second.floats(TinyMlp::W1));
  EXPECT_NE(first.floats(TinyMlp::W1), std::vector<float>(TinyMlp::kIn * TinyMlp::kHidden));
}

TEST(ParameterLoaderTest, ConstantsAreWrittenWholeOrSplat) {
  using namespace sl::schedule;
  ScheduleBuilder b;
  uint32_t whole = b.buffer("whole", HOST, F32, {3});
  uint32_t splat = b.buffer("splat", DEVICE, F32, {5});
  b.constant(whole, std::vector<float>{1, 2, 3});
  b.constant(splat, std::vector<float>{2.5f});
  Memory memory(b.schedule);
  writeConstants(b.schedule, memory.buffers);
  EXPECT_EQ(memory.floats(whole), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(memory.floats(splat), std::vector<float>(5, 2.5f));
}

} // namespace
} // namespace slrt::test
