// The executor end to end on the hand-built tiny MLP, against the same MLP as naive loops.
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

} // namespace
} // namespace slrt::test
