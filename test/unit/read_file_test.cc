// Bounded readers: readFile refuses what is not a regular file, and a file over its limit, before
// reading a byte, and readFilePrefix reads only a file's start; messages quote at most a bounded
// part of bad input; the checked arithmetic the runtime's sizes and times go through.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/checked.h"
#include "slrt/comm.h"
#include "slrt/error.h"
#include "slrt/prompts.h"
#include "slrt/read_file.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

TEST(ReadFileTest, ReadsARegularFile) {
  TempDir dir;
  writeBytes(dir.file("a"), std::string("abc\0def", 7));
  EXPECT_EQ(readFile(dir.file("a")), std::string("abc\0def", 7));
  EXPECT_EQ(readFile(dir.file("a"), 7), std::string("abc\0def", 7));
}

TEST(ReadFileTest, FileOverTheLimitIsRefusedBeforeReading) {
  TempDir dir;
  writeBytes(dir.file("a"), "12345678");
  EXPECT_THAT(errorOf([&] { readFile(dir.file("a"), 7, "the test's limit"); }),
              HasSubstr("/a: the file is 8 bytes, more than the limit of 7 bytes (the test's "
                        "limit)"));
}

TEST(ReadFileTest, FifoIsRefusedWithoutWaitingForAWriter) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  // Without O_NONBLOCK, opening the FIFO would wait here for a writer that never comes.
  EXPECT_THAT(errorOf([&] { readFile(dir.file("fifo")); }),
              HasSubstr("/fifo: cannot read it: it is a FIFO (named pipe), not a regular file"));
}

TEST(ReadFileTest, DevicesAndDirectoriesAreRefused) {
  EXPECT_THAT(errorOf([&] { readFile("/dev/zero"); }),
              HasSubstr("/dev/zero: cannot read it: it is a character device, not a regular "
                        "file"));
  TempDir dir;
  EXPECT_THAT(errorOf([&] { readFile(dir.path()); }), HasSubstr(": cannot read (Is a directory)"));
  EXPECT_THAT(errorOf([&] { readFile(dir.file("absent")); }),
              HasSubstr("/absent: cannot open (No such file or directory)"));
}

TEST(ReadFilePrefixTest, ReadsAtMostThePrefixAndGivesTheSize) {
  TempDir dir;
  writeBytes(dir.file("a"), "0123456789");
  FilePrefix prefix = readFilePrefix(dir.file("a"), 4);
  EXPECT_EQ(prefix.bytes, "0123");
  EXPECT_EQ(prefix.fileSize, 10u);
  prefix = readFilePrefix(dir.file("a"), 100);
  EXPECT_EQ(prefix.bytes, "0123456789");
  EXPECT_EQ(prefix.fileSize, 10u);
}

TEST(ReadFilePrefixTest, RefusesWhatReadFileRefuses) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  EXPECT_THAT(errorOf([&] { readFilePrefix(dir.file("fifo"), 8); }),
              HasSubstr("/fifo: cannot read it: it is a FIFO (named pipe), not a regular file"));
  EXPECT_THAT(errorOf([&] { readFilePrefix(dir.path(), 8); }),
              HasSubstr(": cannot read (Is a directory)"));
}

TEST(QuoteBoundedTest, CutsLongTextAtACharacterBoundary) {
  EXPECT_EQ(quoteBounded("short"), "short");
  std::string text(100'000, 'x');
  EXPECT_EQ(quoteBounded(text), std::string(200, 'x') + "... (100000 bytes)");
  // "é" is two bytes; a cut in its middle backs up to before it.
  std::string accents = "a";
  for (int i = 0; i < 200; ++i)
    accents += "\xC3\xA9";
  std::string quoted = quoteBounded(accents, 4);
  EXPECT_EQ(quoted, "a\xC3\xA9... (401 bytes)");
}

TEST(PromptLimitsTest, LongLineIsRefusedBeforeItIsParsed) {
  PromptLimits limits;
  limits.maxTokens = 4;
  limits.vocab = 256;
  limits.tokenizer = Tokenizer::kBytes;
  uint64_t max = maxPromptLineBytes(limits);
  EXPECT_EQ(max, kLineBytesBase + 4 * kLineBytesPerToken);
  // Not even valid JSON: the length is checked first.
  std::string line(max + 1, '[');
  EXPECT_THAT(errorOf([&] { parsePrompts("{\"tokens\": [1]}\n" + line, "p.jsonl", limits); }),
              HasSubstr("p.jsonl:2: the line is " + std::to_string(max + 1) +
                        " bytes, more than the limit of " + std::to_string(max)));
  // A limit that would overflow saturates.
  limits.maxTokens = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(maxPromptLineBytes(limits), std::numeric_limits<uint64_t>::max());
}

TEST(PromptLimitsTest, MalformedJsonIsQuotedBriefly) {
  PromptLimits limits;
  limits.maxTokens = 100'000;
  limits.vocab = 256;
  // An unterminated string the JSON parser reads to the end and then quotes as its last token.
  std::string line = "{\"text\": \"" + std::string(1'000'000, 'y');
  std::string message = errorOf([&] { parsePrompts(line, "p.jsonl", limits); });
  EXPECT_THAT(message, HasSubstr("p.jsonl:1: malformed JSON"));
  EXPECT_LT(message.size(), 600u) << message.substr(0, 600);
}

TEST(CheckedTest, MultiplicationAndAdditionReportOverflow) {
  EXPECT_EQ(checkedMul<int64_t>(3, int64_t{1} << 61), 3 * (int64_t{1} << 61));
  EXPECT_EQ(checkedMul<int64_t>(3, int64_t{1} << 62), std::nullopt);
  EXPECT_EQ(checkedAdd<uint64_t>(std::numeric_limits<uint64_t>::max(), 1), std::nullopt);
  EXPECT_EQ(saturatingMulAdd<uint64_t>(uint64_t{1} << 63, 2, 1),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(saturatingMulAdd<uint64_t>(5, 2, 1), 11u);
}

TEST(CheckedTest, SaturatingMultiplicationAndAdditionStopAtTheLargestValue) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(saturatingMul<uint64_t>(uint64_t{1} << 32, uint64_t{1} << 31), uint64_t{1} << 63);
  EXPECT_EQ(saturatingMul<uint64_t>(uint64_t{1} << 32, uint64_t{1} << 32), kMax);
  EXPECT_EQ(saturatingAdd<uint64_t>(kMax - 1, 1), kMax);
  EXPECT_EQ(saturatingAdd<uint64_t>(kMax - 1, 2), kMax);
  EXPECT_EQ(saturatingMul<uint64_t>(0, kMax), 0u);
}

TEST(CheckedTest, SecondsBecomeNanosecondsOnlyWithinTheLimit) {
  EXPECT_EQ(checkedNanoseconds(1.5, 10), 1'500'000'000);
  EXPECT_EQ(checkedNanoseconds(1e10, 1e9), std::nullopt);
  EXPECT_EQ(checkedNanoseconds(-1, 1e9), std::nullopt);
  EXPECT_EQ(checkedNanoseconds(std::nan(""), 1e9), std::nullopt);
  EXPECT_EQ(checkedNanoseconds(INFINITY, 1e9), std::nullopt);
}

TEST(CheckedTest, CollectiveTimeoutPastTheLimitIsRefusedOnOneRankToo) {
  CommOptions options;
  options.timeoutSeconds = 1e10;
  EXPECT_THAT(errorOf([&] { openCommunicator(options); }),
              HasSubstr("the collective timeout must be positive and at most 1e+09 s (about 31 "
                        "years), got 1e+10 s"));
  options.timeoutSeconds = 1e9;
  EXPECT_EQ(openCommunicator(options), nullptr); // one rank: no communicator, and no error
}

} // namespace
} // namespace slrt::test
