// The executor end to end on hand-built schedules (the tiny MLP of version 1 ops, a tiny attention
// block of version 2 ops, constants, a multi-stream schedule with arena reuse and host
// accumulation), against the same computations as naive loops; stats, traces, the
// OPTIMIZER_STEP hook.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "slrt/atomic_file.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/read_file.h"
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
  nlohmann::json report =
      makeReport(loaded, backend->name(), executor.stats(), reportedOutputs(outputs));
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

// What the parameter and checkpoint readers refuse NaN and infinities with.
TEST(FindNonFiniteTest, EveryFloatDType) {
  const float f32[] = {1, -0.0f, 3, std::numeric_limits<float>::infinity(), std::nanf("")};
  EXPECT_EQ(findNonFinite(f32, 3, sl::schedule::F32), std::nullopt);
  std::optional<NonFinite> bad = findNonFinite(f32, 5, sl::schedule::F32);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->index, 3u);
  EXPECT_EQ(bad->text, "inf");
  bad = findNonFinite(f32, 5, sl::schedule::F32, /*nanOnly=*/true);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->index, 4u);
  EXPECT_EQ(bad->text, "NaN");

  const double f64[] = {0, -std::numeric_limits<double>::infinity()};
  bad = findNonFinite(f64, 2, sl::schedule::F64);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->text, "-inf");
  EXPECT_EQ(findNonFinite(f64, 2, sl::schedule::F64, true), std::nullopt);

  // f16: 0x7c00 inf, 0xfe00 a negative NaN, 0x7bff the largest finite; bf16: 0x7f80 inf,
  // 0x7fc1 NaN, 0x7f7f finite.
  const uint16_t f16[] = {0x7bff, 0x3c00, 0xfe00, 0x7c00};
  bad = findNonFinite(f16, 4, sl::schedule::F16);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->index, 2u);
  EXPECT_EQ(bad->text, "NaN");
  const uint16_t bf16[] = {0x7f7f, 0xff80, 0x7fc1};
  bad = findNonFinite(bf16, 3, sl::schedule::BF16);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->index, 1u);
  EXPECT_EQ(bad->text, "-inf");
  EXPECT_EQ(findNonFinite(bf16, 3, sl::schedule::BF16, true)->index, 2u);

  // Integers have no NaN.
  const int64_t i64[] = {-1, 0x7ff8000000000000};
  EXPECT_EQ(findNonFinite(i64, 2, sl::schedule::I64), std::nullopt);
}

// A NaN weight is refused as it is read, naming the parameter, the element and the file; an
// infinity may be meant (a mask), so inference takes it.
TEST_F(ExecutorTest, RefusesANaNParameterButTakesInfinities) {
  std::string params = mlp.paramsFileBytes();
  // b1 follows the 16-byte header and w1 (f32 [4, 8]).
  const uint64_t b1 = 16 + 4 * 8 * 4;
  const float nan = std::nanf(""), inf = INFINITY;
  std::memcpy(params.data() + b1 + 2 * sizeof(float), &nan, sizeof nan);
  writeBytes(dir.file("tiny_mlp.params"), params);
  try {
    Executor executor(loaded, *backend);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.file("tiny_mlp.params") +
                                    ": parameter 'b1' holds NaN at element 2 of its f32 [8] (read "
                                    "from offset 144): the model file is corrupt"));
  }
  std::memcpy(params.data() + b1 + 2 * sizeof(float), &inf, sizeof inf);
  writeBytes(dir.file("tiny_mlp.params"), params);
  Executor executor(loaded, *backend);
  EXPECT_NO_THROW(executor.run({{"x", randomInput(3)}}));
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

// An input a GATHER reads as indices is checked before anything runs, naming the element.
TEST_F(TinyAttentionTest, IndexOutOfRangeIsRefusedBeforeTheRun) {
  Executor executor(loaded, *backend);
  try {
    executor.run({{"ids", i64Tensor({1, 4}, {0, 1, 6, 2})}});
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 ("input 'ids' holds 6 at [0, 2]: kernel " + std::to_string(block.gatherKernel) +
                  " 'embed' (GATHER), which indexes axis 0 of [6, 8] with it, takes "
                  "-6..5")
                     .c_str());
  }
  // The executor is still usable with good inputs.
  EXPECT_EQ(executor.run({{"ids", i64Tensor({1, 4}, {0, 1, 2, 3})}}).size(), 2u);
}

// Indices computed in the schedule are checked by the kernel, whose error the executor prefixes
// with the kernel's name; the executor stays usable.
TEST(ExecutorKernelErrorTest, AFailingKernelIsNamed) {
  TempDir dir;
  std::string path = dir.file("shift.slsched");
  writeSchedule(ShiftedLookup::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend);
  try {
    executor.run({{"ids", i64Tensor({3}, {0, 3, 1})}});
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "kernel 4 'lookup' (GATHER): index 4 (element 1 of the indices [3]) is "
                           "out of range for axis 0 of the data [4, 2]");
  }
  std::vector<NamedTensor> out = executor.run({{"ids", i64Tensor({3}, {0, 2, 1})}});
  EXPECT_EQ(toFloats(out[0].tensor), (std::vector<float>{2, 3, 6, 7, 4, 5}));
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

// --- streams on threads ----------------------------------------------------------------------

class StreamedExecutorTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string path = dir.file("streamed.slsched");
    writeSchedule(StreamedSchedule::build(), path);
    loaded = loadSchedule(path);
  }

  HostTensor input(uint32_t seed) {
    std::mt19937 rng(seed);
    return f32Tensor({StreamedSchedule::kSize}, randomFloats(rng, StreamedSchedule::kSize));
  }

  TempDir dir;
  LoadedSchedule loaded;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(StreamedExecutorTest, RunsEveryStreamWithReuseAndHostAccumulation) {
  Executor executor(loaded, *backend);
  for (uint32_t seed : {1u, 2u, 3u}) {
    HostTensor x = input(seed);
    std::vector<NamedTensor> out = executor.run({{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    std::vector<float> xs = toFloats(x), y = toFloats(out[0].tensor), z = toFloats(out[1].tensor);
    for (size_t i = 0; i < xs.size(); ++i) {
      float relu = std::max(xs[i], 0.0f);
      EXPECT_NEAR(z[i], 1.0f / (1.0f + std::exp(-relu)), 1e-6f) << "element " << i;
      // ACCUMULATE is exactly one fp32 addition.
      EXPECT_EQ(y[i], relu + z[i]) << "element " << i;
    }
  }
}

TEST_F(StreamedExecutorTest, CountsPerStreamBytesAndHighWaterMarks) {
  Executor executor(loaded, *backend);
  executor.run({{"x", input(1)}});
  const RunStats &stats = executor.stats();
  EXPECT_EQ(stats.kernels, 6u);
  ASSERT_EQ(stats.perStream.size(), 4u);
  const std::pair<sl::schedule::StreamKind, uint64_t> expected[] = {
      {sl::schedule::COMPUTE, 2},
      {sl::schedule::HOST_TO_DEVICE, 1},
      {sl::schedule::DEVICE_TO_HOST, 2},
      {sl::schedule::HOST_COMPUTE, 1}};
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(stats.perStream[i].id, i);
    EXPECT_EQ(stats.perStream[i].kind, expected[i].first);
    EXPECT_EQ(stats.perStream[i].kernels, expected[i].second);
  }
  EXPECT_EQ(stats.bytesHostToDevice, 20u);
  EXPECT_EQ(stats.bytesDeviceToHost, 40u);
  EXPECT_EQ(stats.bytesCollective, 0u);
  EXPECT_EQ(stats.perOp.at("ACCUMULATE").count, 1u);
  // c reuses a's bytes, so the arena's last 64 bytes (where the builder first put c) are never
  // touched: a at 0 and b at 64, 20 bytes each. The pool's furthest buffer is z at 128.
  EXPECT_EQ(stats.deviceArenaBytes, 148u);
  EXPECT_EQ(stats.deviceArenaPeakBytes, 84u);
  EXPECT_EQ(stats.hostPoolPeakBytes, 148u);

  nlohmann::json report = makeReport(loaded, backend->name(), stats, {});
  EXPECT_EQ(report["device_arena_peak_bytes"], 84);
  EXPECT_EQ(report["host_pool_peak_bytes"], 148);
  EXPECT_EQ(report["bytes_moved"]["collective"], 0);
  ASSERT_EQ(report["streams"].size(), 4u);
  EXPECT_EQ(report["streams"][3]["kind"], "host");
  EXPECT_EQ(report["streams"][2]["kernels"], 2);
  EXPECT_TRUE(report["streams"][0].contains("busy_seconds"));
  EXPECT_TRUE(report["streams"][0].contains("wait_seconds"));
  EXPECT_EQ(report["plan"], nullptr);
}

TEST_F(StreamedExecutorTest, ReportCarriesThePlan) {
  sl::schedule::Plan *plan = loaded.schedule.mutable_plan();
  plan->set_mode("speedloader");
  plan->set_num_sub_batches(4);
  plan->set_sub_batch_size(2);
  plan->set_live_blocks(1);
  plan->set_predicted_device_bytes(1000);
  plan->set_predicted_host_bytes(2000);
  plan->set_predicted_host_pool_bytes(1500);
  plan->set_predicted_step_seconds(0.5);
  plan->set_parameter_bytes(300);
  plan->set_boundary_activation_bytes(40);
  nlohmann::json report = makeReport(loaded, "cpu", RunStats(), {});
  EXPECT_EQ(report["plan"], (nlohmann::json{{"mode", "speedloader"},
                                            {"num_sub_batches", 4},
                                            {"sub_batch_size", 2},
                                            {"live_blocks", 1},
                                            {"predicted_device_bytes", 1000},
                                            {"predicted_host_bytes", 2000},
                                            {"predicted_host_pool_bytes", 1500},
                                            {"predicted_step_seconds", 0.5},
                                            {"parameter_bytes", 300},
                                            {"boundary_activation_bytes", 40}}));
}

TEST_F(StreamedExecutorTest, TracesEveryKernelOnItsStreamsTrack) {
  ExecutorOptions options;
  options.trace = true;
  Executor executor(loaded, *backend, options);
  executor.run({{"x", input(1)}});
  executor.run({{"x", input(2)}});
  std::string path = dir.file("trace.json");
  executor.writeTrace(path);
  nlohmann::json trace = nlohmann::json::parse(readFile(path));
  EXPECT_EQ(trace["otherData"]["runs_traced"], 2);
  EXPECT_EQ(trace["otherData"]["runs"], 2);
  std::map<int, std::string> tracks;
  std::map<std::string, int> kernelsByCategory;
  int runs = 0;
  for (const nlohmann::json &event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name")
      tracks[event["tid"].get<int>()] = event["args"]["name"];
    if (event["ph"] != "X")
      continue;
    EXPECT_GE(event["ts"].get<double>(), 0.0);
    EXPECT_GE(event["dur"].get<double>(), 0.0);
    if (event["cat"] == "run") {
      EXPECT_EQ(event["tid"], 0);
      ++runs;
    } else if (event["cat"] != "wait") {
      ++kernelsByCategory[event["cat"]];
      int kernel = event["args"]["kernel"];
      const sl::schedule::Kernel &k = loaded.schedule.kernels(kernel);
      EXPECT_EQ(event["name"], k.name());
      EXPECT_EQ(event["tid"], static_cast<int>(k.stream()) + 1);
      if (k.op() == sl::schedule::COPY) {
        EXPECT_EQ(event["args"]["bytes"], 20);
      }
    } else {
      EXPECT_THAT(event["name"].get<std::string>(), ::testing::StartsWith("wait event "));
    }
  }
  EXPECT_EQ(tracks, (std::map<int, std::string>{
                        {0, "runs"}, {1, "compute"}, {2, "h2d"}, {3, "d2h"}, {4, "host"}}));
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(kernelsByCategory, (std::map<std::string, int>{
                                   {"COPY", 6}, {"RELU", 2}, {"SIGMOID", 2}, {"ACCUMULATE", 2}}));
}

TEST_F(StreamedExecutorTest, TraceStopsAtItsSpanLimitBetweenRuns) {
  ExecutorOptions options;
  options.trace = true;
  options.traceSpanLimit = 1;
  Executor executor(loaded, *backend, options);
  for (uint32_t seed : {1u, 2u, 3u})
    executor.run({{"x", input(seed)}});
  // The first run is traced whole (6 kernels and the run), then the limit stops the rest.
  EXPECT_EQ(executor.traceSummary().runsTraced, 1u);
  EXPECT_EQ(executor.traceSummary().runs, 3u);
  size_t kernels = 0;
  for (const TraceSpan &span : executor.traceSpans()) {
    EXPECT_EQ(span.run, 0u);
    kernels += span.kind == TraceSpan::Kind::kKernel;
  }
  EXPECT_EQ(kernels, 6u);
}

TEST(ExecutorHookTest, OptimizerStepsCallTheHookOnTheHostStream) {
  TinyTrain train = TinyTrain::build(3);
  train.addOptimizerSteps({{1}, {0}});
  TempDir dir;
  LoadedSchedule loaded = loadSchedule(train.write(dir.path()));
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend);
  std::map<std::string, HostTensor> inputs = {{"input_ids", i64Tensor({2, 3}, {0, 1, 2, 3, 4, 5})},
                                              {"labels", i64Tensor({2, 3}, {1, 2, 3, 4, 5, 6})}};
  // Without a hook OPTIMIZER_STEP does nothing.
  executor.execute(inputs);
  EXPECT_EQ(executor.stats().perOp.at("OPTIMIZER_STEP").count, 2u);

  std::vector<std::vector<uint32_t>> calls;
  std::vector<float> lossSeen;
  executor.setOptimizerStepHook([&](const sl::schedule::Kernel &kernel) {
    calls.emplace_back(kernel.optimizer_step().parameters().begin(),
                       kernel.optimizer_step().parameters().end());
    // The loss is final when an OPTIMIZER_STEP runs.
    float loss;
    std::memcpy(&loss, executor.outputBuffer("loss").data, sizeof loss);
    lossSeen.push_back(loss);
  });
  executor.execute(inputs);
  EXPECT_EQ(calls, (std::vector<std::vector<uint32_t>>{{1}, {0}}));
  float loss;
  std::memcpy(&loss, executor.outputBuffer("loss").data, sizeof loss);
  EXPECT_EQ(lossSeen, (std::vector<float>{loss, loss}));

  // An error from the hook stops the run and comes through unchanged; the executor runs again.
  executor.setOptimizerStepHook([](const sl::schedule::Kernel &) { throw Error("hook says no"); });
  try {
    executor.execute(inputs);
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "hook says no");
  }
  executor.setOptimizerStepHook(nullptr);
  executor.execute(inputs);
  EXPECT_EQ(executor.stats().kernels, static_cast<uint64_t>(loaded.schedule.kernels_size()));
}

TEST(ExecutorDeadlockTest, StreamsThatWaitForEachOtherAreAnErrorNotAHang) {
  using namespace sl::schedule;
  // The verifier refuses this (each copy waits for an event only a later kernel records); built
  // by hand around it, the executor must still not hang.
  ScheduleBuilder b;
  uint32_t x = b.buffer("x", HOST, F32, {2});
  uint32_t a = b.buffer("a", DEVICE, F32, {2});
  uint32_t y = b.buffer("y", HOST, F32, {2});
  b.schedule.set_num_events(2);
  Kernel &in = b.kernel(COPY, "in", {x}, a);
  in.add_wait_events(1);
  in.add_record_events(0);
  Kernel &out = b.kernel(COPY, "out", {a}, y);
  out.add_wait_events(0);
  out.add_record_events(1);
  LoadedSchedule loaded{"by-hand", b.schedule, {}};
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend);
  try {
    executor.run({});
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "every running stream waits for an event that no kernel is left to record");
  }
}

} // namespace
} // namespace slrt::test
