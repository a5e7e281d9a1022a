// Generation: token sampling, and the generator's loop end to end on the tiny generate schedule,
// whose greedy output has a naive reference.
#include <cmath>
#include <cstring>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/generator.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

// --- sampling ---------------------------------------------------------------------------------

TEST(SamplingTest, TemperatureZeroIsGreedyWithTheLowestIdOnTies) {
  SamplingOptions greedy;
  TokenRng rng(0, 0);
  EXPECT_EQ(sampleToken({0.5, 2.0, -1.0, 2.0}, greedy, rng), 1);
  EXPECT_EQ(sampleToken({-INFINITY, -3.0, -INFINITY}, greedy, rng), 1);
}

std::vector<int64_t> draws(const std::vector<double> &logits, const SamplingOptions &options,
                           uint64_t prompt, int count) {
  TokenRng rng(options.seed, prompt);
  std::vector<int64_t> tokens;
  for (int i = 0; i < count; ++i)
    tokens.push_back(sampleToken(logits, options, rng));
  return tokens;
}

const std::vector<double> kFlat = {0.1, 0.3, 0.2, 0.25, 0.0, 0.15, 0.05, 0.3};

TEST(SamplingTest, SameSeedSameTokensOtherSeedOrPromptOthers) {
  SamplingOptions options;
  options.temperature = 1;
  options.seed = 42;
  std::vector<int64_t> a = draws(kFlat, options, 3, 64);
  EXPECT_EQ(draws(kFlat, options, 3, 64), a);
  EXPECT_NE(draws(kFlat, options, 4, 64), a); // another prompt's stream
  options.seed = 43;
  EXPECT_NE(draws(kFlat, options, 3, 64), a);
}

TEST(SamplingTest, TopKOneAndATinyTopPAreGreedy) {
  std::vector<double> logits = {0.1, 0.3, 0.2, 0.31, 0.0};
  SamplingOptions options;
  options.temperature = 5; // nearly uniform without the filters
  options.topK = 1;
  for (int64_t token : draws(logits, options, 0, 50))
    EXPECT_EQ(token, 3);
  options.topK = 0;
  options.topP = 1e-9;
  for (int64_t token : draws(logits, options, 0, 50))
    EXPECT_EQ(token, 3);
}

// Draws `count` tokens and checks their frequencies against `expected` probabilities with a
// chi-square statistic: with a fixed seed the test is deterministic, and the bound (the 0.999
// quantile for up to 4 degrees of freedom) leaves room for any honest sampler.
void expectDistribution(const std::vector<double> &logits, const SamplingOptions &options,
                        const std::vector<double> &expected) {
  const int count = 20000;
  std::vector<int> seen(logits.size(), 0);
  for (int64_t token : draws(logits, options, 5, count))
    ++seen[static_cast<size_t>(token)];
  double chi2 = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(seen[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    double e = expected[i] * count;
    chi2 += (seen[i] - e) * (seen[i] - e) / e;
  }
  EXPECT_LT(chi2, 18.5) << ::testing::PrintToString(seen);
}

TEST(SamplingTest, DrawsFromTheSoftmaxAfterTopKAndTopP) {
  std::vector<double> logits = {std::log(0.5), std::log(0.3), std::log(0.15), std::log(0.05),
                                -INFINITY};
  SamplingOptions options;
  options.temperature = 1;
  options.seed = 9;
  expectDistribution(logits, options, {0.5, 0.3, 0.15, 0.05, 0});
  // Temperature 2: probabilities proportional to sqrt(p).
  options.temperature = 2;
  double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  expectDistribution(
      logits, options,
      {std::sqrt(0.5) / z, std::sqrt(0.3) / z, std::sqrt(0.15) / z, std::sqrt(0.05) / z, 0});
  // Top-k 2 and top-p 0.7 both keep {0.5, 0.3}, renormalised.
  options.temperature = 1;
  options.topK = 2;
  expectDistribution(logits, options, {0.625, 0.375, 0, 0, 0});
  options.topK = 0;
  options.topP = 0.7;
  expectDistribution(logits, options, {0.625, 0.375, 0, 0, 0});
  // Top-p 0.9 needs the third token as well (0.5 + 0.3 < 0.9).
  options.topP = 0.9;
  expectDistribution(logits, options, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0, 0});
}

TEST(SamplingTest, RefusesLogitsItCannotSampleAndBadOptions) {
  SamplingOptions options;
  options.temperature = 1;
  TokenRng rng(0, 0);
  EXPECT_THAT(errorOf([&] {
                sampleToken({0.0, NAN}, options, rng);
              }),
              HasSubstr("logit 1 (of 2) is nan"));
  EXPECT_THAT(errorOf([&] {
                sampleToken({INFINITY, 0.0}, options, rng);
              }),
              HasSubstr("logit 0 (of 2) is inf"));
  EXPECT_THAT(errorOf([&] {
                sampleToken({-INFINITY, -INFINITY}, options, rng);
              }),
              HasSubstr("every one of the 2 logits is -inf"));
  SamplingOptions bad;
  bad.temperature = -1;
  EXPECT_THAT(errorOf([&] { bad.validate(); }),
              HasSubstr("the temperature must be a finite number >= 0 (0: greedy), got -1"));
  bad = SamplingOptions();
  bad.topK = -2;
  EXPECT_THAT(errorOf([&] { bad.validate(); }), HasSubstr("top-k must be >= 0"));
  bad = SamplingOptions();
  bad.topP = 0;
  EXPECT_THAT(errorOf([&] { bad.validate(); }), HasSubstr("top-p must be in (0, 1]"));
}

// --- the generator ----------------------------------------------------------------------------

std::vector<Prompt> promptsOf(const std::vector<std::vector<int64_t>> &tokens) {
  std::vector<Prompt> prompts;
  for (size_t i = 0; i < tokens.size(); ++i)
    prompts.push_back(Prompt{tokens[i], std::nullopt, i + 1});
  return prompts;
}

class GeneratorTest : public ::testing::Test {
protected:
  std::vector<GeneratedSequence> generate(const TinyGenerate &model,
                                          const std::vector<Prompt> &prompts,
                                          const GenerationOptions &options,
                                          nlohmann::json *report = nullptr) {
    std::string name = "g" + std::to_string(files++);
    loaded.push_back(std::make_unique<LoadedSchedule>(loadSchedule(model.write(dir.path(), name))));
    Generator generator(*loaded.back(), *backend, options);
    std::vector<GeneratedSequence> out = generator.generate(prompts);
    if (report)
      *report = generator.report();
    return out;
  }

  TinyGenerate model = TinyGenerate::build(5);
  // Five prompts for batches of two: the last batch has a dummy.
  std::vector<Prompt> prompts = promptsOf({{3, 1, 4, 1}, {5}, {9, 2}, {6, 5, 3}, {15, 8}});
  TempDir dir;
  int files = 0;
  std::vector<std::unique_ptr<LoadedSchedule>> loaded;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(GeneratorTest, GreedyOutputIsTheReferences) {
  nlohmann::json report;
  std::vector<GenerationProgress> progress;
  GenerationOptions options;
  options.progress = [&](const GenerationProgress &p) { progress.push_back(p); };
  std::vector<GeneratedSequence> out = generate(model, prompts, options, &report);
  ASSERT_EQ(out.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    double margin;
    std::vector<int64_t> expected =
        model.referenceGreedy(prompts[i].tokens, model.maxNew, {}, &margin);
    ASSERT_GT(margin, 1e-3) << "the reference is too close to a tie to compare in float";
    EXPECT_EQ(out[i].tokens, expected);
    EXPECT_EQ(out[i].index, i);
    EXPECT_EQ(out[i].promptTokens, static_cast<int64_t>(prompts[i].tokens.size()));
    EXPECT_EQ(out[i].finishReason, "length");
  }
  // Three batches, each a prefill and maxNew - 1 decode steps.
  EXPECT_EQ(report["prompts"], 5);
  EXPECT_EQ(report["batches"], 3);
  EXPECT_EQ(report["prefill_runs"], 3);
  EXPECT_EQ(report["decode_runs"], 3 * (model.maxNew - 1));
  EXPECT_EQ(report["prefill_tokens"], 4 + 1 + 2 + 3 + 2);
  EXPECT_EQ(report["generated_tokens"], 5 * model.maxNew);
  EXPECT_EQ(report["decode_tokens"], 5 * (model.maxNew - 1));
  EXPECT_EQ(report["finish_reasons"]["length"], 5);
  EXPECT_EQ(report["schedule"]["cache_len"], model.maxPrompt + model.maxNew);
  EXPECT_EQ(report["sampling"]["max_new_tokens"], model.maxNew);
  EXPECT_GT(report["bytes_host_to_device"].get<uint64_t>(), 0u);
  EXPECT_GT(report["host_pool_peak_bytes"].get<uint64_t>(), 0u);
  // Each batch's own figures, which add up to the totals: prompts 0-1 (4 + 1 prompt tokens),
  // 2-3 (2 + 3) and 4 (2).
  const nlohmann::json &perBatch = report["per_batch"];
  ASSERT_EQ(perBatch.size(), 3u);
  const uint64_t batchPromptTokens[] = {5, 5, 2}, batchSequences[] = {2, 2, 1};
  uint64_t decodeTokens = 0, decodeRuns = 0, decodeBytes = 0;
  double prefillSeconds = 0, decodeSeconds = 0;
  for (size_t b = 0; b < 3; ++b) {
    SCOPED_TRACE(b);
    EXPECT_EQ(perBatch[b]["prefill_tokens"], batchPromptTokens[b]);
    EXPECT_EQ(perBatch[b]["decode_runs"], model.maxNew - 1);
    EXPECT_EQ(perBatch[b]["decode_tokens"], batchSequences[b] * (model.maxNew - 1));
    EXPECT_GT(perBatch[b]["decode_bytes_host_to_device"].get<uint64_t>(), 0u);
    decodeTokens += perBatch[b]["decode_tokens"].get<uint64_t>();
    decodeRuns += perBatch[b]["decode_runs"].get<uint64_t>();
    decodeBytes += perBatch[b]["decode_bytes_host_to_device"].get<uint64_t>();
    prefillSeconds += perBatch[b]["prefill_seconds"].get<double>();
    decodeSeconds += perBatch[b]["decode_seconds"].get<double>();
  }
  EXPECT_EQ(decodeTokens, report["decode_tokens"].get<uint64_t>());
  EXPECT_EQ(decodeRuns, report["decode_runs"].get<uint64_t>());
  EXPECT_EQ(decodeBytes, report["decode_bytes_host_to_device"].get<uint64_t>());
  EXPECT_NEAR(prefillSeconds, report["prefill_seconds"].get<double>(), 1e-9);
  EXPECT_NEAR(decodeSeconds, report["decode_seconds"].get<double>(), 1e-9);
  ASSERT_EQ(progress.size(), 3u);
  EXPECT_EQ(progress[2].batch, 3u);
  EXPECT_EQ(progress[2].sequencesDone, 5u);
  EXPECT_EQ(progress[2].generatedTokens, 5u * model.maxNew);
}

TEST_F(GeneratorTest, StopTokensEndTheirSequenceAndFewerNewTokens) {
  // A stop token from the middle of prompt 0's greedy output.
  std::vector<int64_t> greedy = model.referenceGreedy(prompts[0].tokens, model.maxNew);
  int64_t stop = greedy[1];
  GenerationOptions options;
  options.stopTokens = {stop};
  std::vector<GeneratedSequence> out = generate(model, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int64_t> expected = model.referenceGreedy(prompts[i].tokens, model.maxNew, {stop});
    EXPECT_EQ(out[i].tokens, expected) << i;
    EXPECT_EQ(out[i].finishReason, expected.back() == stop ? "stop" : "length") << i;
  }
  EXPECT_EQ(out[0].tokens.size(), 2u);

  options.stopTokens.clear();
  options.maxNewTokens = 2;
  out = generate(model, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(out[i].tokens, model.referenceGreedy(prompts[i].tokens, 2)) << i;
}

TEST_F(GeneratorTest, SamplingDoesNotDependOnTheBatch) {
  GenerationOptions options;
  options.sampling.temperature = 1.5;
  options.sampling.seed = 7;
  std::vector<GeneratedSequence> two = generate(model, prompts, options);
  // The same model in batches of three and of one.
  for (int64_t batch : {int64_t{3}, int64_t{1}}) {
    TinyGenerate other = TinyGenerate::build(5, batch);
    std::vector<GeneratedSequence> out = generate(other, prompts, options);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(out[i].tokens, two[i].tokens) << "batch " << batch << ", prompt " << i;
  }
  options.sampling.seed = 8;
  std::vector<GeneratedSequence> reseeded = generate(model, prompts, options);
  bool differs = false;
  for (size_t i = 0; i < prompts.size(); ++i)
    differs = differs || reseeded[i].tokens != two[i].tokens;
  EXPECT_TRUE(differs);
}

TEST_F(GeneratorTest, RefusesOptionsTheScheduleCannotTake) {
  std::string path = model.write(dir.path());
  LoadedSchedule schedule = loadSchedule(path);
  GenerationOptions options;
  options.maxNewTokens = model.maxNew + 1;
  EXPECT_THAT(errorOf([&] { Generator(schedule, *backend, options); }),
              HasSubstr("the most new tokens per sequence must be in [1, 5] (the schedule's "
                        "max_new_tokens: its KV cache holds max_prompt_len + max_new_tokens "
                        "positions), got 6"));
  options = GenerationOptions();
  options.stopTokens = {3, 16};
  EXPECT_THAT(errorOf([&] { Generator(schedule, *backend, options); }),
              HasSubstr("stop token 16 is outside the vocabulary [0, 16)"));
  options = GenerationOptions();
  options.sampling.topP = 2;
  EXPECT_THAT(errorOf([&] { Generator(schedule, *backend, options); }),
              HasSubstr("top-p must be in (0, 1]"));

  TinyMlp mlp = TinyMlp::build(1);
  LoadedSchedule infer = loadSchedule(mlp.write(dir.path()));
  EXPECT_THAT(errorOf([&] { Generator(infer, *backend, GenerationOptions()); }),
              HasSubstr("tiny_mlp.slsched: not a generate schedule: its kind is 'infer', not "
                        "'generate'"));
}

TEST_F(GeneratorTest, ALogitItCannotSampleNamesThePrompt) {
  // Token 3's embedding is NaN: every logit after it is NaN.
  for (int64_t c = 0; c < TinyGenerate::kDim; ++c)
    model.emb[3 * TinyGenerate::kDim + c] = NAN;
  model.schedule.mutable_constants(0)->set_data(
      std::string(reinterpret_cast<const char *>(model.emb.data()), model.emb.size() * 4));
  EXPECT_THAT(errorOf([&] {
                generate(model, promptsOf({{1}, {2, 3}}), GenerationOptions());
              }),
              HasSubstr("prompt 1 (line 2), new token 1: logit 0 (of 16) is nan"));
}

TEST(GenerationOutputTest, WritesOneOrderedObjectPerLine) {
  GeneratedSequence a{0, nlohmann::json("first"), 3, {104, 105, 0xFF}, "length"};
  GeneratedSequence b{1, std::nullopt, 1, {10}, "stop"};
  EXPECT_EQ(generationJsonLines({a, b}, Tokenizer::kNone),
            "{\"index\":0,\"id\":\"first\",\"prompt_tokens\":3,\"tokens\":[104,105,255],"
            "\"finish_reason\":\"length\"}\n"
            "{\"index\":1,\"prompt_tokens\":1,\"tokens\":[10],\"finish_reason\":\"stop\"}\n");
  EXPECT_EQ(generationJsonLines({a}, Tokenizer::kBytes),
            "{\"index\":0,\"id\":\"first\",\"prompt_tokens\":3,\"tokens\":[104,105,255],"
            "\"text\":\"hi\xEF\xBF\xBD\",\"finish_reason\":\"length\"}\n");
}

} // namespace
} // namespace slrt::test
