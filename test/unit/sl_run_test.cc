// The sl-run command line, run as a user would: exit codes, messages, files.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "slrt/atomic_file.h"
#if SLRT_TEST_CUDA
#include "slrt/cuda_backend.h"
#endif
#include "slrt/executor.h"
#include "slrt/npy.h"
#include "slrt/prompts.h"
#include "slrt/read_file.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::ContainsRegex;
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
  for (const char *option : {"SCHEDULE", "--input", "--output", "--report", "--backend",
                             "NAME=FILE", "--trace", "--link-gbps"})
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

// --tf32 asks the CUDA backend for TF32 GEMMs; the CPU backend computes f32 anyway, and the report
// says which one ran: the same outputs, "tf32": false.
TEST_F(SlRunTest, Tf32IsRecordedAndTheCpuBackendStaysF32) {
  std::string report = dir.file("report.json");
  Result r = slRun(schedule + " --input " + x + " --output " + dir.file("y.npy") +
                   " --tf32 --report " + report);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputMatches(dir.file("y.npy"));
  EXPECT_EQ(nlohmann::json::parse(readFile(report))["tf32"], false);
  r = slRun(schedule + " --input " + x + " --output " + dir.file("y.npy") + " --report " + report);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(readFile(report))["tf32"], false);
}

TEST_F(SlRunTest, WritesATraceAndReportsStreamsAndTheLink) {
  std::string trace = dir.file("trace.json"), report = dir.file("report.json");
  Result r = slRun(schedule + " --input " + x + " --output " + dir.file("y.npy") + " --trace " +
                   trace + " --link-gbps 2.5 --report " + report);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  expectOutputMatches(dir.file("y.npy"));
  nlohmann::json t = nlohmann::json::parse(readFile(trace));
  size_t kernels = 0;
  for (const nlohmann::json &event : t["traceEvents"])
    kernels += event["ph"] == "X" && event["cat"] != "run" && event["cat"] != "wait";
  EXPECT_EQ(kernels, 13u);
  EXPECT_EQ(t["otherData"]["runs_traced"], 1);
  nlohmann::json j = nlohmann::json::parse(readFile(report));
  EXPECT_EQ(j["link_gbps"], 2.5);
  EXPECT_EQ(j["bytes_moved"]["collective"], 0);
  EXPECT_EQ(j["streams"].size(), 3u);
  EXPECT_EQ(j["streams"][1]["kind"], "h2d");
  // The furthest device buffer (DY) ends at 792; the tiny MLP pads its arena to 832.
  EXPECT_EQ(j["device_arena_peak_bytes"], 792);
  EXPECT_EQ(j["device_arena_bytes"], 832);
  EXPECT_EQ(j["plan"], nullptr);
}

TEST_F(SlRunTest, NegativeLinkBandwidthIsAUsageError) {
  Result r = slRun(schedule + " --input " + x + " --link-gbps -1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("--link-gbps"));
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

// A bf16 schedule (sl-opt precision=bf16) takes its bf16 input as a float32 .npy, rounded, and
// writes its bf16 output as a float32 .npy, widened exactly: the very values the executor gives.
TEST_F(SlRunTest, Bf16InputsAndOutputsAreFloat32Files) {
  TinyMlp bf16 = mlp;
  toBfloat16(bf16.schedule);
  TempDir bf16Dir;
  std::string path = bf16.write(bf16Dir.path());
  Result r = slRun(path + " --input " + x + " --output " + dir.file("y16.npy"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  HostTensor y = readNpy(dir.file("y16.npy"));
  ASSERT_EQ(y.dtype, sl::schedule::F32);

  LoadedSchedule loaded = loadSchedule(path);
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend, {});
  std::vector<NamedTensor> outputs = executor.run(
      {{"x", roundedToBfloat16(f32Tensor({TinyMlp::kBatch, TinyMlp::kIn}, xValues))}});
  EXPECT_EQ(toFloats(y), toFloats(widenedToF32(outputs[0].tensor)));

  r = slRun(path + " --input " + x);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("y: bf16 [2, 3] = "));

  HostTensor f64 = HostTensor::zeros(sl::schedule::F64, {TinyMlp::kBatch, TinyMlp::kIn});
  writeNpy(dir.file("x64.npy"), f64);
  r = slRun(path + " --input " + dir.file("x64.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("input 'x' is f64, but the schedule takes it as bf16: give it "
                                  "as float32"));
  EXPECT_THAT(slRun("--help").output, HasSubstr("bf16"));
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
  // Refused before the run, whose result could not be written.
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --output " + out +
                                  ": cannot write (No such file or "
                                  "directory)"));
  EXPECT_THAT(r.output, Not(HasSubstr("y: f32")));
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A run that does not fit in the memory free is refused before anything is allocated, with the
// bytes needed and available; exactly enough runs. The testing hook stands in for MemAvailable.
TEST_F(SlRunTest, RunThatDoesNotFitInMemoryIsRefusedUpFront) {
  // The pool and the arena (host memory on the CPU backend); y is written from the pool where it
  // lies, not copied out.
  uint64_t need = mlp.schedule.host_pool_bytes() + mlp.schedule.device_arena_bytes();
  std::string y = dir.file("y.npy"), args = schedule + " --input " + x + " --output " + y;
  ::setenv("SL_TEST_HOST_MEMORY_AVAILABLE", std::to_string(need - 1).c_str(), 1);
  Result r = slRun(args);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: " + schedule + ": the run needs "));
  EXPECT_THAT(r.output,
              HasSubstr("(" + std::to_string(need) + " bytes) of host memory (host pool "));
  EXPECT_THAT(r.output, HasSubstr("(" + std::to_string(need - 1) +
                                  " bytes) is available (SL_TEST_HOST_MEMORY_AVAILABLE)"));
  EXPECT_FALSE(std::filesystem::exists(y));
  ::setenv("SL_TEST_HOST_MEMORY_AVAILABLE", std::to_string(need).c_str(), 1);
  r = slRun(args);
  ::unsetenv("SL_TEST_HOST_MEMORY_AVAILABLE");
  EXPECT_EQ(r.exitCode, 0) << r.output;
  expectOutputMatches(y);
}

// On a GPU the CUDA backend computes what the CPU backend does; elsewhere it says why it cannot.
TEST_F(SlRunTest, CudaBackendRunsOrSaysWhyNot) {
  Result r = slRun(schedule + " --input " + x + " --output " + dir.file("y.npy") +
                   " --backend cuda --report " + dir.file("report.json"));
#if SLRT_TEST_CUDA
  if (cudaDeviceCountOrZero() > 0) {
    ASSERT_EQ(r.exitCode, 0) << r.output;
    expectOutputMatches(dir.file("y.npy"));
    std::ifstream in(dir.file("report.json"));
    nlohmann::json report = nlohmann::json::parse(in);
    EXPECT_EQ(report["backend"], "cuda");
    // --report has the GPU time its kernels.
    EXPECT_EQ(report["op_seconds_clock"], "device");
    return;
  }
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: the CUDA backend found no"));
#else
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: this build has no CUDA backend"));
#endif
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
  // The CPU backend's calls are its kernels' work: host times.
  EXPECT_EQ(report["op_seconds_clock"], "host");
  EXPECT_EQ(report["outputs"][1]["dtype"], "bool");
}

// Warm-up runs change nothing the run computes; the report describes the last run and lists the
// warm-ups' wall times apart. The attention's FLOPs are its products over the causal pairs:
// 2 x B 1 x H 2 x (4 x 5 / 2 = 10 pairs) x (D 4 + Dv 4).
TEST_F(SlRunAttentionTest, WarmupRunsAreReportedApartAndChangeNoOutput) {
  Result r = slRun(schedule + " -i " + ids + " -o y=" + dir.file("y0.npy") + " --report " +
                   dir.file("r0.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = slRun(schedule + " -i " + ids + " -o y=" + dir.file("y2.npy") + " --warmup-runs 2" +
            " --report " + dir.file("r2.json"));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_EQ(toFloats(readNpy(dir.file("y0.npy"))), toFloats(readNpy(dir.file("y2.npy"))));
  nlohmann::json cold = nlohmann::json::parse(readFile(dir.file("r0.json")));
  nlohmann::json warm = nlohmann::json::parse(readFile(dir.file("r2.json")));
  EXPECT_EQ(cold["warmup_seconds"].size(), 0u);
  ASSERT_EQ(warm["warmup_seconds"].size(), 2u);
  for (const nlohmann::json &seconds : warm["warmup_seconds"])
    EXPECT_GT(seconds.get<double>(), 0);
  // One run's kernels, not three runs'.
  EXPECT_EQ(warm["kernels"], cold["kernels"]);
  EXPECT_EQ(warm["ops"]["ATTENTION"]["count"], 1);
  EXPECT_EQ(warm["ops"]["ATTENTION"]["flops"], 320.0);
  EXPECT_EQ(warm["ops"]["MATMUL"]["flops"], cold["ops"]["MATMUL"]["flops"]);
  EXPECT_FALSE(warm["ops"]["ADD"].contains("flops"));
  r = slRun(schedule + " -i " + ids + " --warmup-runs -1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("--warmup-runs: Value -1 not in range 0 to 1000"));
}

TEST_F(SlRunAttentionTest, PrintsI64AndBoolOutputs) {
  Result r = slRun(schedule + " --input ids=" + ids);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("y: f32 [1, 4, 8] = "));
  EXPECT_THAT(r.output, HasSubstr("keep: bool [1, 4] = false true true true\n"));
}

// With two outputs, a bare file cannot be assigned to one; a name with no file is refused too.
TEST_F(SlRunAttentionTest, OutputsMustBeNamedWhenThereAreSeveral) {
  Result r = slRun(schedule + " --input " + ids + " --output " + dir.file("y.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --output " + dir.file("y.npy") +
                                  ": the schedule has 2 outputs (y, keep), so name it: --output "
                                  "NAME=FILE"));
  r = slRun(schedule + " --input ids=");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --input ids=: no file given"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("y.npy")));
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
  // Refused as the input is read, naming its file and the element, before any kernel runs.
  EXPECT_THAT(r.output,
              HasSubstr("sl-run: error: " + ids + ": input 'ids' holds 7 at [0, 1]: kernel " +
                        std::to_string(block.gatherKernel) +
                        " 'embed' (GATHER), which indexes axis 0 of [6, 8] with it, "
                        "takes -6..5"));
}

// Training: a train schedule (TinyTrain) on a token file.
class SlRunTrainTest : public ::testing::Test {
protected:
  void SetUp() override {
    schedule = model.write(dir.path());
    tokens = dir.file("tokens.bin");
    writeTokens(tokens, 40);
  }

  // `count` uint16 ids in [0, kNanToken), or with the NaN token at `nanAt`.
  void writeTokens(const std::string &path, size_t count, size_t nanAt = SIZE_MAX) {
    std::mt19937 rng(17);
    std::uniform_int_distribution<int> id(0, TinyTrain::kNanToken - 1);
    std::vector<uint16_t> ids(count);
    for (uint16_t &t : ids)
      t = static_cast<uint16_t>(id(rng));
    if (nanAt < count)
      ids[nanAt] = TinyTrain::kNanToken;
    writeBytes(path, std::string(reinterpret_cast<const char *>(ids.data()), 2 * ids.size()));
  }

  std::string train(const std::string &args) {
    return schedule + " --data " + tokens + " --lr 0.01 --warmup-steps 2 --decay-steps 3 " +
           "--max-grad-norm 0.1 " + args;
  }

  TinyTrain model = TinyTrain::build(23);
  TempDir dir;
  std::string schedule, tokens;
};

TEST_F(SlRunTrainTest, HelpDescribesTraining) {
  Result r = slRun("--help");
  EXPECT_EQ(r.exitCode, 0);
  for (const char *option :
       {"--data", "--data-dtype", "--steps", "--vocab", "--lr", "--weight-decay", "--beta1",
        "--beta2", "--eps", "--max-grad-norm", "--warmup-steps", "--decay-steps", "--min-lr",
        "--save", "--resume", "train schedule"})
    EXPECT_THAT(r.output, HasSubstr(option));
}

TEST_F(SlRunTrainTest, PrintsAProgressLinePerStepAndReports) {
  Result r = slRun(train("--steps 3 --report " + dir.file("report.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("step 1/3  loss [0-9]+\\.[0-9]{4}  lr 0\\.00e\\+00  "
                                      "tokens/s [0-9]+  elapsed [0-9]+\\.[0-9]{2}s\n"));
  EXPECT_THAT(r.output, HasSubstr("lr 5.00e-03  tokens/s"));
  EXPECT_THAT(r.output, ContainsRegex("step 3/3  loss [0-9.]+  lr 1\\.00e-02  "));
  nlohmann::json report = nlohmann::json::parse(readFile(dir.file("report.json")));
  EXPECT_EQ(report["kind"], "train");
  const nlohmann::json &t = report["train"];
  EXPECT_EQ(t["steps"], 3);
  EXPECT_EQ(t["losses"].size(), 3u);
  EXPECT_EQ(t["lrs"], nlohmann::json::array({0.0, 0.005, 0.01}));
  EXPECT_EQ(t["adamw"]["max_grad_norm"], 0.1);
  EXPECT_EQ(t["adamw"]["weight_decay"], 0.01);
  EXPECT_GT(t["tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(report["outputs"].size(), 3u);
  EXPECT_EQ(report["outputs"][1]["name"], "grad:w");
  // Every step copies the same bytes: ids, labels, both parameters and the constants in, the loss
  // and the gradients out.
  EXPECT_EQ(t["bytes_host_to_device"].size(), 3u);
  EXPECT_EQ(t["bytes_host_to_device"][2], report["bytes_moved"]["host_to_device"]);
  EXPECT_EQ(t["bytes_device_to_host"][0], 4 + 4 * 12 + 4 * 3);
  EXPECT_EQ(t["bytes_collective"], nlohmann::json::array({0, 0, 0}));
  EXPECT_EQ(t["optimizer_overlapped"], false);
}

TEST_F(SlRunTrainTest, TracesEveryStep) {
  std::string trace = dir.file("trace.json");
  Result r = slRun(train("--steps 2 --trace " + trace));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  nlohmann::json t = nlohmann::json::parse(readFile(trace));
  EXPECT_EQ(t["otherData"]["runs_traced"], 2);
  EXPECT_EQ(t["otherData"]["runs"], 2);
  std::set<std::string> runs;
  for (const nlohmann::json &event : t["traceEvents"])
    if (event["ph"] == "X" && event["cat"] == "run")
      runs.insert(event["name"].get<std::string>());
  EXPECT_EQ(runs, (std::set<std::string>{"run 0", "run 1"}));
}

TEST_F(SlRunTrainTest, SaveThenResumeIsBitIdenticalToStraightSteps) {
  std::string straight = dir.file("straight.safetensors"), three = dir.file("three.safetensors"),
              resumed = dir.file("resumed.safetensors");
  Result r = slRun(train("--steps 5 --save " + straight + " --report " + dir.file("a.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = slRun(train("--steps 3 --save " + three));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  r = slRun(train("--steps 2 --resume " + three + " --save " + resumed + " --report " +
                  dir.file("b.json")));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("step 4/5  loss "));
  EXPECT_THAT(r.output, HasSubstr("step 5/5  loss "));
  EXPECT_THAT(r.output, Not(HasSubstr("warning")));
  EXPECT_TRUE(readFile(straight) == readFile(resumed))
      << "the checkpoints of 5 steps and of 3 + 2 steps differ";
  nlohmann::json a = nlohmann::json::parse(readFile(dir.file("a.json")))["train"];
  nlohmann::json b = nlohmann::json::parse(readFile(dir.file("b.json")))["train"];
  EXPECT_EQ(b["first_step"], 3);
  EXPECT_EQ(b["losses"], nlohmann::json::array({a["losses"][3], a["losses"][4]}));
  EXPECT_EQ(b["resumed_from"], three);
}

TEST_F(SlRunTrainTest, ResumeWithOtherDataWarns) {
  std::string ckpt = dir.file("c.safetensors");
  ASSERT_EQ(slRun(train("--steps 2 --save " + ckpt)).exitCode, 0);
  writeTokens(tokens, 9);
  Result r = slRun(train("--steps 1 --resume " + ckpt));
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sl-run: warning: " + ckpt +
                                  " was saved where the next step "
                                  "reads from token 12 of its data, but step 3 of this run "
                                  "reads from token 3 of " +
                                  tokens));
}

TEST_F(SlRunTrainTest, TrainingOptionsNeedATrainScheduleAndViceVersa) {
  TinyMlp mlp = TinyMlp::build(5);
  std::string inference = mlp.write(dir.path());
  Result r = slRun(inference + " --steps 3 --data " + tokens);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --data, --steps: only a train schedule takes "
                                  "these options (" +
                                  inference + " is of kind 'infer')"));
  r = slRun(inference + " --save " + dir.file("x.safetensors"));
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --save: only a train schedule takes this "
                                  "option"));

  writeNpy(dir.file("ids.npy"), i64Tensor({2, 3}, {0, 1, 2, 3, 4, 5}));
  r = slRun(train("--steps 1 --input input_ids=" + dir.file("ids.npy")));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --input: a train schedule reads its inputs "
                                  "from --data"));
  r = slRun(train("--steps 1 --warmup-runs 1"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --warmup-runs: only an inference schedule takes "
                                  "it"));
  r = slRun(schedule + " --steps 1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("is a train schedule: give --data FILE"));
  r = slRun(schedule + " --data " + tokens);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("is a train schedule: give --steps N"));
  r = slRun(train("--steps 0"));
  EXPECT_EQ(r.exitCode, 1);
  // Said in a few words, not with CLI11's range of 0 to DBL_MAX in 309 digits.
  EXPECT_THAT(r.output, HasSubstr("--steps: must be more than 0, not 0\n"));
  EXPECT_THAT(r.output, Not(HasSubstr("179769")));
  EXPECT_EQ(slRun(train("--steps 1 --data-dtype int8")).exitCode, 1);
  r = slRun(train("--steps 1 --beta1 1"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("beta1 must be in [0, 1)"));
}

TEST_F(SlRunTrainTest, DataErrorsLeaveNoFiles) {
  std::string save = dir.file("c.safetensors"), report = dir.file("r.json");
  std::string outputs = " --save " + save + " --report " + report;
  Result r = slRun(schedule + " --steps 2 --data " + dir.file("absent.bin") + outputs);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("absent.bin: cannot open token file"));

  writeTokens(tokens, 6); // a step reads 2*3+1
  r = slRun(train("--steps 2" + outputs));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("tokens.bin: the token file is too small: a step of 2 "
                                  "sequences of 3 tokens reads 7 tokens (2*3+1), the file has 6"));

  writeBytes(tokens, "abc");
  r = slRun(train("--steps 2" + outputs));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("not a multiple of the 2-byte uint16 token"));

  EXPECT_FALSE(std::filesystem::exists(save));
  EXPECT_FALSE(std::filesystem::exists(report));
}

TEST_F(SlRunTrainTest, NanLossStopsAndKeepsTheLastCheckpoint) {
  std::string ckpt = dir.file("c.safetensors"), report = dir.file("r.json");
  ASSERT_EQ(slRun(train("--steps 1 --save " + ckpt)).exitCode, 0);
  std::string good = readFile(ckpt);
  // Step 3 (from the checkpoint's step 1) reads tokens 12..18.
  writeTokens(tokens, 40, 15);
  Result r = slRun(train("--steps 4 --resume " + ckpt + " --save " + ckpt + " --report " + report));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("step 2/5  loss "));
  EXPECT_THAT(r.output, Not(HasSubstr("step 3/5")));
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: step 3: the loss is NaN; training stopped "
                                  "before this step's update (nothing was saved: --save, "
                                  "--report and --trace are written only after the last "
                                  "step)"));
  EXPECT_EQ(readFile(ckpt), good);
  EXPECT_FALSE(std::filesystem::exists(report));
}

TEST_F(SlRunTrainTest, OutOfRangeTokenStopsNamingTheStep) {
  std::vector<uint16_t> ids(20, 1);
  ids[10] = 300;
  writeBytes(tokens, std::string(reinterpret_cast<const char *>(ids.data()), 2 * ids.size()));
  Result r = slRun(train("--steps 3"));
  EXPECT_EQ(r.exitCode, 1);
  // The schedule has no CROSS_ENTROPY to take a vocabulary from; the embedding GATHER's rows
  // bound the ids instead.
  EXPECT_THAT(r.output,
              HasSubstr("sl-run: error: step 2: input 'input_ids' holds 300 at [1, 1]: kernel " +
                        std::to_string(model.embedKernel) +
                        " 'embed' (GATHER), which indexes axis 0 of [8, 4] with it, takes -8..7"));
  r = slRun(train("--steps 3 --vocab 8"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: step 2: " + tokens + ": token 10 of the file"));
}

TEST_F(SlRunTrainTest, CheckpointOfAnotherModelIsRefused) {
  TinyTrain other = TinyTrain::build(23, 2, 3, 2, "other");
  std::string otherSchedule = other.write(dir.path()), ckpt = dir.file("other.safetensors");
  ASSERT_EQ(slRun(otherSchedule + " --data " + tokens + " --steps 1 --save " + ckpt).exitCode, 0);
  Result r = slRun(train("--steps 1 --resume " + ckpt + " --save " + dir.file("mine.st")));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr(ckpt + ": the checkpoint does not match this model"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("mine.st")));
}

// Generation: a generate schedule (TinyGenerate) on a prompts file.
class SlRunGenerateTest : public ::testing::Test {
protected:
  void SetUp() override {
    schedule = model.write(dir.path());
    prompts = dir.file("prompts.jsonl");
    writeBytes(prompts, "{\"tokens\": [3, 1, 4, 1], \"id\": \"pi\"}\n"
                        "{\"tokens\": [5]}\n"
                        "\n"
                        "{\"tokens\": [9, 2], \"id\": 7}\n"
                        "{\"tokens\": [6, 5, 3]}\n"
                        "{\"tokens\": [15, 8]}\n");
  }

  std::vector<nlohmann::json> readLines(const std::string &path) {
    std::vector<nlohmann::json> lines;
    std::string text = readFile(path);
    for (size_t begin = 0; begin < text.size();) {
      size_t end = text.find('\n', begin);
      lines.push_back(nlohmann::json::parse(text.substr(begin, end - begin)));
      begin = end + 1;
    }
    return lines;
  }

  TinyGenerate model = TinyGenerate::build(5);
  const std::vector<std::vector<int64_t>> tokens = {{3, 1, 4, 1}, {5}, {9, 2}, {6, 5, 3}, {15, 8}};
  TempDir dir;
  std::string schedule, prompts;
};

TEST_F(SlRunGenerateTest, HelpDescribesGeneration) {
  Result r = slRun("--help");
  EXPECT_EQ(r.exitCode, 0);
  for (const char *option : {"--prompts", "--tokenizer", "--max-new-tokens", "--stop-token",
                             "--temperature", "--top-k", "--top-p", "--seed", "generate schedule"})
    EXPECT_THAT(r.output, HasSubstr(option));
}

TEST_F(SlRunGenerateTest, GreedyTokensAreTheReferences) {
  std::string out = dir.file("out.jsonl"), report = dir.file("report.json"),
              trace = dir.file("trace.json");
  Result r = slRun(schedule + " --prompts " + prompts + " --output " + out + " --report " + report +
                   " --trace " + trace);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  EXPECT_THAT(r.output, ContainsRegex("batch 1/3  sequences 2/5  tokens 10  tokens/s [0-9]+  "
                                      "elapsed [0-9]+\\.[0-9]{2}s\n"));
  EXPECT_THAT(r.output, HasSubstr("batch 3/3  sequences 5/5  tokens 25  "));
  std::vector<nlohmann::json> lines = readLines(out);
  ASSERT_EQ(lines.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(lines[i]["index"], i);
    EXPECT_EQ(lines[i]["prompt_tokens"], tokens[i].size());
    EXPECT_EQ(lines[i]["tokens"].get<std::vector<int64_t>>(),
              model.referenceGreedy(tokens[i], model.maxNew));
    EXPECT_EQ(lines[i]["finish_reason"], "length");
    EXPECT_FALSE(lines[i].contains("text"));
  }
  EXPECT_EQ(lines[0]["id"], "pi");
  EXPECT_EQ(lines[2]["id"], 7);
  EXPECT_FALSE(lines[1].contains("id"));

  nlohmann::json j = nlohmann::json::parse(readFile(report));
  EXPECT_EQ(j["kind"], "generate");
  const nlohmann::json &g = j["generation"];
  EXPECT_EQ(g["prompts"], 5);
  EXPECT_EQ(g["batches"], 3);
  EXPECT_EQ(g["prefill_tokens"], 12);
  EXPECT_EQ(g["decode_tokens"], 20);
  EXPECT_GT(g["prefill_tokens_per_second"].get<double>(), 0);
  EXPECT_GT(g["decode_tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(g["sampling"]["temperature"], 0.0);
  EXPECT_EQ(g["schedule"]["batch"], 2);
  EXPECT_EQ(g["schedule"]["vocab"], 16);
  nlohmann::json t = nlohmann::json::parse(readFile(trace));
  EXPECT_EQ(t["otherData"]["runs"], 3 + 3 * (model.maxNew - 1));
  EXPECT_THAT(t.dump(), HasSubstr("\"run 1 decode\""));
}

TEST_F(SlRunGenerateTest, StopTokensAndFewerNewTokens) {
  int64_t stop = model.referenceGreedy(tokens[0], model.maxNew)[1];
  std::string out = dir.file("out.jsonl");
  Result r = slRun(schedule + " --prompts " + prompts + " --output " + out + " --stop-token " +
                   std::to_string(stop) + " --stop-token 0 --max-new-tokens 4");
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::vector<nlohmann::json> lines = readLines(out);
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<int64_t> expected = model.referenceGreedy(tokens[i], 4, {stop, 0});
    EXPECT_EQ(lines[i]["tokens"].get<std::vector<int64_t>>(), expected) << i;
    bool stopped = expected.back() == stop || expected.back() == 0;
    EXPECT_EQ(lines[i]["finish_reason"], stopped ? "stop" : "length") << i;
  }
  EXPECT_EQ(lines[0]["finish_reason"], "stop");
}

TEST_F(SlRunGenerateTest, SamplingIsSeededAndWithoutOutputGoesToStdout) {
  std::string args = schedule + " --prompts " + prompts + " --temperature 1.5 --top-p 0.95 ";
  Result a = slRun(args + "--seed 3 --output " + dir.file("a.jsonl"));
  Result b = slRun(args + "--seed 3 --output " + dir.file("b.jsonl"));
  Result c = slRun(args + "--seed 4 --output " + dir.file("c.jsonl"));
  ASSERT_EQ(a.exitCode, 0) << a.output;
  ASSERT_EQ(b.exitCode, 0) << b.output;
  ASSERT_EQ(c.exitCode, 0) << c.output;
  EXPECT_EQ(readFile(dir.file("a.jsonl")), readFile(dir.file("b.jsonl")));
  EXPECT_NE(readFile(dir.file("a.jsonl")), readFile(dir.file("c.jsonl")));
  // --top-k 1 is greedy at any temperature; the lines go to standard output.
  Result greedy = slRun(schedule + " --prompts " + prompts + " --temperature 2 --top-k 1 --seed 1");
  ASSERT_EQ(greedy.exitCode, 0) << greedy.output;
  for (size_t i = 0; i < tokens.size(); ++i) {
    EXPECT_THAT(greedy.output,
                HasSubstr("\"tokens\":" +
                          nlohmann::json(model.referenceGreedy(tokens[i], model.maxNew)).dump()));
  }
}

TEST_F(SlRunGenerateTest, TextPromptsWithTheByteTokenizer) {
  TinyGenerate bytes = TinyGenerate::build(6, 3, 8, 6, 256);
  std::string path = bytes.write(dir.path(), "bytes");
  writeBytes(prompts, "{\"text\": \"Hi \\u00e9\"}\n{\"tokens\": [200, 13]}\n");
  std::string out = dir.file("out.jsonl");
  Result r = slRun(path + " --prompts " + prompts + " --tokenizer bytes -o " + out);
  ASSERT_EQ(r.exitCode, 0) << r.output;
  std::vector<nlohmann::json> lines = readLines(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["prompt_tokens"], 5); // 'H', 'i', ' ', 0xC3, 0xA9
  std::vector<int64_t> generated = lines[0]["tokens"].get<std::vector<int64_t>>();
  EXPECT_EQ(generated, bytes.referenceGreedy({'H', 'i', ' ', 0xC3, 0xA9}, 6));
  EXPECT_EQ(lines[0]["text"], decodeByteTokens(generated));
  EXPECT_EQ(lines[1]["tokens"].get<std::vector<int64_t>>(), bytes.referenceGreedy({200, 13}, 6));
}

TEST_F(SlRunGenerateTest, BadPromptsFailWithoutOutput) {
  std::string out = dir.file("out.jsonl"), report = dir.file("r.json");
  // Each file's contents, and the message after "sl-run: error: PROMPTS".
  const std::pair<std::string, std::string> cases[] = {
      {"{\"tokens\": [1]}\n{\"tokens\": [1, 2\n", ":2: malformed JSON"},
      {"{\"ids\": [1]}\n", ":1: the prompt has neither \"tokens\" nor \"text\""},
      {"{\"tokens\": [1], \"text\": \"a\"}\n", ":1: the prompt has both"},
      {"{\"tokens\": [1]}\n{\"tokens\": []}\n", ":2: the prompt is empty"},
      {"{\"tokens\": [1, 2, 3, 4, 5]}\n",
       ":1: the prompt has 5 tokens, more than the 4 the schedule takes "
       "(max_prompt_len)"},
      {"{\"tokens\": [16]}\n", ":1: token 0 of the prompt is 16, outside the vocabulary [0, 16)"},
      {"{\"text\": \"hi\"}\n", ":1: the prompt is text, which needs a tokenizer"},
      {"", ": holds no prompt"},
  };
  for (const auto &[contents, message] : cases) {
    writeBytes(prompts, contents);
    Result r =
        slRun(schedule + " --prompts " + prompts + " --output " + out + " --report " + report);
    EXPECT_EQ(r.exitCode, 1) << contents;
    EXPECT_THAT(r.output, HasSubstr("sl-run: error: " + prompts + message)) << contents;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(report));
  }
  Result r = slRun(schedule + " --prompts " + dir.file("absent.jsonl") + " --output " + out);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("absent.jsonl: cannot open (No such file or directory)"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST_F(SlRunGenerateTest, OptionsOfOtherKindsAreRefusedAndViceVersa) {
  Result r = slRun(schedule + " --prompts " + prompts + " --steps 2 --data x.bin");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --data, --steps: only a train schedule takes "
                                  "these options (" +
                                  schedule + " is of kind 'generate')"));
  writeNpy(dir.file("ids.npy"), i64Tensor({2, 4}, std::vector<int64_t>(8, 1)));
  r = slRun(schedule + " --prompts " + prompts + " --input input_ids=" + dir.file("ids.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --input: a generate schedule reads its prompts "
                                  "from --prompts, not .npy files"));
  r = slRun(schedule + " --prompts " + prompts + " --warmup-runs 1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --warmup-runs: only an inference schedule takes "
                                  "it"));
  r = slRun(schedule);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr(schedule + " is a generate schedule: give --prompts FILE.jsonl"));
  r = slRun(schedule + " --prompts " + prompts + " -o a.jsonl -o b.jsonl");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("--output is given 2 times"));
  r = slRun(schedule + " --prompts " + prompts + " --max-new-tokens 6");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("the most new tokens per sequence must be in [1, 5]"));
  r = slRun(schedule + " --prompts " + prompts + " --stop-token 16");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("stop token 16 is outside the vocabulary [0, 16)"));
  EXPECT_EQ(slRun(schedule + " --prompts " + prompts + " --top-p 1.5").exitCode, 1);
  EXPECT_EQ(slRun(schedule + " --prompts " + prompts + " --tokenizer gpt2").exitCode, 1);
  r = slRun(schedule + " --prompts " + prompts + " --top-p 0");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("top-p must be in (0, 1]"));

  TinyMlp mlp = TinyMlp::build(5);
  std::string inference = mlp.write(dir.path());
  r = slRun(inference + " --prompts " + prompts + " --temperature 1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --prompts, --temperature: only a generate "
                                  "schedule takes these options (" +
                                  inference + " is of kind 'infer')"));
  // Programs without kind "generate": nothing tells sl-run how to drive them.
  TinyGenerate programs = model;
  programs.schedule.set_kind("infer");
  programs.schedule.clear_generation();
  std::string twoPrograms = programs.write(dir.path(), "two_programs");
  r = slRun(twoPrograms + " --input input_ids=" + dir.file("ids.npy"));
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: " + twoPrograms +
                                  " has 2 programs; sl-run runs a schedule of several programs "
                                  "only when it is a generate schedule, and this one is of kind "
                                  "'infer'"));

  TinyTrain train = TinyTrain::build(23);
  std::string trainSchedule = train.write(dir.path());
  r = slRun(trainSchedule + " --data x.bin --steps 1 --seed 4");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("sl-run: error: --seed: only a generate schedule takes this "
                                  "option"));
}

} // namespace
} // namespace slrt::test
