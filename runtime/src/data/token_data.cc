#include "slrt/token_data.h"

#include <cstring>
#include <string>

#include "slrt/checked.h"
#include "slrt/error.h"

namespace slrt {

TokenDType parseTokenDType(const std::string &name) {
  if (name == "uint16")
    return TokenDType::U16;
  if (name == "uint32")
    return TokenDType::U32;
  throw makeError("unknown token data type '", name, "' (supported: uint16, uint32)");
}

std::string tokenDTypeName(TokenDType dtype) {
  return dtype == TokenDType::U16 ? "uint16" : "uint32";
}

uint64_t tokenDTypeSize(TokenDType dtype) { return dtype == TokenDType::U16 ? 2 : 4; }

TokenData TokenData::open(const std::string &path, TokenDType dtype) {
  MappedFile file = MappedFile::open(path, "token file");
  uint64_t size = tokenDTypeSize(dtype);
  if (file.size() == 0)
    throw makeError(path, ": the token file is empty");
  if (file.size() % size != 0)
    throw makeError(path, ": the token file has ", file.size(), " bytes, not a multiple of the ",
                    size, "-byte ", tokenDTypeName(dtype), " token (wrong --data-dtype?)");
  uint64_t count = file.size() / size;
  return TokenData(std::move(file), dtype, count);
}

uint64_t TokenData::token(uint64_t index) const {
  // memcpy: the mapping is page-aligned, but a typed load through a byte pointer is not portable
  // C++. The runtime runs on little-endian machines only, so the bytes are the value.
  const std::byte *at = file_.data() + index * tokenDTypeSize(dtype_);
  if (dtype_ == TokenDType::U16) {
    uint16_t value;
    std::memcpy(&value, at, sizeof value);
    return value;
  }
  uint32_t value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

void TokenData::checkFits(int64_t batchSize, int64_t seqLen) const {
  if (batchSize <= 0 || seqLen <= 0)
    throw makeError(path(), ": cannot read batches of ", batchSize, " sequences of ", seqLen,
                    " tokens (both must be positive)");
  std::optional<uint64_t> product =
      checkedMul(static_cast<uint64_t>(batchSize), static_cast<uint64_t>(seqLen));
  std::optional<uint64_t> sum = product ? checkedAdd(*product, uint64_t{1}) : std::nullopt;
  bool overflow = !sum;
  uint64_t needed = sum.value_or(0);
  if (overflow || needed > numTokens_)
    throw makeError(path(), ": the token file is too small: a step of ", batchSize,
                    " sequences of ", seqLen, " tokens reads ",
                    overflow ? std::string("more than 2^64") : std::to_string(needed), " tokens (",
                    batchSize, "*", seqLen, "+1), the file has ", numTokens_);
}

TokenBatch TokenData::batch(uint64_t step, int64_t batchSize, int64_t seqLen,
                            int64_t vocabSize) const {
  checkFits(batchSize, seqLen);
  TokenBatch out{HostTensor::zeros(sl::schedule::I64, {batchSize, seqLen}),
                 HostTensor::zeros(sl::schedule::I64, {batchSize, seqLen})};
  batch(step, batchSize, seqLen, vocabSize, out.inputs.as<int64_t>(), out.labels.as<int64_t>());
  return out;
}

void TokenData::batch(uint64_t step, int64_t batchSize, int64_t seqLen, int64_t vocabSize,
                      int64_t *inputs, int64_t *labels) const {
  readRows(step, batchSize, seqLen, vocabSize, 0, batchSize, inputs, labels);
}

TokenBatch TokenData::batchRows(uint64_t step, int64_t batchSize, int64_t seqLen,
                                int64_t vocabSize, int64_t firstRow, int64_t rows) const {
  checkFits(batchSize, seqLen);
  if (firstRow < 0 || rows < 1 || rows > batchSize - firstRow)
    throw makeError(path(), ": sequences [", firstRow, ", ", firstRow + rows,
                    ") are not sequences of a batch of ", batchSize);
  TokenBatch out{HostTensor::zeros(sl::schedule::I64, {rows, seqLen}),
                 HostTensor::zeros(sl::schedule::I64, {rows, seqLen})};
  readRows(step, batchSize, seqLen, vocabSize, firstRow, rows, out.inputs.as<int64_t>(),
           out.labels.as<int64_t>());
  return out;
}

void TokenData::readRows(uint64_t step, int64_t batchSize, int64_t seqLen, int64_t vocabSize,
                         int64_t firstRow, int64_t rows, int64_t *inputs, int64_t *labels) const {
  checkFits(batchSize, seqLen);
  if (vocabSize <= 0)
    throw makeError(path(), ": the vocabulary size must be positive, not ", vocabSize);
  uint64_t tokensPerStep = static_cast<uint64_t>(batchSize) * static_cast<uint64_t>(seqLen);
  uint64_t tokensRead = static_cast<uint64_t>(rows) * static_cast<uint64_t>(seqLen);
  uint64_t skipped = static_cast<uint64_t>(firstRow) * static_cast<uint64_t>(seqLen);
  // (step * B * S + firstRow * S) mod N without overflow, for any step.
  uint64_t index = static_cast<uint64_t>(
      (static_cast<unsigned __int128>(step % numTokens_) * (tokensPerStep % numTokens_) +
       skipped % numTokens_) %
      numTokens_);
  // Window token i is input i (i < rows*S) and label i-1 (i > 0): flattening [rows, seq]
  // row-major makes sequence j's inputs the window's [j*S, j*S+S) and its labels those shifted
  // by one.
  for (uint64_t i = 0; i <= tokensRead; ++i) {
    uint64_t value = token(index);
    if (value >= static_cast<uint64_t>(vocabSize))
      // Steps are numbered from 1 in messages, as sl-run's progress lines number them.
      throw makeError(path(), ": token ", index, " of the file (read by step ", step + 1, ") is ",
                      value, ", past the vocabulary of ", vocabSize, " ids (0..", vocabSize - 1,
                      ")");
    if (i < tokensRead)
      inputs[i] = static_cast<int64_t>(value);
    if (i > 0)
      labels[i - 1] = static_cast<int64_t>(value);
    if (++index == numTokens_)
      index = 0;
  }
}

} // namespace slrt
