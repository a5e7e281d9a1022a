// The sl-run command line, run as a user would: exit codes, messages, files.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "slrt/atomic_file.h"
#include "slrt/npy.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int exitCode;
  std::string output; // stdout and stderr together
};

Result slRun(const std::string &args) {
  std::string command = std::string(SL_RUN_PATH) + " " + args + " 2>&1";
  FILE *pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    throw std::runtime_error("popen failed");
  std::string output;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0)
    output.append(chunk, n);
  int status = ::pclose(pipe);
  // A crash (signal) must fail the test distinctly from a clean error exit.
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, output};
}

class SlRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    schedule = mlp.write(dir.path());
    std::mt19937 rng(9);
    xValues = randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn);
    x = dir.file("x.npy");
    writeNpy(x, f32Tensor({TinyMlp::kBatch, TinyMlp::kIn}, xValues));
  }

  void expectOutputMatches(const std::string &path) {
    HostTensor y = readNpy(path);
    EXPECT_EQ(y.shape, (Shape{TinyMlp::kBatch, TinyMlp::kOut}));
    std::vector<float> expected = mlp.reference(xValues), actual = toFloats(y);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i)
      EXPECT_NEAR(actual[i], expected[i], 1e-5f);
  }

  TinyMlp mlp = TinyMlp::build(5);
  TempDir dir;
  std::string schedule, x;
  std::vector<float> xValues;
};

TEST_F(SlRunTest, HelpDescribesEveryOption) {
  Result r = slRun("--help");
  EXPECT_EQ(r.exitCode, 0);
  for (const char *option :
       {"SCHEDULE", "--input", "--output", "--report", "--backend", "NAME=FILE"})
    EXPECT_THAT(r.output, HasSubstr(option));
}

TEST_F(SlRunTest, RunsWithBareFiles) {
  Result r = slRun(schedule + " --input " + x + " --output " + dir.file("y.npy") + " --report " +
                   dir.file("report.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputMatches(dir.file("y.npy"));
  nlohmann::json report = nlohmann::json::parse(readFile(dir.file("report.json")));
  EXPECT_EQ(report["kernels"], 13);
  EXPECT_EQ(report["backend"], "cpu");
  EXPECT_EQ(report["outputs"][0]["shape"], nlohmann::json::array({2, 3}));
}

TEST_F(SlRunTest, RunsWithNamedFiles) {
  Result r = slRun(schedule + " -i x=" + x + " -o y=" + dir.file("named.npy") + " --backend cpu");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputMatches(dir.file("named.npy"));
}

TEST_F(SlRunTest, PrintsOutputsWithoutOutputFiles) {
  Result r = slRun(schedule + " --input x=" + x);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("y: f32 [2, 3] = "));
}

TEST_F(SlRunTest, MissingInputIsAnError) {
  Result r = slRun(schedule);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: missing input 'x': give --input FILE.npy"));
}

TEST_F(SlRunTest, UnknownNamesAreErrors) {
  Result r = slRun(schedule + " --input q=" + x);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown input 'q' (the schedule's inputs: x)"));
  r = slRun(schedule + " --input " + x + " --output q=" + dir.file("y.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown output 'q' (the schedule's outputs: y)"));
  r = slRun(schedule + " --input " + x + " --input x=" + x);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("input 'x' is given twice"));
}

TEST_F(SlRunTest, WrongShapeIsAnError) {
  writeNpy(dir.file("bad.npy"), f32Tensor({3, 4}, std::vector<float>(12)));
  Result r = slRun(schedule + " --input " + dir.file("bad.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("bad.npy: input 'x' is f32 [3, 4], but the schedule expects f32 "
                                  "[2, 4]"));
}

TEST_F(SlRunTest, BadFilesAreErrors) {
  writeBytes(dir.file("junk.slsched"), "not a schedule");
  Result r = slRun(dir.file("junk.slsched") + " --input " + x);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("junk.slsched: not a SpeedLoader schedule (bad magic)"));
  r = slRun(schedule + " --input " + dir.file("absent.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("absent.npy: cannot open"));
}

TEST_F(SlRunTest, UnwritableOutputLeavesNoFile) {
  std::string out = dir.file("no/such/dir/y.npy");
  Result r = slRun(schedule + " --input " + x + " --output " + out);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr(out + ": cannot create a temporary file"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(SlRunTest, CudaBackendSaysItDoesNotRunSchedulesYet) {
  Result r = slRun(schedule + " --input " + x + " --backend cuda");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("the CUDA backend does not execute schedules yet"));
}

TEST_F(SlRunTest, UsageErrorsExitOne) {
  EXPECT_EQ(slRun("").exitCode, 1);
  EXPECT_EQ(slRun(schedule + " --backend tpu").exitCode, 1);
  EXPECT_EQ(slRun(schedule + " --no-such-flag").exitCode, 1);
}

// The tiny attention block: an i64 input from .npy, f32 and bool outputs.
class SlRunAttentionTest : public ::testing::Test {
protected:
  void SetUp() override {
    schedule = block.write(dir.path());
    ids = dir.file("ids.npy");
    writeNpy(ids, i64Tensor({1, 4}, idValues));
  }

  TinyAttention block = TinyAttention::build(21);
  std::vector<int64_t> idValues{3, -2, 0, 1};
  TempDir dir;
  std::string schedule, ids;
};

TEST_F(SlRunAttentionTest, TakesI64InputsAndWritesEveryDType) {
  Result r = slRun(schedule + " -i " + ids + " -o y=" + dir.file("y.npy") +
                   " -o keep=" + dir.file("keep.npy") + " --report " + dir.file("report.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::vector<float> expected = block.referenceY(idValues);
  std::vector<float> actual = toFloats(readNpy(dir.file("y.npy")));
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5f);
  HostTensor keep = readNpy(dir.file("keep.npy"));
  EXPECT_EQ(keep.dtype, sl::schedule::BOOL);
  EXPECT_EQ(std::vector<uint8_t>(keep.as<uint8_t>(), keep.as<uint8_t>() + 4),
            block.referenceKeep(idValues));
  nlohmann::json report = nlohmann::json::parse(readFile(dir.file("report.json")));
  EXPECT_EQ(report["kernels"], 25);
  EXPECT_EQ(report["ops"]["ATTENTION"]["count"], 1);
  EXPECT_EQ(report["outputs"][1]["dtype"], "bool");
}

TEST_F(SlRunAttentionTest, PrintsI64AndBoolOutputs) {
  Result r = slRun(schedule + " --input ids=" + ids);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("y: f32 [1, 4, 8] = "));
  EXPECT_THAT(r.output, HasSubstr("keep: bool [1, 4] = false true true true\n"));
}

TEST_F(SlRunAttentionTest, WrongInputDTypeIsAnError) {
  writeNpy(dir.file("f.npy"), f32Tensor({1, 4}, {3, 1, 0, 1}));
  Result r = slRun(schedule + " --input " + dir.file("f.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output,
              HasSubstr("f.npy: input 'ids' is f32 [1, 4], but the schedule expects i64 [1, 4]"));
}

TEST_F(SlRunAttentionTest, IndexOutOfRangeIsAnError) {
  writeNpy(ids, i64Tensor({1, 4}, {0, 7, 1, 2}));
  Result r = slRun(schedule + " --input " + ids);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: kernel " + std::to_string(block.gatherKernel) +
                                  " 'embed' (GATHER): index 7 (element 1 of the indices [1, 4]) "
                                  "is out of range"));
}

} // namespace
} // namespace slrt::test
