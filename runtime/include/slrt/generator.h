// Generation with a "generate" schedule (sl-run SCHEDULE --prompts FILE --output FILE): prompts in
// batches, one run of program "prefill" per batch, then runs of program "decode", each adding a
// token to every sequence of the batch that has not stopped, sampled from the logits.
//
// The contract a generate schedule meets is Schedule.generation's (schedule.proto), and
// verifySchedule checks it: programs "prefill" (inputs input_ids i64 [batch, max_prompt_len],
// last_index i64 [batch]; output logits [batch, 1, vocab]) and "decode" (inputs input_ids
// i64 [batch, 1], position i64 [batch]; output logits [batch, 1, vocab]).
//
// The loop. Prompts go batch.size sequences at a time, in file order; the last batch is filled up
// with dummy one-token prompts (token 0) whose outputs are dropped. Prefill gets each prompt
// right-padded with token 0 to max_prompt_len and last_index = its length - 1, and its logits give
// each sequence's first new token. Then, while a sequence of the batch has not stopped, decode gets
// each sequence's newest token and its position, the number of tokens already in that sequence's
// KV cache (the prompt's length plus the tokens generated before this one), and its logits give
// the next token. A sequence that has stopped (and a dummy) is fed token 0 at position 0, which
// its cache can always take; what that computes is dropped. A sequence stops after a stop token
// (which is kept, finish reason "stop") or after maxNewTokens tokens, or when its cache is full
// (finish reason "length").
//
// Sampling (SamplingOptions) is per prompt: prompt i's random stream is seeded from (seed, i), so
// its tokens do not depend on the batch it lands in, on the batch size, or on the other prompts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slrt/backend.h"
#include "slrt/executor.h"
#include "slrt/prompts.h"
#include "slrt/schedule_loader.h"

namespace slrt {

struct SamplingOptions {
  // 0 (the default): greedy, the argmax of the logits, the lowest token id on ties; deterministic.
  // Otherwise a token is drawn from softmax(logits / temperature) over the tokens top-k and
  // top-p keep.
  double temperature = 0;
  // Keep only the topK most probable tokens (ties broken by the lower id); 0 keeps all.
  int64_t topK = 0;
  // Nucleus sampling: keep the smallest set of most probable tokens whose probabilities (after
  // top-k, renormalised) sum to at least topP; 1 keeps all.
  double topP = 1;
  uint64_t seed = 0;

  // Error unless temperature is finite and >= 0, topK >= 0 and topP is in (0, 1].
  void validate() const;
};

// The random stream of one prompt: a 64-bit Mersenne Twister seeded through std::seed_seq with
// the seed and the prompt's index, both fully specified by the C++ standard, so the same seed
// gives the same tokens with any standard library.
class TokenRng {
public:
  TokenRng(uint64_t seed, uint64_t prompt);
  // Uniform in [0, 1), from the top 53 bits of one draw.
  double uniform();

private:
  std::mt19937_64 engine_;
};

// One token from a row of logits. Greedy for temperature 0; otherwise, in double: the tokens
// ordered by logit (highest first, lower id first on ties), the first topK kept, their
// probabilities p_i = exp((l_i - l_max) / temperature) / sum, the smallest prefix whose
// probabilities sum to at least topP kept, and one uniform draw walking that prefix. A logit of
// -inf is a token that is never drawn. Error for a NaN or +inf logit, or when every logit is
// -inf.
int64_t sampleToken(const std::vector<double> &logits, const SamplingOptions &options,
                    TokenRng &rng);

struct GenerationProgress {
  // Batches finished (or, within a batch, the batch being decoded, from 1) and all batches.
  uint64_t batch = 0, batches = 0;
  uint64_t sequencesDone = 0, sequences = 0;
  uint64_t generatedTokens = 0;
  double elapsedSeconds = 0;
};

struct GenerationOptions {
  SamplingOptions sampling;
  // Tokens that end a sequence (each in [0, vocab)).
  std::vector<int64_t> stopTokens;
  // The most tokens a sequence gets, from 1 to Generation.max_new_tokens; 0 means the latter.
  int64_t maxNewTokens = 0;
  // How the output's "text" is made (generationJsonLines); kNone: no "text".
  Tokenizer tokenizer = Tokenizer::kNone;
  ExecutorOptions executor;
  // Called after every batch, and while a batch decodes at most every progressSeconds.
  std::function<void(const GenerationProgress &)> progress;
  double progressSeconds = 5;
};

struct GeneratedSequence {
  // The prompt's index in the file, from 0, and its "id".
  uint64_t index = 0;
  std::optional<nlohmann::json> id;
  int64_t promptTokens = 0;
  std::vector<int64_t> tokens;
  // "stop" (the last token is a stop token) or "length".
  std::string finishReason;
};

// Throws Error unless `schedule` is of kind "generate" (the verifier has checked the rest of the
// contract).
void checkGenerateSchedule(const sl::schedule::Schedule &schedule);

class Generator {
public:
  // Checks the schedule (checkGenerateSchedule) and the options against it (sampling, stop
  // tokens in the vocabulary, maxNewTokens), then creates the executor, which reads the
  // parameters. `schedule` and `backend` must outlive the generator.
  Generator(const LoadedSchedule &schedule, Backend &backend, const GenerationOptions &options);
  ~Generator();
  Generator(const Generator &) = delete;
  Generator &operator=(const Generator &) = delete;

  // The limits prompts must meet (for readPrompts): the schedule's max_prompt_len and vocab, and
  // the options' tokenizer.
  PromptLimits promptLimits() const;

  // Generates for every prompt, batch after batch, and returns the sequences in prompt order.
  // Prompts must meet promptLimits(). An Error of a run names the batch and the program; one of
  // sampling names the prompt.
  std::vector<GeneratedSequence> generate(const std::vector<Prompt> &prompts);

  // The report's "generation" section, over every generate() so far: {"prompts", "batches",
  // "prefill_runs", "decode_runs", "prefill_tokens" (prompt tokens), "prefill_seconds",
  // "prefill_tokens_per_second", "decode_tokens" (tokens sampled from decode's logits),
  // "decode_seconds", "decode_tokens_per_second", "generated_tokens", "finish_reasons": {"stop",
  // "length"}, "bytes_host_to_device", "bytes_device_to_host" (over all runs),
  // "per_batch": each batch's "prefill_tokens", "prefill_seconds", "prefill_tokens_per_second",
  // "decode_runs", "decode_tokens", "decode_seconds", "decode_tokens_per_second" and
  // "decode_bytes_host_to_device", in the order the batches ran (the first one pays one-time
  // costs: a benchmark reads a later one),
  // "device_arena_peak_bytes", "host_pool_peak_bytes" (the highest of any run), "sampling":
  // {"temperature", "top_k", "top_p", "seed", "stop_tokens", "max_new_tokens", "tokenizer"},
  // "schedule": the Generation message's fields}. Seconds are the program runs' wall time (inputs
  // in, kernels, logits out), sampling excluded.
  nlohmann::json report() const;

  Executor &executor() { return *executor_; }

private:
  struct Totals;
  void runBatch(const std::vector<Prompt> &prompts, size_t first, uint64_t batchNumber,
                uint64_t batches, std::vector<GeneratedSequence> &results);
  void runProgram(uint32_t program, const std::map<std::string, HostTensor> &inputs,
                  const std::string &what, double &seconds);
  void sampleRow(uint32_t program, int64_t row, const Prompt &prompt, GeneratedSequence &sequence,
                 TokenRng &rng);

  const LoadedSchedule &schedule_;
  GenerationOptions options_;
  int64_t maxNewTokens_ = 0;
  uint32_t prefill_ = 0, decode_ = 0;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<Totals> totals_;
};

// The output file's contents: one JSON object per line, in the order given: {"index", "id" (when
// the prompt has one), "prompt_tokens", "tokens", "text" (with the bytes tokenizer: the tokens as
// decodeByteTokens decodes them), "finish_reason"}.
std::string generationJsonLines(const std::vector<GeneratedSequence> &sequences,
                                Tokenizer tokenizer);

} // namespace slrt
