// The loader and verifier: a valid schedule loads; each kind of damage is refused with a message
// that names the file and the thing that is wrong.
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/dtype.h"
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

TEST_F(ScheduleLoaderTest, ResolvesAbsoluteParameterPathsOnlyWhenAllowed) {
  TempDir other;
  mlp = TinyMlp::build(7, other.file("weights.bin"));
  writeBytes(other.file("weights.bin"), mlp.paramsFileBytes());
  std::string path = dir.file("abs.slsched");
  writeSchedule(mlp.schedule, path);
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
              HasSubstr("parameter 'w1': file '" + other.file("weights.bin") +
                        "' is an absolute path: a schedule reads parameter files only inside its "
                        "own directory"));
  EXPECT_EQ(loadSchedule(path, true, /*allowExternalPaths=*/true).parameterFiles[3],
            other.file("weights.bin"));
  // Random weights never open the files: nothing to refuse.
  EXPECT_EQ(loadSchedule(path, /*checkParameterFiles=*/false).parameterFiles[3],
            other.file("weights.bin"));
}

TEST_F(ScheduleLoaderTest, ParentPathsAreRefusedUnlessAllowed) {
  std::string sub = dir.file("sub");
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0);
  writeBytes(dir.file("weights.bin"), mlp.paramsFileBytes());
  mlp = TinyMlp::build(7, "../weights.bin");
  std::string path = sub + "/up.slsched";
  writeSchedule(mlp.schedule, path);
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
              HasSubstr("parameter 'w1': file '../weights.bin' is a path with '..'"));
  EXPECT_EQ(loadSchedule(path, true, true).parameterFiles[0], dir.file("weights.bin"));
}

TEST_F(ScheduleLoaderTest, SymbolicLinksOutOfTheDirectoryAreRefused) {
  TempDir other;
  writeBytes(other.file("weights.bin"), mlp.paramsFileBytes());
  mlp = TinyMlp::build(7, "weights.bin");
  writeSchedule(mlp.schedule, dir.file("linked.slsched"));
  ASSERT_EQ(::symlink(other.file("weights.bin").c_str(), dir.file("weights.bin").c_str()), 0);
  std::string message = errorOf([&] { loadSchedule(dir.file("linked.slsched")); });
  EXPECT_THAT(message, HasSubstr("parameter 'w1': file 'weights.bin' resolves to '"));
  EXPECT_THAT(message, HasSubstr("weights.bin' (through a symbolic link), outside the "
                                 "schedule's directory"));
  EXPECT_EQ(loadSchedule(dir.file("linked.slsched"), true, true).parameterFiles.size(), 4u);

  // A linked directory on the way, too.
  mlp = TinyMlp::build(7, "data/weights.bin");
  writeSchedule(mlp.schedule, dir.file("linked-dir.slsched"));
  ASSERT_EQ(::symlink(other.path().c_str(), dir.file("data").c_str()), 0);
  EXPECT_THAT(errorOf([&] { loadSchedule(dir.file("linked-dir.slsched")); }),
              HasSubstr("parameter 'w1': file 'data/weights.bin' resolves to '"));

  // A link that stays inside the directory is followed.
  writeBytes(dir.file("real.bin"), mlp.paramsFileBytes());
  ASSERT_EQ(::symlink("real.bin", dir.file("inner.bin").c_str()), 0);
  mlp = TinyMlp::build(7, "inner.bin");
  writeSchedule(mlp.schedule, dir.file("inner.slsched"));
  EXPECT_EQ(loadSchedule(dir.file("inner.slsched")).parameterFiles[0], dir.file("inner.bin"));
}

TEST_F(ScheduleLoaderTest, FifoAndDeviceParameterFilesAreNotRegularFiles) {
  ASSERT_EQ(::mkfifo(dir.file("fifo.bin").c_str(), 0600), 0);
  mlp = TinyMlp::build(7, "fifo.bin");
  writeSchedule(mlp.schedule, dir.file("fifo.slsched"));
  EXPECT_THAT(errorOf([&] { loadSchedule(dir.file("fifo.slsched")); }),
              HasSubstr("fifo.bin' is not a regular file"));
}

TEST_F(ScheduleLoaderTest, ScheduleThatIsAFifoOrADeviceIsRefusedAtOnce) {
  ASSERT_EQ(::mkfifo(dir.file("s.slsched").c_str(), 0600), 0);
  EXPECT_THAT(errorOf([&] { loadSchedule(dir.file("s.slsched")); }),
              HasSubstr("s.slsched: cannot read it: it is a FIFO (named pipe), not a regular "
                        "file"));
  EXPECT_THAT(errorOf([&] { loadSchedule("/dev/zero"); }),
              HasSubstr("/dev/zero: cannot read it: it is a character device, not a regular "
                        "file"));
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
  // Versions 4 to 7 are accepted: 3 lacks the programs generation needs, 8 is in the future.
  for (uint32_t version : {0u, 1u, 2u, 3u, 8u}) {
    mlp.schedule.set_version(version);
    EXPECT_THAT(loadError(), HasSubstr("schedule version " + std::to_string(version) +
                                       " is not supported (this runtime supports versions 4 to "
                                       "7)"));
  }
}

TEST_F(ScheduleLoaderTest, LoadsVersion4WithoutTransposeFlags) {
  mlp.schedule.set_version(4);
  std::string path = mlp.write(dir.path());
  EXPECT_EQ(loadSchedule(path).schedule.version(), 4u);
}

TEST_F(ScheduleLoaderTest, RejectsTransposeFlagsInVersion4) {
  mlp.schedule.set_version(4);
  mlp.schedule.mutable_kernels(TinyMlp::kMatmulKernel)->mutable_matmul();
  EXPECT_THAT(loadError(), HasSubstr("kernel 5 'fc1.matmul' (MATMUL): has matmul attributes, "
                                     "which schedule version 4 does not have (version 5 does)"));
}

TEST_F(ScheduleLoaderTest, RejectsAlibiInVersion4) {
  TinyAttention block = TinyAttention::build(1);
  block.schedule.set_version(4);
  bool found = false;
  for (sl::schedule::Kernel &k : *block.schedule.mutable_kernels())
    if (k.has_attention()) {
      k.mutable_attention()->set_alibi(true);
      found = true;
      break;
    }
  ASSERT_TRUE(found);
  std::string path = block.write(dir.path());
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
              HasSubstr("has ALiBi slopes, which schedule version 4 does not have (version 5 does)"));
}

TEST_F(ScheduleLoaderTest, RejectsBshdAttentionBeforeVersion6) {
  for (uint32_t version : {4u, 5u}) {
    TinyAttention block = TinyAttention::build(1);
    block.schedule.set_version(version);
    sl::schedule::Kernel *attention = nullptr;
    for (sl::schedule::Kernel &k : *block.schedule.mutable_kernels())
      if (k.op() == sl::schedule::ATTENTION)
        attention = &k;
    ASSERT_NE(attention, nullptr);
    attention->mutable_attention()->set_layout(sl::schedule::AttentionAttributes::BSHD);
    std::string path = block.write(dir.path());
    EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
                HasSubstr("has attention layout BSHD, which schedule version " +
                          std::to_string(version) + " does not have (version 6 does)"));
  }
}

TEST_F(ScheduleLoaderTest, RejectsKvWriteAttributesBeforeVersion7) {
  for (uint32_t version : {4u, 5u, 6u}) {
    TinyGenerate generate = TinyGenerate::build(1);
    generate.schedule.set_version(version);
    generate.schedule.mutable_kernels(generate.kvWriteKernel)
        ->mutable_kv_write()
        ->set_layout(sl::schedule::AttentionAttributes::BSHD);
    std::string path = generate.write(dir.path());
    EXPECT_THAT(errorOf([&] { loadSchedule(path); }),
                HasSubstr("has kv_write attributes, which schedule version " +
                          std::to_string(version) + " does not have (version 7 does)"));
  }
}

TEST_F(ScheduleLoaderTest, EndMarkerIsWrittenLastAfterConstants) {
  TinyAttention block = TinyAttention::build(1);
  ASSERT_GT(block.schedule.constants_size(), 0);
  std::string bytes = block.schedule.SerializeAsString();
  // Field 536870911, wire type fixed32: the tag varint 0xFFFFFFFD, then the magic.
  EXPECT_EQ(bytes.substr(bytes.size() - 9), std::string("\xFD\xFF\xFF\xFF\x0FSLSC", 9));
  std::string path = block.write(dir.path());
  EXPECT_EQ(loadSchedule(path).schedule.constants_size(), 4);
  // A cut between two constants parses, and is refused for the missing marker.
  sl::schedule::Schedule head = block.schedule;
  head.clear_end_magic();
  head.mutable_constants()->RemoveLast();
  writeBytes(path, head.SerializeAsString());
  EXPECT_THAT(errorOf([&] { loadSchedule(path); }), HasSubstr("the end marker is missing"));
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

TEST_F(ScheduleLoaderTest, ChecksMatmulShapesWithTheTransposeFlags) {
  // w1 stored [8, 4] (the same bytes) and read transposed: [2, 4] x [4, 8] as before.
  Buffer *w1 = mlp.schedule.mutable_buffers(TinyMlp::DW1);
  w1->set_shape(0, TinyMlp::kHidden);
  w1->set_shape(1, TinyMlp::kIn);
  MatmulAttributes *flags = mlp.schedule.mutable_kernels(TinyMlp::kMatmulKernel)->mutable_matmul();
  flags->set_trans_b(true);
  std::string path = mlp.write(dir.path());
  EXPECT_TRUE(loadSchedule(path).schedule.kernels(TinyMlp::kMatmulKernel).matmul().trans_b());
  // x read transposed too would be [4, 2] x [4, 8].
  flags->set_trans_a(true);
  EXPECT_THAT(loadError(), HasSubstr("kernel 5 'fc1.matmul' (MATMUL): operand shapes [2, 4] "
                                     "(transposed) and [8, 4] (transposed) are incompatible for "
                                     "matmul"));
  // A flag on a vector operand.
  flags->set_trans_a(false);
  Buffer *x = mlp.schedule.mutable_buffers(TinyMlp::DX);
  x->clear_shape();
  x->add_shape(TinyMlp::kBatch * TinyMlp::kIn);
  EXPECT_THAT(loadError(), HasSubstr("kernel 5 'fc1.matmul' (MATMUL): operand shapes [8] and "
                                     "[8, 4] must both have rank >= 2 with a transpose flag"));
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
void addConstant(Schedule &s, uint32_t buffer, size_t bytes) {
  Constant *c = s.add_constants();
  c->set_buffer(buffer);
  c->set_data(std::string(bytes, '\0'));
}

// Makes parameter `index` (and its host buffer) bf16, read from its f32 bytes in the file, as
// sl-opt precision=bf16 writes it; the buffers after it keep their offsets.
void toBf16Parameter(Schedule &s, int index) {
  Parameter &p = *s.mutable_parameters(index);
  Buffer &b = buf(s, p.buffer());
  p.set_dtype(BF16);
  p.set_file_dtype(F32);
  b.set_dtype(BF16);
  b.set_bytes(b.bytes() / 2);
}

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
    // file_dtype: the one conversion at load is an f32 file into a bf16 buffer.
    {"ParameterFileDTypeF16",
     [](Schedule &s) { s.mutable_parameters(0)->set_file_dtype(F16); },
     "parameter 'w1' is f32 but its file_dtype is f16; the only conversion at load is from an f32 "
     "file to a bf16 parameter"},
    {"ParameterFileDTypeUnknown",
     [](Schedule &s) { s.mutable_parameters(0)->set_file_dtype(static_cast<DType>(42)); },
     "parameter 'w1' is f32 but its file_dtype is dtype(42)"},
    {"ParameterBf16FromF64",
     [](Schedule &s) {
       toBf16Parameter(s, 0);
       s.mutable_parameters(0)->set_file_dtype(F64);
       s.mutable_parameters(0)->set_bytes(256);
     },
     "parameter 'w1' is bf16 but its file_dtype is f64"},
    {"ParameterBf16FileBytes",
     [](Schedule &s) {
       toBf16Parameter(s, 0);
       s.mutable_parameters(0)->set_bytes(64); // the bf16 size, not the f32 size in the file
     },
     "parameter 'w1' is bf16 [4, 8] (64 bytes of f32 in its file) but its buffer 1 'w1' is bf16 "
     "[4, 8] (64 bytes, 128 bytes of f32 in the file)"},
    {"ParameterBf16WithoutFileDType",
     [](Schedule &s) {
       toBf16Parameter(s, 0);
       s.mutable_parameters(0)->clear_file_dtype();
     },
     "parameter 'w1' is bf16 [4, 8] (128 bytes) but its buffer 1 'w1' is bf16 [4, 8] (64 bytes)"},
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
    {"ConstantOnDevice", [](Schedule &s) { addConstant(s, TinyMlp::DX, 32); },
     "constant 0 must be bound to a HOST buffer, but buffer 6 'x.dev' is in the device arena"},
    {"ConstantMissingBuffer", [](Schedule &s) { addConstant(s, 99, 4); },
     "constant 0 refers to buffer 99, but the schedule has 18 buffers"},
    {"ConstantSize", [](Schedule &s) { addConstant(s, TinyMlp::Y, 8); },
     "constant 0 has 8 bytes of data, but its buffer 5 'y' (f32 [2, 3]) takes 24 bytes, or one "
     "element of 4 bytes to repeat"},
    {"ConstantEmpty", [](Schedule &s) { addConstant(s, TinyMlp::Y, 0); },
     "constant 0 has 0 bytes of data"},
    {"ConstantOnParameter", [](Schedule &s) { addConstant(s, TinyMlp::W1, 4); },
     "buffer 1 'w1' is filled by both parameter 'w1' and constant 0"},
    {"ConstantOnInput", [](Schedule &s) { addConstant(s, TinyMlp::X, 32); },
     "buffer 0 'x' is filled by both constant 0 and input 'x'"},
    {"TwoConstants",
     [](Schedule &s) {
       addConstant(s, TinyMlp::Y, 4);
       addConstant(s, TinyMlp::Y, 24);
     },
     "buffer 5 'y' is filled by both constant 0 and constant 1"},
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
     "kernel 6 'fc1.bias' (ADD): has gemm attributes, which ADD does not take"},
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
     "kernel 9 'silu' (SILU): result (buffer 15 's') is i32; SILU takes f32"},
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
     "kernel 7 'relu' (RELU): has transpose attributes, which RELU does not take"},
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

// --- per-op rules ----------------------------------------------------------------------------
// Each case is one kernel "k" on fresh DEVICE buffers in0, in1, ... and out; the message is
// nullptr for a kernel that must pass.
struct OpCase {
  const char *name;
  OpKind op;
  // Buffers as "dtype[dims]", space separated: "f32[2,3] i64[]". Results are "out", then "out1",
  // "out2" for a backward kernel's further results.
  const char *operands;
  const char *result;
  std::function<void(Kernel &)> attributes;
  const char *message;
  // >= 0: the result starts where that operand does (in place, or a partial overlap when their
  // sizes differ).
  int resultAt = -1;
  // >= 0: result 1 starts where that operand does; kOnResult0: where result 0 does.
  int result1At = -1;
};

constexpr int kOnResult0 = -2;

struct Operand {
  DType dtype;
  Shape shape;
};

std::vector<Operand> parseOperands(const std::string &text) {
  std::vector<Operand> operands;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t open = word.find('[');
    Operand operand{DTYPE_UNSPECIFIED, {}};
    for (DType dtype : {F32, F16, BF16, F64, I64, I32, BOOL})
      if (dtypeName(dtype) == word.substr(0, open))
        operand.dtype = dtype;
    std::istringstream dims(word.substr(open + 1, word.size() - open - 2));
    for (std::string dim; std::getline(dims, dim, ',');)
      operand.shape.push_back(std::stoll(dim));
    operands.push_back(operand);
  }
  return operands;
}

void PrintTo(const OpCase &c, std::ostream *os) { *os << c.name; }

Schedule opSchedule(const OpCase &c) {
  ScheduleBuilder b;
  std::vector<uint32_t> ids;
  std::vector<Operand> operands = parseOperands(c.operands);
  for (size_t i = 0; i < operands.size(); ++i)
    ids.push_back(b.buffer("in" + std::to_string(i), DEVICE, operands[i].dtype, operands[i].shape));
  std::vector<uint32_t> results;
  std::vector<Operand> outs = parseOperands(c.result);
  for (size_t i = 0; i < outs.size(); ++i)
    results.push_back(
        b.buffer(i == 0 ? "out" : "out" + std::to_string(i), DEVICE, outs[i].dtype, outs[i].shape));
  auto place = [&](uint32_t result, uint32_t at) {
    b.schedule.mutable_buffers(static_cast<int>(result))
        ->set_offset(b.schedule.buffers(static_cast<int>(at)).offset());
  };
  if (c.resultAt >= 0)
    place(results.at(0), ids[c.resultAt]);
  if (c.result1At != -1)
    place(results.at(1), c.result1At == kOnResult0 ? results[0] : ids[c.result1At]);
  Kernel &k = b.kernel(c.op, "k", ids, results.at(0));
  for (size_t i = 1; i < results.size(); ++i)
    k.add_results(results[i]);
  if (c.attributes)
    c.attributes(k);
  return b.schedule;
}

class OpRuleTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpRuleTest, Verifies) {
  Schedule s = opSchedule(GetParam());
  if (!GetParam().message) {
    EXPECT_NO_THROW(verifySchedule(s)) << errorOf([&] { verifySchedule(s); });
    return;
  }
  EXPECT_THAT(errorOf([&] { verifySchedule(s); }),
              HasSubstr(std::string("kernel 0 'k' (") + OpKind_Name(GetParam().op) +
                        "): " + GetParam().message));
}

std::function<void(Kernel &)> axis(int64_t a) {
  return [=](Kernel &k) { k.mutable_axis()->set_axis(a); };
}
std::function<void(Kernel &)> reduceAxes(std::vector<int64_t> axes, bool keepdims) {
  return [=](Kernel &k) {
    for (int64_t a : axes)
      k.mutable_reduce()->add_axes(a);
    k.mutable_reduce()->set_keepdims(keepdims);
  };
}
std::function<void(Kernel &)> sliceBy(std::vector<int64_t> starts, std::vector<int64_t> steps) {
  return [=](Kernel &k) {
    for (int64_t v : starts)
      k.mutable_slice()->add_starts(v);
    for (int64_t v : steps)
      k.mutable_slice()->add_steps(v);
  };
}
std::function<void(Kernel &)> norm(int64_t a) {
  return [=](Kernel &k) {
    k.mutable_norm()->set_axis(a);
    k.mutable_norm()->set_epsilon(1e-5f);
  };
}
std::function<void(Kernel &)> attention(bool causal, bool alibi = false, bool bshd = false) {
  return [=](Kernel &k) {
    k.mutable_attention()->set_causal(causal);
    k.mutable_attention()->set_scale(0.125f);
    k.mutable_attention()->set_alibi(alibi);
    if (bshd)
      k.mutable_attention()->set_layout(AttentionAttributes::BSHD);
  };
}
const std::function<void(Kernel &)> kTrilu = [](Kernel &k) { k.mutable_trilu()->set_k(1); };
std::function<void(Kernel &)> cumsum(int64_t a) {
  return [=](Kernel &k) { k.mutable_cumsum()->set_axis(a); };
}
const std::function<void(Kernel &)> kRotary = [](Kernel &k) { k.mutable_rotary(); };
const std::function<void(Kernel &)> kGelu = [](Kernel &k) { k.mutable_gelu(); };
const std::function<void(Kernel &)> kCrossEntropy = [](Kernel &k) {
  k.mutable_cross_entropy()->set_ignore_index(-100);
};
const std::function<void(Kernel &)> kNone;

const char *const kValid = nullptr;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

const OpCase kOpCases[] = {
    // Binary arithmetic.
    {"SubBroadcast", SUB, "f32[2,3] f32[3]", "f32[2,3]", kNone, kValid},
    {"DivI64", DIV, "i64[4] i64[1]", "i64[4]", kNone, kValid},
    {"PowScalar", POW, "f32[2,2] f32[]", "f32[2,2]", kNone, kValid},
    {"SubMixedDTypes", SUB, "f32[2] i64[2]", "f32[2]", kNone,
     "operand 1 (buffer 1 'in1') is i64 but operand 0 (buffer 0 'in0') is f32; SUB needs one "
     "dtype for its operands and result"},
    {"SubResultDType", SUB, "i64[2] i64[2]", "f32[2]", kNone,
     "result (buffer 2 'out') is f32 but operand 0 (buffer 0 'in0') is i64"},
    {"SubI32", SUB, "i32[2] i32[2]", "i32[2]", kNone,
     "operand 0 (buffer 0 'in0') is i32; SUB takes f32 or i64"},
    {"PowI64", POW, "i64[2] i64[2]", "i64[2]", kNone,
     "operand 0 (buffer 0 'in0') is i64; POW takes f32"},
    {"AddI64", ADD, "i64[2] i64[2]", "i64[2]", kNone, kValid},
    {"MulI32", MUL, "i32[2] i32[2]", "i32[2]", kNone,
     "operand 0 (buffer 0 'in0') is i32; MUL takes f32 or i64"},
    {"DivDoesNotBroadcast", DIV, "f32[2,3] f32[2]", "f32[2,3]", kNone,
     "operand shapes [2, 3] and [2] do not broadcast"},
    {"SubResultShape", SUB, "f32[2,3] f32[3]", "f32[3,2]", kNone,
     "result shape [3, 2] should be [2, 3]"},
    {"SubWithAttributes", SUB, "f32[2] f32[2]", "f32[2]", axis(0),
     "has axis attributes, which SUB does not take"},
    {"SubOneOperand", SUB, "f32[2]", "f32[2]", kNone,
     "has 1 operands and 1 results; SUB takes 2 operands and 1 result"},
    // Unary.
    {"NegI64", NEG, "i64[3]", "i64[3]", kNone, kValid},
    {"ErfF32", ERF, "f32[2,0]", "f32[2,0]", kNone, kValid},
    {"SqrtI64", SQRT, "i64[3]", "i64[3]", kNone,
     "operand 0 (buffer 0 'in0') is i64; SQRT takes f32"},
    {"TanhResultF64", TANH, "f32[3]", "f64[3]", kNone,
     "result (buffer 1 'out') is f64; TANH takes f32"},
    {"ExpShape", EXP, "f32[2]", "f32[3]", kNone, "result shape [3] should be [2]"},
    {"ReciprocalTwoOperands", RECIPROCAL, "f32[2] f32[2]", "f32[2]", kNone,
     "has 2 operands and 1 results; RECIPROCAL takes 1 operands and 1 result"},
    // Comparisons.
    {"LessI64Broadcast", LESS, "i64[2,1] i64[3]", "bool[2,3]", kNone, kValid},
    {"EqualF32", EQUAL, "f32[3] f32[3]", "bool[3]", kNone, kValid},
    {"EqualResultF32", EQUAL, "f32[3] f32[3]", "f32[3]", kNone,
     "result (buffer 2 'out') is f32; EQUAL takes bool results"},
    {"EqualMixed", EQUAL, "f32[3] i64[3]", "bool[3]", kNone,
     "operand 1 (buffer 1 'in1') is i64 but operand 0 (buffer 0 'in0') is f32; EQUAL needs one "
     "dtype for both operands"},
    {"LessBool", LESS, "bool[3] bool[3]", "bool[3]", kNone,
     "operand 0 (buffer 0 'in0') is bool; LESS takes f32 or i64"},
    {"LessShapes", LESS, "f32[3] f32[2]", "bool[3]", kNone,
     "operand shapes [3] and [2] do not broadcast"},
    // WHERE.
    {"WhereBroadcast", WHERE, "bool[2,1] i64[3] i64[2,3]", "i64[2,3]", kNone, kValid},
    {"WhereF16", WHERE, "bool[] f16[2] f16[2]", "f16[2]", kNone, kValid},
    {"WhereConditionF32", WHERE, "f32[2] f32[2] f32[2]", "f32[2]", kNone,
     "operand 0 (buffer 0 'in0') is f32; WHERE takes bool conditions"},
    {"WhereMixed", WHERE, "bool[2] f32[2] i64[2]", "f32[2]", kNone,
     "operand 2 (buffer 2 'in2') is i64 but operand 1 (buffer 1 'in1') is f32; WHERE needs one "
     "dtype for x, y and the result"},
    {"WhereShapes", WHERE, "bool[2] f32[3] f32[1]", "f32[3]", kNone,
     "operand shapes [2], [3] and [1] do not broadcast"},
    {"WhereResultShape", WHERE, "bool[2,1] f32[3] f32[1]", "f32[3]", kNone,
     "result shape [3] should be [2, 3]"},
    {"WhereTwoOperands", WHERE, "bool[2] f32[2]", "f32[2]", kNone,
     "has 2 operands and 1 results; WHERE takes 3 operands and 1 result"},
    // CAST.
    {"CastF32ToBool", CAST, "f32[2,3]", "bool[2,3]", kNone, kValid},
    {"CastBoolToI32", CAST, "bool[4]", "i32[4]", kNone, kValid},
    {"CastI64ToF64", CAST, "i64[4]", "f64[4]", kNone, kValid},
    {"CastFromF16", CAST, "f16[4]", "f32[4]", kNone,
     "operand 0 (buffer 0 'in0') is f16; CAST takes f32, bf16, f64, i64, i32 or bool"},
    {"CastToF16", CAST, "f32[4]", "f16[4]", kNone,
     "result (buffer 1 'out') is f16; CAST takes f32, bf16, f64, i64, i32 or bool"},
    {"CastShape", CAST, "f32[4]", "i64[2,2]", kNone, "result shape [2, 2] should be [4]"},
    // SOFTMAX.
    {"SoftmaxAxis1", SOFTMAX, "f32[2,3]", "f32[2,3]", axis(1), kValid},
    {"SoftmaxNoAttributes", SOFTMAX, "f32[2,3]", "f32[2,3]", kNone, "has no axis attributes"},
    {"SoftmaxWrongAttributes", SOFTMAX, "f32[2,3]", "f32[2,3]", reduceAxes({1}, false),
     "has reduce attributes; SOFTMAX takes axis attributes"},
    {"SoftmaxAxisOutOfRange", SOFTMAX, "f32[2,3]", "f32[2,3]", axis(2),
     "axis.axis 2 is out of range for operand shape [2, 3] (rank 2)"},
    {"SoftmaxNegativeAxis", SOFTMAX, "f32[2,3]", "f32[2,3]", axis(-1),
     "axis.axis -1 is out of range for operand shape [2, 3] (rank 2)"},
    {"SoftmaxI64", SOFTMAX, "i64[2]", "i64[2]", axis(0),
     "operand 0 (buffer 0 'in0') is i64; SOFTMAX takes f32"},
    // REDUCE_*.
    {"ReduceKeepdims", REDUCE_SUM, "f32[2,3,4]", "f32[1,3,1]", reduceAxes({0, 2}, true), kValid},
    {"ReduceDrop", REDUCE_MEAN, "f32[2,3,4]", "f32[2,4]", reduceAxes({1}, false), kValid},
    {"ReduceAll", REDUCE_MEAN, "f32[2,3,4]", "f32[]", reduceAxes({}, false), kValid},
    {"ReduceAllKeep", REDUCE_SUM, "f32[2,3,4]", "f32[1,1,1]", reduceAxes({}, true), kValid},
    {"ReduceUnsorted", REDUCE_SUM, "f32[2,3,4]", "f32[3]", reduceAxes({2, 0}, false),
     "reduce.axes [2, 0] must be sorted, unique and within the operand's rank 3 (operand shape "
     "[2, 3, 4])"},
    {"ReduceDuplicate", REDUCE_SUM, "f32[2,3,4]", "f32[2,4]", reduceAxes({1, 1}, false),
     "reduce.axes [1, 1] must be sorted, unique"},
    {"ReduceOutOfRange", REDUCE_SUM, "f32[2,3,4]", "f32[2,3]", reduceAxes({3}, false),
     "reduce.axes [3] must be sorted, unique and within the operand's rank 3"},
    {"ReduceKeepdimsResult", REDUCE_MEAN, "f32[2,3,4]", "f32[2,4]", reduceAxes({1}, true),
     "result shape [2, 4] should be [2, 1, 4]"},
    {"ReduceNoAttributes", REDUCE_MEAN, "f32[2]", "f32[]", kNone, "has no reduce attributes"},
    // GATHER.
    {"GatherAxis1", GATHER, "f32[3,5,2] i64[4,2]", "f32[3,4,2,2]", axis(1), kValid},
    {"GatherScalarIndexI32", GATHER, "i64[5,3] i32[]", "i64[3]", axis(0), kValid},
    {"GatherIndicesF32", GATHER, "f32[5,3] f32[2]", "f32[2,3]", axis(0),
     "operand 1 (buffer 1 'in1') is f32; GATHER takes i64 or i32 indices"},
    {"GatherResultDType", GATHER, "f32[5,3] i64[2]", "i64[2,3]", axis(0),
     "result (buffer 2 'out') is i64 but operand 0 (buffer 0 'in0') is f32; GATHER needs one "
     "dtype for data and the result"},
    {"GatherShape", GATHER, "f32[3,5,2] i64[4,2]", "f32[3,4,2]", axis(1),
     "result shape [3, 4, 2] should be [3, 4, 2, 2]"},
    {"GatherAxis", GATHER, "f32[3,5,2] i64[4]", "f32[3,5,2]", axis(3),
     "axis.axis 3 is out of range for operand shape [3, 5, 2] (rank 3)"},
    // CONCAT.
    {"ConcatThree", CONCAT, "f32[2,1,3] f32[2,4,3] f32[2,0,3]", "f32[2,5,3]", axis(1), kValid},
    {"ConcatOneI64", CONCAT, "i64[2]", "i64[2]", axis(0), kValid},
    {"ConcatMismatch", CONCAT, "f32[2,3] f32[3,3]", "f32[2,6]", axis(1),
     "operand 1 shape [3, 3] does not match operand 0 shape [2, 3] outside axis 1"},
    {"ConcatRank", CONCAT, "f32[2,3] f32[2,3,1]", "f32[2,6]", axis(1),
     "operand 1 shape [2, 3, 1] does not match operand 0 shape [2, 3] outside axis 1"},
    {"ConcatResult", CONCAT, "f32[2,3] f32[2,3]", "f32[2,5]", axis(1),
     "result shape [2, 5] should be [2, 6]"},
    {"ConcatDTypes", CONCAT, "f32[2] i32[2]", "f32[4]", axis(0),
     "operand 1 (buffer 1 'in1') is i32 but operand 0 (buffer 0 'in0') is f32; CONCAT needs one "
     "dtype"},
    // Each operand fits in memory (one byte an element); their concatenation's extent does not
    // fit in int64.
    {"ConcatExtentOverflows", CONCAT, "bool[4611686018427387904] bool[4611686018427387904]",
     "bool[1]", axis(0), "the concatenated extent along axis 0 overflows"},
    {"ConcatNoOperands", CONCAT, "", "f32[2]", axis(0),
     "has 0 operands and 1 results; CONCAT takes 1 or more operands and 1 result"},
    // SLICE.
    {"SliceForward", SLICE, "f32[10]", "f32[3]", sliceBy({1}, {3}), kValid},
    {"SliceNegativeSteps", SLICE, "i64[5,4]", "i64[3,4]", sliceBy({4, 3}, {-2, -1}), kValid},
    {"SliceEmptyAtEnd", SLICE, "f32[5]", "f32[0]", sliceBy({5}, {1}), kValid},
    {"SliceEmptyBeforeStart", SLICE, "f32[5,0]", "f32[0,0]", sliceBy({-1, -1}, {-1, -1}), kValid},
    {"SliceEmptyFarOut", SLICE, "f32[5]", "f32[0]", sliceBy({6}, {1}),
     "slice.starts[0] = 6 is out of range for dimension 0 of the operand [5]"},
    {"SliceZeroStep", SLICE, "f32[5,4]", "f32[5,4]", sliceBy({0, 0}, {1, 0}),
     "slice.steps [1, 0] has a zero step in dimension 1"},
    {"SliceStartPastEnd", SLICE, "f32[5]", "f32[1]", sliceBy({5}, {1}),
     "slice.starts[0] = 5 is out of range for dimension 0 of the operand [5]"},
    {"SliceNegativeStart", SLICE, "f32[5]", "f32[1]", sliceBy({-1}, {1}),
     "slice.starts[0] = -1 is out of range for dimension 0 of the operand [5]"},
    {"SliceReadsPastEnd", SLICE, "f32[10]", "f32[4]", sliceBy({1}, {3}),
     "result shape [4] reads past the operand [10] in dimension 0: 4 elements from 1 in steps of "
     "3"},
    {"SliceReadsBelowZero", SLICE, "f32[2,5]", "f32[2,3]", sliceBy({0, 1}, {1, -1}),
     "result shape [2, 3] reads past the operand [2, 5] in dimension 1: 3 elements from 1 in "
     "steps of -1"},
    {"SliceStepOverflows", SLICE, "f32[5]", "f32[3]", sliceBy({0}, {kMax}),
     "result shape [3] reads past the operand [5] in dimension 0: 3 elements from 0 in steps of "
     "9223372036854775807"},
    {"SliceAttributeCount", SLICE, "f32[2,3]", "f32[2,3]", sliceBy({0}, {1}),
     "slice.starts [0] and slice.steps [1] must each have one entry per dimension of the operand "
     "[2, 3]"},
    {"SliceResultRank", SLICE, "f32[2,3]", "f32[6]", sliceBy({0, 0}, {1, 1}),
     "result shape [6] has rank 1, but the operand [2, 3] has rank 2"},
    // EXPAND.
    {"Expand", EXPAND, "bool[3,1]", "bool[2,3,4]", kNone, kValid},
    {"ExpandDoesNotBroadcast", EXPAND, "f32[3]", "f32[2,4]", kNone,
     "operand shape [3] does not broadcast to the result shape [2, 4]"},
    {"ExpandDType", EXPAND, "f32[3]", "i64[2,3]", kNone,
     "result (buffer 1 'out') is i64 but operand 0 (buffer 0 'in0') is f32"},
    // CUMSUM.
    {"CumSumF32", CUMSUM, "f32[2,3]", "f32[2,3]", cumsum(1), kValid},
    {"CumSumI64", CUMSUM, "i64[4]", "i64[4]", cumsum(0), kValid},
    {"CumSumAxisOutOfRange", CUMSUM, "f32[2,3]", "f32[2,3]", cumsum(2),
     "cumsum.axis 2 is out of range for operand shape [2, 3] (rank 2)"},
    {"CumSumResultShape", CUMSUM, "f32[2,3]", "f32[3,2]", cumsum(0),
     "result shape [3, 2] should be [2, 3]"},
    {"CumSumI32", CUMSUM, "i32[2]", "i32[2]", cumsum(0),
     "operand 0 (buffer 0 'in0') is i32; CUMSUM takes f32 or i64"},
    {"CumSumNoAttributes", CUMSUM, "f32[2]", "f32[2]", kNone, "has no cumsum attributes"},
    // TRILU.
    {"TriluBool", TRILU, "bool[2,3,3]", "bool[2,3,3]", kTrilu, kValid},
    {"TriluRank1", TRILU, "f32[3]", "f32[3]", kTrilu,
     "operand shape [3] has rank < 2; TRILU works on the last two dimensions"},
    {"TriluNoAttributes", TRILU, "f32[3,3]", "f32[3,3]", kNone, "has no trilu attributes"},
    // LAYER_NORM.
    {"LayerNormLast", LAYER_NORM, "f32[2,3,4] f32[4] f32[4]", "f32[2,3,4]", norm(2), kValid},
    {"LayerNormAxis1", LAYER_NORM, "f32[2,3,4] f32[1,4]", "f32[2,3,4]", norm(1), kValid},
    {"LayerNormScale", LAYER_NORM, "f32[2,3,4] f32[3]", "f32[2,3,4]", norm(2),
     "scale [3] does not broadcast to the normalised dimensions [4] of x [2, 3, 4]"},
    {"LayerNormBias", LAYER_NORM, "f32[2,3,4] f32[4] f32[2,4]", "f32[2,3,4]", norm(1),
     "bias [2, 4] does not broadcast to the normalised dimensions [3, 4] of x [2, 3, 4]"},
    {"LayerNormAxis", LAYER_NORM, "f32[2,3,4] f32[4]", "f32[2,3,4]", norm(3),
     "norm.axis 3 is out of range for operand shape [2, 3, 4] (rank 3)"},
    {"LayerNormWrongAttributes", LAYER_NORM, "f32[4] f32[4]", "f32[4]", axis(0),
     "has axis attributes; LAYER_NORM takes norm attributes"},
    // RMS_NORM.
    {"RmsNormAxisUnset", RMS_NORM, "f32[2,3,4] f32[4]", "f32[2,3,4]", norm(0), kValid},
    {"RmsNormAxisLast", RMS_NORM, "f32[2,3,4] f32[4]", "f32[2,3,4]", norm(2), kValid},
    {"RmsNormAxis1", RMS_NORM, "f32[2,3,4] f32[4]", "f32[2,3,4]", norm(1),
     "norm.axis 1 for x [2, 3, 4]: RMS_NORM normalises only the last dimension (axis 2, or 0 "
     "unset)"},
    {"RmsNormScale", RMS_NORM, "f32[2,3,4] f32[1,4]", "f32[2,3,4]", norm(2),
     "scale [1, 4] should be [4] for x [2, 3, 4]"},
    {"RmsNormBias", RMS_NORM, "f32[4] f32[4] f32[4]", "f32[4]", norm(0),
     "has 3 operands and 1 results; RMS_NORM takes 2 operands and 1 result"},
    {"RmsNormScalar", RMS_NORM, "f32[] f32[1]", "f32[]", norm(0),
     "x is a scalar; RMS_NORM normalises the last dimension"},
    // ROTARY.
    {"RotaryBroadcast", ROTARY, "f32[2,3,5,8] f32[5,8] f32[1,1,5,8]", "f32[2,3,5,8]", kRotary,
     kValid},
    {"RotaryOddDim", ROTARY, "f32[5,7] f32[5,7] f32[5,7]", "f32[5,7]", kRotary,
     "x [5, 7] has an odd last dimension 7; rotary pairs need an even one"},
    {"RotaryRank1", ROTARY, "f32[8] f32[8] f32[8]", "f32[8]", kRotary,
     "x [8] should be [..., S, D] (rank >= 2)"},
    {"RotaryCos", ROTARY, "f32[5,8] f32[4,8] f32[5,8]", "f32[5,8]", kRotary,
     "cos [4, 8] does not broadcast to x [5, 8]"},
    {"RotarySin", ROTARY, "f32[5,8] f32[5,8] f32[2,5,8]", "f32[5,8]", kRotary,
     "sin [2, 5, 8] does not broadcast to x [5, 8]"},
    {"RotaryNoAttributes", ROTARY, "f32[5,8] f32[5,8] f32[5,8]", "f32[5,8]", kNone,
     "has no rotary attributes"},
    // ATTENTION.
    {"AttentionGqaMask", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[3,5]",
     "f32[2,4,3,6]", attention(true), kValid},
    {"AttentionNoMask", ATTENTION, "f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8]", "f32[1,2,3,8]",
     attention(false), kValid},
    {"AttentionAlibi", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[4]", "f32[2,4,3,6]",
     attention(true, true), kValid},
    {"AttentionMaskAndAlibi", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[3,5] f32[4]",
     "f32[2,4,3,6]", attention(true, true), kValid},
    {"AttentionAlibiSlopesShape", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2]",
     "f32[2,4,3,6]", attention(true, true), "alibi slopes [2] should be [4] (one per query head)"},
    {"AttentionAlibiWithoutSlopes", ATTENTION, "f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8]",
     "f32[1,2,3,8]", attention(true, true),
     "attention.alibi is set but there is no slopes operand (the last, after operand 2)"},
    {"AttentionTwoMasksWithoutAlibi", ATTENTION,
     "f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8] f32[3,3] f32[2]", "f32[1,2,3,8]", attention(true),
     "5 operands; without attention.alibi ATTENTION takes at most 4 (with it, the ALiBi slopes "
     "come last)"},
    {"AttentionGradAlibi", ATTENTION_GRAD,
     "f32[1,2,3,8] f32[1,1,3,8] f32[1,1,3,4] f32[1,2,3,4] f32[2]",
     "f32[1,2,3,8] f32[1,1,3,8] f32[1,1,3,4]", attention(true, true), kValid},
    // attention.layout BSHD: q [B, S, Hq, D], k [B, T, Hkv, D], v [B, T, Hkv, Dv].
    {"AttentionBshd", ATTENTION, "f32[2,3,4,8] f32[2,5,2,8] f32[2,5,2,6] f32[3,5]", "f32[2,3,4,6]",
     attention(true, false, true), kValid},
    {"AttentionBshdReadAsBhsd", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6]",
     "f32[2,4,3,6]", attention(true, false, true),
     "q has 3 heads and k, v have 5; the query heads must be a multiple"},
    {"AttentionBshdKeyLength", ATTENTION, "f32[2,3,4,8] f32[2,5,2,8] f32[2,4,2,6]",
     "f32[2,3,4,6]", attention(true, false, true),
     "q [2, 3, 4, 8], k [2, 5, 2, 8] and v [2, 4, 2, 6] do not fit [B, S, Hq, D], [B, T, Hkv, D], "
     "[B, T, Hkv, Dv]"},
    {"AttentionBshdResult", ATTENTION, "f32[2,3,4,8] f32[2,5,2,8] f32[2,5,2,6]", "f32[2,4,3,6]",
     attention(true, false, true), "result shape [2, 4, 3, 6] should be [2, 3, 4, 6]"},
    {"AttentionGradBshd", ATTENTION_GRAD,
     "f32[1,3,2,8] f32[1,3,1,8] f32[1,3,1,4] f32[1,3,2,4] f32[2]",
     "f32[1,3,2,8] f32[1,3,1,8] f32[1,3,1,4]", attention(true, true, true), kValid},
    // CROSS_ENTROPY.
    {"CrossEntropy", CROSS_ENTROPY, "f32[2,3,7] i64[2,3]", "f32[]",
     [](Kernel &k) { k.mutable_cross_entropy()->set_ignore_index(-100); }, kValid},
    {"CrossEntropyLabelShape", CROSS_ENTROPY, "f32[2,3,7] i64[2,7]", "f32[]",
     [](Kernel &k) { k.mutable_cross_entropy()->set_ignore_index(-100); },
     "labels [2, 7] must be the logits' shape [2, 3, 7] without its last (vocabulary) dimension"},
    {"CrossEntropyLabelDType", CROSS_ENTROPY, "f32[2,7] i32[2]", "f32[]",
     [](Kernel &k) { k.mutable_cross_entropy()->set_ignore_index(-100); },
     "operand 1 (buffer 1 'in1') is i32; CROSS_ENTROPY takes i64 labels"},
    {"CrossEntropyNoAttributes", CROSS_ENTROPY, "f32[2,7] i64[2]", "f32[]", kNone,
     "has no cross_entropy attributes"},
    {"AttentionZeroScale", ATTENTION, "f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8]", "f32[1,2,3,8]",
     [](Kernel &k) { k.mutable_attention()->set_causal(true); },
     "attention.scale is 0; it must be finite and non-zero"},
    {"AttentionRank", ATTENTION, "f32[4,3,8] f32[4,3,8] f32[4,3,8]", "f32[4,3,8]", attention(false),
     "q [4, 3, 8], k [4, 3, 8] and v [4, 3, 8] must be rank 4"},
    {"AttentionHeads", ATTENTION, "f32[1,3,2,8] f32[1,2,2,8] f32[1,2,2,8]", "f32[1,3,2,8]",
     attention(false),
     "q has 3 heads and k, v have 2; the query heads must be a multiple of a positive number of "
     "key/value heads"},
    {"AttentionNoKvHeads", ATTENTION, "f32[1,0,2,8] f32[1,0,2,8] f32[1,0,2,8]", "f32[1,0,2,8]",
     attention(false), "q has 0 heads and k, v have 0"},
    {"AttentionValueLength", ATTENTION, "f32[1,2,3,8] f32[1,2,5,8] f32[1,2,4,8]", "f32[1,2,3,8]",
     attention(false),
     "q [1, 2, 3, 8], k [1, 2, 5, 8] and v [1, 2, 4, 8] do not fit [B, Hq, S, D], [B, Hkv, T, D], "
     "[B, Hkv, T, Dv]"},
    {"AttentionKeyDim", ATTENTION, "f32[1,2,3,8] f32[1,2,5,4] f32[1,2,5,8]", "f32[1,2,3,8]",
     attention(false),
     "q [1, 2, 3, 8], k [1, 2, 5, 4] and v [1, 2, 5, 8] do not fit [B, Hq, S, D]"},
    {"AttentionMask", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[3,4]", "f32[2,4,3,6]",
     attention(true), "mask [3, 4] does not broadcast to the scores [2, 4, 3, 5]"},
    {"AttentionResult", ATTENTION, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6]", "f32[2,4,3,8]",
     attention(true), "result shape [2, 4, 3, 8] should be [2, 4, 3, 6]"},
    {"AttentionNoAttributes", ATTENTION, "f32[1,1,1,2] f32[1,1,1,2] f32[1,1,1,2]", "f32[1,1,1,2]",
     kNone, "has no attention attributes"},
    {"AttentionBoolMask", ATTENTION, "f32[1,1,1,2] f32[1,1,1,2] f32[1,1,1,2] bool[1,1]",
     "f32[1,1,1,2]", attention(false), "operand 3 (buffer 3 'in3') is bool; ATTENTION takes f32"},
    // GELU, SWIGLU.
    {"Gelu", GELU, "f32[2,3]", "f32[2,3]", kGelu, kValid},
    {"GeluNoAttributes", GELU, "f32[2,3]", "f32[2,3]", kNone, "has no gelu attributes"},
    {"Swiglu", SWIGLU, "f32[2,3] f32[2,3]", "f32[2,3]", kNone, kValid},
    {"SwigluShapes", SWIGLU, "f32[2,3] f32[3]", "f32[2,3]", kNone,
     "gate [2, 3] and up [3] must have one shape"},
    {"SwigluWithAttributes", SWIGLU, "f32[3] f32[3]", "f32[3]", kGelu,
     "has gelu attributes, which SWIGLU does not take"},
    // Aliasing: exactly in place where the op allows it, never a partial overlap.
    // ACCUMULATE: f32 of one shape, no broadcasting; in place on the accumulator (operand 0).
    {"Accumulate", ACCUMULATE, "f32[2,3] f32[2,3]", "f32[2,3]", kNone, kValid},
    {"AccumulateInPlace", ACCUMULATE, "f32[2,3] f32[2,3]", "f32[2,3]", kNone, kValid, 0},
    {"AccumulateBroadcast", ACCUMULATE, "f32[2,3] f32[3]", "f32[2,3]", kNone,
     "operand shapes [2, 3] and [3] differ; ACCUMULATE adds tensors of one shape (no "
     "broadcasting)"},
    {"AccumulateResultShape", ACCUMULATE, "f32[6] f32[6]", "f32[2,3]", kNone,
     "result shape [2, 3] should be [6]"},
    {"AccumulateI64", ACCUMULATE, "i64[2] i64[2]", "i64[2]", kNone,
     "operand 0 (buffer 0 'in0') is i64; ACCUMULATE takes f32"},
    {"AccumulateAttributes", ACCUMULATE, "f32[2] f32[2]", "f32[2]", axis(0),
     "has axis attributes, which ACCUMULATE does not take"},
    {"SoftmaxInPlace", SOFTMAX, "f32[2,3]", "f32[2,3]", axis(0), kValid, 0},
    {"CastInPlaceSameSize", CAST, "f32[4]", "i32[4]", kNone, kValid, 0},
    {"WhereInPlaceOnY", WHERE, "bool[2] f32[2] f32[2]", "f32[2]", kNone, kValid, 2},
    {"RotaryInPlace", ROTARY, "f32[2,4] f32[2,4] f32[2,4]", "f32[2,4]", kRotary, kValid, 0},
    {"CastWidening", CAST, "f32[4]", "f64[4]", kNone,
     "result buffer 1 'out' overlaps operand buffer 0 'in0'", 0},
    {"ReduceInPlace", REDUCE_SUM, "f32[2,1]", "f32[2,1]", reduceAxes({1}, true),
     "result buffer 1 'out' overlaps operand buffer 0 'in0'", 0},
    {"GatherOverData", GATHER, "f32[4,2] i64[4]", "f32[4,2]", axis(0),
     "result buffer 2 'out' overlaps operand buffer 0 'in0'", 0},
    {"ConcatOverOperand", CONCAT, "f32[2] f32[2]", "f32[4]", axis(0),
     "result buffer 2 'out' overlaps operand buffer 1 'in1'", 1},
    {"SliceOverOperand", SLICE, "f32[4]", "f32[4]", sliceBy({3}, {-1}),
     "result buffer 1 'out' overlaps operand buffer 0 'in0'", 0},
    {"AttentionOverQuery", ATTENTION, "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]", "f32[1,1,2,2]",
     attention(false), "result buffer 3 'out' overlaps operand buffer 0 'in0'", 0},

    // --- backward kernels ---------------------------------------------------------------------
    // CROSS_ENTROPY_GRAD (labels, dloss, logits) -> dlogits.
    {"CrossEntropyGrad", CROSS_ENTROPY_GRAD, "i64[2,3] f32[] f32[2,3,7]", "f32[2,3,7]",
     kCrossEntropy, kValid},
    {"CrossEntropyGradInPlace", CROSS_ENTROPY_GRAD, "i64[2] f32[] f32[2,7]", "f32[2,7]",
     kCrossEntropy, kValid, 2},
    {"CrossEntropyGradForwardOperands", CROSS_ENTROPY_GRAD, "f32[2,7] i64[2]", "f32[2,7]",
     kCrossEntropy,
     "has 2 operands and 1 results; CROSS_ENTROPY_GRAD takes 3 operands and 1 result"},
    {"CrossEntropyGradLabelsI32", CROSS_ENTROPY_GRAD, "i32[2] f32[] f32[2,7]", "f32[2,7]",
     kCrossEntropy, "operand 0 (buffer 0 'in0') is i32; CROSS_ENTROPY_GRAD takes i64 labels"},
    {"CrossEntropyGradDlossF64", CROSS_ENTROPY_GRAD, "i64[2] f64[] f32[2,7]", "f32[2,7]",
     kCrossEntropy, "operand 1 (buffer 1 'in1') is f64; CROSS_ENTROPY_GRAD takes f32"},
    {"CrossEntropyGradDlossShape", CROSS_ENTROPY_GRAD, "i64[2] f32[1] f32[2,7]", "f32[2,7]",
     kCrossEntropy, "dloss [1] should be a scalar []"},
    {"CrossEntropyGradLabelShape", CROSS_ENTROPY_GRAD, "i64[3] f32[] f32[2,7]", "f32[2,7]",
     kCrossEntropy,
     "labels [3] must be the logits' shape [2, 7] without its last (vocabulary) dimension"},
    {"CrossEntropyGradResultShape", CROSS_ENTROPY_GRAD, "i64[2] f32[] f32[2,7]", "f32[2,6]",
     kCrossEntropy, "result shape [2, 6] should be [2, 7]"},
    {"CrossEntropyGradNoAttributes", CROSS_ENTROPY_GRAD, "i64[2] f32[] f32[2,7]", "f32[2,7]", kNone,
     "has no cross_entropy attributes"},
    // SOFTMAX_GRAD (y, dy) -> dx.
    {"SoftmaxGradMiddleAxis", SOFTMAX_GRAD, "f32[2,3,4] f32[2,3,4]", "f32[2,3,4]", axis(1), kValid},
    {"SoftmaxGradInPlaceOnDy", SOFTMAX_GRAD, "f32[2,3] f32[2,3]", "f32[2,3]", axis(1), kValid, 1},
    {"SoftmaxGradDyShape", SOFTMAX_GRAD, "f32[2,3] f32[2,4]", "f32[2,3]", axis(1),
     "dy [2, 4] should be [2, 3] (the shape of y)"},
    {"SoftmaxGradAxis", SOFTMAX_GRAD, "f32[2,3] f32[2,3]", "f32[2,3]", axis(2),
     "axis.axis 2 is out of range for operand shape [2, 3] (rank 2)"},
    {"SoftmaxGradResultShape", SOFTMAX_GRAD, "f32[2,3] f32[2,3]", "f32[6]", axis(1),
     "result shape [6] should be [2, 3]"},
    {"SoftmaxGradNoAttributes", SOFTMAX_GRAD, "f32[2,3] f32[2,3]", "f32[2,3]", kNone,
     "has no axis attributes"},
    // RMS_NORM_GRAD (x, scale, dy) -> (dx, dscale).
    {"RmsNormGrad", RMS_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]", "f32[2,3,4] f32[4]", norm(2),
     kValid},
    {"RmsNormGradInPlaceOnDy", RMS_NORM_GRAD, "f32[3,4] f32[4] f32[3,4]", "f32[3,4] f32[4]",
     norm(0), kValid, 2},
    {"RmsNormGradOneResult", RMS_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]", "f32[2,4]", norm(1),
     "has 3 operands and 1 results; RMS_NORM_GRAD takes 3 operands and 2 results"},
    {"RmsNormGradDscaleShape", RMS_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]", "f32[2,3,4] f32[1,4]",
     norm(2), "result 1 (dscale) shape [1, 4] should be [4]"},
    {"RmsNormGradDxShape", RMS_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]", "f32[6,4] f32[4]",
     norm(2), "result 0 (dx) shape [6, 4] should be [2, 3, 4]"},
    {"RmsNormGradDyShape", RMS_NORM_GRAD, "f32[2,3,4] f32[4] f32[3,4]", "f32[2,3,4] f32[4]",
     norm(2), "dy [3, 4] should be [2, 3, 4] (the shape of x)"},
    {"RmsNormGradScale", RMS_NORM_GRAD, "f32[2,3,4] f32[3] f32[2,3,4]", "f32[2,3,4] f32[3]",
     norm(2), "scale [3] should be [4] for x [2, 3, 4]"},
    {"RmsNormGradAxis", RMS_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]", "f32[2,3,4] f32[4]", norm(1),
     "norm.axis 1 for x [2, 3, 4]: RMS_NORM_GRAD normalises only the last dimension (axis 2, or "
     "0 unset)"},
    {"RmsNormGradDscaleI64", RMS_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]", "f32[2,4] i64[4]", norm(1),
     "result 1 (buffer 4 'out1') is i64; RMS_NORM_GRAD takes f32"},
    {"RmsNormGradDscaleOverScale", RMS_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]", "f32[2,4] f32[4]",
     norm(1), "result buffer 4 'out1' overlaps operand buffer 1 'in1'", -1, 1},
    // LAYER_NORM_GRAD (x, scale, dy) -> (dx, dscale, dbias).
    {"LayerNormGrad", LAYER_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]", "f32[2,3,4] f32[4] f32[4]",
     norm(2), kValid},
    {"LayerNormGradBroadcastScale", LAYER_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]",
     "f32[2,3,4] f32[3,4] f32[3,4]", norm(1), kValid},
    {"LayerNormGradInPlaceOnX", LAYER_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]",
     "f32[2,4] f32[4] f32[4]", norm(1), kValid, 0},
    {"LayerNormGradDscaleOfScaleShape", LAYER_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]",
     "f32[2,3,4] f32[4] f32[4]", norm(1), "result 1 (dscale) shape [4] should be [3, 4]"},
    {"LayerNormGradDbiasShape", LAYER_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,3,4]",
     "f32[2,3,4] f32[4] f32[3]", norm(2), "result 2 (dbias) shape [3] should be [4]"},
    {"LayerNormGradNoDbias", LAYER_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]", "f32[2,4] f32[4]",
     norm(1), "has 3 operands and 2 results; LAYER_NORM_GRAD takes 3 operands and 3 results"},
    {"LayerNormGradBiasOperand", LAYER_NORM_GRAD, "f32[2,4] f32[4] f32[4] f32[2,4]",
     "f32[2,4] f32[4] f32[4]", norm(1),
     "has 4 operands and 3 results; LAYER_NORM_GRAD takes 3 operands and 3 results"},
    {"LayerNormGradScale", LAYER_NORM_GRAD, "f32[2,3,4] f32[3] f32[2,3,4]",
     "f32[2,3,4] f32[4] f32[4]", norm(2),
     "scale [3] does not broadcast to the normalised dimensions [4] of x [2, 3, 4]"},
    {"LayerNormGradDyShape", LAYER_NORM_GRAD, "f32[2,3,4] f32[4] f32[2,4]",
     "f32[2,3,4] f32[4] f32[4]", norm(2), "dy [2, 4] should be [2, 3, 4] (the shape of x)"},
    {"LayerNormGradAxis", LAYER_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]", "f32[2,4] f32[4] f32[4]",
     norm(2), "norm.axis 2 is out of range for operand shape [2, 4] (rank 2)"},
    {"LayerNormGradWrongAttributes", LAYER_NORM_GRAD, "f32[2,4] f32[4] f32[2,4]",
     "f32[2,4] f32[4] f32[4]", axis(1),
     "has axis attributes; LAYER_NORM_GRAD takes norm attributes"},
    // ROTARY_GRAD (dy, cos, sin) -> dx.
    {"RotaryGrad", ROTARY_GRAD, "f32[2,3,5,8] f32[1,1,5,8] f32[5,8]", "f32[2,3,5,8]", kRotary,
     kValid},
    {"RotaryGradInPlace", ROTARY_GRAD, "f32[2,4] f32[2,4] f32[2,4]", "f32[2,4]", kRotary, kValid,
     0},
    {"RotaryGradOddDim", ROTARY_GRAD, "f32[5,7] f32[5,7] f32[5,7]", "f32[5,7]", kRotary,
     "dy [5, 7] has an odd last dimension 7; rotary pairs need an even one"},
    {"RotaryGradCos", ROTARY_GRAD, "f32[5,8] f32[4,8] f32[5,8]", "f32[5,8]", kRotary,
     "cos [4, 8] does not broadcast to dy [5, 8]"},
    {"RotaryGradResultShape", ROTARY_GRAD, "f32[5,8] f32[5,8] f32[5,8]", "f32[40]", kRotary,
     "result shape [40] should be [5, 8]"},
    {"RotaryGradNoAttributes", ROTARY_GRAD, "f32[5,8] f32[5,8] f32[5,8]", "f32[5,8]", kNone,
     "has no rotary attributes"},
    // ATTENTION_GRAD (q, k, v, dy [, mask]) -> (dq, dk, dv).
    {"AttentionGradGqaMask", ATTENTION_GRAD,
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2,4,3,6] f32[3,5]",
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6]", attention(true), kValid},
    {"AttentionGradNoMask", ATTENTION_GRAD, "f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8]",
     "f32[1,2,3,8] f32[1,2,3,8] f32[1,2,3,8]", attention(false), kValid},
    {"AttentionGradDkPerQueryHead", ATTENTION_GRAD,
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2,4,3,6]",
     "f32[2,4,3,8] f32[2,4,5,8] f32[2,2,5,6]", attention(true),
     "result 1 (dk) shape [2, 4, 5, 8] should be [2, 2, 5, 8]"},
    {"AttentionGradDvShape", ATTENTION_GRAD, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2,4,3,6]",
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,8]", attention(true),
     "result 2 (dv) shape [2, 2, 5, 8] should be [2, 2, 5, 6]"},
    {"AttentionGradDqShape", ATTENTION_GRAD, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2,4,3,6]",
     "f32[2,4,3,6] f32[2,2,5,8] f32[2,2,5,6]", attention(true),
     "result 0 (dq) shape [2, 4, 3, 6] should be [2, 4, 3, 8]"},
    {"AttentionGradDyShape", ATTENTION_GRAD, "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2,4,3,8]",
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6]", attention(true),
     "dy [2, 4, 3, 8] should be [2, 4, 3, 6] (the attention result's shape [B, Hq, S, Dv])"},
    {"AttentionGradMask", ATTENTION_GRAD,
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6] f32[2,4,3,6] f32[3,4]",
     "f32[2,4,3,8] f32[2,2,5,8] f32[2,2,5,6]", attention(true),
     "mask [3, 4] does not broadcast to the scores [2, 4, 3, 5]"},
    {"AttentionGradHeads", ATTENTION_GRAD, "f32[1,3,2,8] f32[1,2,2,8] f32[1,2,2,8] f32[1,3,2,8]",
     "f32[1,3,2,8] f32[1,2,2,8] f32[1,2,2,8]", attention(false),
     "q has 3 heads and k, v have 2; the query heads must be a multiple"},
    {"AttentionGradZeroScale", ATTENTION_GRAD,
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]",
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]", [](Kernel &k) { k.mutable_attention(); },
     "attention.scale is 0; it must be finite and non-zero"},
    {"AttentionGradNoDy", ATTENTION_GRAD, "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]",
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]", attention(false),
     "has 3 operands and 3 results; ATTENTION_GRAD takes 4 to 6 operands and 3 results"},
    {"AttentionGradOneResult", ATTENTION_GRAD,
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]", "f32[1,1,2,2]", attention(false),
     "has 4 operands and 1 results; ATTENTION_GRAD takes 4 to 6 operands and 3 results"},
    {"AttentionGradBoolMask", ATTENTION_GRAD,
     "f32[1,1,1,2] f32[1,1,1,2] f32[1,1,1,2] f32[1,1,1,2] bool[1,1]",
     "f32[1,1,1,2] f32[1,1,1,2] f32[1,1,1,2]", attention(false),
     "operand 4 (buffer 4 'in4') is bool; ATTENTION_GRAD takes f32"},
    {"AttentionGradDqOverQuery", ATTENTION_GRAD,
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]",
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]", attention(false),
     "result buffer 4 'out' overlaps operand buffer 0 'in0'", 0},
    {"AttentionGradDkOverDq", ATTENTION_GRAD, "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]",
     "f32[1,1,2,2] f32[1,1,2,2] f32[1,1,2,2]", attention(false),
     "result 1 (buffer 5 'out1') overlaps result 0 (buffer 4 'out')", -1, kOnResult0},
    // GELU_GRAD (x, dy) -> dx.
    {"GeluGradTanh", GELU_GRAD, "f32[2,3] f32[2,3]", "f32[2,3]",
     [](Kernel &k) { k.mutable_gelu()->set_tanh(true); }, kValid},
    {"GeluGradInPlaceOnDy", GELU_GRAD, "f32[2,3] f32[2,3]", "f32[2,3]", kGelu, kValid, 1},
    {"GeluGradDyShape", GELU_GRAD, "f32[2,3] f32[3]", "f32[2,3]", kGelu,
     "dy [3] should be [2, 3] (the shape of x)"},
    {"GeluGradI64", GELU_GRAD, "i64[3] i64[3]", "i64[3]", kGelu,
     "operand 0 (buffer 0 'in0') is i64; GELU_GRAD takes f32"},
    {"GeluGradNoAttributes", GELU_GRAD, "f32[3] f32[3]", "f32[3]", kNone, "has no gelu attributes"},
    // SWIGLU_GRAD (gate, up, dy) -> (dgate, dup).
    {"SwigluGrad", SWIGLU_GRAD, "f32[2,3] f32[2,3] f32[2,3]", "f32[2,3] f32[2,3]", kNone, kValid},
    {"SwigluGradInPlaceOnGate", SWIGLU_GRAD, "f32[2,3] f32[2,3] f32[2,3]", "f32[2,3] f32[2,3]",
     kNone, kValid, 0},
    {"SwigluGradShapes", SWIGLU_GRAD, "f32[2,3] f32[2,3] f32[3]", "f32[2,3] f32[2,3]", kNone,
     "gate [2, 3], up [2, 3] and dy [3] must have one shape"},
    {"SwigluGradDupShape", SWIGLU_GRAD, "f32[2,3] f32[2,3] f32[2,3]", "f32[2,3] f32[3,2]", kNone,
     "result 1 (dup) shape [3, 2] should be [2, 3]"},
    {"SwigluGradOneResult", SWIGLU_GRAD, "f32[2,3] f32[2,3] f32[2,3]", "f32[2,3]", kNone,
     "has 3 operands and 1 results; SWIGLU_GRAD takes 3 operands and 2 results"},
    {"SwigluGradWithAttributes", SWIGLU_GRAD, "f32[3] f32[3] f32[3]", "f32[3] f32[3]", kGelu,
     "has gelu attributes, which SWIGLU_GRAD does not take"},
    {"SwigluGradDupOverUp", SWIGLU_GRAD, "f32[3] f32[3] f32[3]", "f32[3] f32[3]", kNone,
     "result buffer 4 'out1' overlaps operand buffer 1 'in1'", -1, 1},
    {"SwigluGradResultsShareBuffer", SWIGLU_GRAD, "f32[3] f32[3] f32[3]", "f32[3] f32[3]", kNone,
     "result 1 (buffer 4 'out1') overlaps result 0 (buffer 3 'out')", -1, kOnResult0},
    // GATHER_GRAD (indices, dy) -> ddata.
    {"GatherGradAxis1", GATHER_GRAD, "i64[4,2] f32[3,4,2,2]", "f32[3,5,2]", axis(1), kValid},
    {"GatherGradScalarIndexI32", GATHER_GRAD, "i32[] f32[3]", "f32[5,3]", axis(0), kValid},
    {"GatherGradIndicesF32", GATHER_GRAD, "f32[2] f32[2,3]", "f32[5,3]", axis(0),
     "operand 0 (buffer 0 'in0') is f32; GATHER_GRAD takes i64 or i32 indices"},
    {"GatherGradResultI64", GATHER_GRAD, "i64[2] f32[2,3]", "i64[5,3]", axis(0),
     "result (buffer 2 'out') is i64; GATHER_GRAD takes f32"},
    {"GatherGradDyShape", GATHER_GRAD, "i64[4,2] f32[3,4,2]", "f32[3,5,2]", axis(1),
     "dy [3, 4, 2] should be [3, 4, 2, 2], the GATHER of the result [3, 5, 2] along axis 1 by "
     "indices [4, 2]"},
    {"GatherGradAxis", GATHER_GRAD, "i64[4] f32[3,5,2]", "f32[3,5,2]", axis(3),
     "axis.axis 3 is out of range for the result shape [3, 5, 2] (rank 3)"},
    {"GatherGradNoAttributes", GATHER_GRAD, "i64[2] f32[2,3]", "f32[5,3]", kNone,
     "has no axis attributes"},
    {"GatherGradOverDy", GATHER_GRAD, "i64[4] f32[4,2]", "f32[4,2]", axis(0),
     "result buffer 2 'out' overlaps operand buffer 1 'in1'", 1},
    // SLICE_GRAD dy -> dx, dx of the sliced operand's shape.
    {"SliceGrad", SLICE_GRAD, "f32[3]", "f32[10]", sliceBy({1}, {3}), kValid},
    {"SliceGradNegativeSteps", SLICE_GRAD, "f32[3,4]", "f32[5,4]", sliceBy({4, 3}, {-2, -1}),
     kValid},
    {"SliceGradEmptyAtEnd", SLICE_GRAD, "f32[0]", "f32[5]", sliceBy({5}, {1}), kValid},
    {"SliceGradReadsPastEnd", SLICE_GRAD, "f32[4]", "f32[10]", sliceBy({1}, {3}),
     "dy [4] reads past dx [10] in dimension 0: 4 elements from 1 in steps of 3"},
    {"SliceGradStartPastEnd", SLICE_GRAD, "f32[1]", "f32[5]", sliceBy({5}, {1}),
     "slice.starts[0] = 5 is out of range for dimension 0 of dx [5]"},
    {"SliceGradAttributeCount", SLICE_GRAD, "f32[2,3]", "f32[2,3]", sliceBy({0}, {1}),
     "slice.starts [0] and slice.steps [1] must each have one entry per dimension of dx [2, 3]"},
    {"SliceGradRank", SLICE_GRAD, "f32[6]", "f32[2,3]", sliceBy({0, 0}, {1, 1}),
     "dy [6] has rank 1, but dx [2, 3] has rank 2"},
    {"SliceGradZeroStep", SLICE_GRAD, "f32[2,3]", "f32[2,3]", sliceBy({0, 0}, {1, 0}),
     "slice.steps [1, 0] has a zero step in dimension 1"},
    {"SliceGradI64", SLICE_GRAD, "i64[3]", "i64[10]", sliceBy({1}, {3}),
     "operand 0 (buffer 0 'in0') is i64; SLICE_GRAD takes f32"},
    {"SliceGradOverDy", SLICE_GRAD, "f32[4]", "f32[4]", sliceBy({3}, {-1}),
     "result buffer 1 'out' overlaps operand buffer 0 'in0'", 0},
};

INSTANTIATE_TEST_SUITE_P(Ops, OpRuleTest, ::testing::ValuesIn(kOpCases),
                         [](const auto &info) { return std::string(info.param.name); });

// Every floating-point op takes f64 as well as f32 (the CPU backend runs f64 schedules for
// float64 gradient checks), one precision per kernel.
const OpCase kF64OpCases[] = {
    {"MatmulF64", MATMUL, "f64[2,3] f64[3,4]", "f64[2,4]", kNone, kValid},
    {"AddF64Broadcast", ADD, "f64[2,3] f64[3]", "f64[2,3]", kNone, kValid},
    {"PowF64", POW, "f64[2] f64[2]", "f64[2]", kNone, kValid},
    {"ErfF64", ERF, "f64[2]", "f64[2]", kNone, kValid},
    {"LessF64", LESS, "f64[2] f64[2]", "bool[2]", kNone, kValid},
    {"TransposeF64", TRANSPOSE, "f64[2,3]", "f64[3,2]",
     [](Kernel &k) {
       k.mutable_transpose()->add_perm(1);
       k.mutable_transpose()->add_perm(0);
     },
     kValid},
    {"ReduceSumF64", REDUCE_SUM, "f64[2,3]", "f64[2]", reduceAxes({1}, false), kValid},
    {"SoftmaxF64", SOFTMAX, "f64[2,3]", "f64[2,3]", axis(1), kValid},
    {"LayerNormGradF64", LAYER_NORM_GRAD, "f64[2,4] f64[4] f64[2,4]", "f64[2,4] f64[4] f64[4]",
     norm(1), kValid},
    {"AttentionGradF64", ATTENTION_GRAD, "f64[1,2,3,4] f64[1,1,3,4] f64[1,1,3,4] f64[1,2,3,4]",
     "f64[1,2,3,4] f64[1,1,3,4] f64[1,1,3,4]", attention(true), kValid},
    {"CrossEntropyF64", CROSS_ENTROPY, "f64[2,7] i64[2]", "f64[]", kCrossEntropy, kValid},
    {"CrossEntropyGradF64", CROSS_ENTROPY_GRAD, "i64[2] f64[] f64[2,7]", "f64[2,7]", kCrossEntropy,
     kValid},
    {"GatherGradF64", GATHER_GRAD, "i64[2] f64[2,3]", "f64[4,3]", axis(0), kValid},
    {"SliceGradF64", SLICE_GRAD, "f64[2]", "f64[4]", sliceBy({0}, {2}), kValid},
    {"AccumulateF64", ACCUMULATE, "f64[3] f64[3]", "f64[3]", kNone, kValid},
    {"MulMixedPrecision", MUL, "f32[2] f64[2]", "f32[2]", kNone,
     "operand 1 (buffer 1 'in1') is f64; MUL takes f32 here, like operand 0 (buffer 0 'in0') (one "
     "dtype for its operands and result)"},
    {"SoftmaxI64", SOFTMAX, "i64[2,3]", "i64[2,3]", axis(1),
     "operand 0 (buffer 0 'in0') is i64; SOFTMAX takes f32 (or bf16, f64)"},
    {"SubI32", SUB, "i32[2] i32[2]", "i32[2]", kNone,
     "operand 0 (buffer 0 'in0') is i32; SUB takes f32 or i64 (or bf16, f64)"},
    {"CrossEntropyResultF32", CROSS_ENTROPY, "f64[2,7] i64[2]", "f32[]", kCrossEntropy,
     "result (buffer 2 'out') is f32; CROSS_ENTROPY takes f64 here, like operand 0 (buffer 0 "
     "'in0') (one dtype for the logits and the result)"},
};

INSTANTIATE_TEST_SUITE_P(F64Ops, OpRuleTest, ::testing::ValuesIn(kF64OpCases),
                         [](const auto &info) { return std::string(info.param.name); });

// bf16 schedules (sl-opt precision=bf16): every float op takes bf16 throughout, as it takes f64,
// and CAST converts to and from it.
const OpCase kBf16OpCases[] = {
    {"GemmBf16", GEMM, "bf16[3,4] bf16[4,5] bf16[5]", "bf16[3,5]",
     [](Kernel &k) { k.mutable_gemm()->set_alpha(1.0f); }, kValid},
    {"MatmulBf16", MATMUL, "bf16[2,3,4] bf16[4,5]", "bf16[2,3,5]", kNone, kValid},
    {"SubBf16", SUB, "bf16[2,3] bf16[3]", "bf16[2,3]", kNone, kValid},
    {"LessBf16", LESS, "bf16[2] bf16[2]", "bool[2]", kNone, kValid},
    {"SiluBf16", SILU, "bf16[4]", "bf16[4]", kNone, kValid},
    {"SoftmaxBf16", SOFTMAX, "bf16[2,3]", "bf16[2,3]", axis(1), kValid},
    {"RmsNormBf16", RMS_NORM, "bf16[2,4] bf16[4]", "bf16[2,4]", norm(1), kValid},
    {"AttentionBf16", ATTENTION, "bf16[1,2,3,4] bf16[1,1,3,4] bf16[1,1,3,4]", "bf16[1,2,3,4]",
     attention(true), kValid},
    {"AccumulateBf16", ACCUMULATE, "bf16[3] bf16[3]", "bf16[3]", kNone, kValid},
    {"CrossEntropyBf16", CROSS_ENTROPY, "bf16[2,7] i64[2]", "bf16[]", kCrossEntropy, kValid},
    {"CrossEntropyGradBf16", CROSS_ENTROPY_GRAD, "i64[2] bf16[] bf16[2,7]", "bf16[2,7]",
     kCrossEntropy, kValid},
    {"RmsNormGradBf16", RMS_NORM_GRAD, "bf16[2,4] bf16[4] bf16[2,4]", "bf16[2,4] bf16[4]",
     norm(1), kValid},
    {"AttentionGradBf16", ATTENTION_GRAD,
     "bf16[1,2,3,4] bf16[1,1,3,4] bf16[1,1,3,4] bf16[1,2,3,4]",
     "bf16[1,2,3,4] bf16[1,1,3,4] bf16[1,1,3,4]", attention(true), kValid},
    {"GatherGradBf16", GATHER_GRAD, "i64[2] bf16[2,3]", "bf16[4,3]", axis(0), kValid},
    {"SliceGradBf16", SLICE_GRAD, "bf16[2]", "bf16[4]", sliceBy({0}, {2}), kValid},
    {"CastToBf16", CAST, "f32[4]", "bf16[4]", kNone, kValid},
    {"CastBf16ToI64", CAST, "bf16[4]", "i64[4]", kNone, kValid},
    {"MulBf16AndF32", MUL, "bf16[2] f32[2]", "bf16[2]", kNone,
     "operand 1 (buffer 1 'in1') is f32; MUL takes bf16 here, like operand 0 (buffer 0 'in0') "
     "(one dtype for its operands and result)"},
    {"GemmBf16ResultF32", GEMM, "bf16[3,4] bf16[4,5]", "f32[3,5]",
     [](Kernel &k) { k.mutable_gemm()->set_alpha(1.0f); },
     "result (buffer 2 'out') is f32; GEMM takes bf16 here"},
    {"CrossEntropyBf16ResultF32", CROSS_ENTROPY, "bf16[2,7] i64[2]", "f32[]", kCrossEntropy,
     "result (buffer 2 'out') is f32; CROSS_ENTROPY takes bf16 here"},
    {"SoftmaxF16", SOFTMAX, "f16[2,3]", "f16[2,3]", axis(1),
     "operand 0 (buffer 0 'in0') is f16; SOFTMAX takes f32 (or bf16, f64)"},
};

INSTANTIATE_TEST_SUITE_P(Bf16Ops, OpRuleTest, ::testing::ValuesIn(kBf16OpCases),
                         [](const auto &info) { return std::string(info.param.name); });

} // namespace
} // namespace slrt::test
