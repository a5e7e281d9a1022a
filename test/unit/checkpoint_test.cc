// safetensors reading and writing (round trips, strict rejection of damaged files, atomic writes)
// and the training checkpoint on top of it (bit-exact round trip, refusing another model's).
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "slrt/atomic_file.h"
#include "slrt/checkpoint.h"
#include "slrt/error.h"
#include "slrt/read_file.h"
#include "slrt/safetensors.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TensorEntry randomEntry(std::mt19937 &rng, const std::string &name, DType dtype, Shape shape) {
  TensorEntry entry{name, dtype, shape, {}};
  entry.data.resize(numel(shape).value() * dtypeSize(dtype));
  for (std::byte &b : entry.data)
    b = static_cast<std::byte>(dtype == BOOL ? rng() % 2 : rng() & 0xff);
  return entry;
}

// A file with the given header text (not padded) and data bytes.
std::string fileWith(const std::string &header, const std::string &data,
                     std::optional<uint64_t> length = std::nullopt) {
  uint64_t n = length.value_or(header.size());
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string decodeError(const std::string &bytes) {
  return errorOf([&] { decodeSafetensors(bytes, "bad.safetensors"); });
}

// --- safetensors ---------------------------------------------------------------------------------

TEST(SafetensorsTest, RoundTripsEveryDTypeAndRank) {
  TempDir dir;
  std::mt19937 rng(1);
  std::vector<TensorEntry> entries = {
      randomEntry(rng, "f32", F32, {2, 3}),
      randomEntry(rng, "f16", F16, {5}),
      randomEntry(rng, "bf16", BF16, {2, 2, 2}),
      randomEntry(rng, "f64", F64, {}),
      randomEntry(rng, "i64", I64, {3, 1}),
      randomEntry(rng, "i32", I32, {4}),
      randomEntry(rng, "bool", BOOL, {7}),
      randomEntry(rng, "empty", F32, {2, 0, 3}),
      randomEntry(rng, "model.layers.0.self_attn.q_proj.weight", F32, {4, 4}),
      randomEntry(rng, "onnx::MatMul_123", F32, {4, 2}),
  };
  SafetensorsMetadata metadata = {{"format", "pt"}, {"note", "ünïcode \"quoted\""}};
  writeSafetensors(dir.file("t.safetensors"), entries, metadata);
  SafetensorsFile back = readSafetensors(dir.file("t.safetensors"));
  EXPECT_EQ(back.metadata, metadata);
  ASSERT_EQ(back.tensors.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    SCOPED_TRACE(entries[i].name);
    EXPECT_EQ(back.tensors[i].name, entries[i].name);
    EXPECT_EQ(back.tensors[i].dtype, entries[i].dtype);
    EXPECT_EQ(back.tensors[i].shape, entries[i].shape);
    EXPECT_EQ(back.tensors[i].data, entries[i].data);
  }
}

TEST(SafetensorsTest, WritesTheLayoutOfTheSpec) {
  std::vector<float> a = {1.0f, -2.0f, 3.5f};
  std::vector<int64_t> b = {-1, 1ll << 40};
  std::string bytes =
      encodeSafetensors({{"a", F32, {3}, a.data()}, {"b", I64, {2}, b.data()}}, {{"k", "v"}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data must start 8-byte aligned";
  ASSERT_EQ(bytes.size(), 8 + n + 12 + 16);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"k", "v"}}));
  EXPECT_EQ(header["a"],
            (nlohmann::json{{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 12}}}));
  EXPECT_EQ(header["b"],
            (nlohmann::json{{"dtype", "I64"}, {"shape", {2}}, {"data_offsets", {12, 28}}}));
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, a.data(), 12), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 12, b.data(), 16), 0);
}

TEST(SafetensorsTest, NoTensorsAndNoMetadata) {
  std::string bytes = encodeSafetensors({}, {});
  EXPECT_EQ(bytes.substr(8, 2), "{}");
  SafetensorsFile file = decodeSafetensors(bytes, "mem");
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_TRUE(file.metadata.empty());
}

TEST(SafetensorsTest, ReadsTensorsInDataOrderWhateverTheHeaderOrder) {
  // JSON object order is not significant; the data offsets are.
  std::string header = R"({"z":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},)"
                       R"("a":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})";
  int32_t values[2] = {7, 9};
  SafetensorsFile file =
      decodeSafetensors(fileWith(header, std::string(reinterpret_cast<char *>(values), 8)), "m");
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].name, "z");
  EXPECT_EQ(file.tensors[1].name, "a");
  int32_t a;
  std::memcpy(&a, file.tensors[1].data.data(), 4);
  EXPECT_EQ(a, 9);
}

TEST(SafetensorsTest, TruncatedFilesAreErrors) {
  TempDir dir;
  std::mt19937 rng(2);
  std::vector<TensorEntry> entries = {randomEntry(rng, "w", F32, {4, 4}),
                                      randomEntry(rng, "b", F32, {4})};
  std::string bytes = encodeSafetensors(
      {{"w", F32, {4, 4}, entries[0].data.data()}, {"b", F32, {4}, entries[1].data.data()}}, {});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  for (uint64_t cut : {uint64_t{0}, uint64_t{5}, uint64_t{8}, uint64_t{9}, 8 + n / 2, 8 + n - 1,
                       8 + n, 8 + n + 1, 8 + n + 64, uint64_t{bytes.size() - 1}}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    std::string path = dir.file("cut.safetensors");
    writeBytes(path, bytes.substr(0, cut));
    std::string message = errorOf([&] { readSafetensors(path); });
    EXPECT_THAT(message, HasSubstr(path));
    EXPECT_THAT(message, HasSubstr("truncated"));
  }
  // The tensor whose data is cut off is named.
  writeBytes(dir.file("cut.safetensors"), bytes.substr(0, bytes.size() - 1));
  EXPECT_THAT(errorOf([&] { readSafetensors(dir.file("cut.safetensors")); }),
              HasSubstr("tensor 'b'"));
}

TEST(SafetensorsTest, MissingFileIsAnError) {
  TempDir dir;
  EXPECT_THAT(errorOf([&] { readSafetensors(dir.file("none.safetensors")); }),
              AllOf(HasSubstr(dir.file("none.safetensors")), HasSubstr("cannot open")));
}

TEST(SafetensorsTest, CorruptHeadersAreErrors) {
  const std::string data8(8, '\0');
  auto entry = [](const std::string &name, const std::string &dtype, const std::string &shape,
                  const std::string &offsets) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };
  struct Case {
    const char *what;
    std::string bytes;
    std::vector<std::string> expected;
  };
  std::vector<Case> cases = {
      {"bad JSON", fileWith(R"({"a": {"dtype": )", data8), {"not valid JSON"}},
      {"not an object", fileWith("[1, 2]", ""), {"not a JSON object"}},
      {"empty header", fileWith("", data8), {"not a JSON object"}},
      {"header length past EOF",
       fileWith("{}", "", uint64_t{1} << 40),
       {"header length 1099511627776 runs past the end of the file (10 bytes)"}},
      {"unknown dtype",
       fileWith("{" + entry("w", "U8", "[8]", "[0,8]") + "}", data8),
       {"tensor 'w'", "unsupported dtype 'U8'"}},
      {"dtype/shape mismatch",
       fileWith("{" + entry("w", "F32", "[3]", "[0,8]") + "}", data8),
       {"tensor 'w'", "[0, 8) hold 8 bytes, but a F32 [3] tensor has 12"}},
      {"offsets past the data",
       fileWith("{" + entry("w", "F64", "[2]", "[0,16]") + "}", data8),
       {"tensor 'w'", "run past the end of the data (8 bytes)"}},
      {"offsets reversed",
       fileWith("{" + entry("w", "F32", "[0]", "[8,0]") + "}", data8),
       {"tensor 'w'", "end before they begin"}},
      {"offsets not a pair",
       fileWith("{" + entry("w", "F32", "[2]", "[0]") + "}", data8),
       {"tensor 'w'", "not a pair"}},
      {"negative offset",
       fileWith("{" + entry("w", "F32", "[2]", "[-8,0]") + "}", data8),
       {"tensor 'w'", "not a pair"}},
      {"overlapping",
       fileWith("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[4,12]") +
                    "}",
                std::string(12, '\0')),
       {"tensor 'b' [4, 12) overlaps tensor 'a' [0, 8)"}},
      {"same range twice",
       fileWith("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "F32", "[2]", "[0,8]") +
                    "}",
                data8),
       {"overlaps"}},
      {"gap",
       fileWith("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[1]", "[8,12]") +
                    "}",
                std::string(12, '\0')),
       {"bytes [4, 8) of the data belong to no tensor"}},
      {"trailing bytes",
       fileWith("{" + entry("a", "F32", "[1]", "[0,4]") + "}", data8),
       {"4 bytes after the end of the last tensor's data"}},
      {"duplicate tensor",
       fileWith("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("a", "F32", "[1]", "[4,8]") +
                    "}",
                data8),
       {"tensor 'a' appears twice"}},
      {"duplicate key",
       fileWith(R"({"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                std::string(4, '\0')),
       {"repeats the key 'dtype'"}},
      {"negative dimension",
       fileWith("{" + entry("w", "F32", "[-2]", "[0,8]") + "}", data8),
       {"tensor 'w'", "not a list of non-negative integers"}},
      {"missing shape",
       fileWith(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", data8),
       {"tensor 'w'", "needs dtype, shape and data_offsets"}},
      {"unknown key",
       fileWith(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data8),
       {"tensor 'w'", "unexpected key 'x'"}},
      {"entry not an object", fileWith(R"({"w":3})", ""), {"tensor 'w'", "not an object"}},
      {"metadata not strings",
       fileWith(R"({"__metadata__":{"step":3}})", ""),
       {"'step' is not a string"}},
      {"shape overflows",
       fileWith("{" + entry("w", "F32", "[4294967296,4294967296]", "[0,8]") + "}", data8),
       {"tensor 'w'", "too large"}},
      {"shorter than the header length",
       std::string(5, '\0'),
       {"truncated: 5 bytes, fewer than the 8 of the header length"}},
      {"metadata not an object",
       fileWith(R"({"__metadata__":3})", ""),
       {"\"__metadata__\" is not an object of strings"}},
      {"dtype not a string",
       fileWith(R"({"w":{"dtype":1,"shape":[2],"data_offsets":[0,8]}})", data8),
       {"tensor 'w': dtype is not a string"}},
      {"shape not an array",
       fileWith(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", data8),
       {"tensor 'w': shape is not an array"}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    std::string message = decodeError(c.bytes);
    EXPECT_THAT(message, HasSubstr("bad.safetensors: "));
    for (const std::string &part : c.expected)
      EXPECT_THAT(message, HasSubstr(part));
  }
}

// A header length past the reference implementation's limit is corruption, even when the file is
// that long: it is refused before any of it is parsed.
TEST(SafetensorsTest, HeaderOverTheLimitIsAnError) {
  const uint64_t length = 100'000'001;
  std::string bytes = fileWith(std::string(length, ' '), "");
  EXPECT_THAT(decodeError(bytes),
              HasSubstr("bad.safetensors: the header length 100000001 is over the limit of "
                        "100000000 bytes"));
}

TEST(SafetensorsTest, WriterRefusesWhatItCannotWrite) {
  float x = 0;
  EXPECT_THAT(errorOf([&] {
                encodeSafetensors({{"a", F32, {1}, &x}, {"a", F32, {1}, &x}}, {});
              }),
              HasSubstr("two tensors are named 'a'"));
  EXPECT_THAT(errorOf([&] {
                encodeSafetensors({{"__metadata__", F32, {1}, &x}}, {});
              }),
              HasSubstr("cannot be named '__metadata__'"));
  EXPECT_THAT(errorOf([&] {
                encodeSafetensors({{"a", DTYPE_UNSPECIFIED, {1}, &x}}, {});
              }),
              AllOf(HasSubstr("tensor 'a'"), HasSubstr("cannot store dtype unspecified")));
  EXPECT_THAT(errorOf([&] {
                encodeSafetensors({{"a", F32, {-1}, &x}}, {});
              }),
              AllOf(HasSubstr("tensor 'a'"), HasSubstr("invalid shape [-1]")));
  EXPECT_THAT(errorOf([&] {
                encodeSafetensors({{"a", F32, {2}, nullptr}}, {});
              }),
              AllOf(HasSubstr("tensor 'a'"), HasSubstr("no data")));
  EXPECT_THAT(errorOf([&] {
                encodeSafetensors({{"\xff", F32, {1}, &x}}, {});
              }),
              HasSubstr("cannot write the header"));

  TempDir dir;
  TensorEntry wrongSize{"w", F32, {3}, std::vector<std::byte>(8)};
  EXPECT_THAT(errorOf([&] { writeSafetensors(dir.file("w.safetensors"), {wrongSize}); }),
              AllOf(HasSubstr(dir.file("w.safetensors")), HasSubstr("tensor 'w' has 8 bytes")));
  EXPECT_TRUE(listDir(dir.path()).empty());
}

// --- training checkpoints
// --------------------------------------------------------------------------

// Floats whose bits must survive: -0, denormals, the largest floats. (NaN and infinities are
// refused by the checkpoint reader, below; the safetensors layer carries their bits, above.)
std::vector<float> awkwardFloats(std::mt19937 &rng, size_t count, bool nonNegative = false) {
  std::vector<float> values = randomFloats(rng, count);
  const uint32_t special[] = {0x80000000u, 0x00000001u, 0x7f7fffffu, 0x807fffffu,
                              0x00000000u, 0xff7fffffu, 0x007fffffu, 0x80000001u};
  for (size_t i = 0; i < count && i < std::size(special); ++i)
    std::memcpy(&values[i * 3 % count], &special[i], 4);
  if (nonNegative)
    for (float &value : values)
      if (value < 0)
        value = -value;
  return values;
}

// The second moment is never negative; the reader refuses a checkpoint where it is.
ParameterState randomParameter(std::mt19937 &rng, const std::string &name, Shape shape) {
  size_t n = numel(shape).value();
  return {name, shape, awkwardFloats(rng, n), awkwardFloats(rng, n),
          awkwardFloats(rng, n, /*nonNegative=*/true)};
}

TrainingCheckpoint sampleCheckpoint(uint32_t seed = 3) {
  std::mt19937 rng(seed);
  TrainingCheckpoint checkpoint;
  checkpoint.step = 1234567890123ull;
  checkpoint.modelFingerprint = "tiny-llama-9f2c";
  checkpoint.dataPosition = 98765;
  checkpoint.rngState = 0xdeadbeefcafef00dull;
  checkpoint.parameters = {randomParameter(rng, "model.embed_tokens.weight", {16, 8}),
                           randomParameter(rng, "onnx::MatMul_1042", {8, 8}),
                           randomParameter(rng, "model.norm.weight", {8}),
                           randomParameter(rng, "scale", {})};
  return checkpoint;
}

std::vector<ParameterSpec> specsOf(const TrainingCheckpoint &checkpoint) {
  std::vector<ParameterSpec> specs;
  for (const ParameterState &p : checkpoint.parameters)
    specs.push_back({p.name, p.shape});
  return specs;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CheckpointTest, RoundTripIsBitIdentical) {
  TempDir dir;
  TrainingCheckpoint saved = sampleCheckpoint();
  saveCheckpoint(dir.file("ckpt.safetensors"), saved);
  TrainingCheckpoint loaded =
      loadCheckpoint(dir.file("ckpt.safetensors"), saved.modelFingerprint, specsOf(saved));
  EXPECT_EQ(loaded.step, saved.step);
  EXPECT_EQ(loaded.modelFingerprint, saved.modelFingerprint);
  EXPECT_EQ(loaded.dataPosition, saved.dataPosition);
  EXPECT_EQ(loaded.rngState, saved.rngState);
  ASSERT_EQ(loaded.parameters.size(), saved.parameters.size());
  for (size_t i = 0; i < saved.parameters.size(); ++i) {
    SCOPED_TRACE(saved.parameters[i].name);
    EXPECT_EQ(loaded.parameters[i].name, saved.parameters[i].name);
    EXPECT_EQ(loaded.parameters[i].shape, saved.parameters[i].shape);
    EXPECT_TRUE(sameBits(loaded.parameters[i].master, saved.parameters[i].master));
    EXPECT_TRUE(sameBits(loaded.parameters[i].adamM, saved.parameters[i].adamM));
    EXPECT_TRUE(sameBits(loaded.parameters[i].adamV, saved.parameters[i].adamV));
  }
  // Saving what was loaded writes the same bytes.
  saveCheckpoint(dir.file("again.safetensors"), loaded);
  EXPECT_EQ(readFile(dir.file("again.safetensors")), readFile(dir.file("ckpt.safetensors")));
}

TEST(CheckpointTest, ReturnsParametersInTheModelsOrder) {
  TempDir dir;
  TrainingCheckpoint saved = sampleCheckpoint();
  saveCheckpoint(dir.file("ckpt.safetensors"), saved);
  std::vector<ParameterSpec> specs = specsOf(saved);
  std::reverse(specs.begin(), specs.end());
  TrainingCheckpoint loaded =
      loadCheckpoint(dir.file("ckpt.safetensors"), saved.modelFingerprint, specs);
  ASSERT_EQ(loaded.parameters.size(), 4u);
  EXPECT_EQ(loaded.parameters[0].name, "scale");
  EXPECT_TRUE(sameBits(loaded.parameters[3].adamV, saved.parameters[0].adamV));
}

TEST(CheckpointTest, StoresWeightsUnderOnnxNamesForOtherTools) {
  TempDir dir;
  TrainingCheckpoint saved = sampleCheckpoint();
  saveCheckpoint(dir.file("ckpt.safetensors"), saved);
  SafetensorsFile file = readSafetensors(dir.file("ckpt.safetensors"));
  std::vector<std::string> names;
  for (const TensorEntry &entry : file.tensors) {
    names.push_back(entry.name);
    EXPECT_EQ(entry.dtype, F32);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "model.embed_tokens.weight", "model.embed_tokens.weight.adam_m",
                "model.embed_tokens.weight.adam_v", "onnx::MatMul_1042", "onnx::MatMul_1042.adam_m",
                "onnx::MatMul_1042.adam_v", "model.norm.weight", "model.norm.weight.adam_m",
                "model.norm.weight.adam_v", "scale", "scale.adam_m", "scale.adam_v"}));
  EXPECT_EQ(file.tensors[3].shape, (Shape{8, 8}));
  EXPECT_EQ(file.metadata,
            (SafetensorsMetadata{{"speedloader.checkpoint", "1"},
                                 {"speedloader.step", "1234567890123"},
                                 {"speedloader.model_fingerprint", "tiny-llama-9f2c"},
                                 {"speedloader.data_position", "98765"},
                                 {"speedloader.rng_state", "16045690984503111693"}}));
}

TEST(CheckpointTest, AnotherModelsCheckpointIsAnError) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  TrainingCheckpoint saved = sampleCheckpoint();
  saveCheckpoint(path, saved);
  std::vector<ParameterSpec> specs = specsOf(saved);

  EXPECT_THAT(errorOf([&] { loadCheckpoint(path, "gpt2-0000", specs); }),
              AllOf(HasSubstr(path), HasSubstr("another model"), HasSubstr("'tiny-llama-9f2c'"),
                    HasSubstr("'gpt2-0000'")));

  std::vector<ParameterSpec> reshaped = specs;
  reshaped[1].shape = {4, 16};
  EXPECT_THAT(errorOf([&] { loadCheckpoint(path, saved.modelFingerprint, reshaped); }),
              AllOf(HasSubstr(path), HasSubstr("does not match this model"),
                    HasSubstr("tensor 'onnx::MatMul_1042' is f32 [8, 8]"),
                    HasSubstr("parameter 'onnx::MatMul_1042' of this model is f32 [4, 16]"),
                    Not(HasSubstr("written for model"))));

  std::vector<ParameterSpec> extra = specs;
  extra.insert(extra.begin() + 2, {"lm_head.weight", {16, 8}});
  EXPECT_THAT(errorOf([&] { loadCheckpoint(path, "other", extra); }),
              AllOf(HasSubstr("no tensor 'lm_head.weight'"), HasSubstr("f32 [16, 8]"),
                    HasSubstr("written for model 'tiny-llama-9f2c', this model is 'other'")));

  std::vector<ParameterSpec> fewer(specs.begin(), specs.end() - 1);
  EXPECT_THAT(errorOf([&] { loadCheckpoint(path, saved.modelFingerprint, fewer); }),
              HasSubstr("holds tensor 'scale' (f32 []), which is not a parameter of this model"));

  // A moment missing from the file is named as such.
  TrainingCheckpoint noMoment = saved;
  SafetensorsFile file = readSafetensors(path);
  file.tensors.erase(file.tensors.begin() + 1);
  writeSafetensors(dir.file("partial.safetensors"), file.tensors, file.metadata);
  EXPECT_THAT(errorOf([&] {
                loadCheckpoint(dir.file("partial.safetensors"), saved.modelFingerprint, specs);
              }),
              HasSubstr("no tensor 'model.embed_tokens.weight.adam_m' (the AdamW first moment"));
}

TEST(CheckpointTest, PlainWeightFilesAreNotCheckpoints) {
  TempDir dir;
  float w[2] = {1, 2};
  writeSafetensors(dir.file("weights.safetensors"), std::vector<TensorView>{{"w", F32, {2}, w}},
                   {{"format", "pt"}});
  EXPECT_THAT(errorOf([&] {
                loadCheckpoint(dir.file("weights.safetensors"), "m", {{"w", {2}}});
              }),
              AllOf(HasSubstr("not a SpeedLoader training checkpoint"),
                    HasSubstr("speedloader.checkpoint")));
  writeSafetensors(dir.file("future.safetensors"), std::vector<TensorView>{},
                   {{"speedloader.checkpoint", "2"}});
  EXPECT_THAT(errorOf([&] { loadCheckpoint(dir.file("future.safetensors"), "m", {}); }),
              HasSubstr("layout version '2' is not supported"));
  writeSafetensors(dir.file("badstep.safetensors"), std::vector<TensorView>{},
                   {{"speedloader.checkpoint", "1"},
                    {"speedloader.model_fingerprint", "m"},
                    {"speedloader.step", "-3"},
                    {"speedloader.data_position", "0"},
                    {"speedloader.rng_state", "0"}});
  EXPECT_THAT(errorOf([&] { loadCheckpoint(dir.file("badstep.safetensors"), "m", {}); }),
              HasSubstr("'speedloader.step' is '-3', not a non-negative integer"));
}

TEST(CheckpointTest, TruncatedCheckpointIsAnError) {
  TempDir dir;
  TrainingCheckpoint saved = sampleCheckpoint();
  saveCheckpoint(dir.file("full.safetensors"), saved);
  std::string bytes = readFile(dir.file("full.safetensors"));
  for (size_t cut : {size_t{3}, size_t{100}, bytes.size() / 2, bytes.size() - 4}) {
    SCOPED_TRACE(cut);
    writeBytes(dir.file("cut.safetensors"), bytes.substr(0, cut));
    EXPECT_THAT(errorOf([&] {
                  loadCheckpoint(dir.file("cut.safetensors"), saved.modelFingerprint,
                                 specsOf(saved));
                }),
                AllOf(HasSubstr(dir.file("cut.safetensors")), HasSubstr("truncated")));
  }
}

// Training never saves such values, so a file holding one is corrupt: resuming from it would train
// on NaN. The message names the tensor, what it is, and the element.
TEST(CheckpointTest, NonFiniteValuesAndNegativeSecondMomentsAreRefused) {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    size_t parameter;
    std::vector<float> ParameterState::*values;
    size_t element;
    float value;
    std::string message;
  };
  const Case cases[] = {
      {0, &ParameterState::master, 5, nan,
       "tensor 'model.embed_tokens.weight' (the master weights of parameter "
       "'model.embed_tokens.weight') holds NaN at element 5: the checkpoint is corrupt"},
      {1, &ParameterState::adamM, 0, -inf,
       "tensor 'onnx::MatMul_1042.adam_m' (the AdamW first moment of parameter "
       "'onnx::MatMul_1042') holds -inf at element 0: the checkpoint is corrupt"},
      {3, &ParameterState::adamV, 0, inf,
       "tensor 'scale.adam_v' (the AdamW second moment of parameter 'scale') holds inf at "
       "element 0"},
      {2, &ParameterState::adamV, 7, -0.5f,
       "tensor 'model.norm.weight.adam_v' (the AdamW second moment of parameter "
       "'model.norm.weight') holds -0.5 at element 7, but a second moment is never negative: the "
       "checkpoint is corrupt"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.message);
    TrainingCheckpoint saved = sampleCheckpoint();
    (saved.parameters[c.parameter].*c.values)[c.element] = c.value;
    saveCheckpoint(path, saved);
    EXPECT_THAT(errorOf([&] { loadCheckpoint(path, saved.modelFingerprint, specsOf(saved)); }),
                HasSubstr(path + ": " + c.message));
  }
}

TEST(CheckpointTest, ModelListingAParameterTwiceIsAnError) {
  TempDir dir;
  TrainingCheckpoint saved = sampleCheckpoint();
  saveCheckpoint(dir.file("ckpt.safetensors"), saved);
  std::vector<ParameterSpec> specs = specsOf(saved);
  specs.push_back(specs[1]);
  EXPECT_THAT(
      errorOf([&] { loadCheckpoint(dir.file("ckpt.safetensors"), saved.modelFingerprint, specs); }),
      HasSubstr("ckpt.safetensors: the model lists parameter 'onnx::MatMul_1042' twice"));
}

TEST(CheckpointTest, SaveRefusesInconsistentState) {
  TempDir dir;
  TrainingCheckpoint bad = sampleCheckpoint();
  bad.parameters[2].adamV.pop_back();
  EXPECT_THAT(errorOf([&] { saveCheckpoint(dir.file("c.safetensors"), bad); }),
              AllOf(HasSubstr(dir.file("c.safetensors")), HasSubstr("'model.norm.weight'"),
                    HasSubstr("AdamW second moment hold 7 values, its shape [8] has 8")));
  TrainingCheckpoint negative = sampleCheckpoint();
  negative.parameters[0].shape = {-16, 8};
  EXPECT_THAT(errorOf([&] { saveCheckpoint(dir.file("c.safetensors"), negative); }),
              HasSubstr("c.safetensors: cannot save parameter 'model.embed_tokens.weight': "
                        "invalid shape [-16, 8]"));
  TrainingCheckpoint clash = sampleCheckpoint();
  clash.parameters[3].name = "onnx::MatMul_1042.adam_m";
  EXPECT_THAT(errorOf([&] { saveCheckpoint(dir.file("c.safetensors"), clash); }),
              AllOf(HasSubstr("c.safetensors"), HasSubstr("two tensors are named")));
  EXPECT_TRUE(listDir(dir.path()).empty());
}

// --- atomicity: a failed save leaves the previous checkpoint and nothing else ------------------

class AtomicSaveTest : public ::testing::Test {
protected:
  void SetUp() override {
    path = dir.file("ckpt.safetensors");
    saveCheckpoint(path, sampleCheckpoint(1));
    before = readFile(path);
    update = sampleCheckpoint(2);
  }
  void expectUnchanged() {
    EXPECT_EQ(readFile(path), before);
    EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"ckpt.safetensors"});
  }

  TempDir dir;
  std::string path, before;
  TrainingCheckpoint update;
};

TEST_F(AtomicSaveTest, SucceedingSaveReplacesTheFile) {
  saveCheckpoint(path, update);
  EXPECT_NE(readFile(path), before);
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"ckpt.safetensors"});
}

TEST_F(AtomicSaveTest, InvalidStateLeavesTheOldFile) {
  update.parameters[0].master.clear();
  EXPECT_THROW(saveCheckpoint(path, update), Error);
  expectUnchanged();
}

TEST_F(AtomicSaveTest, WriteFailingMidwayLeavesTheOldFile) {
  // A file size limit makes write() fail with EFBIG part-way through the temporary file, the way
  // a full disk would. SIGXFSZ would otherwise kill the process.
  struct Restore {
    rlimit limit;
    void (*handler)(int);
    ~Restore() {
      ::setrlimit(RLIMIT_FSIZE, &limit);
      std::signal(SIGXFSZ, handler);
    }
  } restore{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &restore.limit), 0);
  restore.handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = restore.limit;
  small.rlim_cur = before.size() / 2;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message = errorOf([&] { saveCheckpoint(path, update); });
  ::setrlimit(RLIMIT_FSIZE, &restore.limit);
  EXPECT_THAT(message, AllOf(HasSubstr(path), HasSubstr("cannot write")));
  expectUnchanged();
}

TEST_F(AtomicSaveTest, ReadOnlyDirectoryLeavesTheOldFile) {
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  if (::geteuid() != 0) {
    std::string message = errorOf([&] { saveCheckpoint(path, update); });
    EXPECT_THAT(message, AllOf(HasSubstr(path), HasSubstr("temporary")));
  } else {
    // Root ignores directory permissions: save as an unprivileged user in a child process.
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0)
        ::_exit(2);
      try {
        saveCheckpoint(path, update);
      } catch (const Error &e) {
        std::string message = e.what();
        bool named = message.find(path) != std::string::npos &&
                     message.find("temporary") != std::string::npos;
        ::_exit(named ? 0 : 3);
      }
      ::_exit(4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 2) {
      ::chmod(dir.path().c_str(), 0755);
      GTEST_SKIP() << "cannot drop root privileges here";
    }
    EXPECT_EQ(WEXITSTATUS(status), 0) << "3: the error does not name the file; 4: no error";
  }
  ::chmod(dir.path().c_str(), 0755);
  expectUnchanged();
}

TEST_F(AtomicSaveTest, RenameFailingLeavesNoTemporary) {
  // The target is a directory: the temporary is written in full, then rename() fails.
  std::filesystem::create_directory(dir.file("ckpt.d"));
  std::string message = errorOf([&] { saveCheckpoint(dir.file("ckpt.d"), update); });
  EXPECT_THAT(message, HasSubstr(dir.file("ckpt.d")));
  EXPECT_EQ(listDir(dir.path()), (std::vector<std::string>{"ckpt.d", "ckpt.safetensors"}));
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("ckpt.d")));
  EXPECT_EQ(readFile(path), before);
}

TEST_F(AtomicSaveTest, MissingDirectoryIsAnError) {
  std::string missing = dir.file("no/such/dir/ckpt.safetensors");
  EXPECT_THAT(errorOf([&] { saveCheckpoint(missing, update); }),
              AllOf(HasSubstr(missing), HasSubstr("No such file or directory")));
  expectUnchanged();
}

} // namespace
} // namespace slrt::test
