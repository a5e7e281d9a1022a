// The verifier's version 4 rules: the generation kernels (KV_WRITE, DECODE_ATTENTION, TAKE_ROWS),
// programs, bindings per program, program boundaries in the stream hazard check, and the contract
// of kind "generate". Each rule is checked by the message it gives.
#include <functional>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/schedule_verifier.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

// --- the kernels ------------------------------------------------------------------------------
// One kernel "k" on fresh buffers in0, in1, ... and out, all in `space`, on a stream of `stream`
// kind; a message of nullptr means the kernel must pass.
struct OpCase {
  const char *name;
  OpKind op;
  // Buffers as "dtype[dims]", space separated: "f32[2,3] i64[2]". A result of "in0" is operand 0
  // itself (KV_WRITE's cache).
  std::string operands;
  const char *result;
  std::function<void(Kernel &)> attributes;
  const char *message;
  StreamKind stream = COMPUTE;
  MemorySpace space = DEVICE;
  // Where the result starts: >= 0, the offset of that operand (an overlap); -1, its own place.
  int resultAt = -1;
  // >= 0: operand 1 starts where that operand does.
  int operand1At = -1;
};

void PrintTo(const OpCase &c, std::ostream *os) { *os << c.name; }

struct Operand {
  DType dtype;
  Shape shape;
};

Operand parseOperand(const std::string &word) {
  size_t open = word.find('[');
  Operand operand{DTYPE_UNSPECIFIED, {}};
  for (DType dtype : {F32, BF16, F64, I64, I32, BOOL})
    if (dtypeName(dtype) == word.substr(0, open))
      operand.dtype = dtype;
  std::istringstream dims(word.substr(open + 1, word.size() - open - 2));
  for (std::string dim; std::getline(dims, dim, ',');)
    operand.shape.push_back(std::stoll(dim));
  return operand;
}

Schedule opSchedule(const OpCase &c) {
  ScheduleBuilder b;
  Stream *host = b.schedule.add_streams();
  host->set_id(3);
  host->set_kind(HOST_COMPUTE);
  std::vector<uint32_t> ids;
  std::istringstream words(c.operands);
  for (std::string word; words >> word;) {
    Operand o = parseOperand(word);
    ids.push_back(b.buffer("in" + std::to_string(ids.size()), c.space, o.dtype, o.shape));
  }
  uint32_t result = 0;
  if (std::string(c.result) == "in0") {
    result = ids[0];
  } else {
    Operand o = parseOperand(c.result);
    result = b.buffer("out", c.space, o.dtype, o.shape);
  }
  auto place = [&](uint32_t id, uint32_t at) {
    b.schedule.mutable_buffers(static_cast<int>(id))
        ->set_offset(b.schedule.buffers(static_cast<int>(at)).offset());
  };
  if (c.resultAt >= 0)
    place(result, ids[static_cast<size_t>(c.resultAt)]);
  if (c.operand1At >= 0)
    place(ids[1], ids[static_cast<size_t>(c.operand1At)]);
  Kernel &k = b.kernel(c.op, "k", ids, result);
  k.set_stream(c.stream == HOST_COMPUTE ? 3 : 0);
  if (c.attributes)
    c.attributes(k);
  return b.schedule;
}

class GenerationOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(GenerationOpTest, Verifies) {
  Schedule s = opSchedule(GetParam());
  if (!GetParam().message) {
    EXPECT_EQ(verifyError(s), "no error");
    return;
  }
  EXPECT_THAT(verifyError(s), HasSubstr(std::string("kernel 0 'k' (") + OpKind_Name(GetParam().op) +
                                    "): " + GetParam().message));
}

constexpr const char *kValid = nullptr;
const std::function<void(Kernel &)> kNone;
std::function<void(Kernel &)> attention(float scale = 0.5f, bool alibi = false) {
  return [=](Kernel &k) {
    k.mutable_attention()->set_scale(scale);
    k.mutable_attention()->set_alibi(alibi);
  };
}
std::function<void(Kernel &)> axis0() {
  return [](Kernel &k) { k.mutable_axis()->set_axis(0); };
}
std::function<void(Kernel &)> bshd() {
  return [](Kernel &k) {
    k.mutable_kv_write()->set_layout(sl::schedule::AttentionAttributes::BSHD);
  };
}

// KV_WRITE: cache [2, 2, 1, 5, 4], k and v [2, 1, 3, 4], start [2], on the host or the device.
constexpr const char *kCache = "f32[2,2,1,5,4]";
const std::string kKvWrite = std::string(kCache) + " f32[2,1,3,4] f32[2,1,3,4]";
// DECODE_ATTENTION: q [2, 4, 1, 8], k and v [2, 2, 1, 8], cache [2, 2, 2, 6, 8], length [2].
const std::string kDecode = "f32[2,4,1,8] f32[2,2,1,8] f32[2,2,1,8] f32[2,2,2,6,8] i64[2]";

const OpCase kOpCases[] = {
    {"KvWrite", KV_WRITE, kKvWrite, "in0", kNone, kValid, HOST_COMPUTE, HOST},
    {"KvWriteWithStart", KV_WRITE, kKvWrite + " i64[2]", "in0", kNone, kValid, HOST_COMPUTE, HOST},
    // Version 7: k and v in attention's [B, T, Hkv, D] order.
    {"KvWriteBshd", KV_WRITE, std::string(kCache) + " f32[2,3,1,4] f32[2,3,1,4] i64[2]", "in0",
     bshd(), kValid, HOST_COMPUTE, HOST},
    {"KvWriteBshdKeyHeads", KV_WRITE, kKvWrite, "in0", bshd(),
     "k [2, 1, 3, 4] does not fit the cache [2, 2, 1, 5, 4]: it should be [B, T, Hkv, D] with "
     "B = 2, Hkv = 1 and D = 4",
     HOST_COMPUTE, HOST},
    {"KvWriteF64", KV_WRITE, "f64[1,2,2,4,3] f64[1,2,4,3] f64[1,2,4,3] i64[1]", "in0", kNone,
     kValid, HOST_COMPUTE, HOST},
    // A cache kept on the device is written there, on the compute stream.
    {"KvWriteOnTheDevice", KV_WRITE, kKvWrite + " i64[2]", "in0", kNone, kValid},
    {"KvWriteOnComputeOverHostBuffers", KV_WRITE, kKvWrite, "in0", kNone,
     "buffer 0 'in0' is in the host pool; compute kernels use only DEVICE buffers", COMPUTE, HOST},
    {"KvWriteOnDeviceBuffers", KV_WRITE, kKvWrite, "in0", kNone,
     "buffer 0 'in0' is in the device arena; kernels on a HOST_COMPUTE stream use only HOST "
     "buffers",
     HOST_COMPUTE, DEVICE},
    {"KvWriteOperandCount", KV_WRITE, kCache, "in0", kNone,
     "has 1 operands and 1 results; KV_WRITE takes 3 or 4 operands and 1 result", HOST_COMPUTE,
     HOST},
    {"KvWriteResultIsNotTheCache", KV_WRITE, kKvWrite, kCache, kNone,
     "result (buffer 3 'out') must be the very buffer of operand 0 (buffer 0 'in0'), the cache it "
     "writes in place",
     HOST_COMPUTE, HOST},
    {"KvWriteCacheRank", KV_WRITE, "f32[2,2,5,4] f32[2,1,3,4] f32[2,1,3,4]", "in0", kNone,
     "cache [2, 2, 5, 4] should be [B, 2, Hkv, C, D] (keys at [:, 0], values at [:, 1])",
     HOST_COMPUTE, HOST},
    {"KvWriteCacheNotKeysAndValues", KV_WRITE, "f32[2,3,1,5,4] f32[2,1,3,4] f32[2,1,3,4]", "in0",
     kNone, "cache [2, 3, 1, 5, 4] should be [B, 2, Hkv, C, D]", HOST_COMPUTE, HOST},
    {"KvWriteKeyHeads", KV_WRITE, "f32[2,2,1,5,4] f32[2,2,3,4] f32[2,2,3,4]", "in0", kNone,
     "k [2, 2, 3, 4] does not fit the cache [2, 2, 1, 5, 4]: it should be [B, Hkv, T, D] with "
     "B = 2, Hkv = 1 and D = 4",
     HOST_COMPUTE, HOST},
    {"KvWriteValueShape", KV_WRITE, "f32[2,2,1,5,4] f32[2,1,3,4] f32[2,1,2,4]", "in0", kNone,
     "v [2, 1, 2, 4] should be [2, 1, 3, 4] (the shape of k)", HOST_COMPUTE, HOST},
    {"KvWriteMorePositionsThanTheCache", KV_WRITE, "f32[2,2,1,5,4] f32[2,1,6,4] f32[2,1,6,4]",
     "in0", kNone, "k [2, 1, 6, 4] has 6 positions, more than the cache [2, 2, 1, 5, 4] holds (5)",
     HOST_COMPUTE, HOST},
    {"KvWriteStartShape", KV_WRITE, kKvWrite + " i64[3]", "in0", kNone,
     "start [3] should be [2] (one position per sequence)", HOST_COMPUTE, HOST},
    {"KvWriteStartI32", KV_WRITE, kKvWrite + " i32[2]", "in0", kNone,
     "operand 3 (buffer 3 'in3') is i32; KV_WRITE takes i64 starts", HOST_COMPUTE, HOST},
    {"KvWriteMixedPrecision", KV_WRITE, "f32[2,2,1,5,4] f64[2,1,3,4] f32[2,1,3,4]", "in0", kNone,
     "operand 1 (buffer 1 'in1') is f64; KV_WRITE takes f32 here, like operand 0 (buffer 0 "
     "'in0') (one dtype for the cache, k, v and the result)",
     HOST_COMPUTE, HOST},
    {"KvWriteI64Cache", KV_WRITE, "i64[2,2,1,5,4] i64[2,1,3,4] i64[2,1,3,4]", "in0", kNone,
     "operand 0 (buffer 0 'in0') is i64; KV_WRITE takes f32 (or bf16, f64)", HOST_COMPUTE, HOST},
    {"KvWriteBf16", KV_WRITE, "bf16[2,2,1,5,4] bf16[2,1,3,4] bf16[2,1,3,4] i64[2]", "in0", kNone,
     kValid, HOST_COMPUTE, HOST},
    {"KvWriteAttributes", KV_WRITE, kKvWrite, "in0", axis0(),
     "has axis attributes; KV_WRITE takes kv_write attributes", HOST_COMPUTE, HOST},
    {"KvWriteKeysInsideTheCache", KV_WRITE, kKvWrite, "in0", kNone,
     "result buffer 0 'in0' overlaps operand buffer 1 'in1'", HOST_COMPUTE, HOST, -1, 0},

    {"DecodeAttention", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]", attention(), kValid},
    {"DecodeAttentionAlibi", DECODE_ATTENTION, kDecode + " f32[4]", "f32[2,4,1,8]",
     attention(0.5f, true), kValid},
    {"DecodeAttentionAlibiSlopesShape", DECODE_ATTENTION, kDecode + " f32[2]", "f32[2,4,1,8]",
     attention(0.5f, true), "alibi slopes [2] should be [4] (one per query head)"},
    {"DecodeAttentionAlibiWithoutSlopes", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]",
     attention(0.5f, true), "attention.alibi is set but there is no slopes operand"},
    {"DecodeAttentionSlopesWithoutAlibi", DECODE_ATTENTION, kDecode + " f32[4]", "f32[2,4,1,8]",
     attention(), "6 operands; without attention.alibi DECODE_ATTENTION takes at most 5"},
    {"DecodeAttentionAlibiF64Slopes", DECODE_ATTENTION, kDecode + " f64[4]", "f32[2,4,1,8]",
     attention(0.5f, true), "operand 5 (buffer 5 'in5') is f64; DECODE_ATTENTION takes f32 here"},
    {"DecodeAttentionF64", DECODE_ATTENTION,
     "f64[1,2,1,4] f64[1,1,1,4] f64[1,1,1,4] f64[1,2,1,3,4] i64[1]", "f64[1,2,1,4]", attention(),
     kValid},
    {"DecodeAttentionBf16", DECODE_ATTENTION,
     "bf16[1,2,1,4] bf16[1,1,1,4] bf16[1,1,1,4] bf16[1,2,1,3,4] i64[1]", "bf16[1,2,1,4]",
     attention(), kValid},
    {"DecodeAttentionBf16CacheF32", DECODE_ATTENTION,
     "bf16[1,2,1,4] bf16[1,1,1,4] bf16[1,1,1,4] f32[1,2,1,3,4] i64[1]", "bf16[1,2,1,4]",
     attention(), "operand 3 (buffer 3 'in3') is f32; DECODE_ATTENTION takes bf16 here"},
    {"DecodeAttentionWithoutAttributes", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]", kNone,
     "has no attention attributes"},
    {"DecodeAttentionZeroScale", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]", attention(0),
     "attention.scale is 0; it must be finite and non-zero"},
    {"DecodeAttentionBshd", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]",
     [](Kernel &k) {
       k.mutable_attention()->set_scale(0.5f);
       k.mutable_attention()->set_layout(AttentionAttributes::BSHD);
     },
     "attention.layout must be BHSD (DECODE_ATTENTION has no other layout)"},
    {"DecodeAttentionOnHost", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]", attention(),
     "runs on stream 3 of kind HOST_COMPUTE; compute kernels run on a COMPUTE stream", HOST_COMPUTE,
     HOST},
    {"DecodeAttentionOnHostBuffers", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]", attention(),
     "buffer 0 'in0' is in the host pool; compute kernels use only DEVICE buffers", COMPUTE, HOST},
    {"DecodeAttentionCacheRank", DECODE_ATTENTION,
     "f32[2,4,1,8] f32[2,2,1,8] f32[2,2,1,8] f32[2,2,6,8] i64[2]", "f32[2,4,1,8]", attention(),
     "cache [2, 2, 6, 8] should be [B, 2, Hkv, C, D]"},
    {"DecodeAttentionTwoQueries", DECODE_ATTENTION,
     "f32[2,4,2,8] f32[2,2,1,8] f32[2,2,1,8] f32[2,2,2,6,8] i64[2]", "f32[2,4,2,8]", attention(),
     "q [2, 4, 2, 8] does not fit the cache [2, 2, 2, 6, 8]: it should be [B, Hq, 1, D] with "
     "B = 2 and D = 8"},
    {"DecodeAttentionKeyHeads", DECODE_ATTENTION,
     "f32[2,4,1,8] f32[2,1,1,8] f32[2,2,1,8] f32[2,2,2,6,8] i64[2]", "f32[2,4,1,8]", attention(),
     "k [2, 1, 1, 8] should be [2, 2, 1, 8] ([B, Hkv, 1, D], as the cache)"},
    {"DecodeAttentionValueShape", DECODE_ATTENTION,
     "f32[2,4,1,8] f32[2,2,1,8] f32[2,2,1,4] f32[2,2,2,6,8] i64[2]", "f32[2,4,1,8]", attention(),
     "v [2, 2, 1, 4] should be [2, 2, 1, 8] ([B, Hkv, 1, D], as the cache)"},
    {"DecodeAttentionHeadsNotAMultiple", DECODE_ATTENTION,
     "f32[2,3,1,8] f32[2,2,1,8] f32[2,2,1,8] f32[2,2,2,6,8] i64[2]", "f32[2,3,1,8]", attention(),
     "q has 3 heads and the cache 2; the query heads must be a multiple of a positive number of "
     "key/value heads"},
    {"DecodeAttentionLengthShape", DECODE_ATTENTION,
     "f32[2,4,1,8] f32[2,2,1,8] f32[2,2,1,8] f32[2,2,2,6,8] i64[1]", "f32[2,4,1,8]", attention(),
     "length [1] should be [2] (one length per sequence)"},
    {"DecodeAttentionLengthI32", DECODE_ATTENTION,
     "f32[2,4,1,8] f32[2,2,1,8] f32[2,2,1,8] f32[2,2,2,6,8] i32[2]", "f32[2,4,1,8]", attention(),
     "operand 4 (buffer 4 'in4') is i32; DECODE_ATTENTION takes i64 lengths"},
    {"DecodeAttentionMixedPrecision", DECODE_ATTENTION,
     "f32[2,4,1,8] f32[2,2,1,8] f32[2,2,1,8] f64[2,2,2,6,8] i64[2]", "f32[2,4,1,8]", attention(),
     "operand 3 (buffer 3 'in3') is f64; DECODE_ATTENTION takes f32 here"},
    {"DecodeAttentionResultShape", DECODE_ATTENTION, kDecode, "f32[2,4,1,4]", attention(),
     "result shape [2, 4, 1, 4] should be [2, 4, 1, 8]"},
    {"DecodeAttentionInPlace", DECODE_ATTENTION, kDecode, "f32[2,4,1,8]", attention(),
     "result buffer 5 'out' overlaps operand buffer 0 'in0'", COMPUTE, DEVICE, 0},

    {"TakeRows", TAKE_ROWS, "f32[2,5,3] i64[2]", "f32[2,1,3]", kNone, kValid},
    {"TakeRowsI64", TAKE_ROWS, "i64[2,5,3] i64[2]", "i64[2,1,3]", kNone, kValid},
    {"TakeRowsBf16", TAKE_ROWS, "bf16[2,5,3] i64[2]", "bf16[2,1,3]", kNone, kValid},
    {"TakeRowsRank", TAKE_ROWS, "f32[2,5] i64[2]", "f32[2,1]", kNone,
     "x [2, 5] and index [2] should be [B, S, H] and [B]"},
    {"TakeRowsIndexShape", TAKE_ROWS, "f32[2,5,3] i64[3]", "f32[2,1,3]", kNone,
     "x [2, 5, 3] and index [3] should be [B, S, H] and [B]"},
    {"TakeRowsIndexI32", TAKE_ROWS, "f32[2,5,3] i32[2]", "f32[2,1,3]", kNone,
     "operand 1 (buffer 1 'in1') is i32; TAKE_ROWS takes i64 indices"},
    {"TakeRowsResultShape", TAKE_ROWS, "f32[2,5,3] i64[2]", "f32[2,2,3]", kNone,
     "result shape [2, 2, 3] should be [2, 1, 3]"},
    {"TakeRowsResultDType", TAKE_ROWS, "i64[2,5,3] i64[2]", "f32[2,1,3]", kNone,
     "result (buffer 2 'out') is f32 but operand 0 (buffer 0 'in0') is i64; TAKE_ROWS needs one "
     "dtype for x and the result"},
    {"TakeRowsAttributes", TAKE_ROWS, "f32[2,5,3] i64[2]", "f32[2,1,3]", axis0(),
     "has axis attributes, which TAKE_ROWS does not take"},
    {"TakeRowsInPlace", TAKE_ROWS, "f32[2,5,3] i64[2]", "f32[2,1,3]", kNone,
     "result buffer 2 'out' overlaps operand buffer 0 'in0'", COMPUTE, DEVICE, 0},
};

INSTANTIATE_TEST_SUITE_P(Ops, GenerationOpTest, ::testing::ValuesIn(kOpCases),
                         [](const auto &info) { return std::string(info.param.name); });

// --- programs, bindings and kind "generate", on the tiny generate schedule ---------------------

struct ScheduleCase {
  const char *name;
  std::function<void(Schedule &)> damage;
  const char *message;
};

void PrintTo(const ScheduleCase &c, std::ostream *os) { *os << c.name; }

class GenerateScheduleTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST(GenerateScheduleTest, TinyGenerateIsValid) {
  Schedule s = TinyGenerate::build(1).schedule;
  EXPECT_EQ(verifyError(s), "no error");
  // Both programs have an input "input_ids" and an output "logits": names are per program.
  EXPECT_EQ(s.inputs(0).name(), s.inputs(2).name());
  EXPECT_EQ(s.outputs(0).name(), s.outputs(1).name());
}

TEST_P(GenerateScheduleTest, RejectsWithMessage) {
  Schedule s = TinyGenerate::build(1).schedule;
  GetParam().damage(s);
  EXPECT_THAT(verifyError(s), HasSubstr(GetParam().message));
}

Program &program(Schedule &s, int index) { return *s.mutable_programs(index); }
Generation &generation(Schedule &s) { return *s.mutable_generation(); }
Binding *binding(google::protobuf::RepeatedPtrField<Binding> *bindings, uint32_t program,
                 const std::string &name) {
  for (Binding &b : *bindings)
    if (b.program() == program && b.name() == name)
      return &b;
  throw std::runtime_error("no binding " + name);
}

// The tiny generate schedule's prefill has kernels 0..10, decode 11..21.
const ScheduleCase kScheduleCases[] = {
    {"ProgramWithoutName", [](Schedule &s) { program(s, 0).clear_name(); },
     "program 0 has an empty name"},
    {"ProgramNamesUnique", [](Schedule &s) { program(s, 1).set_name("prefill"); },
     "program 1 'prefill' has the name of program 0 'prefill' (program names are unique)"},
    {"ProgramWithoutKernels", [](Schedule &s) { program(s, 1).set_num_kernels(0); },
     "program 1 'decode' has no kernels"},
    {"FirstProgramNotAtZero",
     [](Schedule &s) {
       program(s, 0).set_first_kernel(1);
       program(s, 0).set_num_kernels(10);
     },
     "program 0 'prefill' starts at kernel 1, but the first program must start at kernel 0 "
     "(programs are contiguous and in order)"},
    {"ProgramsWithAGap",
     [](Schedule &s) {
       program(s, 1).set_first_kernel(12);
       program(s, 1).set_num_kernels(10);
     },
     "program 1 'decode' starts at kernel 12, but program 0 'prefill' ends before kernel 11 "
     "(programs are contiguous and in order)"},
    {"ProgramsOverlap", [](Schedule &s) { program(s, 1).set_first_kernel(10); },
     "program 1 'decode' starts at kernel 10, but program 0 'prefill' ends before kernel 11"},
    {"ProgramPastTheEnd", [](Schedule &s) { program(s, 1).set_num_kernels(12); },
     "program 1 'decode' (12 kernels from kernel 11) runs past the last kernel (the schedule has "
     "22 kernels)"},
    {"ProgramsLeaveKernelsOut", [](Schedule &s) { program(s, 1).set_num_kernels(10); },
     "the programs end before kernel 21, but the schedule has 22 kernels (programs cover every "
     "kernel)"},
    {"EventAcrossPrograms", [](Schedule &s) { s.mutable_kernels(11)->add_wait_events(3); },
     "kernel 11 'decode.ids.h2d' (COPY) of program 1 'decode': waits for event 3, which kernel 8 "
     "'prefill.kv.d2h' (COPY) of program 0 'prefill' records; an event is recorded and waited "
     "within one program"},
    {"BindingProgramOutOfRange",
     [](Schedule &s) { binding(s.mutable_inputs(), 1, "position")->set_program(2); },
     "input 'position' belongs to program 2, but the schedule has 2 programs"},
    {"BindingNamesUniquePerProgram", [](Schedule &s) { *s.add_outputs() = s.outputs(1); },
     "output 'logits' is declared twice in program 1 'decode'"},
    {"GenerateWithoutGenerationMessage", [](Schedule &s) { s.clear_generation(); },
     "a schedule of kind 'generate' needs the generation message"},
    {"BatchNotPositive", [](Schedule &s) { generation(s).set_batch(0); },
     "generation.batch is 0; it must be positive"},
    {"MaxNewTokensNotPositive", [](Schedule &s) { generation(s).set_max_new_tokens(-1); },
     "generation.max_new_tokens is -1; it must be positive"},
    {"NoSubBatches", [](Schedule &s) { generation(s).set_num_sub_batches(0); },
     "generation.num_sub_batches is 0; it must be positive"},
    {"CacheLength", [](Schedule &s) { generation(s).set_cache_len(8); },
     "generation.cache_len is 8, but max_prompt_len (4) + max_new_tokens (5) is 9"},
    {"SubBatchesAreNotTheBatch", [](Schedule &s) { generation(s).set_num_sub_batches(2); },
     "generation.num_sub_batches (2) sub-batches of 2 sequences (sub_batch_size) are not batch "
     "(2)"},
    {"ProgramNames", [](Schedule &s) { program(s, 1).set_name("decoder"); },
     "a schedule of kind 'generate' has two programs, 'prefill' and 'decode'; this one has "
     "'prefill', 'decoder'"},
    {"MissingInput",
     [](Schedule &s) {
       s.mutable_inputs()->erase(s.mutable_inputs()->begin() + 1); // prefill's last_index
     },
     "program 'prefill' has no input 'last_index' (i64 [2]: batch)"},
    {"MissingOutput", [](Schedule &s) { s.mutable_outputs()->erase(s.mutable_outputs()->begin()); },
     "program 'prefill' has no output 'logits' (f32 [2, 1, 16]: batch, 1, vocab)"},
    {"InputShape",
     [](Schedule &s) {
       generation(s).set_max_prompt_len(3);
       generation(s).set_cache_len(8);
     },
     "input 'input_ids' of program 'prefill' is i64 [2, 4], but the generation message makes it "
     "i64 [2, 3] (batch, max_prompt_len)"},
    {"DecodeInputShape",
     [](Schedule &s) {
       // decode's input_ids as a [2] view of its buffer.
       Buffer *ids = s.mutable_buffers(
           static_cast<int>(binding(s.mutable_inputs(), 1, "input_ids")->buffer()));
       ids->clear_shape();
       ids->add_shape(2);
     },
     "input 'input_ids' of program 'decode' is i64 [2], but the generation message makes it "
     "i64 [2, 1] (batch, 1)"},
    {"ExtraInput",
     [](Schedule &s) {
       Binding *extra = s.add_inputs();
       extra->set_name("temperature");
       extra->set_buffer(binding(s.mutable_outputs(), 1, "logits")->buffer());
       extra->set_program(1);
     },
     "program 'decode' has input 'temperature', which a generate schedule does not take (its "
     "inputs are input_ids and position)"},
    {"LogitsShape", [](Schedule &s) { generation(s).set_vocab(17); },
     "output 'logits' of program 'prefill' is f32 [2, 1, 16], but the generation message makes it "
     "f32, bf16 or f64 [2, 1, 17] (batch, 1, vocab)"},
};

INSTANTIATE_TEST_SUITE_P(Generate, GenerateScheduleTest, ::testing::ValuesIn(kScheduleCases),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(GenerateScheduleTest, OtherKindsHaveNoGenerationMessage) {
  Schedule s = TinyMlp::build(1).schedule;
  s.mutable_generation()->set_batch(1);
  EXPECT_THAT(verifyError(s), HasSubstr("the schedule has a generation message, but its kind is "
                                    "'infer' (only kind 'generate' has one)"));
}

TEST(GenerateScheduleTest, BindingsWithoutProgramsBelongToProgramZero) {
  Schedule s = TinyMlp::build(1).schedule;
  s.mutable_inputs(0)->set_program(1);
  EXPECT_THAT(verifyError(s), HasSubstr("input 'x' belongs to program 1, but the schedule has no "
                                    "programs (its bindings belong to program 0)"));
}

// --- program boundaries are barriers for the stream hazard check --------------------------------
// Program 0 copies x to the device and reads it there; program 1 copies y over the same device
// bytes, with no event ordering it after program 0's read. Streams are idle between programs, so
// that is safe; within one program it is a hazard.
Schedule reuseAcrossPrograms() {
  ScheduleBuilder b;
  uint32_t x = b.buffer("x", HOST, F32, {4});
  uint32_t y = b.buffer("y", HOST, F32, {4});
  uint32_t out = b.buffer("out", HOST, F32, {4});
  uint32_t a = b.buffer("a", DEVICE, F32, {4});
  uint32_t r = b.buffer("r", DEVICE, F32, {4});
  b.input("x", x, 0);
  b.input("y", y, 1);
  b.output("out", out, 1);
  b.schedule.set_num_events(3);
  b.kernel(COPY, "x.h2d", {x}, a).add_record_events(0);
  b.kernel(RELU, "relu", {a}, r).add_wait_events(0);
  b.kernel(COPY, "y.h2d", {y}, a).add_record_events(1);
  Kernel &sigmoid = b.kernel(SIGMOID, "sigmoid", {a}, r);
  sigmoid.add_wait_events(1);
  sigmoid.add_record_events(2);
  b.kernel(COPY, "r.d2h", {r}, out).add_wait_events(2);
  for (auto [name, first, count] : {std::tuple<const char *, uint32_t, uint32_t>{"one", 0, 2},
                                    std::tuple<const char *, uint32_t, uint32_t>{"two", 2, 3}}) {
    Program *p = b.schedule.add_programs();
    p->set_name(name);
    p->set_first_kernel(first);
    p->set_num_kernels(count);
  }
  return b.schedule;
}

TEST(ProgramHazardTest, ProgramBoundariesAreBarriers) {
  Schedule s = reuseAcrossPrograms();
  EXPECT_EQ(verifyError(s), "no error");

  // One program of the same kernels: the copy of y overwrites what relu reads, unordered.
  Schedule one = s;
  one.clear_programs();
  for (Binding &binding : *one.mutable_inputs())
    binding.set_program(0);
  one.mutable_outputs(0)->set_program(0);
  EXPECT_THAT(verifyError(one), HasSubstr("kernel 2 'y.h2d' (COPY) on stream 1 writes bytes of buffer "
                                      "3 'a' that kernel 1 'relu' (RELU) on stream 0 reads"));
}

TEST(ProgramHazardTest, HazardsWithinAProgramAreStillFound) {
  Schedule s = reuseAcrossPrograms();
  // The sigmoid no longer waits for the copy of y it reads.
  s.mutable_kernels(3)->clear_wait_events();
  EXPECT_THAT(verifyError(s), HasSubstr("kernel 3 'sigmoid' (SIGMOID) on stream 0 reads bytes of "
                                    "buffer 3 'a' that kernel 2 'y.h2d' (COPY) on stream 1 "
                                    "writes"));
}

} // namespace
} // namespace slrt::test
