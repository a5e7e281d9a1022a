// Token data: the window rule (inputs and labels shifted by one, wrap-around at the end of the
// file), both token widths, and every error a user can cause.
#include <climits>
#include <cstring>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/token_data.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A token file of `tokens` at the given width, little-endian.
std::string tokenBytes(const std::vector<uint64_t> &tokens, TokenDType dtype) {
  std::string bytes;
  for (uint64_t token : tokens)
    for (uint64_t i = 0; i < tokenDTypeSize(dtype); ++i)
      bytes += static_cast<char>((token >> (8 * i)) & 0xff);
  return bytes;
}

std::string writeTokens(const TempDir &dir, const std::vector<uint64_t> &tokens,
                        TokenDType dtype = TokenDType::U16, const std::string &name = "t.bin") {
  std::string path = dir.file(name);
  writeBytes(path, tokenBytes(tokens, dtype));
  return path;
}

std::vector<uint64_t> iota(uint64_t count, uint64_t first = 0) {
  std::vector<uint64_t> tokens(count);
  for (uint64_t i = 0; i < count; ++i)
    tokens[i] = first + i;
  return tokens;
}

std::vector<int64_t> values(const HostTensor &t) {
  return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.numel());
}

// The issue's rule written out directly: sequence j of step t has inputs tokens
// [t*B*S + j*S, +S) and labels the same shifted by one, indices mod N.
void expectReference(const TokenData &data, const std::vector<uint64_t> &tokens, uint64_t step,
                     int64_t B, int64_t S, int64_t vocab) {
  TokenBatch batch = data.batch(step, B, S, vocab);
  ASSERT_EQ(batch.inputs.dtype, sl::schedule::I64);
  ASSERT_EQ(batch.inputs.shape, (Shape{B, S}));
  ASSERT_EQ(batch.labels.dtype, sl::schedule::I64);
  ASSERT_EQ(batch.labels.shape, (Shape{B, S}));
  unsigned __int128 n = tokens.size();
  for (int64_t j = 0; j < B; ++j)
    for (int64_t k = 0; k < S; ++k) {
      unsigned __int128 at = static_cast<unsigned __int128>(step) * B * S + j * S + k;
      SCOPED_TRACE("step " + std::to_string(step) + " j " + std::to_string(j) + " k " +
                   std::to_string(k));
      EXPECT_EQ(batch.inputs.as<int64_t>()[j * S + k], static_cast<int64_t>(tokens[at % n]));
      EXPECT_EQ(batch.labels.as<int64_t>()[j * S + k], static_cast<int64_t>(tokens[(at + 1) % n]));
    }
}

TEST(TokenDataTest, OpensAndCountsTokens) {
  TempDir dir;
  TokenData u16 =
      TokenData::open(writeTokens(dir, iota(10), TokenDType::U16, "a"), TokenDType::U16);
  EXPECT_EQ(u16.numTokens(), 10u);
  EXPECT_EQ(u16.dtype(), TokenDType::U16);
  EXPECT_EQ(u16.path(), dir.file("a"));
  TokenData u32 =
      TokenData::open(writeTokens(dir, iota(10), TokenDType::U32, "b"), TokenDType::U32);
  EXPECT_EQ(u32.numTokens(), 10u);
}

TEST(TokenDataTest, ReadsLittleEndian) {
  TempDir dir;
  writeBytes(dir.file("le16"), std::string("\x34\x12\xff\xff", 4));
  TokenData u16 = TokenData::open(dir.file("le16"), TokenDType::U16);
  EXPECT_EQ(u16.token(0), 0x1234u);
  EXPECT_EQ(u16.token(1), 0xffffu);
  writeBytes(dir.file("le32"), std::string("\x78\x56\x34\x12", 4));
  EXPECT_EQ(TokenData::open(dir.file("le32"), TokenDType::U32).token(0), 0x12345678u);
}

TEST(TokenDataTest, FirstStepsAsWrittenInTheIssue) {
  TempDir dir;
  TokenData data = TokenData::open(writeTokens(dir, iota(20, 100)), TokenDType::U16);
  // B = 2, S = 3: step 0 reads tokens 0..6, step 1 tokens 6..12.
  TokenBatch b0 = data.batch(0, 2, 3, 1000);
  EXPECT_EQ(values(b0.inputs), (std::vector<int64_t>{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(values(b0.labels), (std::vector<int64_t>{101, 102, 103, 104, 105, 106}));
  TokenBatch b1 = data.batch(1, 2, 3, 1000);
  EXPECT_EQ(values(b1.inputs), (std::vector<int64_t>{106, 107, 108, 109, 110, 111}));
  EXPECT_EQ(values(b1.labels), (std::vector<int64_t>{107, 108, 109, 110, 111, 112}));
}

TEST(TokenDataTest, WrapsAroundAtTheEndOfTheFile) {
  TempDir dir;
  TokenData data = TokenData::open(writeTokens(dir, iota(10)), TokenDType::U16);
  // B = 1, S = 4: step 2 starts at 8 and runs past the end.
  TokenBatch b = data.batch(2, 1, 4, 10);
  EXPECT_EQ(values(b.inputs), (std::vector<int64_t>{8, 9, 0, 1}));
  EXPECT_EQ(values(b.labels), (std::vector<int64_t>{9, 0, 1, 2}));
  // Step 3 starts at 12 mod 10 = 2.
  EXPECT_EQ(values(data.batch(3, 1, 4, 10).inputs), (std::vector<int64_t>{2, 3, 4, 5}));
  // Step 5 starts at 20 mod 10 = 0 again.
  EXPECT_EQ(values(data.batch(5, 1, 4, 10).inputs), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(TokenDataTest, OnlyTheLabelWraps) {
  TempDir dir;
  // Exactly B*S+1 = 7 tokens. Step 0's window ends on the file's last token, which is only a
  // label; step 1 starts at 6 and wraps at once.
  TokenData data = TokenData::open(writeTokens(dir, iota(7)), TokenDType::U16);
  TokenBatch b0 = data.batch(0, 2, 3, 7);
  EXPECT_EQ(values(b0.inputs), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(values(b0.labels), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  TokenBatch b1 = data.batch(1, 2, 3, 7);
  EXPECT_EQ(values(b1.inputs), (std::vector<int64_t>{6, 0, 1, 2, 3, 4}));
  EXPECT_EQ(values(b1.labels), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(TokenDataTest, MatchesTheRuleForManyStepsAndShapes) {
  TempDir dir;
  std::mt19937 rng(7);
  std::vector<uint64_t> tokens(37);
  for (uint64_t &t : tokens)
    t = rng() % 500;
  TokenData data = TokenData::open(writeTokens(dir, tokens), TokenDType::U16);
  for (auto [B, S] : {std::pair<int64_t, int64_t>{1, 1}, {2, 5}, {3, 4}, {4, 9}, {1, 36}})
    for (uint64_t step : {0ull, 1ull, 2ull, 7ull, 100ull, 12345ull})
      expectReference(data, tokens, step, B, S, 500);
}

TEST(TokenDataTest, HugeStepsDoNotOverflow) {
  TempDir dir;
  std::vector<uint64_t> tokens = iota(1009);
  TokenData data = TokenData::open(writeTokens(dir, tokens), TokenDType::U16);
  for (uint64_t step : {uint64_t{1} << 40, uint64_t{1} << 63, ~uint64_t{0}})
    expectReference(data, tokens, step, 8, 125, 1009);
}

TEST(TokenDataTest, Uint32TokensPastUint16) {
  TempDir dir;
  std::vector<uint64_t> tokens = iota(12, 70000);
  tokens[3] = 4000000000u;
  TokenData data = TokenData::open(writeTokens(dir, tokens, TokenDType::U32), TokenDType::U32);
  EXPECT_EQ(data.numTokens(), 12u);
  EXPECT_EQ(data.token(3), 4000000000u);
  for (uint64_t step : {0ull, 1ull, 2ull, 3ull})
    expectReference(data, tokens, step, 2, 2, 4000000001);
  TokenBatch b = data.batch(0, 1, 3, 4000000001);
  EXPECT_EQ(values(b.inputs), (std::vector<int64_t>{70000, 70001, 70002}));
  EXPECT_EQ(values(b.labels), (std::vector<int64_t>{70001, 70002, 4000000000}));
}

TEST(TokenDataTest, LargestUint16IdFitsAVocabularyOf65536) {
  TempDir dir;
  TokenData data = TokenData::open(writeTokens(dir, {65535, 0, 65535}), TokenDType::U16);
  EXPECT_EQ(values(data.batch(0, 1, 2, 65536).labels), (std::vector<int64_t>{0, 65535}));
}

TEST(TokenDataTest, FillsCallerArrays) {
  TempDir dir;
  std::vector<uint64_t> tokens = iota(23, 5);
  TokenData data = TokenData::open(writeTokens(dir, tokens), TokenDType::U16);
  std::vector<int64_t> inputs(12, -1), labels(12, -1);
  data.batch(4, 3, 4, 100, inputs.data(), labels.data());
  TokenBatch expected = data.batch(4, 3, 4, 100);
  EXPECT_EQ(inputs, values(expected.inputs));
  EXPECT_EQ(labels, values(expected.labels));
}

TEST(TokenDataTest, MovesKeepTheMapping) {
  TempDir dir;
  TokenData a =
      TokenData::open(writeTokens(dir, iota(8, 1), TokenDType::U16, "a"), TokenDType::U16);
  TokenData b = std::move(a);
  EXPECT_EQ(b.numTokens(), 8u);
  EXPECT_EQ(values(b.batch(0, 1, 3, 10).inputs), (std::vector<int64_t>{1, 2, 3}));
  TokenData c =
      TokenData::open(writeTokens(dir, iota(4, 7), TokenDType::U16, "c"), TokenDType::U16);
  c = std::move(b); // unmaps c's own file
  EXPECT_EQ(c.numTokens(), 8u);
  EXPECT_EQ(c.token(7), 8u);
  static_assert(!std::is_copy_constructible_v<TokenData>);
  static_assert(!std::is_copy_assignable_v<TokenData>);
}

TEST(TokenDataTest, ParsesDataDTypeNames) {
  EXPECT_EQ(parseTokenDType("uint16"), TokenDType::U16);
  EXPECT_EQ(parseTokenDType("uint32"), TokenDType::U32);
  EXPECT_EQ(tokenDTypeName(TokenDType::U32), "uint32");
  EXPECT_THAT(errorOf([] { parseTokenDType("int64"); }),
              AllOf(HasSubstr("'int64'"), HasSubstr("uint16, uint32")));
}

TEST(TokenDataTest, MissingFileIsAnError) {
  TempDir dir;
  std::string path = dir.file("nope.bin");
  EXPECT_THAT(
      errorOf([&] { TokenData::open(path, TokenDType::U16); }),
      AllOf(HasSubstr(path), HasSubstr("cannot open token file"), HasSubstr("No such file")));
}

TEST(TokenDataTest, DirectoryIsAnError) {
  TempDir dir;
  EXPECT_THAT(errorOf([&] { TokenData::open(dir.path(), TokenDType::U16); }),
              AllOf(HasSubstr(dir.path()), HasSubstr("not a regular file")));
}

TEST(TokenDataTest, EmptyFileIsAnError) {
  TempDir dir;
  writeBytes(dir.file("empty"), "");
  EXPECT_THAT(errorOf([&] { TokenData::open(dir.file("empty"), TokenDType::U16); }),
              AllOf(HasSubstr(dir.file("empty")), HasSubstr("empty")));
}

TEST(TokenDataTest, SizeNotAMultipleOfTheTokenIsAnError) {
  TempDir dir;
  writeBytes(dir.file("odd"), std::string(7, '\0'));
  EXPECT_THAT(errorOf([&] { TokenData::open(dir.file("odd"), TokenDType::U16); }),
              AllOf(HasSubstr(dir.file("odd")), HasSubstr("7 bytes"), HasSubstr("2-byte uint16")));
  writeBytes(dir.file("six"), std::string(6, '\0'));
  EXPECT_EQ(TokenData::open(dir.file("six"), TokenDType::U16).numTokens(), 3u);
  EXPECT_THAT(errorOf([&] { TokenData::open(dir.file("six"), TokenDType::U32); }),
              AllOf(HasSubstr("6 bytes"), HasSubstr("4-byte uint32")));
}

TEST(TokenDataTest, TooFewTokensIsAnErrorWithTheCounts) {
  TempDir dir;
  TokenData data = TokenData::open(writeTokens(dir, iota(12)), TokenDType::U16);
  // 3 * 4 + 1 = 13 tokens are needed, 12 are there: exactly one short.
  std::string message = errorOf([&] { data.batch(0, 3, 4, 100); });
  EXPECT_THAT(message, AllOf(HasSubstr(dir.file("t.bin")), HasSubstr("too small"),
                             HasSubstr("reads 13 tokens"), HasSubstr("the file has 12")));
  EXPECT_EQ(errorOf([&] { data.checkFits(3, 4); }), message);
  EXPECT_NO_THROW(data.checkFits(1, 11));
  EXPECT_THAT(errorOf([&] { data.checkFits(INT64_MAX, INT64_MAX); }), HasSubstr("more than 2^64"));
}

TEST(TokenDataTest, NonPositiveShapesAreErrors) {
  TempDir dir;
  TokenData data = TokenData::open(writeTokens(dir, iota(12)), TokenDType::U16);
  EXPECT_THAT(errorOf([&] { data.batch(0, 0, 4, 100); }), HasSubstr("must be positive"));
  EXPECT_THAT(errorOf([&] { data.batch(0, 2, -1, 100); }), HasSubstr("must be positive"));
  EXPECT_THAT(errorOf([&] { data.batch(0, 2, 2, 0); }), HasSubstr("vocabulary size"));
}

TEST(TokenDataTest, TokenPastTheVocabularyIsAnError) {
  TempDir dir;
  std::vector<uint64_t> tokens = iota(10);
  tokens[5] = 31;
  TokenData data = TokenData::open(writeTokens(dir, tokens), TokenDType::U16);
  // Step 0 (tokens 0..3) never reads token 5.
  EXPECT_NO_THROW(data.batch(0, 1, 3, 10));
  // Step 1 (tokens 3..6) does, as an input; messages number steps from 1, as sl-run does.
  EXPECT_THAT(errorOf([&] { data.batch(1, 1, 3, 10); }),
              AllOf(HasSubstr(dir.file("t.bin")), HasSubstr("token 5 of the file"),
                    HasSubstr("(read by step 2)"), HasSubstr("is 31"),
                    HasSubstr("vocabulary of 10")));
  // Reading the bad token only as the last label is still an error: step 0 at S = 5 reads 0..5.
  EXPECT_THAT(errorOf([&] { data.batch(0, 1, 5, 10); }), HasSubstr("is 31"));
  // A vocabulary of exactly 31 ids does not hold id 31; 32 does.
  EXPECT_THAT(errorOf([&] { data.batch(1, 1, 3, 31); }), HasSubstr("vocabulary of 31"));
  EXPECT_NO_THROW(data.batch(1, 1, 3, 32));
}

TEST(TokenDataTest, TokenPastTheVocabularyAfterTheWrap) {
  TempDir dir;
  std::vector<uint64_t> tokens = iota(6);
  tokens[1] = 70000;
  TokenData data = TokenData::open(writeTokens(dir, tokens, TokenDType::U32), TokenDType::U32);
  // B*S = 4: step 1 reads 4, 5, 0, 1, 2 and finds token 1 after wrapping.
  EXPECT_THAT(errorOf([&] { data.batch(1, 1, 4, 50000); }),
              AllOf(HasSubstr("token 1 of the file"), HasSubstr("is 70000"),
                    HasSubstr("vocabulary of 50000")));
}

} // namespace
} // namespace slrt::test
