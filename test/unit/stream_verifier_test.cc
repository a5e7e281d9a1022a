// The verifier's version 3 rules: the HOST_COMPUTE stream, ACCUMULATE and OPTIMIZER_STEP placement,
// one recorder per event, and the cross-stream hazard check (kernels on different streams that
// touch the same bytes, one writing, must be ordered by events).
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/schedule_verifier.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

Kernel &kernel(Schedule &s, int index) { return *s.mutable_kernels(index); }

// --- the streamed schedule: reuse, four streams, host accumulation ----------------------------

TEST(StreamVerifierTest, StreamedScheduleWithReuseIsValid) {
  Schedule s = StreamedSchedule::build();
  // c reuses a's bytes: the reuse is what the hazard check has to clear.
  ASSERT_EQ(s.buffers(StreamedSchedule::C).offset(), s.buffers(StreamedSchedule::A).offset());
  EXPECT_EQ(verifyError(s), "no error");
}

struct StreamCase {
  const char *name;
  std::function<void(Schedule &)> change;
  const char *message;
};

void PrintTo(const StreamCase &c, std::ostream *os) { *os << c.name; }

class StreamedScheduleTest : public ::testing::TestWithParam<StreamCase> {};

TEST_P(StreamedScheduleTest, RejectsWithMessage) {
  Schedule s = StreamedSchedule::build();
  GetParam().change(s);
  EXPECT_THAT(verifyError(s), HasSubstr(GetParam().message));
}

const StreamCase kStreamCases[] = {
    {"UnknownStreamKind",
     [](Schedule &s) { s.mutable_streams(3)->set_kind(static_cast<StreamKind>(6)); },
     "stream 3 has no valid kind (6)"},
    {"ComputeOpOnHostStream", [](Schedule &s) { kernel(s, 3).set_stream(3); },
     "kernel 3 'sigmoid' (SIGMOID): runs on stream 3 of kind HOST_COMPUTE; compute kernels run on "
     "a COMPUTE stream"},
    {"AccumulateOnCopyStream", [](Schedule &s) { kernel(s, 5).set_stream(2); },
     "kernel 5 'sum' (ACCUMULATE): runs on stream 2 of kind DEVICE_TO_HOST; ACCUMULATE runs on a "
     "COMPUTE stream (device buffers) or a HOST_COMPUTE stream (host buffers)"},
    {"AccumulateOnHostStreamWithDeviceBuffer",
     [](Schedule &s) { kernel(s, 5).set_operands(1, StreamedSchedule::C); },
     "kernel 5 'sum' (ACCUMULATE): buffer 5 'c' is in the device arena; kernels on a HOST_COMPUTE "
     "stream use only HOST buffers"},
    {"AccumulateOnComputeStreamWithHostBuffers", [](Schedule &s) { kernel(s, 5).set_stream(0); },
     "kernel 5 'sum' (ACCUMULATE): buffer 1 'y' is in the host pool; compute kernels use only "
     "DEVICE buffers"},
    {"EventRecordedTwice", [](Schedule &s) { kernel(s, 3).set_record_events(0, 1); },
     "kernel 3 'sigmoid' (SIGMOID): records event 1, which kernel 1 'relu' (RELU) records too; "
     "each event is recorded by exactly one kernel"},
    {"EventListedTwiceByOneKernel", [](Schedule &s) { kernel(s, 3).add_record_events(2); },
     "kernel 3 'sigmoid' (SIGMOID): records event 2, which it lists twice; each event is recorded "
     "by exactly one kernel"},
    // Read after write across streams: the copy out no longer waits for the kernel that wrote b.
    {"ReadAfterWrite", [](Schedule &s) { kernel(s, 2).clear_wait_events(); },
     "kernel 2 'b.d2h' (COPY) on stream 2 reads bytes of buffer 4 'b' that kernel 1 'relu' (RELU) "
     "on stream 0 writes, with no event ordering them"},
    // Write after read across streams, through reuse: c now reuses b's bytes, which the copy on
    // the d2h stream still reads, and the compute stream does not wait for that copy.
    {"WriteAfterReadThroughReuse",
     [](Schedule &s) {
       s.mutable_buffers(StreamedSchedule::C)->set_offset(s.buffers(StreamedSchedule::B).offset());
     },
     "kernel 3 'sigmoid' (SIGMOID) on stream 0 writes bytes of buffer 5 'c' that kernel 2 'b.d2h' "
     "(COPY) on stream 2 reads as buffer 4 'b', with no event ordering them"},
    // Write after write: the host accumulation no longer waits for the copies into y and z.
    {"HostReadsUnorderedCopy", [](Schedule &s) { kernel(s, 5).clear_wait_events(); },
     "kernel 5 'sum' (ACCUMULATE) on stream 3 reads bytes of buffer 1 'y' that kernel 2 'b.d2h' "
     "(COPY) on stream 2 writes, with no event ordering them"},
    // ACCUMULATE may run exactly in place, never partly: z now starts one element into y.
    {"AccumulatePartlyInPlace",
     [](Schedule &s) {
       s.mutable_buffers(StreamedSchedule::Z)
           ->set_offset(s.buffers(StreamedSchedule::Y).offset() + 4);
     },
     "kernel 5 'sum' (ACCUMULATE): result buffer 1 'y' overlaps operand buffer 2 'z'"},
};

INSTANTIATE_TEST_SUITE_P(Streams, StreamedScheduleTest, ::testing::ValuesIn(kStreamCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(StreamVerifierTest, OrderingIsTransitiveAcrossStreams) {
  // x.h2d -> relu (event 0), sigmoid -> c.d2h (event 2), c.d2h -> sum (event 3): sum is ordered
  // after x.h2d only through the compute and d2h streams. Make the host stream overwrite x, which
  // x.h2d read.
  Schedule s = StreamedSchedule::build();
  kernel(s, 5).set_operands(0, StreamedSchedule::X);
  kernel(s, 5).set_operands(1, StreamedSchedule::X);
  kernel(s, 5).set_results(0, StreamedSchedule::X);
  EXPECT_EQ(verifyError(s), "no error");
  // Without the wait, nothing orders them.
  kernel(s, 5).clear_wait_events();
  EXPECT_THAT(verifyError(s), HasSubstr("kernel 5 'sum' (ACCUMULATE) on stream 3 writes bytes of "
                                    "buffer 0 'x' that kernel 0 'x.h2d' (COPY) on stream 1 reads, "
                                    "with no event ordering them"));
}

TEST(StreamVerifierTest, EveryReaderSinceTheLastWriteIsChecked) {
  // Two streams read b: b.d2h (d2h stream) and a new copy on the host-to-device stream. A later
  // write of some of b's bytes (through another buffer that partly overlaps it) on the compute
  // stream must be ordered after both.
  Schedule s = StreamedSchedule::build();
  Buffer *copy = s.add_buffers();
  *copy = s.buffers(StreamedSchedule::A);
  copy->set_id(static_cast<uint32_t>(s.buffers_size() - 1));
  copy->set_name("b.copy");
  copy->set_offset(s.device_arena_bytes());
  s.set_device_arena_bytes(s.device_arena_bytes() + 64);
  Kernel *reader = s.add_kernels();
  reader->set_op(COPY);
  reader->set_name("b.again");
  reader->set_stream(1); // a host-to-device stream copying device to device
  reader->add_operands(StreamedSchedule::B);
  reader->add_results(copy->id());
  reader->add_wait_events(1);
  Buffer *part = s.add_buffers();
  *part = s.buffers(StreamedSchedule::B);
  part->set_id(static_cast<uint32_t>(s.buffers_size() - 1));
  part->set_name("b.part");
  part->set_offset(part->offset() + 8);
  Kernel *writer = s.add_kernels();
  writer->set_op(RELU);
  writer->set_name("b.overwrite");
  writer->set_stream(0);
  writer->add_operands(StreamedSchedule::A);
  writer->add_results(part->id());
  EXPECT_THAT(verifyError(s), HasSubstr("kernel 7 'b.overwrite' (RELU) on stream 0 writes bytes of "
                                    "buffer 7 'b.part' that kernel 6 'b.again' (COPY) on stream 1 "
                                    "reads as buffer 4 'b', with no event ordering them"));
  // Ordered after the second reader (and so after the first, through it), it passes.
  s.set_num_events(5);
  s.mutable_kernels(6)->add_record_events(4);
  s.mutable_kernels(7)->add_wait_events(4);
  EXPECT_THAT(verifyError(s), HasSubstr("kernel 7 'b.overwrite' (RELU) on stream 0 writes bytes of "
                                    "buffer 7 'b.part' that kernel 2 'b.d2h' (COPY) on stream 2 "
                                    "reads as buffer 4 'b'"));
  s.mutable_kernels(4)->add_record_events(5);
  s.set_num_events(6);
  s.mutable_kernels(7)->add_wait_events(5);
  EXPECT_EQ(verifyError(s), "no error");
}

TEST(StreamVerifierTest, RefusesMoreStreamsThanThreads) {
  ScheduleBuilder b;
  uint32_t source = b.buffer("source", HOST, F32, {1});
  for (int i = 0; i < 257; ++i) {
    Stream *stream = b.schedule.add_streams();
    stream->set_id(static_cast<uint32_t>(b.schedule.streams_size() - 1));
    stream->set_kind(HOST_TO_DEVICE);
    uint32_t target = b.buffer("t" + std::to_string(i), DEVICE, F32, {1});
    b.kernel(COPY, "c" + std::to_string(i), {source}, target).set_stream(stream->id());
  }
  EXPECT_THAT(verifyError(b.schedule),
              HasSubstr("kernels run on more than 256 streams; this runtime runs each stream on a "
                        "host thread of its own and takes at most 256"));
}

// --- OPTIMIZER_STEP -------------------------------------------------------------------------

class OptimizerStepTest : public ::testing::Test {
protected:
  void SetUp() override { reset(); }
  // The tiny train schedule with two steps, b's then w's.
  void reset() {
    train = TinyTrain::build(5);
    train.addOptimizerSteps({{1}, {0}});
    ASSERT_EQ(verifyError(train.schedule), "no error");
    first = train.schedule.kernels_size() - 2;
  }
  Kernel &step(int which) { return kernel(train.schedule, first + which); }
  // "kernel 21 'adamw.0' (OPTIMIZER_STEP)", and the same followed by ": ".
  std::string text(int which) {
    return "kernel " + std::to_string(first + which) + " 'adamw." + std::to_string(which) +
           "' (OPTIMIZER_STEP)";
  }
  std::string prefix(int which) { return text(which) + ": "; }
  uint32_t output(const std::string &name) {
    for (const Binding &binding : train.schedule.outputs())
      if (binding.name() == name)
        return binding.buffer();
    ADD_FAILURE() << "no output " << name;
    return 0;
  }

  TinyTrain train = TinyTrain::build(5);
  int first = 0;
};

TEST_F(OptimizerStepTest, RunsOnAHostComputeStream) {
  step(0).set_stream(0);
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "runs on stream 0 of kind COMPUTE; OPTIMIZER_STEP runs on a "
                                    "HOST_COMPUTE stream"));
}

TEST_F(OptimizerStepTest, TakesItsAttributesAndNoResults) {
  step(0).clear_optimizer_step();
  EXPECT_THAT(verifyError(train.schedule), HasSubstr(prefix(0) + "has no optimizer_step attributes"));
  reset();
  step(0).add_results(output("loss"));
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "has 2 operands and 1 results; OPTIMIZER_STEP takes 1 or more "
                                    "operands and 0 results"));
}

TEST_F(OptimizerStepTest, NamesOneParameterPerGradientOperand) {
  step(0).mutable_optimizer_step()->add_parameters(0);
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "has 1 gradient operands, but optimizer_step.parameters names "
                                    "2 parameters (operand i + 1 is the gradient of "
                                    "parameters[i])"));
}

TEST_F(OptimizerStepTest, Operand0IsTheLoss) {
  step(0).set_operands(0, output("grad:b"));
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "operand 0 is buffer 9 'grad:b', but it must be buffer 7 "
                                    "'loss', the buffer of output 'loss'"));
}

TEST_F(OptimizerStepTest, NeedsALossOutput) {
  for (Binding &binding : *train.schedule.mutable_outputs())
    if (binding.name() == "loss")
      binding.set_name("total");
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "the schedule has no output 'loss' (operand 0 of an "
                                    "OPTIMIZER_STEP is its buffer)"));
}

TEST_F(OptimizerStepTest, ParametersAreInRange) {
  step(0).mutable_optimizer_step()->set_parameters(0, 2);
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "optimizer_step.parameters[0] is 2, but the schedule has 2 "
                                    "parameters"));
}

TEST_F(OptimizerStepTest, GradientOperandsAreTheGradientOutputs) {
  step(0).set_operands(1, output("grad:w"));
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "operand 1 is buffer 8 'grad:w', but the gradient of "
                                    "parameter 'b' is output 'grad:b' in buffer 9 'grad:b'"));
}

TEST_F(OptimizerStepTest, NeedsTheGradientOutput) {
  for (Binding &binding : *train.schedule.mutable_outputs())
    if (binding.name() == "grad:b")
      binding.set_name("db");
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "steps parameter 'b', but the schedule has no output 'grad:b' "
                                    "(its gradient)"));
}

TEST_F(OptimizerStepTest, StepsAParameterOnce) {
  step(1).mutable_optimizer_step()->set_parameters(0, 1);
  step(1).set_operands(1, output("grad:b"));
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(1) + "steps parameter 'b', which " + text(0) +
                        " steps too; a parameter appears in at most one OPTIMIZER_STEP"));
  reset();
  step(0).mutable_optimizer_step()->add_parameters(1);
  step(0).add_operands(output("grad:b"));
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(prefix(0) + "steps parameter 'b', which it names twice; a parameter "
                                    "appears in at most one OPTIMIZER_STEP"));
}

TEST_F(OptimizerStepTest, ReadsOnlyWhatIsOrderedBeforeIt) {
  // Without its wait, nothing orders the step after the copies that write the loss.
  step(0).clear_wait_events();
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr(text(0) + " on stream 3 reads bytes of buffer 7 'loss' that kernel " +
                        std::to_string(first - 3) +
                        " 'loss.d2h' (COPY) on stream 2 writes, with no event ordering them"));
}

TEST_F(OptimizerStepTest, WritesTheWeightsOfItsParameters) {
  // A copy of w to the device after the step that updates w must wait for it.
  uint32_t w = train.schedule.parameters(0).buffer();
  Buffer *again = train.schedule.add_buffers();
  *again = train.schedule.buffers(static_cast<int>(w));
  again->set_id(static_cast<uint32_t>(train.schedule.buffers_size() - 1));
  again->set_name("w.again");
  again->set_space(DEVICE);
  again->set_offset(train.schedule.device_arena_bytes());
  train.schedule.set_device_arena_bytes(train.schedule.device_arena_bytes() + again->bytes());
  Kernel *copy = train.schedule.add_kernels();
  copy->set_op(COPY);
  copy->set_name("w.again");
  copy->set_stream(1);
  copy->add_operands(w);
  copy->add_results(again->id());
  EXPECT_THAT(verifyError(train.schedule),
              HasSubstr("kernel " + std::to_string(first + 2) +
                        " 'w.again' (COPY) on stream 1 reads bytes of buffer 2 'w' that " +
                        text(1) + " on stream 3 writes, with no event ordering them"));
  // Ordered after the step, the copy reads the updated weights: valid.
  train.schedule.set_num_events(train.schedule.num_events() + 1);
  step(1).add_record_events(train.schedule.num_events() - 1);
  copy->add_wait_events(train.schedule.num_events() - 1);
  EXPECT_EQ(verifyError(train.schedule), "no error");
}

} // namespace
} // namespace slrt::test
