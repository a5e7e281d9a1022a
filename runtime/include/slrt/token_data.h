// Training data: a memory-mapped file of token ids, read one step's window at a time.
//
// The file is raw little-endian token ids, uint16 by default and uint32 for vocabularies past 65536
// (sl-run's --data-dtype), with no header. Step t of a run with B sequences of S tokens reads the
// B*S+1 tokens starting at token (t*B*S) mod N, N the file's token count, each index taken mod N,
// so the window wraps around at the end of the file. Sequence j's inputs are the window's tokens
// [j*S, j*S+S) and its labels the same tokens shifted by one, [j*S+1, j*S+S+1): every input
// position is trained to predict the token that follows it in the file.
#pragma once

#include <cstdint>
#include <string>

#include "slrt/host_tensor.h"
#include "slrt/mapped_file.h"

namespace slrt {

enum class TokenDType { U16, U32 };

// "uint16" or "uint32" (the spelling of --data-dtype); Error for anything else.
TokenDType parseTokenDType(const std::string &name);
std::string tokenDTypeName(TokenDType dtype);
uint64_t tokenDTypeSize(TokenDType dtype);

// One step's inputs and labels, each i64 [batch, seq], row-major.
struct TokenBatch {
  HostTensor inputs;
  HostTensor labels;
};

// Movable, not copyable: it owns the mapping, which the destructor unmaps.
class TokenData {
public:
  // Maps `path` read-only. Error when it cannot be opened, is empty, or its size is not a multiple
  // of the token size. Token ids are checked against the vocabulary only as batches are read, so
  // opening a large file costs nothing.
  static TokenData open(const std::string &path, TokenDType dtype);

  uint64_t numTokens() const { return numTokens_; }
  TokenDType dtype() const { return dtype_; }
  const std::string &path() const { return file_.path(); }

  // The token at `index` (< numTokens()).
  uint64_t token(uint64_t index) const;

  // Error unless the file holds the batchSize*seqLen+1 tokens one step reads (the message gives the
  // needed and available counts). batch() checks this too; a tool calls it before a run starts so
  // that a too-small file fails before any output is written.
  void checkFits(int64_t batchSize, int64_t seqLen) const;

  // Step `step`'s inputs and labels. Error when a token of the window is >= vocabSize, naming its
  // position in the file, its value and the vocabulary size.
  TokenBatch batch(uint64_t step, int64_t batchSize, int64_t seqLen, int64_t vocabSize) const;

  // The same, written into caller-owned arrays of batchSize*seqLen int64 each (a host pool buffer,
  // say). On Error their contents are unspecified.
  void batch(uint64_t step, int64_t batchSize, int64_t seqLen, int64_t vocabSize, int64_t *inputs,
             int64_t *labels) const;

  // Sequences [firstRow, firstRow + rows) of step `step`'s batch of batchSize sequences: exactly
  // those rows of batch(step, batchSize, ...), reading only their tokens. Data parallelism: rank
  // r of W, with b sequences per rank, reads rows [r * b, (r + 1) * b) of the W * b of a step.
  // Error as batch(), and for rows outside the batch.
  TokenBatch batchRows(uint64_t step, int64_t batchSize, int64_t seqLen, int64_t vocabSize,
                       int64_t firstRow, int64_t rows) const;

private:
  TokenData(MappedFile file, TokenDType dtype, uint64_t numTokens)
      : file_(std::move(file)), dtype_(dtype), numTokens_(numTokens) {}
  void readRows(uint64_t step, int64_t batchSize, int64_t seqLen, int64_t vocabSize,
                int64_t firstRow, int64_t rows, int64_t *inputs, int64_t *labels) const;

  MappedFile file_;
  TokenDType dtype_;
  uint64_t numTokens_;
};

} // namespace slrt
