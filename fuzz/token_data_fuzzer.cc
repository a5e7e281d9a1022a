// libFuzzer target: the token-data reader. The first 16 bytes choose the read (token dtype, batch
// size, sequence length, vocabulary size, step); the rest is the token file. Every input must be
// read or refused with an Error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_file.h"
#include "slrt/error.h"
#include "slrt/token_data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  constexpr size_t kHead = 16;
  if (size < kHead)
    return 0;
  // Small signed batch and sequence sizes (zero and negative included), a vocabulary around the
  // token values, and any step.
  slrt::TokenDType dtype = data[0] & 1 ? slrt::TokenDType::U32 : slrt::TokenDType::U16;
  int64_t batchSize = int8_t(data[1]);
  int64_t seqLen = int8_t(data[2]);
  int32_t vocab;
  std::memcpy(&vocab, data + 3, sizeof vocab);
  uint64_t step;
  std::memcpy(&step, data + 7, sizeof step);
  std::string_view tokens(reinterpret_cast<const char *>(data + kHead), size - kHead);
  try {
    slrt::TokenData file = slrt::TokenData::open(sl::fuzz::writeInput("tokens.bin", tokens), dtype);
    slrt::TokenBatch batch = file.batch(step, batchSize, seqLen, vocab);
  } catch (const slrt::Error &) {
  }
  return 0;
}
