#include "slrt/prompts.h"

#include <algorithm>
#include <limits>

#include "slrt/read_file.h"
#include "slrt/checked.h"
#include "slrt/error.h"

namespace slrt {
namespace {

using Json = nlohmann::json;

// Bytes of input an error message quotes at most.
constexpr size_t kMaxQuotedBytes = 200;

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest says what and
// where.
// They quote the token they stopped at ("last read: '...'"), which may be the whole line: the
// quote is cut short.
std::string jsonMessage(const std::exception &e) {
  std::string message = e.what();
  size_t close = message.find("] ");
  return quoteBounded(message.rfind("[json.exception.", 0) == 0 && close != std::string::npos
                          ? message.substr(close + 2)
                          : message,
                      kMaxQuotedBytes);
}

// "an array", "a string", "null".
std::string typeText(const Json &value) {
  std::string name = value.type_name();
  if (value.is_null())
    return name;
  return (name[0] == 'a' || name[0] == 'o' ? "an " : "a ") + name;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos;
}

class PromptParser {
public:
  PromptParser(const std::string &path, const PromptLimits &limits)
      : path_(path), limits_(limits) {}

  Prompt parse(std::string_view line, uint64_t number) {
    number_ = number;
    Json object;
    try {
      object = Json::parse(line.begin(), line.end());
    } catch (const Json::exception &e) {
      // parse_error, and out_of_range for a number too large for a double.
      throw error("malformed JSON (", jsonMessage(e), ")");
    }
    if (!object.is_object())
      throw error("a prompt is a JSON object with \"tokens\" or \"text\", not ", typeText(object));
    auto tokens = object.find("tokens"), text = object.find("text");
    bool hasTokens = tokens != object.end(), hasText = text != object.end();
    if (hasTokens == hasText)
      throw error(hasTokens ? "the prompt has both \"tokens\" and \"text\"; give one"
                            : "the prompt has neither \"tokens\" nor \"text\"");
    Prompt prompt;
    prompt.line = number;
    prompt.tokens = hasTokens ? tokenIds(*tokens) : encode(*text);
    if (prompt.tokens.empty())
      throw error("the prompt is empty; it needs at least one token");
    if (static_cast<int64_t>(prompt.tokens.size()) > limits_.maxTokens)
      throw error("the prompt has ", prompt.tokens.size(), " tokens, more than the ",
                  limits_.maxTokens, " the schedule takes (max_prompt_len)");
    for (size_t i = 0; i < prompt.tokens.size(); ++i)
      if (prompt.tokens[i] < 0 || prompt.tokens[i] >= limits_.vocab)
        throw error("token ", i, " of the prompt is ", prompt.tokens[i],
                    ", outside the vocabulary [0, ", limits_.vocab, ")");
    auto id = object.find("id");
    if (id != object.end()) {
      if (!id->is_string() && !id->is_number())
        throw error("\"id\" is ", typeText(*id), "; it must be a string or a number");
      prompt.id = *id;
    }
    return prompt;
  }

private:
  template <typename... Parts> Error error(const Parts &...parts) const {
    return makeError(path_, ":", number_, ": ", parts...);
  }

  std::vector<int64_t> tokenIds(const Json &tokens) const {
    if (!tokens.is_array())
      throw error("\"tokens\" is ", typeText(tokens), "; it must be an array of token ids");
    std::vector<int64_t> ids;
    ids.reserve(tokens.size());
    for (const Json &token : tokens) {
      size_t i = ids.size();
      if (token.is_number_unsigned()) {
        uint64_t value = token.get<uint64_t>();
        if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          throw error("token ", i, " of the prompt is ", value, ", outside the vocabulary [0, ",
                      limits_.vocab, ")");
        ids.push_back(static_cast<int64_t>(value));
      } else if (token.is_number_integer()) {
        ids.push_back(token.get<int64_t>());
      } else {
        // A float is shown (it is a scalar); anything else is named by its type, since dumping
        // a deeply nested value would recurse as deep.
        throw error("token ", i, " of \"tokens\" is ",
                    token.is_number_float() ? token.dump() : typeText(token),
                    "; token ids are integers");
      }
    }
    return ids;
  }

  std::vector<int64_t> encode(const Json &text) const {
    if (!text.is_string())
      throw error("\"text\" is ", typeText(text), "; it must be a string");
    if (limits_.tokenizer == Tokenizer::kNone)
      throw error("the prompt is text, which needs a tokenizer (--tokenizer bytes); without one, "
                  "give \"tokens\"");
    // Bytes: each byte of the UTF-8 text is a token.
    const std::string &s = text.get_ref<const std::string &>();
    std::vector<int64_t> ids;
    ids.reserve(s.size());
    for (unsigned char c : s)
      ids.push_back(c);
    return ids;
  }

  const std::string &path_;
  const PromptLimits &limits_;
  uint64_t number_ = 0;
};

// Appends U+FFFD, the replacement character.
void replacement(std::string &out) { out += "\xEF\xBF\xBD"; }

} // namespace

Tokenizer parseTokenizer(const std::string &name) {
  if (name == "none")
    return Tokenizer::kNone;
  if (name == "bytes")
    return Tokenizer::kBytes;
  throw makeError("unknown tokenizer '", name, "' (known: none, bytes)");
}

std::string tokenizerName(Tokenizer tokenizer) {
  return tokenizer == Tokenizer::kBytes ? "bytes" : "none";
}

std::vector<Prompt> parsePrompts(std::string_view text, const std::string &path,
                                 const PromptLimits &limits) {
  PromptParser parser(path, limits);
  uint64_t maxLine = maxPromptLineBytes(limits);
  std::vector<Prompt> prompts;
  uint64_t number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    // Before the JSON parser sees it: parsing a 100 MB line costs gigabytes.
    if (line.size() > maxLine)
      throw makeError(path, ":", number, ": the line is ", line.size(),
                      " bytes, more than the limit of ", maxLine, " for prompts of at most ",
                      limits.maxTokens, " tokens (", kLineBytesPerToken, " bytes a token and ",
                      kLineBytesBase, " for the rest)");
    if (!blank(line))
      prompts.push_back(parser.parse(line, number));
  }
  if (prompts.empty())
    throw makeError(path, ": holds no prompt (one JSON object per line: {\"tokens\": [...]} or "
                          "{\"text\": \"...\"})");
  return prompts;
}

uint64_t maxPromptLineBytes(const PromptLimits &limits) {
  return saturatingMulAdd<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(limits.maxTokens, 0)),
                                    kLineBytesPerToken, kLineBytesBase);
}

std::vector<Prompt> readPrompts(const std::string &path, const PromptLimits &limits) {
  return parsePrompts(readFile(path, kMaxPromptsFileBytes, "the prompts file limit"), path,
                      limits);
}

std::string decodeByteTokens(const std::vector<int64_t> &tokens) {
  // A token that is no byte reads as -1: it can neither start nor continue a sequence.
  auto byteAt = [&](size_t i) -> int {
    return tokens[i] >= 0 && tokens[i] < 256 ? static_cast<int>(tokens[i]) : -1;
  };
  std::string out;
  out.reserve(tokens.size());
  size_t i = 0;
  while (i < tokens.size()) {
    int lead = byteAt(i);
    // How many continuation bytes follow the lead, and the range of the first of them (the
    // others are always 0x80..0xBF); the narrower first ranges rule out overlong forms,
    // surrogates and code points past U+10FFFF.
    int count = 0, low = 0x80, high = 0xBF;
    if (lead >= 0 && lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      count = 1;
    } else if (lead == 0xE0) {
      count = 2, low = 0xA0;
    } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
      count = 2;
    } else if (lead == 0xED) {
      count = 2, high = 0x9F;
    } else if (lead == 0xF0) {
      count = 3, low = 0x90;
    } else if (lead >= 0xF1 && lead <= 0xF3) {
      count = 3;
    } else if (lead == 0xF4) {
      count = 3, high = 0x8F;
    } else {
      replacement(out);
      ++i;
      continue;
    }
    size_t n = 1;
    for (; n <= static_cast<size_t>(count) && i + n < tokens.size(); ++n) {
      int c = byteAt(i + n);
      bool ok = n == 1 ? c >= low && c <= high : c >= 0x80 && c <= 0xBF;
      if (!ok)
        break;
    }
    if (n == static_cast<size_t>(count) + 1) {
      for (size_t j = 0; j < n; ++j)
        out += static_cast<char>(byteAt(i + j));
    } else {
      // The valid start of a sequence cut short: one replacement for all of it.
      replacement(out);
    }
    i += n;
  }
  return out;
}

} // namespace slrt
