// The prompts reader (JSON Lines) and the byte tokenizer's decoding: what a prompts file may hold,
// the message for each thing it must not, and UTF-8 decoding exactly as Python's
// errors="replace".
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/prompts.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

const PromptLimits kLimits{4, 300, Tokenizer::kNone};
const PromptLimits kBytes{6, 256, Tokenizer::kBytes};

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an slrt::Error";
  return "";
}

std::string parseError(const std::string &text, const PromptLimits &limits = kLimits) {
  return errorOf([&] { parsePrompts(text, "p.jsonl", limits); });
}

TEST(PromptsTest, ReadsTokensTextAndIds) {
  std::string text = "{\"tokens\": [1, 2, 299]}\n"
                     "\n"
                     "  \r\n"
                     "{\"id\": \"a\", \"tokens\": [0], \"source\": {\"ignored\": true}}\r\n"
                     "{\"tokens\": [7, 7, 7, 7], \"id\": 12}";
  std::vector<Prompt> prompts = parsePrompts(text, "p.jsonl", kLimits);
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].tokens, (std::vector<int64_t>{1, 2, 299}));
  EXPECT_EQ(prompts[0].line, 1u);
  EXPECT_FALSE(prompts[0].id);
  EXPECT_EQ(prompts[1].tokens, (std::vector<int64_t>{0}));
  EXPECT_EQ(prompts[1].line, 4u);
  EXPECT_EQ(*prompts[1].id, "a");
  EXPECT_EQ(prompts[2].tokens, (std::vector<int64_t>{7, 7, 7, 7}));
  EXPECT_EQ(*prompts[2].id, 12);

  // The byte tokenizer: every byte of the UTF-8 text, as speedloader.data writes training data.
  prompts = parsePrompts("{\"text\": \"h\\u00e9\\n\"}\n{\"tokens\": [255]}\n", "p.jsonl", kBytes);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0].tokens, (std::vector<int64_t>{'h', 0xC3, 0xA9, '\n'}));
  EXPECT_EQ(prompts[1].tokens, (std::vector<int64_t>{255}));
}

TEST(PromptsTest, ReadsAFile) {
  TempDir dir;
  writeBytes(dir.file("p.jsonl"), "{\"tokens\": [3]}\n");
  EXPECT_EQ(readPrompts(dir.file("p.jsonl"), kLimits)[0].tokens, (std::vector<int64_t>{3}));
  EXPECT_THAT(errorOf([&] { readPrompts(dir.file("absent.jsonl"), kLimits); }),
              HasSubstr(dir.file("absent.jsonl") + ": cannot open (No such file or directory)"));
}

struct BadPrompts {
  const char *name;
  const char *text;
  const char *message;
  PromptLimits limits = kLimits;
};

void PrintTo(const BadPrompts &c, std::ostream *os) { *os << c.name; }

class BadPromptsTest : public ::testing::TestWithParam<BadPrompts> {};

TEST_P(BadPromptsTest, NamesTheFileAndLine) {
  EXPECT_THAT(parseError(GetParam().text, GetParam().limits), HasSubstr(GetParam().message));
}

const BadPrompts kBadPrompts[] = {
    {"MalformedJson", "{\"tokens\": [1]}\n{\"tokens\": [1,}\n",
     "p.jsonl:2: malformed JSON (parse error at line 1, column 15: syntax error while parsing "
     "value"},
    {"TwoObjectsOnALine", "{\"tokens\": [1]} {\"tokens\": [2]}",
     "p.jsonl:1: malformed JSON (parse error at line 1, column 17: syntax error while parsing "
     "value - unexpected '{'; expected end of input)"},
    {"NumberTooLarge", "{\"tokens\": [1], \"id\": 1e999}",
     "p.jsonl:1: malformed JSON (number overflow parsing '1e999')"},
    {"NotAnObject", "[1, 2]",
     "p.jsonl:1: a prompt is a JSON object with \"tokens\" or \"text\", not an array"},
    {"Null", "null", "p.jsonl:1: a prompt is a JSON object with \"tokens\" or \"text\", not null"},
    {"Neither", "{\"id\": 1}", "p.jsonl:1: the prompt has neither \"tokens\" nor \"text\""},
    {"Both", "{\"tokens\": [1], \"text\": \"a\"}",
     "p.jsonl:1: the prompt has both \"tokens\" and \"text\"; give one"},
    {"EmptyTokens", "{\"tokens\": [1]}\n\n{\"tokens\": []}",
     "p.jsonl:3: the prompt is empty; it needs at least one token"},
    {"EmptyText", "{\"text\": \"\"}", "p.jsonl:1: the prompt is empty", kBytes},
    {"TooLong", "{\"tokens\": [1, 2, 3, 4, 5]}",
     "p.jsonl:1: the prompt has 5 tokens, more than the 4 the schedule takes (max_prompt_len)"},
    {"TextTooLong", "{\"text\": \"\\u00e9\\u00e9\\u00e9\\u00e9\"}",
     "p.jsonl:1: the prompt has 8 tokens, more than the 6", kBytes},
    {"TokenPastVocabulary", "{\"tokens\": [1, 300]}",
     "p.jsonl:1: token 1 of the prompt is 300, outside the vocabulary [0, 300)"},
    {"NegativeToken", "{\"tokens\": [-1]}",
     "p.jsonl:1: token 0 of the prompt is -1, outside the vocabulary [0, 300)"},
    {"HugeToken", "{\"tokens\": [18446744073709551615]}",
     "token 0 of the prompt is 18446744073709551615, outside the vocabulary"},
    {"ByteOutsideASmallVocabulary",
     "{\"text\": \"a\"}",
     "p.jsonl:1: token 0 of the prompt is 97, outside the vocabulary [0, 64)",
     {4, 64, Tokenizer::kBytes}},
    {"FloatToken", "{\"tokens\": [1, 1.5]}",
     "p.jsonl:1: token 1 of \"tokens\" is 1.5; token ids are integers"},
    {"StringToken", "{\"tokens\": [\"1\"]}",
     "p.jsonl:1: token 0 of \"tokens\" is a string; token ids are integers"},
    {"NestedToken", "{\"tokens\": [[[[1]]]]}",
     "p.jsonl:1: token 0 of \"tokens\" is an array; token ids are integers"},
    {"TokensNotAnArray", "{\"tokens\": 5}",
     "p.jsonl:1: \"tokens\" is a number; it must be an array of token ids"},
    {"TextNotAString", "{\"text\": [104]}", "p.jsonl:1: \"text\" is an array; it must be a string",
     kBytes},
    {"TextWithoutTokenizer", "{\"text\": \"hello\"}",
     "p.jsonl:1: the prompt is text, which needs a tokenizer (--tokenizer bytes); without one, "
     "give \"tokens\""},
    {"IdNotScalar", "{\"tokens\": [1], \"id\": [1]}",
     "p.jsonl:1: \"id\" is an array; it must be a string or a number"},
    {"NoPrompts", "\n  \n", "p.jsonl: holds no prompt"},
    {"EmptyFile", "", "p.jsonl: holds no prompt"},
};

INSTANTIATE_TEST_SUITE_P(Prompts, BadPromptsTest, ::testing::ValuesIn(kBadPrompts),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(PromptsTest, TokenizerNames) {
  EXPECT_EQ(parseTokenizer("bytes"), Tokenizer::kBytes);
  EXPECT_EQ(parseTokenizer("none"), Tokenizer::kNone);
  EXPECT_EQ(tokenizerName(Tokenizer::kBytes), "bytes");
  EXPECT_THAT(errorOf([] { parseTokenizer("gpt2"); }),
              HasSubstr("unknown tokenizer 'gpt2' (known: none, bytes)"));
}

std::vector<int64_t> bytesOf(const std::string &s) {
  std::vector<int64_t> tokens;
  for (unsigned char c : s)
    tokens.push_back(c);
  return tokens;
}

// Each case checked against Python 3: bytes(tokens).decode("utf-8", errors="replace").
TEST(PromptsTest, DecodesBytesAsPythonsReplace) {
  const std::string r = "\xEF\xBF\xBD"; // U+FFFD
  const std::pair<std::string, std::string> cases[] = {
      {"plain ascii", "plain ascii"},
      {"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80", "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"},
      {"\xFF", r},
      {"\xE0\x80", r + r}, // overlong: E0 needs A0..BF next
      {"\xF0\x90\x80", r}, // cut short at the end: one replacement
      {"\xF0\x90\x80"
       "A",
       r + "A"},                           // cut short by an ASCII byte
      {"\xED\xA0\x80", r + r + r},         // a surrogate
      {"\xC0\xAF", r + r},                 // overlong two-byte form
      {"\xF4\x90\x80\x80", r + r + r + r}, // past U+10FFFF
      {"\xE2\x82", r},
      {"\x80\x80", r + r},
      {"\xC2", r},
  };
  for (const auto &[bytes, text] : cases)
    EXPECT_EQ(decodeByteTokens(bytesOf(bytes)), text) << ::testing::PrintToString(bytes);
  // A token that is no byte is a replacement too, and cuts a sequence short.
  EXPECT_EQ(decodeByteTokens({'a', -1, 'b', 256}), "a" + r + "b" + r);
  EXPECT_EQ(decodeByteTokens({0xE2, 0x82, 300}), r + r);
  EXPECT_EQ(decodeByteTokens({}), "");
}

} // namespace
} // namespace slrt::test
