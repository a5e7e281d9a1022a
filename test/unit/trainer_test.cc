// The trainer on a hand-built train schedule whose loss and gradients are computed by hand
// (TinyTrain), against a naive AdamW; resuming; the ways training stops; the optimizer stepping
// inside the run at OPTIMIZER_STEP kernels; the train contract.
#include <cmath>
#include <cstring>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/atomic_file.h"
#include "slrt/bfloat16.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/read_file.h"
#include "slrt/safetensors.h"
#include "slrt/trainer.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Writes uint16 token ids.
void writeTokens(const std::string &path, const std::vector<uint16_t> &tokens) {
  writeBytes(path, std::string(reinterpret_cast<const char *>(tokens.data()),
                               tokens.size() * sizeof(uint16_t)));
}

// `count` ids in [0, kNanToken): every one has a finite embedding.
std::vector<uint16_t> finiteTokens(uint32_t seed, size_t count) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, TinyTrain::kNanToken - 1);
  std::vector<uint16_t> tokens(count);
  for (uint16_t &t : tokens)
    t = static_cast<uint16_t>(id(rng));
  return tokens;
}

// torch.optim.AdamW with clip_grad_norm_, in double, over any number of parameters.
struct NaiveAdamW {
  explicit NaiveAdamW(const AdamWConfig &config) : c(config) {}

  void step(std::vector<std::vector<double>> &params, std::vector<std::vector<double>> grads) {
    if (m.empty())
      for (const std::vector<double> &p : params) {
        m.emplace_back(p.size(), 0.0);
        v.emplace_back(p.size(), 0.0);
      }
    if (c.maxGradNorm > 0) {
      double squares = 0;
      for (const std::vector<double> &g : grads)
        for (double e : g)
          squares += e * e;
      double coef = std::min(1.0, c.maxGradNorm / (std::sqrt(squares) + 1e-6));
      for (std::vector<double> &g : grads)
        for (double &e : g)
          e *= coef;
    }
    double lr = c.lrAt(t);
    ++t;
    double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
    for (size_t i = 0; i < params.size(); ++i)
      for (size_t j = 0; j < params[i].size(); ++j) {
        double g = grads[i][j];
        double &p = params[i][j], &mi = m[i][j], &vi = v[i][j];
        p *= 1 - lr * c.weightDecay;
        mi = c.beta1 * mi + (1 - c.beta1) * g;
        vi = c.beta2 * vi + (1 - c.beta2) * g * g;
        p -= lr / bc1 * mi / (std::sqrt(vi) / std::sqrt(bc2) + c.eps);
      }
  }

  AdamWConfig c;
  int64_t t = 0;
  std::vector<std::vector<double>> m, v;
};

std::vector<double> toDoubles(const std::vector<float> &values) {
  return std::vector<double>(values.begin(), values.end());
}

std::vector<float> toFloatVector(const std::vector<double> &values) {
  return std::vector<float>(values.begin(), values.end());
}

class TrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    loaded = loadSchedule(model.write(dir.path()));
    tokensPath = dir.file("tokens.bin");
    tokens = finiteTokens(3, 40);
    writeTokens(tokensPath, tokens);
  }

  // The inputs and labels step `t` (0-based) reads, as TokenData documents it.
  void window(uint64_t t, std::vector<int64_t> &ids, std::vector<int64_t> &labels) const {
    int64_t perStep = model.batch * model.seq;
    ids.clear();
    labels.clear();
    for (int64_t i = 0; i < perStep; ++i) {
      uint64_t at = (t * perStep + i) % tokens.size();
      ids.push_back(tokens[at]);
      labels.push_back(tokens[(at + 1) % tokens.size()]);
    }
  }

  template <typename F> std::string errorOf(F &&f) {
    try {
      f();
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an Error";
    return "";
  }

  TinyTrain model = TinyTrain::build(11);
  TempDir dir;
  LoadedSchedule loaded;
  std::string tokensPath;
  std::vector<uint16_t> tokens;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(TrainerTest, StepsMatchNaiveAdamWOnNaiveGradients) {
  AdamWConfig plain;
  plain.lr = 1e-2;
  plain.weightDecay = 0.1;
  AdamWConfig scheduled = plain;
  scheduled.warmupSteps = 2;
  scheduled.decaySteps = 3;
  scheduled.minLr = 1e-3;
  // Small enough that every step clips.
  scheduled.maxGradNorm = 0.05;
  for (const AdamWConfig &config : {plain, scheduled}) {
    SCOPED_TRACE(config.maxGradNorm > 0 ? "scheduled and clipped" : "plain");
    TokenData data = TokenData::open(tokensPath, TokenDType::U16);
    Trainer trainer(loaded, *backend, data, {config, TinyTrain::kVocab});
    EXPECT_EQ(trainer.batchSize(), model.batch);
    EXPECT_EQ(trainer.seqLen(), model.seq);

    std::vector<std::vector<double>> params = {toDoubles(model.w), toDoubles(model.b)};
    NaiveAdamW naive(config);
    constexpr uint64_t kSteps = 7;
    for (uint64_t t = 0; t < kSteps; ++t) {
      std::vector<int64_t> ids, labels;
      window(t, ids, labels);
      TinyTrain::Result expected =
          model.reference(toFloatVector(params[0]), toFloatVector(params[1]), ids, labels);
      StepRecord r = trainer.step();
      EXPECT_EQ(r.step, t + 1);
      EXPECT_NEAR(r.loss, expected.loss, 1e-5 * expected.loss) << "step " << t + 1;
      EXPECT_EQ(r.lr, config.lrAt(static_cast<int64_t>(t)));
      double norm = 0;
      for (const std::vector<double> *g : {&expected.gradW, &expected.gradB})
        for (double e : *g)
          norm += e * e;
      EXPECT_NEAR(r.gradNorm, std::sqrt(norm), 1e-5 * std::sqrt(norm));
      EXPECT_GT(r.tokensPerSecond, 0);
      naive.step(params, {expected.gradW, expected.gradB});
    }
    ASSERT_EQ(trainer.completedSteps(), kSteps);
    ASSERT_EQ(trainer.history().size(), kSteps);
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> &actual = trainer.optimizer().weights(i);
      ASSERT_EQ(actual.size(), params[i].size());
      for (size_t j = 0; j < actual.size(); ++j)
        EXPECT_NEAR(actual[j], params[i][j], 2e-5) << "parameter " << i << " element " << j;
    }
  }
}

TEST_F(TrainerTest, WeightsAreWrittenBackBeforeTheNextRun) {
  // The loss of step 2 is computed by the schedule from the parameter buffers: it matches the
  // reference only if step 1's update reached them.
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  Trainer trainer(loaded, *backend, data, {});
  trainer.step();
  std::vector<int64_t> ids, labels;
  window(1, ids, labels);
  TinyTrain::Result expected =
      model.reference(trainer.optimizer().weights(0), trainer.optimizer().weights(1), ids, labels);
  TinyTrain::Result stale = model.reference(model.w, model.b, ids, labels);
  float loss = trainer.step().loss;
  EXPECT_NEAR(loss, expected.loss, 1e-6 * expected.loss);
  EXPECT_GT(std::abs(loss - stale.loss), 1e-4);
}

void expectSameState(const TrainingCheckpoint &a, const TrainingCheckpoint &b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.modelFingerprint, b.modelFingerprint);
  EXPECT_EQ(a.dataPosition, b.dataPosition);
  ASSERT_EQ(a.parameters.size(), b.parameters.size());
  for (size_t i = 0; i < a.parameters.size(); ++i) {
    const ParameterState &p = a.parameters[i], &q = b.parameters[i];
    EXPECT_EQ(p.name, q.name);
    EXPECT_EQ(p.shape, q.shape);
    for (auto field : {&ParameterState::master, &ParameterState::adamM, &ParameterState::adamV}) {
      ASSERT_EQ((p.*field).size(), (q.*field).size());
      EXPECT_EQ(
          std::memcmp((p.*field).data(), (q.*field).data(), (p.*field).size() * sizeof(float)), 0)
          << p.name;
    }
  }
}

TEST_F(TrainerTest, ResumeContinuesBitIdentically) {
  TrainerOptions options;
  options.adamw.lr = 1e-2;
  options.adamw.warmupSteps = 2;
  options.adamw.decaySteps = 4;
  options.adamw.maxGradNorm = 0.1;
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);

  Trainer straight(loaded, *backend, data, options);
  for (int i = 0; i < 5; ++i)
    straight.step();

  std::string saved = dir.file("three.safetensors");
  {
    Trainer first(loaded, *backend, data, options);
    for (int i = 0; i < 3; ++i)
      first.step();
    first.save(saved);
  }
  Trainer resumed(loaded, *backend, data, options);
  uint64_t savedPosition = resumed.resume(saved);
  EXPECT_EQ(savedPosition, 18u);
  EXPECT_EQ(resumed.dataPosition(), 18u);
  EXPECT_EQ(resumed.completedSteps(), 3u);
  for (int i = 0; i < 2; ++i) {
    StepRecord r = resumed.step();
    const StepRecord &s = straight.history()[3 + i];
    EXPECT_EQ(r.step, s.step);
    EXPECT_EQ(std::memcmp(&r.loss, &s.loss, sizeof(float)), 0) << "step " << r.step;
    EXPECT_EQ(r.lr, s.lr);
    EXPECT_EQ(r.gradNorm, s.gradNorm);
  }
  expectSameState(resumed.checkpoint(), straight.checkpoint());
  nlohmann::json report = resumed.report();
  EXPECT_EQ(report["first_step"], 3);
  EXPECT_EQ(report["steps"], 2);
  EXPECT_EQ(report["resumed_from"], saved);
}

// Each value rounded to bf16 and back: what a bf16 parameter buffer holds of f32 weights.
std::vector<float> roundedToBfloat16(const std::vector<float> &values) {
  std::vector<float> out;
  for (float v : values)
    out.push_back(bfloat16ToFloat(floatToBfloat16(v)));
  return out;
}

std::vector<float> bufferValues(const TensorRef &ref) {
  EXPECT_EQ(ref.dtype, sl::schedule::BF16);
  std::vector<float> values(ref.bytes / sizeof(uint16_t));
  widenBfloat16(reinterpret_cast<const uint16_t *>(ref.data), values.data(), values.size());
  return values;
}

// Mixed precision: bf16 parameters read from an f32 file. The masters start from the file's f32
// values (not the rounded buffers), the forward sees the masters rounded to bf16, an f32 gradient
// (w) is read as it is and a bf16 one (b) widened, and after every update the buffers hold
// exactly the rounded masters; resuming continues bit-identically.
TEST_F(TrainerTest, Bf16ParametersKeepF32MastersFromTheFile) {
  TinyTrain half = TinyTrain::build(11, 2, 3, 3, "tiny_bf16", -1, /*bf16Parameters=*/true);
  ASSERT_EQ(half.w, model.w);
  LoadedSchedule halfLoaded = loadSchedule(half.write(dir.path()));
  AdamWConfig config;
  config.lr = 1e-2;
  config.weightDecay = 0.1;
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  Trainer trainer(halfLoaded, *backend, data, {config, TinyTrain::kVocab});
  ASSERT_NE(roundedToBfloat16(half.w), half.w); // the test tells the two starts apart
  EXPECT_EQ(trainer.optimizer().weights(0), half.w);
  EXPECT_EQ(trainer.optimizer().weights(1), half.b);
  EXPECT_EQ(bufferValues(trainer.executor().parameterBuffer(0)), roundedToBfloat16(half.w));

  std::vector<std::vector<double>> params = {toDoubles(half.w), toDoubles(half.b)};
  NaiveAdamW naive(config);
  for (uint64_t t = 0; t < 4; ++t) {
    std::vector<int64_t> ids, labels;
    window(t, ids, labels);
    // The run computes with the bf16 weights; the gradient is taken there.
    TinyTrain::Result expected =
        half.reference(roundedToBfloat16(toFloatVector(params[0])),
                       roundedToBfloat16(toFloatVector(params[1])), ids, labels);
    StepRecord r = trainer.step();
    EXPECT_NEAR(r.loss, expected.loss, 1e-5 * expected.loss) << "step " << t + 1;
    // grad:b is a bf16 output: the trainer steps on it widened, the rounded reference.
    for (double &e : expected.gradB)
      e = bfloat16ToFloat(floatToBfloat16(static_cast<float>(e)));
    naive.step(params, {expected.gradW, expected.gradB});
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> &master = trainer.optimizer().weights(i);
      for (size_t j = 0; j < master.size(); ++j)
        EXPECT_NEAR(master[j], params[i][j], 2e-5) << "parameter " << i << " element " << j;
      EXPECT_EQ(bufferValues(trainer.executor().parameterBuffer(static_cast<int>(i))),
                roundedToBfloat16(master))
          << "parameter " << i << " after step " << t + 1;
    }
  }

  std::string saved = dir.file("bf16.safetensors");
  {
    Trainer first(halfLoaded, *backend, data, {config, TinyTrain::kVocab});
    first.step();
    first.step();
    first.save(saved);
  }
  Trainer resumed(halfLoaded, *backend, data, {config, TinyTrain::kVocab});
  resumed.resume(saved);
  EXPECT_EQ(bufferValues(resumed.executor().parameterBuffer(0)),
            roundedToBfloat16(resumed.optimizer().weights(0)));
  for (int i = 0; i < 2; ++i) {
    StepRecord r = resumed.step();
    EXPECT_EQ(std::memcmp(&r.loss, &trainer.history()[2 + i].loss, sizeof(float)), 0);
  }
  expectSameState(resumed.checkpoint(), trainer.checkpoint());
}

TEST_F(TrainerTest, NanLossStopsNamingTheStepAndKeepsTheLastGoodState) {
  // 6 tokens a step: step 3 (tokens 12..18) is the first whose inputs hold the NaN token.
  std::vector<uint16_t> poisoned = finiteTokens(5, 30);
  poisoned[14] = TinyTrain::kNanToken;
  writeTokens(tokensPath, poisoned);
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  Trainer trainer(loaded, *backend, data, {});
  trainer.step();
  trainer.step();
  TrainingCheckpoint good = trainer.checkpoint();
  EXPECT_THAT(errorOf([&] { trainer.step(); }),
              StartsWith("step 3: the loss is NaN; training stopped before this step's update"));
  EXPECT_EQ(trainer.completedSteps(), 2u);
  EXPECT_EQ(trainer.history().size(), 2u);
  expectSameState(trainer.checkpoint(), good);
}

TEST_F(TrainerTest, OutOfRangeTokensStopNamingTheStep) {
  std::vector<uint16_t> bad = finiteTokens(5, 30);
  bad[8] = 9;
  writeTokens(tokensPath, bad);
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  {
    // Without a vocabulary (the schedule has no CROSS_ENTROPY to take one from), the batch is
    // refused against the embedding GATHER that reads it, before any kernel runs.
    Trainer trainer(loaded, *backend, data, {});
    trainer.step();
    EXPECT_THAT(errorOf([&] { trainer.step(); }),
                StartsWith("step 2: input 'input_ids' holds 9 at [0, 2]: kernel " +
                           std::to_string(model.embedKernel) +
                           " 'embed' (GATHER), which indexes axis 0 of [8, 4] with it, takes "
                           "-8..7"));
    EXPECT_EQ(trainer.completedSteps(), 1u);
  }
  {
    // With one, the batch is refused as it is read, naming the token's place in the file.
    Trainer trainer(loaded, *backend, data, {AdamWConfig(), TinyTrain::kVocab});
    trainer.step();
    EXPECT_THAT(errorOf([&] { trainer.step(); }),
                AllOf(StartsWith("step 2: " + tokensPath + ": token 8 of the file"),
                      HasSubstr("past the vocabulary of 8 ids")));
  }
}

TEST_F(TrainerTest, CheckpointOfAnotherModelIsRefused) {
  TinyTrain other = TinyTrain::build(11, 2, 3, 2, "other");
  LoadedSchedule otherLoaded = loadSchedule(other.write(dir.path()));
  EXPECT_NE(modelFingerprint(other.schedule), modelFingerprint(model.schedule));
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  std::string path = dir.file("other.safetensors");
  {
    Trainer trainer(otherLoaded, *backend, data, {});
    trainer.step();
    trainer.save(path);
  }
  Trainer trainer(loaded, *backend, data, {});
  EXPECT_THAT(errorOf([&] { trainer.resume(path); }),
              AllOf(StartsWith(path + ": the checkpoint does not match this model"),
                    HasSubstr(modelFingerprint(other.schedule))));
  EXPECT_EQ(trainer.completedSteps(), 0u);
  EXPECT_EQ(trainer.optimizer().weights(0), model.w);
}

// AdamW counts steps in int64: a checkpoint claiming more is refused, and the trainer unchanged.
TEST_F(TrainerTest, CheckpointStepPastInt64IsRefused) {
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  std::string path = dir.file("c.safetensors");
  {
    Trainer trainer(loaded, *backend, data, {});
    trainer.step();
    trainer.save(path);
  }
  SafetensorsFile file = readSafetensors(path);
  file.metadata["speedloader.step"] = "9223372036854775808";
  writeSafetensors(path, file.tensors, file.metadata);
  Trainer trainer(loaded, *backend, data, {});
  EXPECT_EQ(errorOf([&] { trainer.resume(path); }),
            path + ": step 9223372036854775808 is out of range");
  EXPECT_EQ(trainer.completedSteps(), 0u);
}

TEST_F(TrainerTest, AnotherBatchShapeOfTheSameModelResumes) {
  // The fingerprint depends on the parameters only: a schedule of the same model with another
  // batch shape continues the training, from another place in the data.
  TinyTrain wide = TinyTrain::build(11, 1, 4, 3, "wide");
  EXPECT_EQ(modelFingerprint(wide.schedule), modelFingerprint(model.schedule));
  LoadedSchedule wideLoaded = loadSchedule(wide.write(dir.path()));
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  std::string path = dir.file("ckpt.safetensors");
  Trainer trainer(loaded, *backend, data, {});
  trainer.step();
  trainer.step();
  trainer.save(path);
  Trainer resumed(wideLoaded, *backend, data, {});
  uint64_t savedPosition = resumed.resume(path);
  EXPECT_EQ(savedPosition, 12u);
  EXPECT_EQ(resumed.dataPosition(), 8u);
  EXPECT_EQ(resumed.optimizer().weights(1), trainer.optimizer().weights(1));
  EXPECT_EQ(resumed.step().step, 3u);
}

TEST_F(TrainerTest, TooSmallTokenFileIsRefusedUpFront) {
  writeTokens(tokensPath, finiteTokens(1, 6)); // a step reads 2*3+1
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  EXPECT_THAT(errorOf([&] { Trainer(loaded, *backend, data, {}); }),
              HasSubstr("the token file is too small"));
}

// The executor refuses a NaN weight; a trained one must not be infinite either, since its update
// would be NaN. Both are refused before the first step, naming the parameter and the element.
TEST_F(TrainerTest, NonFiniteWeightsAreRefusedAtLoad) {
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  std::string file = dir.file("tiny_train.params");
  std::string params = readFile(file);
  for (float value : {-INFINITY, std::nanf("")}) {
    std::string poisoned = params;
    // The file holds a 16-byte header, w (f32 [4, 3]) then b.
    std::memcpy(poisoned.data() + 16 + 5 * sizeof(float), &value, sizeof value);
    writeBytes(file, poisoned);
    EXPECT_THAT(errorOf([&] { Trainer(loaded, *backend, data, {}); }),
                HasSubstr(std::isnan(value)
                              ? file + ": parameter 'w' holds NaN at element 5 of its "
                                       "f32 [4, 3] (read from offset 16): the model "
                                       "file is corrupt"
                              : file + ": parameter 'w' holds -inf at element 5 of "
                                       "its f32 [4, 3]: a trained parameter must be "
                                       "finite"));
  }
}

TEST_F(TrainerTest, BadOptionsAreRefused) {
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  TrainerOptions options;
  options.adamw.beta2 = 1.0;
  EXPECT_THAT(errorOf([&] { Trainer(loaded, *backend, data, options); }),
              HasSubstr("beta2 must be in [0, 1)"));
  options = {};
  options.vocabSize = -1;
  EXPECT_THAT(errorOf([&] { Trainer(loaded, *backend, data, options); }),
              HasSubstr("vocabulary size must not be negative"));
}

TEST_F(TrainerTest, ReportHoldsTheTrainingRun) {
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  TrainerOptions options;
  options.adamw.lr = 5e-3;
  options.adamw.warmupSteps = 2;
  Trainer trainer(loaded, *backend, data, options);
  trainer.step();
  trainer.step();
  trainer.save(dir.file("c.safetensors"));
  nlohmann::json r = trainer.report();
  EXPECT_EQ(r["steps"], 2);
  EXPECT_EQ(r["first_step"], 0);
  EXPECT_EQ(r["tokens_per_step"], 6);
  ASSERT_EQ(r["losses"].size(), 2u);
  EXPECT_EQ(r["losses"][1].get<float>(), trainer.history()[1].loss);
  EXPECT_EQ(r["lrs"], nlohmann::json::array({0.0, 2.5e-3}));
  EXPECT_EQ(r["adamw"]["lr"], 5e-3);
  EXPECT_EQ(r["adamw"]["warmup_steps"], 2);
  EXPECT_EQ(r["data"]["tokens"], 40);
  EXPECT_EQ(r["data"]["dtype"], "uint16");
  EXPECT_EQ(r["vocab_size"], nullptr);
  EXPECT_EQ(r["resumed_from"], nullptr);
  EXPECT_EQ(r["saved_to"], dir.file("c.safetensors"));
  EXPECT_EQ(r["fingerprint"], trainer.fingerprint());
  EXPECT_GT(r["tokens_per_second"].get<double>(), 0);
}

// --- the optimizer inside the run (OPTIMIZER_STEP) ----------------------------------------------

// Token ids in [0, 6): finite embeddings, and not the poison token 6 of poisonedModel().
std::vector<uint16_t> safeTokens(uint32_t seed, size_t count) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> id(0, 5);
  std::vector<uint16_t> tokens(count);
  for (uint16_t &t : tokens)
    t = static_cast<uint16_t>(id(rng));
  return tokens;
}

constexpr int64_t kPoisonToken = 6;

class OverlappedTrainerTest : public TrainerTest {
protected:
  // TinyTrain with OPTIMIZER_STEP groups, written next to the plain model under another name.
  LoadedSchedule withSteps(const std::vector<std::vector<uint32_t>> &groups,
                           const std::string &name, int64_t poisonToken = -1) {
    TinyTrain m = TinyTrain::build(11, 2, 3, 3, name, poisonToken);
    m.addOptimizerSteps(groups);
    return loadSchedule(m.write(dir.path()));
  }
  // Token data whose third step feeds the poison token (its gradient is NaN).
  TokenData poisonedData() {
    std::vector<uint16_t> poisoned = safeTokens(5, 30);
    poisoned[14] = kPoisonToken;
    writeTokens(tokensPath, poisoned);
    return TokenData::open(tokensPath, TokenDType::U16);
  }
  // The weights the run reads (both parameters' buffers) are `good`'s masters, bit for bit.
  static void expectBuffersHold(Trainer &trainer, const TrainingCheckpoint &good) {
    for (int i = 0; i < 2; ++i) {
      const TensorRef &ref = trainer.executor().parameterBuffer(i);
      EXPECT_EQ(std::memcmp(ref.data, good.parameters[static_cast<size_t>(i)].master.data(),
                            ref.bytes),
                0);
    }
  }
  // Two good steps, then the poisoned third stops before its update: the state after step 2.
  TrainingCheckpoint stopsAtThePoisonedStep(Trainer &trainer) {
    trainer.step();
    trainer.step();
    TrainingCheckpoint good = trainer.checkpoint();
    EXPECT_EQ(errorOf([&] { trainer.step(); }),
              "step 3: the gradient of parameter 'w' holds NaN or infinite values; training "
              "stopped before this step's update");
    return good;
  }
};

TEST_F(OverlappedTrainerTest, StepsInsideTheRunAreBitIdenticalToStepsAfterIt) {
  AdamWConfig plain;
  plain.lr = 1e-2;
  plain.weightDecay = 0.1;
  plain.warmupSteps = 2;
  plain.decaySteps = 3;
  AdamWConfig clipped = plain;
  clipped.maxGradNorm = 0.05; // every step clips: the optimizer must wait for the whole run
  LoadedSchedule stepped = withSteps({{1}, {0}}, "stepped");
  for (const AdamWConfig &config : {plain, clipped}) {
    SCOPED_TRACE(config.maxGradNorm > 0 ? "clipped" : "plain");
    TokenData data = TokenData::open(tokensPath, TokenDType::U16);
    // A backend holds one arena: the two trainers step in turns, so each needs its own.
    std::unique_ptr<Backend> otherBackend = createCpuBackend();
    Trainer after(loaded, *backend, data, {config, TinyTrain::kVocab});
    Trainer inside(stepped, *otherBackend, data, {config, TinyTrain::kVocab});
    EXPECT_FALSE(after.overlapsOptimizer());
    EXPECT_EQ(inside.overlapsOptimizer(), config.maxGradNorm == 0);
    for (int i = 0; i < 6; ++i) {
      StepRecord a = after.step(), b = inside.step();
      EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << "step " << a.step;
      EXPECT_EQ(a.gradNorm, b.gradNorm) << "step " << a.step;
      EXPECT_EQ(a.lr, b.lr);
    }
    expectSameState(inside.checkpoint(), after.checkpoint());
    // The weights the next run reads are the optimizer's.
    for (int i = 0; i < 2; ++i) {
      const TensorRef &ref = inside.executor().parameterBuffer(i);
      EXPECT_EQ(std::memcmp(ref.data, inside.optimizer().weights(static_cast<size_t>(i)).data(),
                            ref.bytes),
                0);
    }
    EXPECT_EQ(inside.report()["optimizer_overlapped"], config.maxGradNorm == 0);
  }
}

TEST_F(OverlappedTrainerTest, StepsThatLeaveAParameterOutRunAfterTheRun) {
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  LoadedSchedule partial = withSteps({{1}}, "partial");
  std::unique_ptr<Backend> otherBackend = createCpuBackend();
  Trainer trainer(partial, *backend, data, {});
  EXPECT_FALSE(trainer.overlapsOptimizer());
  Trainer reference(loaded, *otherBackend, data, {});
  trainer.step();
  reference.step();
  expectSameState(trainer.checkpoint(), reference.checkpoint());
}

TEST_F(OverlappedTrainerTest, NanLossStopsBeforeAnyGroupIsUpdated) {
  std::vector<uint16_t> poisoned = safeTokens(5, 30);
  poisoned[14] = TinyTrain::kNanToken;
  writeTokens(tokensPath, poisoned);
  TokenData data = TokenData::open(tokensPath, TokenDType::U16);
  LoadedSchedule stepped = withSteps({{1}, {0}}, "stepped");
  Trainer trainer(stepped, *backend, data, {});
  ASSERT_TRUE(trainer.overlapsOptimizer());
  trainer.step();
  trainer.step();
  TrainingCheckpoint good = trainer.checkpoint();
  EXPECT_EQ(errorOf([&] { trainer.step(); }),
            "step 3: the loss is NaN; training stopped before this step's update");
  EXPECT_FALSE(trainer.partlyApplied());
  expectSameState(trainer.checkpoint(), good);
  expectBuffersHold(trainer, good);
}

TEST_F(OverlappedTrainerTest, NonFiniteGradientOfTheFirstGroupStopsBeforeTheUpdate) {
  // Step 3's labels hold the poison token: grad:w is NaN, the loss and grad:b are finite.
  TokenData data = poisonedData();
  LoadedSchedule wFirst = withSteps({{0}, {1}}, "w_first", kPoisonToken);
  Trainer trainer(wFirst, *backend, data, {});
  TrainingCheckpoint good = stopsAtThePoisonedStep(trainer);
  EXPECT_FALSE(trainer.partlyApplied());
  expectSameState(trainer.checkpoint(), good);
  EXPECT_NO_THROW(trainer.save(dir.file("still-good.safetensors")));
}

TEST_F(OverlappedTrainerTest, NonFiniteGradientInAGroupStopsBeforeAnyOfItsParametersMoves) {
  // One group, b before w: w's gradient is NaN at step 3, b's finite; b must not move either.
  TokenData data = poisonedData();
  LoadedSchedule together = withSteps({{1, 0}}, "together", kPoisonToken);
  Trainer trainer(together, *backend, data, {});
  ASSERT_TRUE(trainer.overlapsOptimizer());
  TrainingCheckpoint good = stopsAtThePoisonedStep(trainer);
  EXPECT_FALSE(trainer.partlyApplied());
  expectSameState(trainer.checkpoint(), good);
  // The weights the run reads were not written either.
  expectBuffersHold(trainer, good);
}

// The same, with the optimizer after the run (no OPTIMIZER_STEP): nothing was updated.
TEST_F(OverlappedTrainerTest, NonFiniteGradientStopsTheStepAfterTheRunToo) {
  TokenData data = poisonedData();
  TinyTrain m = TinyTrain::build(11, 2, 3, 3, "after_run", kPoisonToken);
  LoadedSchedule afterRun = loadSchedule(m.write(dir.path()));
  Trainer trainer(afterRun, *backend, data, {});
  EXPECT_FALSE(trainer.overlapsOptimizer());
  TrainingCheckpoint good = stopsAtThePoisonedStep(trainer);
  expectSameState(trainer.checkpoint(), good);
}

TEST_F(OverlappedTrainerTest, NonFiniteGradientAfterAnUpdatedGroupRefusesToSaveOrContinue) {
  TokenData data = poisonedData();
  LoadedSchedule bFirst = withSteps({{1}, {0}}, "b_first", kPoisonToken);
  std::string saved = dir.file("two.safetensors");
  Trainer trainer(bFirst, *backend, data, {});
  trainer.step();
  trainer.step();
  trainer.save(saved);
  std::string savedBytes = readFile(saved);

  const std::string partly = "step 3 was partly applied (1 of 2 parameters were updated before "
                             "it failed), so the weights in memory mix two steps; the last saved "
                             "checkpoint is intact: resume from it";
  EXPECT_EQ(errorOf([&] { trainer.step(); }),
            "step 3: the gradient of parameter 'w' holds NaN or infinite values; " + partly);
  EXPECT_TRUE(trainer.partlyApplied());
  EXPECT_EQ(errorOf([&] { trainer.save(saved); }), "cannot save " + saved + ": " + partly);
  EXPECT_EQ(errorOf([&] { trainer.checkpoint(); }), "cannot make a checkpoint: " + partly);
  EXPECT_EQ(errorOf([&] { trainer.step(); }), "cannot step: " + partly);
  EXPECT_EQ(trainer.completedSteps(), 2u);
  EXPECT_EQ(readFile(saved), savedBytes);

  // The checkpoint continues as if the failed step never ran.
  Trainer resumed(bFirst, *backend, data, {});
  EXPECT_EQ(resumed.resume(saved), 12u);
  EXPECT_EQ(resumed.completedSteps(), 2u);
}

// checkTrainSchedule on schedules that break the contract one way each.
TEST(TrainContractTest, RefusesWhatBreaksTheContract) {
  using namespace sl::schedule;
  const Schedule good = TinyTrain::build(1).schedule;
  EXPECT_NO_THROW(checkTrainSchedule(good));
  auto errorFor = [&](const std::function<void(Schedule &)> &change) -> std::string {
    Schedule s = good;
    change(s);
    try {
      checkTrainSchedule(s);
    } catch (const Error &e) {
      return e.what();
    }
    return "no error";
  };
  auto buffer = [](Schedule &s, const std::string &name) -> Buffer & {
    for (Buffer &b : *s.mutable_buffers())
      if (b.name() == name)
        return b;
    throw std::runtime_error("no buffer " + name);
  };
  EXPECT_EQ(errorFor([](Schedule &s) { s.set_kind("infer"); }),
            "not a train schedule: its kind is 'infer', not 'train'");
  EXPECT_EQ(errorFor([](Schedule &s) { s.mutable_inputs(1)->set_name("targets"); }),
            "not a train schedule: it has no input 'labels'");
  EXPECT_EQ(errorFor([&](Schedule &s) { buffer(s, "labels").set_dtype(I32); }),
            "not a train schedule: input 'labels' is i32 [2, 3], not i64 [batch, seq] with both "
            "positive");
  EXPECT_EQ(errorFor([&](Schedule &s) { buffer(s, "labels").set_shape(1, 4); }),
            "not a train schedule: input 'labels' is [2, 4] but 'input_ids' is [2, 3]");
  EXPECT_EQ(errorFor([](Schedule &s) {
              Binding *extra = s.add_inputs();
              extra->set_name("mask");
            }),
            "not a train schedule: it has input 'mask', but a train step takes only 'input_ids' "
            "and 'labels'");
  EXPECT_EQ(errorFor([&](Schedule &s) { s.mutable_outputs(0)->set_name("cost"); }),
            "not a train schedule: it has no output 'loss'");
  EXPECT_EQ(errorFor([&](Schedule &s) { buffer(s, "loss").add_shape(1); }),
            "not a train schedule: output 'loss' is f32 [1], not f32 []");
  EXPECT_EQ(errorFor([](Schedule &s) { s.mutable_outputs()->RemoveLast(); }),
            "not a train schedule: it has no output 'grad:b' (the gradient of parameter 'b')");
  EXPECT_EQ(errorFor([&](Schedule &s) { buffer(s, "grad:w").set_shape(0, 5); }),
            "not a train schedule: output 'grad:w' is f32 [5, 3], but parameter 'w' is f32 "
            "[4, 3]");
  EXPECT_EQ(errorFor([](Schedule &s) { s.mutable_parameters(1)->set_name("w"); }),
            "not a train schedule: parameter 'w' is listed twice");
  EXPECT_EQ(errorFor([](Schedule &s) { s.mutable_parameters(1)->set_dtype(F64); }),
            "parameter 'b' is f64 [3]: only f32 or bf16 parameters can be trained (AdamW keeps "
            "f32 master weights)");
  // A bf16 parameter trains with an f32 gradient (accumulated in f32) or a bf16 one ...
  EXPECT_EQ(errorFor([](Schedule &s) { s.mutable_parameters(1)->set_dtype(BF16); }), "no error");
  EXPECT_EQ(errorFor([&](Schedule &s) {
              s.mutable_parameters(1)->set_dtype(BF16);
              buffer(s, "grad:b").set_dtype(BF16);
            }),
            "no error");
  // ... but an f32 parameter's gradient is not bf16, nor a bf16 one's f64.
  EXPECT_EQ(errorFor([&](Schedule &s) { buffer(s, "grad:b").set_dtype(BF16); }),
            "not a train schedule: output 'grad:b' is bf16 [3], but parameter 'b' is f32 [3]");
  EXPECT_EQ(errorFor([&](Schedule &s) {
              s.mutable_parameters(1)->set_dtype(BF16);
              buffer(s, "grad:b").set_dtype(F64);
            }),
            "not a train schedule: output 'grad:b' is f64 [3], but parameter 'b' is bf16 [3]");
  EXPECT_EQ(errorFor([](Schedule &s) { s.clear_parameters(); }),
            "not a train schedule: it has no parameters to train");
}

TEST(TrainContractTest, FingerprintDependsOnParameterNamesShapesAndDTypes) {
  using namespace sl::schedule;
  const Schedule s = TinyTrain::build(1).schedule;
  std::string base = modelFingerprint(s);
  EXPECT_THAT(base, StartsWith("2 parameters, 15 values, fnv1a64 "));
  EXPECT_EQ(modelFingerprint(TinyTrain::build(2).schedule), base); // other weights, same model
  Schedule renamed = s, reshaped = s, retyped = s;
  renamed.mutable_parameters(0)->set_name("v");
  reshaped.mutable_parameters(0)->set_shape(0, 3);
  reshaped.mutable_parameters(0)->set_shape(1, 4);
  retyped.mutable_parameters(1)->set_dtype(F64);
  for (const Schedule *changed : {&renamed, &reshaped, &retyped})
    EXPECT_NE(modelFingerprint(*changed), base);
}

// The executor accessors the trainer relies on.
TEST(ExecutorBuffersTest, ParameterBuffersFeedTheNextRun) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(8);
  LoadedSchedule loaded = loadSchedule(mlp.write(dir.path()));
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend);
  std::mt19937 rng(4);
  std::vector<float> x = randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn);
  HostTensor input = f32Tensor({TinyMlp::kBatch, TinyMlp::kIn}, x);

  mlp.w1 = randomFloats(rng, mlp.w1.size());
  const TensorRef &w1 = executor.parameterBuffer(0);
  ASSERT_EQ(w1.bytes, mlp.w1.size() * sizeof(float));
  std::memcpy(w1.data, mlp.w1.data(), w1.bytes);
  executor.execute({{"x", input}});
  const TensorRef &y = executor.outputBuffer("y");
  EXPECT_EQ(y.shape, (Shape{TinyMlp::kBatch, TinyMlp::kOut}));
  std::vector<float> expected = mlp.reference(x);
  const auto *actual = reinterpret_cast<const float *>(y.data);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5f);
  std::vector<NamedTensor> outputs = executor.run({{"x", input}});
  EXPECT_EQ(std::memcmp(outputs[0].tensor.data.data(), y.data, y.bytes), 0);

  EXPECT_THROW(executor.parameterBuffer(4), Error);
  EXPECT_THROW(executor.parameterBuffer(-1), Error);
  EXPECT_THROW(executor.outputBuffer("z"), Error);
}

} // namespace
} // namespace slrt::test
