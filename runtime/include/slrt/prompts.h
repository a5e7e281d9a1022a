// Prompts for generation (sl-run --prompts): a JSON Lines file, one prompt object per line.
//
//   {"tokens": [15, 7, 42]}                token ids, each in [0, vocab)
//   {"text": "Once upon a time", "id": 7}  text, which needs a tokenizer (--tokenizer bytes)
//
// A prompt has exactly one of "tokens" (an array of integers) and "text" (a string), at least one
// and at most max_prompt_len tokens, and optionally an "id" (a string or a number) that the output
// repeats. Other fields are ignored. Lines holding only whitespace are skipped; a prompt's index
// is its position among the prompts of the file, from 0. Every error names the file and the line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace slrt {

// How "text" becomes token ids. kBytes is the byte-level tokenizer that python/speedloader/data.py
// uses for training data: each byte of the UTF-8 text is one token, ids 0..255. kNone accepts only
// "tokens".
enum class Tokenizer { kNone, kBytes };

// "none" or "bytes" (the spelling of sl-run's --tokenizer); Error for anything else.
Tokenizer parseTokenizer(const std::string &name);
std::string tokenizerName(Tokenizer tokenizer);

struct Prompt {
  std::vector<int64_t> tokens;
  // The "id" field (a string or a number), when there is one.
  std::optional<nlohmann::json> id;
  // Where it is in the file, from 1.
  uint64_t line = 0;
};

struct PromptLimits {
  // The longest prompt the schedule takes (Generation.max_prompt_len) and its vocabulary
  // (Generation.vocab); both positive.
  int64_t maxTokens = 1;
  int64_t vocab = 1;
  Tokenizer tokenizer = Tokenizer::kNone;
};

// Parses `text`, the contents of the prompts file `path` (used in messages only). Throws Error
// "PATH:LINE: ..." for malformed JSON, a line that is not an object, neither or both of "tokens"
// and "text", tokens that are not integers, an empty prompt, a prompt longer than
// limits.maxTokens, a token outside [0, limits.vocab), "text" without a tokenizer, an "id" that is
// neither a string nor a number, a line longer than maxPromptLineBytes(limits); and "PATH: ..."
// for a file that holds no prompt. Messages quote at most 200 bytes of the line.
std::vector<Prompt> parsePrompts(std::string_view text, const std::string &path,
                                 const PromptLimits &limits);

// A line of a prompts file may hold at most kLineBytesBase + kLineBytesPerToken * maxTokens bytes
// (saturating): room for every token written as a 20-digit id or a 6-byte JSON escape, and for
// an "id" and other fields. parsePrompts refuses a longer line before parsing it.
constexpr uint64_t kLineBytesBase = 64 * 1024;
constexpr uint64_t kLineBytesPerToken = 32;
uint64_t maxPromptLineBytes(const PromptLimits &limits);

// The largest prompts file readPrompts reads: 1 GiB.
constexpr uint64_t kMaxPromptsFileBytes = uint64_t{1} << 30;

// readFile(path) (a regular file of at most kMaxPromptsFileBytes), then parsePrompts. Error naming
// the path when it cannot be read.
std::vector<Prompt> readPrompts(const std::string &path, const PromptLimits &limits);

// The text of byte tokens, as Python's bytes(tokens).decode("utf-8", errors="replace"): valid
// UTF-8 sequences are kept, and each maximal invalid subpart (a byte that cannot start a
// sequence, or the valid start of a sequence cut short) becomes one U+FFFD. A token outside
// [0, 256), which is no byte, becomes one U+FFFD too.
std::string decodeByteTokens(const std::vector<int64_t> &tokens);

} // namespace slrt
