// The executor's programs (Schedule.programs): one program per run, inputs and outputs per
// program, buffers (the KV cache) kept between runs, stats and traces per run; schedules without
// programs are one program.
#include <cmath>
#include <functional>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/trace.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an slrt::Error";
  return "";
}

std::vector<double> row(const TensorRef &logits, int64_t b) {
  int64_t vocab = logits.shape.back();
  const float *p = reinterpret_cast<const float *>(logits.data) + b * vocab;
  return std::vector<double>(p, p + vocab);
}

void expectNear(const std::vector<double> &actual, const std::vector<double> &expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5 * (1 + std::fabs(expected[i]))) << "logit " << i;
}

class ExecutorProgramsTest : public ::testing::Test {
protected:
  void SetUp() override { loaded = loadSchedule(model.write(dir.path())); }

  TinyGenerate model = TinyGenerate::build(11);
  TempDir dir;
  LoadedSchedule loaded;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(ExecutorProgramsTest, RunsOneProgramAtATimeAndKeepsTheCache) {
  ExecutorOptions options;
  options.trace = true;
  Executor executor(loaded, *backend, options);
  ASSERT_EQ(executor.programCount(), 2u);
  uint32_t prefill = executor.programIndex("prefill"), decode = executor.programIndex("decode");
  EXPECT_EQ(prefill, 0u);
  EXPECT_EQ(decode, 1u);

  std::vector<std::vector<int64_t>> sequences = {{3, 1, 4}, {5}};
  std::vector<NamedTensor> outputs =
      executor.run({{"input_ids", i64Tensor({2, 4}, {3, 1, 4, 0, 5, 0, 0, 0})},
                    {"last_index", i64Tensor({2}, {2, 0})}},
                   prefill);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].name, "logits");
  EXPECT_EQ(executor.stats().program, prefill);
  EXPECT_EQ(executor.stats().kernels, 11u);
  for (int64_t b = 0; b < 2; ++b)
    expectNear(row(executor.outputBuffer("logits", prefill), b),
               model.referenceLogits(sequences[static_cast<size_t>(b)]));

  // Two decode steps: each reads what prefill and the step before wrote to the cache.
  for (int step = 0; step < 2; ++step) {
    std::vector<int64_t> next = {7 + step, 2 * step}, position;
    for (size_t b = 0; b < 2; ++b) {
      position.push_back(static_cast<int64_t>(sequences[b].size()));
      sequences[b].push_back(next[b]);
    }
    executor.execute(
        {{"input_ids", i64Tensor({2, 1}, next)}, {"position", i64Tensor({2}, position)}}, decode);
    EXPECT_EQ(executor.stats().program, decode);
    EXPECT_EQ(executor.stats().kernels, 11u);
    EXPECT_EQ(executor.stats().perOp.at("DECODE_ATTENTION").count, 1u);
    EXPECT_EQ(executor.stats().perOp.count("ATTENTION"), 0u);
    for (int64_t b = 0; b < 2; ++b)
      expectNear(row(executor.outputBuffer("logits", decode), b),
                 model.referenceLogits(sequences[static_cast<size_t>(b)]));
  }

  // The trace names each run's program.
  std::set<std::pair<uint64_t, uint32_t>> runs;
  for (const TraceSpan &span : executor.traceSpans())
    if (span.kind == TraceSpan::Kind::kRun)
      runs.insert({span.run, span.program});
  EXPECT_EQ(runs, (std::set<std::pair<uint64_t, uint32_t>>{{0, 0}, {1, 1}, {2, 1}}));
  std::string trace =
      chromeTraceJson(loaded.schedule, loaded.path, executor.traceSpans(), executor.traceSummary());
  EXPECT_THAT(trace, HasSubstr("\"name\":\"run 0 prefill\""));
  EXPECT_THAT(trace, HasSubstr("\"name\":\"run 2 decode\""));
}

TEST_F(ExecutorProgramsTest, ChecksTheInputsOfTheProgramRun) {
  Executor executor(loaded, *backend);
  std::map<std::string, HostTensor> prefillInputs = {
      {"input_ids", i64Tensor({2, 4}, std::vector<int64_t>(8, 1))},
      {"last_index", i64Tensor({2}, {0, 0})}};
  EXPECT_THAT(errorOf([&] { executor.run(prefillInputs, 1); }),
              HasSubstr("input 'input_ids' is i64 [2, 4], but the schedule expects i64 [2, 1]"));
  prefillInputs.erase("input_ids");
  EXPECT_THAT(errorOf([&] { executor.run(prefillInputs, 1); }),
              HasSubstr("unknown input 'last_index' (the inputs of program 'decode': input_ids, "
                        "position)"));
  EXPECT_THAT(errorOf([&] {
                executor.run({{"input_ids", i64Tensor({2, 1}, {1, 1})}}, 1);
              }),
              HasSubstr("missing input 'position' (the inputs of program 'decode': input_ids, "
                        "position)"));
  EXPECT_THAT(errorOf([&] { executor.run({}, 2); }),
              HasSubstr("program 2 is out of range (the schedule has 2 programs)"));
  EXPECT_THAT(errorOf([&] { executor.run({}); }),
              HasSubstr("the schedule has 2 programs: name the one to run"));
  EXPECT_THAT(errorOf([&] { executor.programIndex("train"); }),
              HasSubstr("the schedule has no program 'train' (its programs: 'prefill', "
                        "'decode')"));
  EXPECT_THAT(errorOf([&] { executor.outputBuffer("loss", 1); }),
              HasSubstr("program 'decode' has no output 'loss'"));
  EXPECT_NE(executor.outputBuffer("logits", 0).data, executor.outputBuffer("logits", 1).data);
}

TEST_F(ExecutorProgramsTest, KernelErrorsNameTheKernel) {
  Executor executor(loaded, *backend);
  // Position 9 is the cache's length: attention may read all of it, but there is no room for the
  // new token's keys and values.
  EXPECT_THAT(errorOf([&] {
                executor.execute({{"input_ids", i64Tensor({2, 1}, {1, 1})},
                                  {"position", i64Tensor({2}, {9, 0})}},
                                 1);
              }),
              HasSubstr("kernel " + std::to_string(model.kvWriteKernel) +
                        " 'decode.kv.write' (KV_WRITE): start 9 (element 0 of the starts [2]) is "
                        "outside [0, 8]: 1 new position must fit the cache [2, 2, 1, 9, 8] of 9 "
                        "positions"));
  // The executor runs again after an error.
  executor.execute({{"input_ids", i64Tensor({2, 1}, {1, 1})}, {"position", i64Tensor({2}, {0, 0})}},
                   1);
}

TEST(ExecutorProgramsCompatibilityTest, SchedulesWithoutProgramsAreOneProgram) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(42);
  LoadedSchedule loaded = loadSchedule(mlp.write(dir.path()));
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend);
  EXPECT_EQ(executor.programCount(), 1u);
  std::mt19937 rng(1);
  HostTensor x =
      f32Tensor({TinyMlp::kBatch, TinyMlp::kIn}, randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn));
  std::vector<float> a = toFloats(executor.run({{"x", x}})[0].tensor);
  std::vector<float> b = toFloats(executor.run({{"x", x}}, 0)[0].tensor);
  EXPECT_EQ(a, b);
  EXPECT_EQ(executor.stats().kernels, 13u);
  EXPECT_THAT(errorOf([&] {
                executor.run({{"x", x}}, 1);
              }),
              HasSubstr("program 1 is out of range (the schedule has 1 program)"));
  EXPECT_THAT(errorOf([&] { executor.programIndex("decode"); }),
              HasSubstr("the schedule has no program 'decode' (its programs: none)"));
}

} // namespace
} // namespace slrt::test
