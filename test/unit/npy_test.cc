// .npy reading and writing: round trips, and strict rejection of what we do not support.
#include <cstring>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/npy.h"
#include "slrt/read_file.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

// A .npy file with the given header dict (padded as NumPy does) and `dataBytes` bytes of data.
std::string npyWithHeader(const std::string &dict, size_t dataBytes, int major = 1) {
  std::string header = dict;
  size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < preamble - 8; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(dataBytes, '\0');
}

std::string decodeError(const std::string &bytes) {
  try {
    decodeNpy(bytes, "t.npy");
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an Error";
  return "";
}

template <typename T> void expectRoundTrip(DType dtype, Shape shape) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  for (uint64_t i = 0; i < t.numel(); ++i)
    t.as<T>()[i] = static_cast<T>(i * 3) - static_cast<T>(7);
  HostTensor back = decodeNpy(encodeNpy(t), "mem");
  EXPECT_EQ(back.dtype, dtype);
  EXPECT_EQ(back.shape, shape);
  EXPECT_EQ(back.data, t.data);
}

TEST(NpyTest, RoundTripsEveryDTypeAndRank) {
  for (Shape shape : {Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 0, 4}, Shape{1, 2, 3, 4}}) {
    SCOPED_TRACE(formatShape(shape));
    expectRoundTrip<float>(F32, shape);
    expectRoundTrip<double>(F64, shape);
    expectRoundTrip<int64_t>(I64, shape);
    expectRoundTrip<int32_t>(I32, shape);
    expectRoundTrip<uint8_t>(BOOL, shape);
  }
}

TEST(NpyTest, ReadsAndWritesNumpyBool) {
  // What numpy.save writes for np.array([True, False, True]).
  std::string bytes =
      npyWithHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", 0) +
      std::string("\x01\x00\x01", 3);
  HostTensor t = decodeNpy(bytes, "bool.npy");
  EXPECT_EQ(t.dtype, BOOL);
  EXPECT_EQ(t.shape, (Shape{3}));
  EXPECT_EQ(std::vector<uint8_t>(t.as<uint8_t>(), t.as<uint8_t>() + 3),
            (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(encodeNpy(t), bytes);
}

TEST(NpyTest, ReadsNumpyInt64) {
  std::string bytes = npyWithHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 0);
  for (int64_t v : {int64_t{-3}, int64_t{1} << 40})
    bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  HostTensor t = decodeNpy(bytes, "ids.npy");
  EXPECT_EQ(t.dtype, I64);
  EXPECT_EQ(t.as<int64_t>()[0], -3);
  EXPECT_EQ(t.as<int64_t>()[1], int64_t{1} << 40);
}

TEST(NpyTest, WritesHeadersNumpyReads) {
  std::string bytes = encodeNpy(f32Tensor({3}, {1, 2, 3}));
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerLength = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9])
                                                                   << 8;
  EXPECT_EQ((10 + headerLength) % 64, 0u);
  EXPECT_THAT(bytes.substr(10, headerLength),
              HasSubstr("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"));
  EXPECT_EQ(bytes.size(), 10 + headerLength + 12);
}

TEST(NpyTest, ReadsVersion2AndDoubleQuotes) {
  HostTensor t = decodeNpy(
      npyWithHeader("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2,3)}", 24, 2),
      "v2.npy");
  EXPECT_EQ(t.dtype, I32);
  EXPECT_EQ(t.shape, (Shape{2, 3}));
}

TEST(NpyTest, FileRoundTripIsAtomic) {
  TempDir dir;
  std::string path = dir.file("out.npy");
  HostTensor t = f32Tensor({2, 2}, {1.5f, -2, 3, 4});
  writeNpy(path, t);
  EXPECT_EQ(readNpy(path).data, t.data);
  // No temporary is left beside it.
  int files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path()))
    files += entry.is_regular_file();
  EXPECT_EQ(files, 1);
  // A failed write leaves nothing behind either.
  EXPECT_THROW(writeNpy(dir.file("missing/out.npy"), t), Error);
  HostTensor bf16 = HostTensor::zeros(BF16, {2});
  EXPECT_THROW(writeNpy(dir.file("bf16.npy"), bf16), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("bf16.npy")));
}

// A streamed file is the bytes encodeNpy makes; a bf16 tensor is written as f32 widened exactly,
// across more than one of the writer's chunks of 2^20 elements, with the header of the f32 shape.
TEST(NpyTest, StreamedWritesAreTheEncodedBytesAndWidenBf16InChunks) {
  TempDir dir;
  HostTensor t = f32Tensor({3, 2}, {1.5f, -2, 3, 4, -0.0f, 6});
  writeNpy(dir.file("t.npy"), t.view());
  EXPECT_EQ(readFile(dir.file("t.npy")), encodeNpy(t));

  // 2.1M elements: two whole chunks and part of a third.
  HostTensor narrow = HostTensor::zeros(BF16, {3, 700000});
  const uint64_t n = narrow.numel();
  ASSERT_GT(n, uint64_t{2} << 20);
  uint16_t *bits = reinterpret_cast<uint16_t *>(narrow.data.data());
  for (uint64_t i = 0; i < n; ++i)
    bits[i] = static_cast<uint16_t>((i * 2654435761u) >> 7); // every sign, exponent and NaN
  writeNpyAsF32(dir.file("wide.npy"), narrow.view());
  HostTensor wide = readNpy(dir.file("wide.npy"));
  EXPECT_EQ(wide.dtype, F32);
  EXPECT_EQ(wide.shape, narrow.shape);
  EXPECT_EQ(wide.data, widenedToF32(narrow).data); // bytewise: NaN payloads and -0 kept
  // Other dtypes are written as they are.
  writeNpyAsF32(dir.file("same.npy"), t.view());
  EXPECT_EQ(readFile(dir.file("same.npy")), encodeNpy(t));
}

struct BadNpy {
  const char *name;
  std::string bytes;
  const char *message;
};

// Names the case in test output instead of a byte dump.
void PrintTo(const BadNpy &c, std::ostream *os) { *os << c.name; }

class NpyRejectTest : public ::testing::TestWithParam<BadNpy> {};

TEST_P(NpyRejectTest, RejectsWithMessage) {
  EXPECT_THAT(decodeError(GetParam().bytes), HasSubstr(GetParam().message));
}

const std::string kGood = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

INSTANTIATE_TEST_SUITE_P(
    Npy, NpyRejectTest,
    ::testing::Values(
        BadNpy{"Empty", "", "t.npy: not a .npy file (bad magic)"},
        BadNpy{"NotNpy", "PK\x03\x04 this is a zip", "not a .npy file (bad magic)"},
        BadNpy{"Version3", std::string("\x93NUMPY\x03\x00\x00\x00", 10),
               ".npy format version 3.0 is not supported (supported: 1.0, 2.0)"},
        BadNpy{"TruncatedLength", std::string("\x93NUMPY\x01\x00\x10", 9), "truncated .npy header"},
        BadNpy{"TruncatedHeader", npyWithHeader(kGood, 24).substr(0, 40),
               "truncated .npy header (118 bytes declared, 30 present)"},
        BadNpy{"NoNewline", std::string("\x93NUMPY\x01\x00\x02\x00{}", 12),
               "bad .npy header: it does not end with a newline"},
        BadNpy{"NotADict", npyWithHeader("[1, 2]", 0), "bad .npy header: expected '{'"},
        BadNpy{"MissingKey", npyWithHeader("{'descr': '<f4', 'shape': (2, 3)}", 24),
               "the header must have the keys 'descr', 'fortran_order' and 'shape'"},
        BadNpy{"UnknownKey",
               npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", 4),
               "unexpected or repeated key 'x'"},
        BadNpy{"RepeatedKey",
               npyWithHeader(
                   "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4),
               "unexpected or repeated key 'descr'"},
        BadNpy{"UnterminatedString", npyWithHeader("{'descr': '<f4}", 4),
               "bad .npy header: unterminated string"},
        BadNpy{"BadBool", npyWithHeader("{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", 4),
               "expected True or False"},
        BadNpy{"NegativeDim",
               npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4),
               "expected a non-negative integer dimension"},
        BadNpy{"TrailingText", npyWithHeader(kGood + " junk", 24),
               "unexpected text after the header dict"},
        BadNpy{"BigEndian",
               npyWithHeader("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24),
               "big-endian data ('>f4') is not supported"},
        BadNpy{"UnsupportedDType",
               npyWithHeader("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", 12),
               "unsupported dtype '<f2' (supported: '<f4', '<f8', '<i8', '<i4', '|b1')"},
        BadNpy{"Bfloat16Bits",
               npyWithHeader("{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3), }", 12),
               "unsupported dtype '<u2' (supported: '<f4', '<f8', '<i8', '<i4', '|b1'; numpy has "
               "no bfloat16: give a bf16 input as float32, which is rounded to bf16)"},
        BadNpy{"UnsignedBytes",
               npyWithHeader("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", 6),
               "unsupported dtype '|u1'"},
        BadNpy{"StructuredDType",
               npyWithHeader("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8),
               "expected a string"},
        BadNpy{"FortranOrder",
               npyWithHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24),
               "Fortran-order arrays are not supported"},
        BadNpy{"TruncatedData", npyWithHeader(kGood, 23),
               "a f32 [2, 3] array needs 24 bytes of data but the file has 23 (truncated)"},
        BadNpy{"ExtraData", npyWithHeader(kGood, 25),
               "a f32 [2, 3] array needs 24 bytes of data but the file has 25"},
        BadNpy{"HugeShape",
               npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                             "4294967296), }",
                             0),
               "shape [4294967296, 4294967296] is too large"},
        BadNpy{"DimTooLarge",
               npyWithHeader("{'descr': '<f4', 'fortran_order': False, 'shape': "
                             "(99999999999999999999,), }",
                             0),
               "dimension too large"}),
    [](const auto &info) { return std::string(info.param.name); });

TEST(NpyTest, ReadNpyNamesTheFile) {
  TempDir dir;
  try {
    readNpy(dir.file("absent.npy"));
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("absent.npy: cannot open"));
  }
}

} // namespace
} // namespace slrt::test
