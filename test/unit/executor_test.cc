// The executor end to end on hand-built schedules (the tiny MLP of version 1 ops, a tiny attention
// block of version 2 ops, constants), against the same computations as naive loops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/report.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

class ExecutorTest : public ::testing::Test {
protected:
  void SetUp() override { loaded = loadSchedule(mlp.write(dir.path())); }

  HostTensor randomInput(uint32_t seed) {
    std::mt19937 rng(seed);
    return f32Tensor({TinyMlp::kBatch, TinyMlp::kIn},
                     randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn));
  }

  std::string runError(const std::map<std::string, HostTensor> &inputs) {
    Executor executor(loaded, *backend);
    try {
      executor.run(inputs);
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an Error";
    return "";
  }

  TinyMlp mlp = TinyMlp::build(42);
  TempDir dir;
  LoadedSchedule loaded;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(ExecutorTest, TinyMlpMatchesNaive) {
  Executor executor(loaded, *backend);
  // Twice, with fresh inputs: a run must not depend on what the previous one left behind.
  for (uint32_t seed : {1u, 2u}) {
    HostTensor x = randomInput(seed);
    std::vector<NamedTensor> outputs = executor.run({{"x", x}});
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_EQ(outputs[0].name, "y");
    EXPECT_EQ(outputs[0].tensor.shape, (Shape{TinyMlp::kBatch, TinyMlp::kOut}));
    std::vector<float> expected = mlp.reference(toFloats(x));
    std::vector<float> actual = toFloats(outputs[0].tensor);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], expected[i], 1e-5f) << "element " << i;
  }
}

TEST_F(ExecutorTest, CollectsStats) {
  Executor executor(loaded, *backend);
  executor.run({{"x", randomInput(3)}});
  const RunStats &stats = executor.stats();
  EXPECT_EQ(stats.kernels, 13u);
  // x, w1, b1, w2, b2 go to the device; y comes back.
  EXPECT_EQ(stats.bytesHostToDevice, 32u + 128 + 32 + 96 + 12);
  EXPECT_EQ(stats.bytesDeviceToHost, 24u);
  EXPECT_EQ(stats.bytesWithinSpace, 0u);
  EXPECT_EQ(stats.parameterBytesRead, 128u + 32 + 96 + 12);
  EXPECT_EQ(stats.deviceArenaBytes, 832u);
  EXPECT_EQ(stats.hostPoolBytes, 512u);
  EXPECT_EQ(stats.perOp.at("COPY").count, 6u);
  EXPECT_EQ(stats.perOp.at("MATMUL").count, 1u);
  EXPECT_EQ(stats.perOp.at("GEMM").count, 1u);
  EXPECT_GT(stats.wallSeconds, 0.0);
}

TEST_F(ExecutorTest, ReportHasTheRun) {
  Executor executor(loaded, *backend);
  std::vector<NamedTensor> outputs = executor.run({{"x", randomInput(4)}});
  nlohmann::json report = makeReport(loaded, backend->name(), executor.stats(), outputs);
  EXPECT_EQ(report["schedule"], loaded.path);
  EXPECT_EQ(report["kind"], "infer");
  EXPECT_EQ(report["backend"], "cpu");
  EXPECT_EQ(report["kernels"], 13);
  EXPECT_EQ(report["bytes_moved"]["host_to_device"], 300);
  EXPECT_EQ(report["bytes_moved"]["device_to_host"], 24);
  EXPECT_EQ(report["device_arena_bytes"], 832);
  EXPECT_EQ(report["host_pool_bytes"], 512);
  EXPECT_EQ(report["ops"]["SILU"]["count"], 1);
  EXPECT_EQ(report["outputs"][0]["name"], "y");
  EXPECT_EQ(report["outputs"][0]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_GE(report["wall_seconds"].get<double>(), 0.0);
}

TEST_F(ExecutorTest, RejectsWrongInputs) {
  EXPECT_THAT(runError({}), HasSubstr("missing input 'x' (the schedule's inputs: x)"));
  EXPECT_THAT(runError({{"x", randomInput(1)}, {"z", randomInput(1)}}),
              HasSubstr("unknown input 'z' (the schedule's inputs: x)"));
  EXPECT_THAT(runError({{"x", f32Tensor({2, 5}, std::vector<float>(10))}}),
              HasSubstr("input 'x' is f32 [2, 5], but the schedule expects f32 [2, 4]"));
  EXPECT_THAT(runError({{"x", HostTensor::zeros(sl::schedule::F64, {2, 4})}}),
              HasSubstr("input 'x' is f64 [2, 4], but the schedule expects f32 [2, 4]"));
}

TEST_F(ExecutorTest, ReportsParameterFileThatShrankAfterLoading) {
  std::string params = mlp.paramsFileBytes();
  writeBytes(dir.file("tiny_mlp.params"), params.substr(0, 100));
  try {
    Executor executor(loaded, *backend);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("tiny_mlp.params: file ended early"));
  }
}

// Constants are in their host buffers before anything runs: whole, or one element repeated.
TEST(ExecutorConstantsTest, WritesFullAndSplatConstants) {
  using namespace sl::schedule;
  ScheduleBuilder b;
  uint32_t full = b.buffer("full", HOST, F32, {2, 3});
  uint32_t splat = b.buffer("splat", HOST, I64, {5});
  uint32_t flags = b.buffer("flags", HOST, BOOL, {3});
  uint32_t wide = b.buffer("wide", HOST, F64, {7});
  uint32_t single = b.buffer("single", HOST, F32, {});
  uint32_t none = b.buffer("none", HOST, F32, {0, 4});
  b.constant(full, std::vector<float>{1, 2, 3, 4, 5, 6});
  b.constant(splat, std::vector<int64_t>{-7});
  b.constant(flags, std::vector<uint8_t>{1});
  b.constant(wide, std::vector<double>{0.25});
  b.constant(single, std::vector<float>{9});
  b.constant(none, std::vector<float>{3}); // a splat over nothing writes nothing
  // A copy to the device and back shows the constants are in place before the first kernel.
  uint32_t dev = b.buffer("splat.dev", DEVICE, I64, {5});
  uint32_t back = b.buffer("back", HOST, I64, {5});
  // The streams run concurrently: the copy back waits for the copy in.
  b.schedule.set_num_events(1);
  b.kernel(COPY, "in", {splat}, dev).add_record_events(0);
  b.kernel(COPY, "out", {dev}, back).add_wait_events(0);
  for (auto [name, id] : {std::pair{"full", full},
                          {"splat", splat},
                          {"flags", flags},
                          {"wide", wide},
                          {"single", single},
                          {"none", none},
                          {"back", back}})
    b.output(name, id);

  TempDir dir;
  std::string path = dir.file("constants.slsched");
  writeSchedule(b.schedule, path);
  LoadedSchedule loaded = loadSchedule(path);
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend);
  for (int run = 0; run < 2; ++run) {
    std::vector<NamedTensor> out = executor.run({});
    ASSERT_EQ(out.size(), 7u);
    EXPECT_EQ(toFloats(out[0].tensor), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(std::vector<int64_t>(out[1].tensor.as<int64_t>(), out[1].tensor.as<int64_t>() + 5),
              std::vector<int64_t>(5, -7));
    EXPECT_EQ(std::vector<uint8_t>(out[2].tensor.as<uint8_t>(), out[2].tensor.as<uint8_t>() + 3),
              std::vector<uint8_t>(3, 1));
    EXPECT_EQ(std::vector<double>(out[3].tensor.as<double>(), out[3].tensor.as<double>() + 7),
              std::vector<double>(7, 0.25));
    EXPECT_EQ(toFloats(out[4].tensor), std::vector<float>{9});
    EXPECT_EQ(out[5].tensor.numel(), 0u);
    EXPECT_EQ(out[6].tensor.data, out[1].tensor.data);
  }
}

class TinyAttentionTest : public ::testing::Test {
protected:
  void SetUp() override { loaded = loadSchedule(block.write(dir.path())); }

  TinyAttention block = TinyAttention::build(11);
  TempDir dir;
  LoadedSchedule loaded;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(TinyAttentionTest, MatchesNaive) {
  Executor executor(loaded, *backend);
  // Negative ids count from the end of the vocabulary; ids >= 3 are replaced by the fill value.
  for (std::vector<int64_t> ids : {std::vector<int64_t>{4, 1, -1, 0}, {2, -6, 5, 3}}) {
    std::vector<NamedTensor> outputs = executor.run({{"ids", i64Tensor({1, 4}, ids)}});
    ASSERT_EQ(outputs.size(), 2u);
    EXPECT_EQ(outputs[0].name, "y");
    EXPECT_EQ(outputs[0].tensor.shape, (Shape{1, 4, 8}));
    std::vector<float> expected = block.referenceY(ids), actual = toFloats(outputs[0].tensor);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], expected[i], 1e-5f) << "element " << i;
    EXPECT_EQ(outputs[1].name, "keep");
    EXPECT_EQ(outputs[1].tensor.dtype, sl::schedule::BOOL);
    const uint8_t *keep = outputs[1].tensor.as<uint8_t>();
    EXPECT_EQ(std::vector<uint8_t>(keep, keep + 4), block.referenceKeep(ids));
  }
  EXPECT_EQ(executor.stats().kernels, 25u);
  EXPECT_EQ(executor.stats().perOp.at("COPY").count, 12u);
  EXPECT_EQ(executor.stats().perOp.at("ATTENTION").count, 1u);
  EXPECT_EQ(executor.stats().perOp.at("ROTARY").count, 2u);
}

TEST_F(TinyAttentionTest, IndexOutOfRangeNamesTheKernel) {
  Executor executor(loaded, *backend);
  try {
    executor.run({{"ids", i64Tensor({1, 4}, {0, 1, 6, 2})}});
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("kernel " + std::to_string(block.gatherKernel) +
                                    " 'embed' (GATHER): index 6 (element 2 of the indices [1, 4]) "
                                    "is out of range for axis 0 of the data [6, 8]"));
  }
  // The executor is still usable with good inputs.
  EXPECT_EQ(executor.run({{"ids", i64Tensor({1, 4}, {0, 1, 2, 3})}}).size(), 2u);
}

TEST_F(TinyAttentionTest, RejectsInputOfWrongDType) {
  Executor executor(loaded, *backend);
  try {
    executor.run({{"ids", f32Tensor({1, 4}, {0, 1, 2, 3})}});
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(),
                HasSubstr("input 'ids' is f32 [1, 4], but the schedule expects i64 [1, 4]"));
  }
}

} // namespace
} // namespace slrt::test
