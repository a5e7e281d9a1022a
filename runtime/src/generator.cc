#include "slrt/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "slrt/bfloat16.h"
#include "slrt/error.h"
#include "slrt/schedule_verifier.h"

namespace slrt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double perSecond(uint64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}

} // namespace

void SamplingOptions::validate() const {
  if (!(temperature >= 0) || std::isinf(temperature))
    throw makeError("the temperature must be a finite number >= 0 (0: greedy), got ", temperature);
  if (topK < 0)
    throw makeError("top-k must be >= 0 (0: every token), got ", topK);
  if (!(topP > 0 && topP <= 1))
    throw makeError("top-p must be in (0, 1] (1: every token), got ", topP);
}

TokenRng::TokenRng(uint64_t seed, uint64_t prompt) {
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                         static_cast<uint32_t>(prompt), static_cast<uint32_t>(prompt >> 32)};
  engine_.seed(sequence);
}

double TokenRng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

int64_t sampleToken(const std::vector<double> &logits, const SamplingOptions &options,
                    TokenRng &rng) {
  int64_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    double x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<double>::infinity())
      throw makeError("logit ", i, " (of ", logits.size(), ") is ", x);
    if (x != -std::numeric_limits<double>::infinity() &&
        (best < 0 || x > logits[static_cast<size_t>(best)]))
      best = static_cast<int64_t>(i);
  }
  if (best < 0)
    throw makeError("every one of the ", logits.size(), " logits is -inf");
  if (options.temperature == 0)
    return best;

  // Candidates by logit, highest first and the lower id first on ties; -inf is never drawn.
  std::vector<int64_t> order;
  order.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != -std::numeric_limits<double>::infinity())
      order.push_back(static_cast<int64_t>(i));
  auto higher = [&](int64_t a, int64_t b) {
    double la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t keep = order.size();
  if (options.topK > 0 && static_cast<uint64_t>(options.topK) < keep) {
    keep = static_cast<size_t>(options.topK);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      higher);
    order.resize(keep);
  } else {
    std::sort(order.begin(), order.end(), higher);
  }
  // exp of the difference to the maximum: no overflow, the first candidate weighs 1.
  double max = logits[static_cast<size_t>(order[0])];
  std::vector<double> weight(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i)
    total += weight[i] =
        std::exp((logits[static_cast<size_t>(order[i])] - max) / options.temperature);
  if (options.topP < 1) {
    double cumulative = 0;
    size_t nucleus = 0;
    while (nucleus < keep) {
      cumulative += weight[nucleus++];
      if (cumulative >= options.topP * total)
        break;
    }
    keep = nucleus;
    total = cumulative;
  }
  double u = rng.uniform() * total, cumulative = 0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += weight[i];
    if (u < cumulative)
      return order[i];
  }
  // u < total by construction; rounding in the running sum may leave it just short.
  return order[keep - 1];
}

void checkGenerateSchedule(const sl::schedule::Schedule &schedule) {
  if (schedule.kind() != kGenerateKind)
    throw makeError("its kind is '", schedule.kind(), "', not '", kGenerateKind, "'");
}

struct Generator::Totals {
  uint64_t prompts = 0, batches = 0, prefillRuns = 0, decodeRuns = 0;
  uint64_t prefillTokens = 0, decodeTokens = 0, generatedTokens = 0;
  uint64_t stopped = 0, length = 0;
  double prefillSeconds = 0, decodeSeconds = 0;
  uint64_t bytesHostToDevice = 0, bytesDeviceToHost = 0;
  // Of those, the decoding steps' (the traffic a step's link bound is made of).
  uint64_t decodeBytesHostToDevice = 0, decodeBytesDeviceToHost = 0;
  uint64_t deviceArenaPeakBytes = 0, hostPoolPeakBytes = 0;
  // Each batch's own figures, in the order they ran: the first batch pays the one-time costs
  // (kernel plans, library heuristics), so a benchmark reads a later one.
  struct Batch {
    uint64_t prefillTokens = 0, decodeTokens = 0, decodeRuns = 0, decodeBytesHostToDevice = 0;
    double prefillSeconds = 0, decodeSeconds = 0;
  };
  std::vector<Batch> perBatch;
  // The running totals of what Batch holds, for a batch's figures as their growth over it.
  Batch sums() const {
    return {prefillTokens, decodeTokens, decodeRuns, decodeBytesHostToDevice, prefillSeconds,
            decodeSeconds};
  }
  // For progress: when generate() started and the last report.
  Clock::time_point start, lastProgress;
  uint64_t sequencesDone = 0, sequences = 0;
};

Generator::Generator(const LoadedSchedule &schedule, Backend &backend,
                     const GenerationOptions &options)
    : schedule_(schedule), options_(options), totals_(std::make_unique<Totals>()) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  try {
    checkGenerateSchedule(s);
  } catch (const Error &e) {
    throw makeError(schedule_.path, ": not a generate schedule: ", e.what());
  }
  options_.sampling.validate();
  const sl::schedule::Generation &g = s.generation();
  if (options_.maxNewTokens < 0 || options_.maxNewTokens > g.max_new_tokens())
    throw makeError("the most new tokens per sequence must be in [1, ", g.max_new_tokens(),
                    "] (the schedule's max_new_tokens: its KV cache holds max_prompt_len + "
                    "max_new_tokens positions), got ",
                    options_.maxNewTokens);
  maxNewTokens_ = options_.maxNewTokens == 0 ? g.max_new_tokens() : options_.maxNewTokens;
  for (int64_t token : options_.stopTokens)
    if (token < 0 || token >= g.vocab())
      throw makeError("stop token ", token, " is outside the vocabulary [0, ", g.vocab(), ")");
  executor_ = std::make_unique<Executor>(schedule_, backend, options_.executor);
  prefill_ = executor_->programIndex(kPrefillProgram);
  decode_ = executor_->programIndex(kDecodeProgram);
}

Generator::~Generator() = default;

PromptLimits Generator::promptLimits() const {
  const sl::schedule::Generation &g = schedule_.schedule.generation();
  return PromptLimits{g.max_prompt_len(), g.vocab(), options_.tokenizer};
}

std::vector<GeneratedSequence> Generator::generate(const std::vector<Prompt> &prompts) {
  const sl::schedule::Generation &g = schedule_.schedule.generation();
  uint64_t batch = static_cast<uint64_t>(g.batch());
  uint64_t batches = (prompts.size() + batch - 1) / batch;
  Totals &t = *totals_;
  t.start = t.lastProgress = Clock::now();
  t.sequencesDone = 0;
  t.sequences = prompts.size();
  std::vector<GeneratedSequence> results(prompts.size());
  for (uint64_t b = 0; b < batches; ++b) {
    runBatch(prompts, b * batch, b + 1, batches, results);
    t.lastProgress = Clock::now();
    if (options_.progress)
      options_.progress(
          {b + 1, batches, t.sequencesDone, t.sequences, t.generatedTokens, secondsSince(t.start)});
  }
  t.prompts += prompts.size();
  t.batches += batches;
  return results;
}

void Generator::runProgram(uint32_t program, const std::map<std::string, HostTensor> &inputs,
                           const std::string &what, double &seconds) {
  auto start = Clock::now();
  try {
    executor_->execute(inputs, program);
  } catch (const Error &e) {
    throw makeError(what, ": ", e.what());
  }
  seconds += secondsSince(start);
  const RunStats &stats = executor_->stats();
  Totals &t = *totals_;
  t.bytesHostToDevice += stats.bytesHostToDevice;
  t.bytesDeviceToHost += stats.bytesDeviceToHost;
  if (program == decode_) {
    t.decodeBytesHostToDevice += stats.bytesHostToDevice;
    t.decodeBytesDeviceToHost += stats.bytesDeviceToHost;
  }
  t.deviceArenaPeakBytes = std::max(t.deviceArenaPeakBytes, stats.deviceArenaPeakBytes);
  t.hostPoolPeakBytes = std::max(t.hostPoolPeakBytes, stats.hostPoolPeakBytes);
}

void Generator::sampleRow(uint32_t program, int64_t row, const Prompt &prompt,
                          GeneratedSequence &sequence, TokenRng &rng) {
  const TensorRef &logits = executor_->outputBuffer(kLogitsOutput, program);
  size_t vocab = static_cast<size_t>(logits.shape.back());
  std::vector<double> values(vocab);
  if (logits.dtype == sl::schedule::F64) {
    std::memcpy(values.data(), logits.data + row * vocab * sizeof(double), vocab * sizeof(double));
  } else if (logits.dtype == sl::schedule::BF16) {
    const uint16_t *p =
        reinterpret_cast<const uint16_t *>(logits.data) + row * static_cast<int64_t>(vocab);
    std::transform(p, p + vocab, values.begin(), bfloat16ToFloat);
  } else {
    const float *p =
        reinterpret_cast<const float *>(logits.data) + row * static_cast<int64_t>(vocab);
    std::copy(p, p + vocab, values.begin());
  }
  int64_t token;
  try {
    token = sampleToken(values, options_.sampling, rng);
  } catch (const Error &e) {
    throw makeError("prompt ", sequence.index, " (line ", prompt.line, "), new token ",
                    sequence.tokens.size() + 1, ": ", e.what());
  }
  sequence.tokens.push_back(token);
  ++totals_->generatedTokens;
  const sl::schedule::Generation &g = schedule_.schedule.generation();
  int64_t inCache = sequence.promptTokens + static_cast<int64_t>(sequence.tokens.size()) - 1;
  if (std::find(options_.stopTokens.begin(), options_.stopTokens.end(), token) !=
      options_.stopTokens.end()) {
    sequence.finishReason = "stop";
    ++totals_->stopped;
  } else if (static_cast<int64_t>(sequence.tokens.size()) >= maxNewTokens_ ||
             inCache >= g.cache_len()) {
    // The next decode would put this token at position inCache, past the cache's end.
    sequence.finishReason = "length";
    ++totals_->length;
  }
  if (!sequence.finishReason.empty())
    ++totals_->sequencesDone;
}

void Generator::runBatch(const std::vector<Prompt> &prompts, size_t first, uint64_t batchNumber,
                         uint64_t batches, std::vector<GeneratedSequence> &results) {
  const sl::schedule::Generation &g = schedule_.schedule.generation();
  int64_t batch = g.batch(), maxPrompt = g.max_prompt_len();
  int64_t real = std::min<int64_t>(batch, static_cast<int64_t>(prompts.size() - first));
  Totals &t = *totals_;
  const Totals::Batch before = t.sums();
  std::string where = "batch " + std::to_string(batchNumber) + " (prompts " +
                      std::to_string(first) + " to " + std::to_string(first + real - 1) + ")";

  std::vector<TokenRng> rngs;
  for (int64_t j = 0; j < real; ++j) {
    GeneratedSequence &sequence = results[first + static_cast<size_t>(j)];
    sequence.index = first + static_cast<size_t>(j);
    sequence.id = prompts[sequence.index].id;
    sequence.promptTokens = static_cast<int64_t>(prompts[sequence.index].tokens.size());
    rngs.emplace_back(options_.sampling.seed, sequence.index);
  }

  // Prefill: prompts right-padded with token 0; dummies are the one-token prompt [0].
  HostTensor ids = HostTensor::zeros(sl::schedule::I64, {batch, maxPrompt});
  HostTensor lastIndex = HostTensor::zeros(sl::schedule::I64, {batch});
  for (int64_t j = 0; j < real; ++j) {
    const std::vector<int64_t> &tokens = prompts[first + static_cast<size_t>(j)].tokens;
    std::copy(tokens.begin(), tokens.end(), ids.as<int64_t>() + j * maxPrompt);
    lastIndex.as<int64_t>()[j] = static_cast<int64_t>(tokens.size()) - 1;
    t.prefillTokens += tokens.size();
  }
  runProgram(prefill_, {{kInputIdsInput, ids}, {kLastIndexInput, lastIndex}},
             where + ", " + kPrefillProgram, t.prefillSeconds);
  ++t.prefillRuns;
  for (int64_t j = 0; j < real; ++j) {
    size_t i = first + static_cast<size_t>(j);
    sampleRow(prefill_, j, prompts[i], results[i], rngs[static_cast<size_t>(j)]);
  }

  // Decode until every sequence of the batch has stopped.
  HostTensor newest = HostTensor::zeros(sl::schedule::I64, {batch, 1});
  HostTensor position = HostTensor::zeros(sl::schedule::I64, {batch});
  for (uint64_t step = 1;; ++step) {
    int64_t active = 0;
    for (int64_t j = 0; j < batch; ++j) {
      const GeneratedSequence *sequence =
          j < real ? &results[first + static_cast<size_t>(j)] : nullptr;
      bool running = sequence && sequence->finishReason.empty();
      newest.as<int64_t>()[j] = running ? sequence->tokens.back() : 0;
      position.as<int64_t>()[j] =
          running ? sequence->promptTokens + static_cast<int64_t>(sequence->tokens.size()) - 1 : 0;
      active += running;
    }
    if (active == 0)
      break;
    runProgram(decode_, {{kInputIdsInput, newest}, {kPositionInput, position}},
               where + ", " + kDecodeProgram + " step " + std::to_string(step), t.decodeSeconds);
    ++t.decodeRuns;
    for (int64_t j = 0; j < real; ++j) {
      size_t i = first + static_cast<size_t>(j);
      if (!results[i].finishReason.empty())
        continue;
      sampleRow(decode_, j, prompts[i], results[i], rngs[static_cast<size_t>(j)]);
      ++t.decodeTokens;
    }
    if (options_.progress && secondsSince(t.lastProgress) >= options_.progressSeconds) {
      t.lastProgress = Clock::now();
      options_.progress({batchNumber, batches, t.sequencesDone, t.sequences, t.generatedTokens,
                         secondsSince(t.start)});
    }
  }
  const Totals::Batch after = t.sums();
  t.perBatch.push_back({after.prefillTokens - before.prefillTokens,
                        after.decodeTokens - before.decodeTokens,
                        after.decodeRuns - before.decodeRuns,
                        after.decodeBytesHostToDevice - before.decodeBytesHostToDevice,
                        after.prefillSeconds - before.prefillSeconds,
                        after.decodeSeconds - before.decodeSeconds});
}

nlohmann::json Generator::report() const {
  const Totals &t = *totals_;
  nlohmann::json perBatch = nlohmann::json::array();
  for (const Totals::Batch &b : t.perBatch)
    perBatch.push_back({{"prefill_tokens", b.prefillTokens},
                        {"prefill_seconds", b.prefillSeconds},
                        {"prefill_tokens_per_second", perSecond(b.prefillTokens, b.prefillSeconds)},
                        {"decode_runs", b.decodeRuns},
                        {"decode_tokens", b.decodeTokens},
                        {"decode_seconds", b.decodeSeconds},
                        {"decode_tokens_per_second", perSecond(b.decodeTokens, b.decodeSeconds)},
                        {"decode_bytes_host_to_device", b.decodeBytesHostToDevice}});
  const sl::schedule::Generation &g = schedule_.schedule.generation();
  return {
      {"prompts", t.prompts},
      {"batches", t.batches},
      {"prefill_runs", t.prefillRuns},
      {"decode_runs", t.decodeRuns},
      {"prefill_tokens", t.prefillTokens},
      {"prefill_seconds", t.prefillSeconds},
      {"prefill_tokens_per_second", perSecond(t.prefillTokens, t.prefillSeconds)},
      {"decode_tokens", t.decodeTokens},
      {"decode_seconds", t.decodeSeconds},
      {"decode_tokens_per_second", perSecond(t.decodeTokens, t.decodeSeconds)},
      {"generated_tokens", t.generatedTokens},
      {"finish_reasons", {{"stop", t.stopped}, {"length", t.length}}},
      {"bytes_host_to_device", t.bytesHostToDevice},
      {"bytes_device_to_host", t.bytesDeviceToHost},
      {"decode_bytes_host_to_device", t.decodeBytesHostToDevice},
      {"decode_bytes_device_to_host", t.decodeBytesDeviceToHost},
      {"per_batch", perBatch},
      {"device_arena_peak_bytes", t.deviceArenaPeakBytes},
      {"host_pool_peak_bytes", t.hostPoolPeakBytes},
      {"sampling",
       {{"temperature", options_.sampling.temperature},
        {"top_k", options_.sampling.topK},
        {"top_p", options_.sampling.topP},
        {"seed", options_.sampling.seed},
        {"stop_tokens", options_.stopTokens},
        {"max_new_tokens", maxNewTokens_},
        {"tokenizer", tokenizerName(options_.tokenizer)}}},
      {"schedule",
       {{"batch", g.batch()},
        {"max_prompt_len", g.max_prompt_len()},
        {"max_new_tokens", g.max_new_tokens()},
        {"vocab", g.vocab()},
        {"cache_len", g.cache_len()},
        {"num_sub_batches", g.num_sub_batches()},
        {"sub_batch_size", g.sub_batch_size()},
        {"kv_cache_bytes", g.kv_cache_bytes()},
        {"parameter_bytes", g.parameter_bytes()},
        {"weights_on_device", g.weights_on_device()},
        {"kv_cache_on_device", g.kv_cache_on_device()}}},
  };
}

std::string generationJsonLines(const std::vector<GeneratedSequence> &sequences,
                                Tokenizer tokenizer) {
  std::string out;
  for (const GeneratedSequence &sequence : sequences) {
    nlohmann::ordered_json line;
    line["index"] = sequence.index;
    if (sequence.id)
      line["id"] = *sequence.id;
    line["prompt_tokens"] = sequence.promptTokens;
    line["tokens"] = sequence.tokens;
    if (tokenizer == Tokenizer::kBytes)
      line["text"] = decodeByteTokens(sequence.tokens);
    line["finish_reason"] = sequence.finishReason;
    // The text is valid UTF-8 by construction and ids came from a JSON parser; replace rather
    // than throw all the same.
    out += line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  return out;
}

} // namespace slrt
