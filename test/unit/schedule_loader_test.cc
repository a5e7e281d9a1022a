// The loader and verifier: a valid schedule loads; each kind of damage is refused with a message
// that names the file and the thing that is wrong.
#include <cstdint>
#include <functional>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/schedule_loader.h"
#include "slrt/schedule_verifier.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

// Runs `load` and returns the Error's message; fails the test if nothing is thrown.
std::string errorOf(const std::function<void()> &load) {
  try {
    load();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an slrt::Error";
  return "";
}

class ScheduleLoaderTest : public ::testing::Test {
protected:
  TinyMlp mlp = TinyMlp::build(7);
  TempDir dir;

  // Writes the (possibly damaged) schedule with its parameter file and returns loadSchedule's
  // error.
  std::string loadError() {
    std::string path = mlp.write(dir.path());
    std::string message = errorOf([&] { loadSchedule(path); });
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u)
        << "message does not start with the path: " << message;
    return message;
  }
};

TEST_F(ScheduleLoaderTest, LoadsValidSchedule) {
  std::string path = mlp.write(dir.path());
  LoadedSchedule loaded = loadSchedule(path);
  EXPECT_EQ(loaded.path, path);
  EXPECT_EQ(loaded.schedule.kernels_size(), 13);
  ASSERT_EQ(loaded.parameterFiles.size(), 4u);
  EXPECT_EQ(loaded.parameterFiles[0], dir.file("tiny_mlp.params"));
}

TEST_F(ScheduleLoaderTest, ResolvesAbsoluteParameterPaths) {
  TempDir other;
  mlp = TinyMlp::build(7, other.file("weights.bin"));
  writeBytes(other.file("weights.bin"), mlp.paramsFileBytes());
  std::string path = dir.file("abs.slsched");
  writeSchedule(mlp.schedule, path);
  EXPECT_EQ(loadSchedule(path).parameterFiles[3], other.file("weights.bin"));
}

TEST_F(ScheduleLoaderTest, RejectsMissingFile) {
  EXPECT_THAT(errorOf([&] { loadSchedule(dir.file("nope.slsched")); }),
              HasSubstr("nope.slsched: cannot open"));
}

TEST_F(ScheduleLoaderTest, RejectsTruncatedFile) {
  std::string bytes = mlp.schedule.SerializeAsString();
  std::string path = dir.file("cut.slsched");
  // Cutting into the last kernel leaves a length-delimited field that runs past the end.
  writeBytes(path, bytes.substr(0, bytes.size() - 3));
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }), HasSubstr("cut.slsched: truncated or corrupt"));
  writeBytes(path, bytes.substr(0, 12));
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }), HasSubstr("truncated or corrupt"));
}

TEST_F(ScheduleLoaderTest, RejectsFileCutBetweenKernels) {
  // A cut exactly between two kernels still parses as a shorter schedule; the end marker, written
  // last, is what is missing.
  sl::schedule::Schedule head = mlp.schedule;
  head.clear_end_magic();
  head.mutable_kernels()->RemoveLast();
  std::string bytes = mlp.schedule.SerializeAsString();
  std::string prefix = head.SerializeAsString();
  ASSERT_EQ(bytes.compare(0, prefix.size(), prefix), 0);
  std::string path = dir.file("short.slsched");
  writeBytes(path, prefix);
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
              HasSubstr("short.slsched: truncated schedule (the end marker is missing)"));
}

TEST_F(ScheduleLoaderTest, RejectsWrongMagic) {
  std::string path = dir.file("bad.slsched");
  std::string bytes = mlp.schedule.SerializeAsString();
  ASSERT_EQ(bytes.substr(0, 5), std::string("\x0dSLSC"));
  bytes[2] = 'X';
  writeBytes(path, bytes);
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
              HasSubstr("bad.slsched: not a SpeedLoader schedule (bad magic)"));
  for (const char *contents : {"", "\x0dSL", "{\"json\": true}"}) {
    writeBytes(path, contents);
    EXPECT_THAT(errorOf([&] { loadSchedule(path); }), HasSubstr("(bad magic)")) << contents;
  }
}

TEST_F(ScheduleLoaderTest, RejectsWrongVersion) {
  mlp.schedule.set_version(2);
  EXPECT_THAT(loadError(),
              HasSubstr("schedule version 2 is not supported (this runtime supports version 1)"));
}

TEST_F(ScheduleLoaderTest, RejectsBufferOutOfBounds) {
  mlp.schedule.mutable_buffers(TinyMlp::Y)->set_offset(496);
  EXPECT_THAT(loadError(), HasSubstr("buffer 5 'y' (offset 496, 24 bytes) does not fit in the host "
                                     "pool (host_pool_bytes 512)"));
}

TEST_F(ScheduleLoaderTest, RejectsOffsetThatOverflows) {
  // offset + bytes wraps around to a small number: must not pass as "in bounds".
  uint64_t offset = std::numeric_limits<uint64_t>::max() - 7;
  mlp.schedule.mutable_buffers(TinyMlp::Z)->set_offset(offset);
  EXPECT_THAT(loadError(), HasSubstr("buffer 14 'z' (offset " + std::to_string(offset) +
                                     ", 24 bytes) does not fit in the device arena"));
}

TEST_F(ScheduleLoaderTest, RejectsMissingParameterFile) {
  std::string path = dir.file("tiny_mlp.slsched");
  writeSchedule(mlp.schedule, path);
  EXPECT_THAT(
      errorOf([&] { loadSchedule(path); }),
      HasSubstr("parameter 'w1': file '" + dir.file("tiny_mlp.params") + "' does not exist"));
}

TEST_F(ScheduleLoaderTest, RejectsParameterPastEndOfFile) {
  std::string path = mlp.write(dir.path());
  std::string params = mlp.paramsFileBytes();
  writeBytes(dir.file("tiny_mlp.params"), params.substr(0, params.size() - 1));
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
              HasSubstr("parameter 'b2' reads 12 bytes at offset 272 of '" +
                        dir.file("tiny_mlp.params") + "', which has only 283 bytes"));
}

TEST_F(ScheduleLoaderTest, RejectsParameterOffsetThatOverflows) {
  mlp.schedule.mutable_parameters(0)->set_file_offset(std::numeric_limits<uint64_t>::max() - 4);
  EXPECT_THAT(loadError(), HasSubstr("parameter 'w1' reads 128 bytes at offset"));
}

TEST_F(ScheduleLoaderTest, RejectsKernelReferencingMissingBuffer) {
  mlp.schedule.mutable_kernels(TinyMlp::kMatmulKernel)->set_operands(1, 99);
  EXPECT_THAT(loadError(), HasSubstr("kernel 5 'fc1.matmul' (MATMUL): operand 1 refers to buffer "
                                     "99, but the schedule has 18 buffers"));
}

TEST_F(ScheduleLoaderTest, RejectsEventWaitedBeforeRecorded) {
  // Event 5 is recorded by the MUL kernel, which comes after the MATMUL.
  mlp.schedule.mutable_kernels(TinyMlp::kMatmulKernel)->add_wait_events(5);
  EXPECT_THAT(loadError(), HasSubstr("kernel 5 'fc1.matmul' (MATMUL): waits for event 5, which no "
                                     "earlier kernel records"));
}

TEST_F(ScheduleLoaderTest, RejectsMatmulShapeMismatch) {
  // Same bytes, so only the shape check can catch it.
  Buffer *w1 = mlp.schedule.mutable_buffers(TinyMlp::DW1);
  w1->set_shape(0, TinyMlp::kHidden);
  w1->set_shape(1, TinyMlp::kIn);
  EXPECT_THAT(loadError(), HasSubstr("kernel 5 'fc1.matmul' (MATMUL): operand shapes [2, 4] and "
                                     "[8, 4] are incompatible for matmul"));
}

TEST_F(ScheduleLoaderTest, RejectsMatmulResultShapeMismatch) {
  Buffer *h = mlp.schedule.mutable_buffers(TinyMlp::H);
  h->set_shape(0, TinyMlp::kHidden);
  h->set_shape(1, TinyMlp::kBatch);
  EXPECT_THAT(loadError(), HasSubstr("(MATMUL): result shape [8, 2] should be [2, 8]"));
}

// One damage per case, checked by verifySchedule directly.
struct VerifierCase {
  const char *name;
  std::function<void(Schedule &)> damage;
  const char *message;
};

void PrintTo(const VerifierCase &c, std::ostream *os) { *os << c.name; }

class VerifierTest : public ::testing::TestWithParam<VerifierCase> {};

TEST_P(VerifierTest, RejectsWithMessage) {
  Schedule s = TinyMlp::build(3).schedule;
  verifySchedule(s); // the undamaged schedule is valid
  GetParam().damage(s);
  EXPECT_THAT(errorOf([&] { verifySchedule(s); }), HasSubstr(GetParam().message));
}

Buffer &buf(Schedule &s, uint32_t id) { return *s.mutable_buffers(static_cast<int>(id)); }
Kernel &kernel(Schedule &s, int index) { return *s.mutable_kernels(index); }

const VerifierCase kVerifierCases[] = {
    {"BufferId", [](Schedule &s) { buf(s, 3).set_id(4); },
     "buffer at index 3 has id 4 (ids must equal their index)"},
    {"NoSpace", [](Schedule &s) { buf(s, 0).set_space(MEMORY_SPACE_UNSPECIFIED); },
     "buffer 0 'x' has no valid memory space (unspecified)"},
    {"UnknownDType", [](Schedule &s) { buf(s, 0).set_dtype(static_cast<DType>(42)); },
     "buffer 0 'x' has unknown dtype dtype(42)"},
    {"NoDType", [](Schedule &s) { buf(s, 0).set_dtype(DTYPE_UNSPECIFIED); },
     "buffer 0 'x' has unknown dtype unspecified"},
    {"NegativeDim", [](Schedule &s) { buf(s, 0).set_shape(0, -2); },
     "buffer 0 'x' has a negative dimension in shape [-2, 4]"},
    {"HugeShape",
     [](Schedule &s) {
       buf(s, 0).set_shape(0, int64_t{1} << 40);
       buf(s, 0).set_shape(1, int64_t{1} << 40);
     },
     "buffer 0 'x' shape [1099511627776, 1099511627776] is too large"},
    {"WrongBytes", [](Schedule &s) { buf(s, 0).set_bytes(31); },
     "buffer 0 'x' has 31 bytes, but f32 [2, 4] needs 32"},
    {"MisalignedOffset", [](Schedule &s) { buf(s, 0).set_offset(2); },
     "buffer 0 'x' offset 2 is not a multiple of its element size 4"},
    {"DeviceOutOfBounds", [](Schedule &s) { s.set_device_arena_bytes(700); },
     "buffer 16 'g' (offset 704, 24 bytes) does not fit in the device arena (device_arena_bytes "
     "700)"},
    {"ParameterBufferMissing", [](Schedule &s) { s.mutable_parameters(1)->set_buffer(18); },
     "parameter 'b1' refers to buffer 18, but the schedule has 18 buffers"},
    {"ParameterOnDevice", [](Schedule &s) { s.mutable_parameters(1)->set_buffer(TinyMlp::DB1); },
     "parameter 'b1' must be bound to a HOST buffer, but buffer 8 'b1.dev' is in the device arena"},
    {"ParameterShape", [](Schedule &s) { s.mutable_parameters(0)->set_shape(0, 8); },
     "parameter 'w1' is f32 [8, 8] (128 bytes) but its buffer 1 'w1' is f32 [4, 8] (128 bytes)"},
    {"ParameterDType", [](Schedule &s) { s.mutable_parameters(0)->set_dtype(I32); },
     "parameter 'w1' is i32 [4, 8]"},
    {"ParameterNoFile", [](Schedule &s) { s.mutable_parameters(0)->clear_file(); },
     "parameter 'w1' names no file"},
    {"ParameterAndInputShareBuffer", [](Schedule &s) { s.mutable_inputs(0)->set_buffer(1); },
     "buffer 1 'w1' is filled by both parameter 'w1' and input 'x'"},
    {"InputOnDevice", [](Schedule &s) { s.mutable_inputs(0)->set_buffer(TinyMlp::DX); },
     "input 'x' must be bound to a HOST buffer"},
    {"OutputMissingBuffer", [](Schedule &s) { s.mutable_outputs(0)->set_buffer(1000); },
     "output 'y' refers to buffer 1000, but the schedule has 18 buffers"},
    {"DuplicateOutputName", [](Schedule &s) { *s.add_outputs() = s.outputs(0); },
     "output 'y' is declared twice"},
    {"EmptyInputName", [](Schedule &s) { s.mutable_inputs(0)->clear_name(); },
     "an input has an empty name"},
    {"StreamId", [](Schedule &s) { s.mutable_streams(1)->set_id(0); },
     "stream at index 1 has id 0"},
    {"StreamKind", [](Schedule &s) { s.mutable_streams(1)->set_kind(STREAM_KIND_UNSPECIFIED); },
     "stream 1 has no valid kind (0)"},
    {"UnknownOp", [](Schedule &s) { kernel(s, 7).set_op(static_cast<OpKind>(77)); },
     "kernel 7 'relu' (op 77): unknown op"},
    {"NoOp", [](Schedule &s) { kernel(s, 7).set_op(OP_KIND_UNSPECIFIED); },
     "kernel 7 'relu' (OP_KIND_UNSPECIFIED): unknown op"},
    {"OperandCount", [](Schedule &s) { kernel(s, 6).add_operands(0); },
     "kernel 6 'fc1.bias' (ADD): has 3 operands and 1 results; ADD takes 2 operands and 1 result"},
    {"GemmOperandCount", [](Schedule &s) { kernel(s, 8).add_operands(0); },
     "GEMM takes 2 or 3 operands and 1 result"},
    {"ResultCount", [](Schedule &s) { kernel(s, 7).add_results(TinyMlp::H); },
     "kernel 7 'relu' (RELU): has 1 operands and 2 results"},
    {"ResultMissingBuffer", [](Schedule &s) { kernel(s, 7).set_results(0, 18); },
     "kernel 7 'relu' (RELU): result 0 refers to buffer 18"},
    {"StreamMissing", [](Schedule &s) { kernel(s, 7).set_stream(3); },
     "kernel 7 'relu' (RELU): uses stream 3, but the schedule has 3 streams"},
    {"ComputeOnCopyStream", [](Schedule &s) { kernel(s, 7).set_stream(1); },
     "kernel 7 'relu' (RELU): runs on stream 1 of kind HOST_TO_DEVICE; compute kernels run on a "
     "COMPUTE stream"},
    {"CopyOnComputeStream", [](Schedule &s) { kernel(s, 0).set_stream(0); },
     "copies run on a HOST_TO_DEVICE or DEVICE_TO_HOST stream"},
    {"GemmWithoutAttributes", [](Schedule &s) { kernel(s, 8).clear_gemm(); },
     "kernel 8 'fc2' (GEMM): has no gemm attributes"},
    {"AttributesOnAdd", [](Schedule &s) { kernel(s, 6).mutable_gemm(); },
     "kernel 6 'fc1.bias' (ADD): has attributes, which ADD does not take"},
    {"WaitEventOutOfRange", [](Schedule &s) { kernel(s, 7).add_wait_events(6); },
     "kernel 7 'relu' (RELU): waits for event 6, but the schedule has 6 events"},
    {"RecordEventOutOfRange", [](Schedule &s) { kernel(s, 7).add_record_events(100); },
     "kernel 7 'relu' (RELU): records event 100, but the schedule has 6 events"},
    {"WaitOwnRecord",
     [](Schedule &s) {
       kernel(s, 0).clear_record_events();
       kernel(s, 0).add_wait_events(0);
       kernel(s, 0).add_record_events(0);
     },
     "kernel 0 'x.h2d' (COPY): waits for event 0, which no earlier kernel records"},
    {"CopySizeMismatch", [](Schedule &s) { kernel(s, 0).set_results(0, TinyMlp::DW1); },
     "kernel 0 'x.h2d' (COPY): copies buffer 0 'x' (f32, 32 bytes) into buffer 7 'w1.dev' (f32, "
     "128 "
     "bytes); a copy needs equal dtype and size"},
    {"CopyDTypeMismatch", [](Schedule &s) { buf(s, TinyMlp::DX).set_dtype(I32); },
     "a copy needs equal dtype and size"},
    {"ComputeOnHostBuffer", [](Schedule &s) { kernel(s, 7).set_operands(0, TinyMlp::X); },
     "kernel 7 'relu' (RELU): buffer 0 'x' is in the host pool; compute kernels use only DEVICE "
     "buffers"},
    {"ComputeNotF32", [](Schedule &s) { buf(s, TinyMlp::S).set_dtype(I32); },
     "kernel 9 'silu' (SILU): buffer 15 's' is i32; compute kernels of schedule version 1 are f32"},
    {"UnaryShape",
     [](Schedule &s) {
       buf(s, TinyMlp::S).set_shape(0, 3);
       buf(s, TinyMlp::S).set_shape(1, 2);
     },
     "kernel 9 'silu' (SILU): result shape [3, 2] should be [2, 3]"},
    {"AddDoesNotBroadcast",
     [](Schedule &s) {
       // b1.dev [8] -> [2, 4] (same bytes) does not broadcast against h [2, 8].
       buf(s, TinyMlp::DB1).set_shape(0, 2);
       buf(s, TinyMlp::DB1).add_shape(4);
     },
     "kernel 6 'fc1.bias' (ADD): operand shapes [2, 8] and [2, 4] do not broadcast"},
    {"MulResultShape",
     [](Schedule &s) {
       buf(s, TinyMlp::DY).clear_shape();
       buf(s, TinyMlp::DY).add_shape(6);
     },
     "kernel 11 'gate' (MUL): result shape [6] should be [2, 3]"},
    {"GemmRank",
     [](Schedule &s) {
       buf(s, TinyMlp::DW2).clear_shape();
       buf(s, TinyMlp::DW2).add_shape(24);
     },
     "kernel 8 'fc2' (GEMM): A [2, 8] and B [24] must both be rank 2"},
    {"GemmInnerMismatch", [](Schedule &s) { kernel(s, 8).mutable_gemm()->set_trans_b(false); },
     "kernel 8 'fc2' (GEMM): op(A) is [2, 8] and op(B) is [3, 8]; their inner dimensions differ"},
    {"GemmResultShape",
     [](Schedule &s) {
       buf(s, TinyMlp::Z).set_shape(0, 3);
       buf(s, TinyMlp::Z).set_shape(1, 2);
     },
     "kernel 8 'fc2' (GEMM): result shape [3, 2] should be [2, 3]"},
    {"GemmCDoesNotBroadcast",
     [](Schedule &s) {
       // b2.dev [3] -> [3, 1] (same bytes) cannot broadcast to [2, 3].
       buf(s, TinyMlp::DB2).add_shape(1);
     },
     "kernel 8 'fc2' (GEMM): C [3, 1] does not broadcast to [2, 3]"},
    {"TransposeAttributesOnRelu",
     [](Schedule &s) { kernel(s, 7).mutable_transpose()->add_perm(0); },
     "kernel 7 'relu' (RELU): has attributes, which RELU does not take"},
    {"TransposePermLength",
     [](Schedule &s) {
       kernel(s, 7).set_op(TRANSPOSE);
       kernel(s, 7).set_results(0, TinyMlp::H); // not in place
       kernel(s, 7).mutable_transpose()->add_perm(0);
     },
     "kernel 7 'relu' (TRANSPOSE): perm has 1 entries for an operand of rank 2"},
    {"TransposePermNotPermutation",
     [](Schedule &s) {
       kernel(s, 7).set_op(TRANSPOSE);
       kernel(s, 7).set_results(0, TinyMlp::H);
       kernel(s, 7).mutable_transpose()->add_perm(1);
       kernel(s, 7).mutable_transpose()->add_perm(1);
     },
     "kernel 7 'relu' (TRANSPOSE): perm [1, 1] is not a permutation of the operand's 2 dimensions"},
    {"TransposeResultShape",
     [](Schedule &s) {
       kernel(s, 7).set_op(TRANSPOSE);
       kernel(s, 7).set_results(0, TinyMlp::Z); // z is [2, 3]
       kernel(s, 7).mutable_transpose()->add_perm(0);
       kernel(s, 7).mutable_transpose()->add_perm(1);
     },
     "kernel 7 'relu' (TRANSPOSE): result shape [2, 3] should be [2, 8]"},
    {"TransposeInPlace",
     [](Schedule &s) {
       kernel(s, 7).set_op(TRANSPOSE);
       kernel(s, 7).mutable_transpose()->add_perm(0);
       kernel(s, 7).mutable_transpose()->add_perm(1);
     },
     "kernel 7 'relu' (TRANSPOSE): result buffer 13 'hr' overlaps operand buffer 12 'h2'"},
    {"MatmulResultOverlapsOperand", [](Schedule &s) { buf(s, TinyMlp::H).set_offset(0); },
     "kernel 5 'fc1.matmul' (MATMUL): result buffer 11 'h' overlaps operand buffer 6 'x.dev'"},
    {"PartialOverlap", [](Schedule &s) { buf(s, TinyMlp::HR).set_offset(516); },
     "kernel 7 'relu' (RELU): result buffer 13 'hr' overlaps operand buffer 12 'h2'"},
};

INSTANTIATE_TEST_SUITE_P(Schedule, VerifierTest, ::testing::ValuesIn(kVerifierCases),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
} // namespace slrt::test
