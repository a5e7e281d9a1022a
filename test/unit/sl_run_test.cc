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
#include "slrt/npy.h"
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

// On a GPU the CUDA backend computes what the CPU backend does; elsewhere it says why it cannot.
TEST_F(SlRunTest, CudaBackendRunsOrSaysWhyNot) {
  Result r = slRun(schedule + " --input " + x + " --output " + dir.file("y.npy") +
                   " --backend cuda --report " + dir.file("report.json"));
#if SLRT_TEST_CUDA
  if (cudaDeviceCountOrZero() > 0) {
    ASSERT_EQ(r.exitCode, 0) << r.output;
    expectOutputMatches(dir.file("y.npy"));
    std::ifstream in(dir.file("report.json"));
    EXPECT_EQ(nlohmann::json::parse(in)["backend"], "cuda");
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
  r = slRun(schedule + " --steps 1");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("is a train schedule: give --data FILE"));
  r = slRun(schedule + " --data " + tokens);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.output, HasSubstr("is a train schedule: give --steps N"));
  EXPECT_EQ(slRun(train("--steps 0")).exitCode, 1);
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
  EXPECT_THAT(r.output,
              HasSubstr("sl-run: error: step 2: kernel " + std::to_string(model.embedKernel) +
                        " 'embed' (GATHER): index "
                        "300"));
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

} // namespace
} // namespace slrt::test
