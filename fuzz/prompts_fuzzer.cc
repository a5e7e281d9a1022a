// libFuzzer target: the prompts reader (sl-run --prompts) and the byte tokenizer's decoding. The
// first 4 bytes choose the limits (tokenizer, longest prompt, vocabulary); the rest is the JSON
// Lines file. Every input must be read or refused with an Error, and what is read must keep the
// reader's promises; decoding any tokens must give valid UTF-8.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "slrt/error.h"
#include "slrt/prompts.h"

namespace {

// Aborts (a crash libFuzzer reports) unless `text` is valid UTF-8: nlohmann's strict dump throws
// on anything else.
void expectUtf8(const std::string &text) {
  try {
    (void)nlohmann::json(text).dump();
  } catch (const nlohmann::json::type_error &) {
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  constexpr size_t kHead = 4;
  if (size < kHead)
    return 0;
  slrt::PromptLimits limits;
  limits.tokenizer = data[0] & 1 ? slrt::Tokenizer::kBytes : slrt::Tokenizer::kNone;
  limits.maxTokens = 1 + data[1];
  limits.vocab = 1 + (data[2] | data[3] << 8);
  std::string_view text(reinterpret_cast<const char *>(data + kHead), size - kHead);

  std::vector<int64_t> raw(text.begin(), text.end());
  for (int64_t &token : raw)
    token = static_cast<unsigned char>(token) | (token & 0x100); // bytes, some past 255
  expectUtf8(slrt::decodeByteTokens(raw));

  try {
    std::vector<slrt::Prompt> prompts = slrt::parsePrompts(text, "prompts.jsonl", limits);
    if (prompts.empty())
      std::abort();
    for (const slrt::Prompt &prompt : prompts) {
      if (prompt.tokens.empty() || static_cast<int64_t>(prompt.tokens.size()) > limits.maxTokens)
        std::abort();
      for (int64_t token : prompt.tokens)
        if (token < 0 || token >= limits.vocab)
          std::abort();
      if (prompt.id && !prompt.id->is_string() && !prompt.id->is_number())
        std::abort();
      expectUtf8(slrt::decodeByteTokens(prompt.tokens));
    }
  } catch (const slrt::Error &) {
  }
  return 0;
}
