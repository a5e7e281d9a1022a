// sl-run's modes as library code (slrt/tooling/): the checks of the options before anything is
// read, the --input/--output assignment, and an inference run without the command line.
// sl_run_test runs the tool itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "slrt/error.h"
#include "slrt/npy.h"
#include "slrt/tooling/inference.h"
#include "slrt/tooling/run.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;
using tooling::RunOptions;

// Rank 2 of a job of 4 that no collective may reach.
class IdleCommunicator : public Communicator {
public:
  int rank() const override { return 2; }
  int size() const override { return 4; }
  std::string name() const override { return "idle"; }
  void allGather(const float *, float *, size_t, const std::string &) override { unused(); }
  void reduceScatter(const float *, float *, size_t, const std::string &) override { unused(); }
  void allReduceSum(double *, size_t, const std::string &) override { unused(); }
  void allGatherBytes(const void *, void *, size_t, const std::string &) override { unused(); }
  void barrier(const std::string &) override { unused(); }
  [[noreturn]] void abort(int) override { std::abort(); }

private:
  [[noreturn]] static void unused() { throw Error("no collective expected"); }
};

TEST(RunOptionsTest, CalibrateTakesOnlyTheBackendAndItsSeconds) {
  RunOptions o;
  o.calibratePath = "profile.json";
  EXPECT_NO_THROW(tooling::checkRunOptions(o));
  const char *message = "--calibrate runs no schedule: it takes only --backend and "
                        "--calibrate-seconds";
  RunOptions data = o;
  data.trainFlagsGiven = {"--data"};
  EXPECT_EQ(errorOf([&] { tooling::checkRunOptions(data); }), message);
  RunOptions report = o;
  report.reportPath = "r.json";
  EXPECT_EQ(errorOf([&] { tooling::checkRunOptions(report); }), message);
  RunOptions random = o;
  random.randomWeightsSeed = 1;
  EXPECT_EQ(errorOf([&] { tooling::checkRunOptions(random); }), message);
  IdleCommunicator comm;
  RunOptions ranks = o;
  ranks.comm = &comm;
  EXPECT_EQ(errorOf([&] { tooling::checkRunOptions(ranks); }),
            "--calibrate runs as one process; run it without mpirun");
}

TEST(RunOptionsTest, ConsolidateTakesOnlySaveAndExportOnnx) {
  RunOptions o;
  o.schedulePath = "s.slsched";
  o.consolidatePath = "index.json";
  o.trainFlagsGiven = {"--save", "--export-onnx"};
  EXPECT_NO_THROW(tooling::checkRunOptions(o));
  RunOptions infer = o;
  infer.inferFlagsGiven = {"--input", "--output"};
  EXPECT_EQ(errorOf([&] { tooling::checkRunOptions(infer); }),
            "--consolidate takes only --save and --export-onnx, not --input, --output");
  RunOptions steps = o;
  steps.trainFlagsGiven.push_back("--steps");
  EXPECT_EQ(errorOf([&] { tooling::checkRunOptions(steps); }),
            "--consolidate takes only --save and --export-onnx (it does not train), not --steps");
}

TEST(RunOptionsTest, LinkBandwidthIsAFiniteNumberNotBelowZero) {
  RunOptions o;
  o.schedulePath = "s.slsched";
  for (double gbps : {0.0, 2.5})
    EXPECT_NO_THROW((o.linkGbps = gbps, tooling::checkRunOptions(o)));
  for (double gbps : {-1.0, std::nan(""), HUGE_VAL}) {
    o.linkGbps = gbps;
    EXPECT_THAT(errorOf([&] { tooling::checkRunOptions(o); }),
                HasSubstr("the link bandwidth must be a finite number of GB/s >= 0"));
  }
}

TEST(RunOptionsTest, EachRankTracesToAFileOfItsOwn) {
  RunOptions o;
  o.tracePath = "out/trace.json";
  EXPECT_EQ(tooling::tracePathOf(o), "out/trace.json");
  EXPECT_TRUE(tooling::isRankZero(o));
  IdleCommunicator comm;
  o.comm = &comm;
  EXPECT_FALSE(tooling::isRankZero(o));
  EXPECT_EQ(tooling::tracePathOf(o), "out/trace.rank2.json");
  o.tracePath = "out.d/trace";
  EXPECT_EQ(tooling::tracePathOf(o), "out.d/trace.rank2");
}

TEST(AssignFilesTest, NamesOrOneBareFile) {
  sl::schedule::Schedule s;
  s.add_inputs()->set_name("x");
  EXPECT_EQ(tooling::assignFiles({"a.npy"}, s.inputs(), "input"),
            (std::map<std::string, std::string>{{"x", "a.npy"}}));
  EXPECT_EQ(tooling::assignFiles({"x=b=c.npy"}, s.inputs(), "input"),
            (std::map<std::string, std::string>{{"x", "b=c.npy"}}));
  EXPECT_EQ(errorOf([&] { tooling::assignFiles({"q=a.npy"}, s.inputs(), "input"); }),
            "--input q=a.npy: unknown input 'q' (the schedule's inputs: x)");
  EXPECT_EQ(errorOf([&] { tooling::assignFiles({"x="}, s.inputs(), "input"); }),
            "--input x=: no file given");
  EXPECT_EQ(errorOf([&] {
              tooling::assignFiles({"a.npy", "x=b.npy"}, s.inputs(), "input");
            }),
            "input 'x' is given twice");
  s.add_inputs()->set_name("y");
  EXPECT_EQ(errorOf([&] { tooling::assignFiles({"a.npy"}, s.inputs(), "input"); }),
            "--input a.npy: the schedule has 2 inputs (x, y), so name it: --input NAME=FILE");
  EXPECT_EQ(errorOf([&] { tooling::assignFiles({"z=a.npy"}, s.outputs(), "output"); }),
            "--output z=a.npy: unknown output 'z' (the schedule's outputs: none)");
}

// The whole inference mode, as sl-run runs it, without the command line.
TEST(ToolingRunTest, RunsAnInferenceScheduleFromOptions) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(5);
  std::mt19937 rng(9);
  std::vector<float> x = randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn);
  writeNpy(dir.file("x.npy"), f32Tensor({TinyMlp::kBatch, TinyMlp::kIn}, x));
  RunOptions o;
  o.schedulePath = mlp.write(dir.path());
  o.inputArgs = {dir.file("x.npy")};
  o.outputArgs = {"y=" + dir.file("y.npy")};
  o.linkGbps = 100;
  o.inferFlagsGiven = {"--input", "--output"};
  EXPECT_EQ(tooling::run(o), 0);
  std::vector<float> y = toFloats(readNpy(dir.file("y.npy"))), expected = mlp.reference(x);
  ASSERT_EQ(y.size(), expected.size());
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], expected[i], 1e-5f);

  o.trainFlagsGiven = {"--steps"};
  EXPECT_EQ(errorOf([&] { tooling::run(o); }),
            "--steps: only a train schedule takes this option (" + o.schedulePath +
                " is of kind 'infer')");
}

} // namespace
} // namespace slrt::test
