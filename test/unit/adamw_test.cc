// The host AdamW against naive references, its schedule, clipping, grouping, threads and state;
// bf16 gradients and the weights it writes into the parameters' buffers.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/adamw.h"
#include "slrt/bfloat16.h"
#include "slrt/error.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.141592653589793;

// Parameters and one gradient per parameter per step, all random.
struct Problem {
  std::vector<std::vector<float>> params;
  std::vector<std::vector<std::vector<float>>> grads; // [step][param]

  static Problem random(uint32_t seed, const std::vector<size_t> &sizes, int steps,
                        float gradScale = 1.0f) {
    std::mt19937 rng(seed);
    Problem p;
    for (size_t n : sizes)
      p.params.push_back(randomFloats(rng, n));
    p.grads.resize(steps);
    for (auto &step : p.grads)
      for (size_t n : sizes) {
        step.push_back(randomFloats(rng, n));
        for (float &g : step.back())
          g *= gradScale;
      }
    return p;
  }

  AdamW optimizer(const AdamWConfig &config) const {
    AdamW opt(config);
    for (size_t i = 0; i < params.size(); ++i)
      opt.addParameter("p" + std::to_string(i), params[i]);
    return opt;
  }

  std::vector<const float *> gradsAt(int step) const {
    std::vector<const float *> out;
    for (const auto &g : grads[step])
      out.push_back(g.data());
    return out;
  }
};

// The textbook algorithm of torch.optim.AdamW's documentation in double: decay, moments, bias
// corrected moments, update; clipping as clip_grad_norm_.
struct DoubleReference {
  AdamWConfig config;
  std::vector<std::vector<double>> p, m, v;
  int64_t t = 0;

  DoubleReference(const AdamWConfig &c, const std::vector<std::vector<float>> &params) : config(c) {
    for (const auto &x : params) {
      p.emplace_back(x.begin(), x.end());
      m.emplace_back(x.size(), 0.0);
      v.emplace_back(x.size(), 0.0);
    }
  }

  void step(const std::vector<std::vector<float>> &grads) {
    double lr = config.lrAt(t);
    ++t;
    double scale = 1;
    if (config.maxGradNorm > 0) {
      double squares = 0;
      for (const auto &g : grads)
        for (float x : g)
          squares += double(x) * x;
      scale = std::min(1.0, config.maxGradNorm / (std::sqrt(squares) + 1e-6));
    }
    for (size_t k = 0; k < p.size(); ++k)
      for (size_t i = 0; i < p[k].size(); ++i) {
        double g = grads[k][i] * scale;
        p[k][i] -= lr * config.weightDecay * p[k][i];
        m[k][i] = config.beta1 * m[k][i] + (1 - config.beta1) * g;
        v[k][i] = config.beta2 * v[k][i] + (1 - config.beta2) * g * g;
        double mHat = m[k][i] / (1 - std::pow(config.beta1, t));
        double vHat = v[k][i] / (1 - std::pow(config.beta2, t));
        p[k][i] -= lr * mHat / (std::sqrt(vHat) + config.eps);
      }
  }
};

// torch's float32 operation order (torch/optim/adamw.py, _single_tensor_adamw, on its AVX2 kernels,
// which fuse the moments' multiply-adds), one element at a time on one thread: what the vectorised,
// threaded implementation must equal bit for bit.
void torchOrderStep(const AdamWConfig &c, int64_t completedSteps, float clipCoef, float &p,
                    float &m, float &v, float grad) {
  double lr = c.lrAt(completedSteps);
  double t = static_cast<double>(completedSteps + 1);
  double stepSize = lr / (1 - std::pow(c.beta1, t));
  double bc2Sqrt = std::sqrt(1 - std::pow(c.beta2, t));
  float g = grad * clipCoef;                               // grad.mul_(clip_coef)
  p = p * static_cast<float>(1 - lr * c.weightDecay);      // param.mul_
  m = m * static_cast<float>(c.beta1);                     // exp_avg.mul_
  m = std::fma(static_cast<float>(1 - c.beta1), g, m);     // .add_(alpha=)
  v = v * static_cast<float>(c.beta2);                     // exp_avg_sq.mul_
  v = std::fma(static_cast<float>(1 - c.beta2) * g, g, v); // .addcmul_(value=)
  float denom = std::sqrt(v) / static_cast<float>(bc2Sqrt) + static_cast<float>(c.eps);
  p = p + static_cast<float>(-stepSize) * m / denom; // param.addcdiv_
}

void expectSameBits(const std::vector<float> &a, const std::vector<float> &b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

void expectSameState(const AdamW &a, const AdamW &b) {
  ASSERT_EQ(a.parameterCount(), b.parameterCount());
  EXPECT_EQ(a.step(), b.step());
  for (size_t i = 0; i < a.parameterCount(); ++i) {
    SCOPED_TRACE("parameter " + std::to_string(i));
    expectSameBits(a.weights(i), b.weights(i));
    expectSameBits(a.expAvg(i), b.expAvg(i));
    expectSameBits(a.expAvgSq(i), b.expAvgSq(i));
  }
}

TEST(AdamWTest, DefaultsAreTorchs) {
  AdamWConfig c;
  EXPECT_EQ(c.lr, 1e-3);
  EXPECT_EQ(c.beta1, 0.9);
  EXPECT_EQ(c.beta2, 0.999);
  EXPECT_EQ(c.eps, 1e-8);
  EXPECT_EQ(c.weightDecay, 0.01);
  EXPECT_EQ(c.maxGradNorm, 0);
  for (int64_t step : {0, 1, 1000, 1000000})
    EXPECT_EQ(c.lrAt(step), 1e-3);
}

TEST(AdamWTest, MatchesDoubleReferenceAndTorchOrderExactly) {
  // Sizes with and without a vector remainder, one spanning several chunks.
  Problem prob = Problem::random(1, {1, 7, 33, 40000}, 5);
  for (double wd : {0.0, 0.01, 0.1}) {
    AdamWConfig config;
    config.lr = 1e-2;
    config.weightDecay = wd;
    SCOPED_TRACE("weight decay " + std::to_string(wd));
    AdamW opt = prob.optimizer(config);
    DoubleReference ref(config, prob.params);
    std::vector<std::vector<float>> p = prob.params, m, v;
    for (const auto &x : p) {
      m.emplace_back(x.size(), 0.0f);
      v.emplace_back(x.size(), 0.0f);
    }
    for (int s = 0; s < 5; ++s) {
      opt.step(prob.gradsAt(s));
      ref.step(prob.grads[s]);
      for (size_t k = 0; k < p.size(); ++k)
        for (size_t i = 0; i < p[k].size(); ++i)
          torchOrderStep(config, s, 1.0f, p[k][i], m[k][i], v[k][i], prob.grads[s][k][i]);
    }
    EXPECT_EQ(opt.step(), 5);
    for (size_t k = 0; k < p.size(); ++k) {
      SCOPED_TRACE("parameter " + std::to_string(k));
      expectSameBits(opt.weights(k), p[k]);
      expectSameBits(opt.expAvg(k), m[k]);
      expectSameBits(opt.expAvgSq(k), v[k]);
      for (size_t i = 0; i < p[k].size(); ++i) {
        ASSERT_NEAR(opt.weights(k)[i], ref.p[k][i], 1e-6 * std::abs(ref.p[k][i]) + 1e-7) << i;
        ASSERT_NEAR(opt.expAvg(k)[i], ref.m[k][i], 1e-6 * std::abs(ref.m[k][i]) + 1e-7) << i;
        ASSERT_NEAR(opt.expAvgSq(k)[i], ref.v[k][i], 1e-6 * std::abs(ref.v[k][i]) + 1e-12) << i;
      }
    }
  }
}

TEST(AdamWTest, WeightDecayIsDecoupled) {
  // With zero gradients the moments stay zero and only the decay moves the weights: p *= 1 - lr*wd
  // each step. Weight decay folded into the gradient (Adam's L2) would instead move every weight by
  // about lr per step, whatever its size.
  AdamWConfig config;
  config.lr = 0.1;
  config.weightDecay = 0.5;
  AdamW opt(config);
  opt.addParameter("w", {1.0f, -2.0f, 0.25f});
  std::vector<float> zero(3, 0.0f);
  std::vector<float> expected = {1.0f, -2.0f, 0.25f};
  for (int s = 0; s < 5; ++s) {
    opt.step({zero.data()});
    for (float &x : expected)
      x *= 0.95f;
    expectSameBits(opt.weights(0), expected);
    expectSameBits(opt.expAvg(0), zero);
  }
}

TEST(AdamWTest, BiasCorrectionMakesEveryStepLrSizedForAConstantGradient) {
  // m_hat = g and v_hat = g^2 at every step t when g is constant, so each step moves a weight by
  // lr * g / (|g| + eps), i.e. lr against the gradient's sign. Uncorrected, step 1 would move it by
  // lr * (1 - beta1) / sqrt(1 - beta2), about 3.16 lr.
  AdamWConfig config;
  config.lr = 0.01;
  config.weightDecay = 0;
  AdamW opt(config);
  // Small weights, so that their float rounding is far below the 1e-5 lr the check allows.
  std::vector<float> w = {0.0f, 0.01f, -0.02f, 0.0f};
  std::vector<float> g = {0.3f, -2.0f, 1e-3f, -40.0f};
  opt.addParameter("w", w);
  for (int s = 1; s <= 5; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    std::vector<float> before = opt.weights(0);
    opt.step({g.data()});
    for (size_t i = 0; i < g.size(); ++i) {
      double moved = double(opt.weights(0)[i]) - before[i];
      double expected = -config.lr * g[i] / (std::abs(g[i]) + config.eps);
      EXPECT_NEAR(moved, expected, 1e-5 * config.lr) << i;
      // The corrected moments, as the state holds them uncorrected.
      double mHat = opt.expAvg(0)[i] / (1 - std::pow(config.beta1, s));
      double vHat = opt.expAvgSq(0)[i] / (1 - std::pow(config.beta2, s));
      EXPECT_NEAR(mHat, g[i], 1e-5 * std::abs(g[i])) << i;
      EXPECT_NEAR(vHat, double(g[i]) * g[i], 1e-5 * g[i] * g[i]) << i;
    }
  }
}

TEST(AdamWTest, ClipsTheGlobalNormLikeClipGradNorm) {
  // Two parameters whose gradients together have norm 5 (3 and 4).
  std::vector<float> ga = {3.0f, 0.0f}, gb = {0.0f, 0.0f, 4.0f};
  std::vector<float> a = {0.1f, 0.2f}, b = {-0.3f, 0.4f, 0.5f};
  auto run = [&](double maxNorm, double *norm) {
    AdamWConfig config;
    config.maxGradNorm = maxNorm;
    AdamW opt(config);
    opt.addParameter("a", a);
    opt.addParameter("b", b);
    *norm = opt.step({ga.data(), gb.data()});
    return opt;
  };

  AdamWConfig off;
  EXPECT_EQ(AdamW(off).clipCoefficient(1e6), 1.0f);
  AdamWConfig on;
  on.maxGradNorm = 1;
  AdamW clipper(on);
  // torch: max_norm * (1 / (norm + 1e-6)) in float32, clamped to 1.
  EXPECT_EQ(clipper.clipCoefficient(25.0), 1.0f * (1.0f / (5.0f + 1e-6f)));
  EXPECT_EQ(clipper.clipCoefficient(0.25), 1.0f);
  EXPECT_EQ(clipper.clipCoefficient(0.0), 1.0f);

  double norm = -1;
  AdamW clipped = run(1.0, &norm);
  EXPECT_DOUBLE_EQ(norm, 5.0);
  // Clipping scales the gradient before the moments see it.
  float coef = clipper.clipCoefficient(25.0);
  EXPECT_FLOAT_EQ(clipped.expAvg(0)[0], 0.1f * (3.0f * coef));
  EXPECT_FLOAT_EQ(clipped.expAvg(1)[2], 0.1f * (4.0f * coef));

  // Clipping with a coefficient is stepping with gradients scaled by it.
  std::vector<float> sa = ga, sb = gb;
  for (float &x : sa)
    x *= coef;
  for (float &x : sb)
    x *= coef;
  AdamW scaled(off);
  scaled.addParameter("a", a);
  scaled.addParameter("b", b);
  scaled.step({sa.data(), sb.data()});
  expectSameState(clipped, scaled);

  // A limit above the norm leaves the gradients alone; clipping off too.
  AdamW loose = run(10.0, &norm);
  EXPECT_DOUBLE_EQ(norm, 5.0);
  AdamW unclipped = run(0.0, &norm);
  EXPECT_EQ(norm, 0.0);
  expectSameState(loose, unclipped);
  EXPECT_FLOAT_EQ(unclipped.expAvg(0)[0], 0.1f * 3.0f);
}

TEST(AdamWTest, ClippingMatchesTheDoubleReference) {
  Problem prob = Problem::random(2, {300, 5000}, 5, 10.0f);
  AdamWConfig config;
  config.maxGradNorm = 1.0;
  AdamW opt = prob.optimizer(config);
  DoubleReference ref(config, prob.params);
  for (int s = 0; s < 5; ++s) {
    opt.step(prob.gradsAt(s));
    ref.step(prob.grads[s]);
  }
  for (size_t k = 0; k < 2; ++k)
    for (size_t i = 0; i < prob.params[k].size(); ++i) {
      ASSERT_NEAR(opt.weights(k)[i], ref.p[k][i], 1e-6 * std::abs(ref.p[k][i]) + 1e-7) << i;
      ASSERT_NEAR(opt.expAvg(k)[i], ref.m[k][i], 1e-6 * std::abs(ref.m[k][i]) + 1e-9) << i;
    }
}

TEST(AdamWTest, ScheduleWarmsUpLinearlyThenDecaysByCosine) {
  AdamWConfig c;
  c.lr = 1.0;
  c.minLr = 0.1;
  c.warmupSteps = 4;
  c.decaySteps = 10;
  EXPECT_EQ(c.lrAt(-3), 0.0);
  EXPECT_EQ(c.lrAt(0), 0.0);
  EXPECT_EQ(c.lrAt(1), 0.25);
  EXPECT_EQ(c.lrAt(3), 0.75);
  EXPECT_EQ(c.lrAt(4), 1.0); // warmup done: the cosine starts at lr
  EXPECT_NEAR(c.lrAt(5), 0.1 + 0.9 * 0.5 * (1 + std::cos(kPi / 10)), 1e-15);
  EXPECT_NEAR(c.lrAt(9), 0.55, 1e-15); // half way down
  EXPECT_NEAR(c.lrAt(13), 0.1 + 0.9 * 0.5 * (1 + std::cos(kPi * 0.9)), 1e-15);
  EXPECT_EQ(c.lrAt(14), 0.1); // warmup + decay: the floor, and from then on
  EXPECT_EQ(c.lrAt(1000), 0.1);
  for (int64_t s = 4; s < 14; ++s)
    EXPECT_GT(c.lrAt(s), c.lrAt(s + 1)) << s;

  AdamWConfig warmupOnly;
  warmupOnly.lr = 2.0;
  warmupOnly.warmupSteps = 2;
  EXPECT_EQ(warmupOnly.lrAt(1), 1.0);
  EXPECT_EQ(warmupOnly.lrAt(2), 2.0);
  EXPECT_EQ(warmupOnly.lrAt(100), 2.0);

  AdamWConfig decayOnly;
  decayOnly.lr = 1.0;
  decayOnly.decaySteps = 2;
  EXPECT_EQ(decayOnly.lrAt(0), 1.0);
  EXPECT_NEAR(decayOnly.lrAt(1), 0.5, 1e-15);
  EXPECT_EQ(decayOnly.lrAt(2), 0.0);
}

TEST(AdamWTest, StepsUseTheScheduledLr) {
  // The first update of a warmup has lr 0: the weights (and their decay) stay, the moments move.
  AdamWConfig config;
  config.lr = 0.1;
  config.warmupSteps = 2;
  config.decaySteps = 2;
  config.minLr = 0.01;
  Problem prob = Problem::random(3, {9}, 5);
  AdamW opt = prob.optimizer(config);
  EXPECT_EQ(opt.currentLr(), 0.0);
  opt.step(prob.gradsAt(0));
  expectSameBits(opt.weights(0), prob.params[0]);
  EXPECT_NE(opt.expAvg(0)[0], 0.0f);
  EXPECT_EQ(opt.currentLr(), 0.05);

  DoubleReference ref(config, prob.params);
  ref.step(prob.grads[0]);
  for (int s = 1; s < 5; ++s) {
    opt.step(prob.gradsAt(s));
    ref.step(prob.grads[s]);
  }
  for (size_t i = 0; i < 9; ++i)
    EXPECT_NEAR(opt.weights(0)[i], ref.p[0][i], 1e-6 * std::abs(ref.p[0][i]) + 1e-7) << i;
}

TEST(AdamWTest, SteppingByGroupsEqualsSteppingAllAtOnce) {
  Problem prob = Problem::random(4, {40000, 17, 20001, 3}, 3, 0.1f);
  AdamWConfig config;
  config.maxGradNorm = 0.5; // small enough to clip every step
  config.warmupSteps = 1;
  config.decaySteps = 3;
  AdamW whole = prob.optimizer(config);
  AdamW grouped = prob.optimizer(config);
  for (int s = 0; s < 3; ++s) {
    whole.step(prob.gradsAt(s));
    auto g = prob.gradsAt(s);
    // Groups finish in backward order; each group's squared norm is kept, summed in group order.
    std::vector<std::vector<ParamGrad>> groups = {{{0, g[0]}, {1, g[1]}}, {{2, g[2]}, {3, g[3]}}};
    std::vector<double> squares(groups.size());
    for (size_t k = groups.size(); k-- > 0;)
      squares[k] = grouped.gradSquaredNorm(groups[k]);
    float coef = grouped.clipCoefficient(squares[0] + squares[1]);
    EXPECT_LT(coef, 1.0f);
    for (size_t k = groups.size(); k-- > 0;)
      grouped.stepGroup(groups[k], coef);
    grouped.finishStep();
    expectSameState(whole, grouped);
  }
}

TEST(AdamWTest, ResultsDoNotDependOnTheThreadCount) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP";
#else
  Problem prob = Problem::random(5, {100003, 5, 65536}, 3);
  AdamWConfig config;
  config.maxGradNorm = 10.0;
  int threads = omp_get_max_threads();
  auto run = [&](int n, double *squares) {
    omp_set_num_threads(n);
    AdamW opt = prob.optimizer(config);
    *squares = opt.gradSquaredNorm({{0, prob.grads[0][0].data()}, {2, prob.grads[0][2].data()}});
    for (int s = 0; s < 3; ++s)
      opt.step(prob.gradsAt(s));
    return opt;
  };
  double one = 0, three = 0;
  AdamW serial = run(1, &one);
  AdamW parallel = run(3, &three);
  omp_set_num_threads(threads);
  EXPECT_EQ(std::memcmp(&one, &three, sizeof one), 0);
  expectSameState(serial, parallel);
#endif
}

// Runs `body` with `threads` OpenMP threads (when built with OpenMP), then restores the count.
void withThreads(int threads, const std::function<void()> &body) {
#ifdef _OPENMP
  int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  body();
  omp_set_num_threads(before);
#else
  (void)threads;
  body();
#endif
}

float floatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(AdamWTest, FusedWeightWriteIsTheRoundedOrCopiedMasters) {
  // Sizes around and across the 16384-element chunks; 3 threads split the chunks.
  const std::vector<size_t> sizes = {1, 7, 16383, 16385, 40001, 5};
  Problem prob = Problem::random(8, sizes, 3);
  // Values whose rounding to bf16 is delicate, at the start of parameter 2: ties (to even, down
  // and up), the largest finite float (rounds to infinity), a subnormal, -0. With a zero gradient
  // and no weight decay, the update keeps them as they are. Parameter 4's gradients hold a NaN and
  // an infinity at step 2, so its masters become NaN there: the fused write rounds NaN too.
  const float special[] = {floatOfBits(0x3f808000u), floatOfBits(0x3f818000u),
                           floatOfBits(0xbf808001u), std::numeric_limits<float>::max(),
                           floatOfBits(0x00012345u), -0.0f};
  for (size_t i = 0; i < std::size(special); ++i) {
    prob.params[2][i] = special[i];
    for (auto &step : prob.grads)
      step[2][i] = 0.0f;
  }
  prob.grads[1][4][100] = std::numeric_limits<float>::quiet_NaN();
  prob.grads[1][4][30000] = -std::numeric_limits<float>::infinity();
  AdamWConfig config;
  config.lr = 1e-2;
  config.weightDecay = 0;

  AdamW reference = prob.optimizer(config), fused = prob.optimizer(config);
  // Even parameters are bf16 buffers, odd ones f32, filled with garbage that must be overwritten.
  std::vector<std::vector<uint16_t>> bf16Out(sizes.size());
  std::vector<std::vector<float>> f32Out(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k)
    if (k % 2)
      f32Out[k].assign(sizes[k], 7.0f);
    else
      bf16Out[k].assign(sizes[k], 0x1234);
  withThreads(3, [&] {
    for (int s = 0; s < 3; ++s) {
      SCOPED_TRACE("step " + std::to_string(s + 1));
      reference.step(prob.gradsAt(s));
      std::vector<ParamGrad> group;
      for (size_t k = 0; k < sizes.size(); ++k) {
        ParamGrad pg{k, prob.grads[s][k].data()};
        if (k % 2)
          pg.weightsOut = f32Out[k].data();
        else
          pg.bf16WeightsOut = bf16Out[k].data();
        group.push_back(pg);
      }
      fused.stepGroup(group);
      fused.finishStep();
      expectSameState(reference, fused);
      for (size_t k = 0; k < sizes.size(); ++k) {
        SCOPED_TRACE("parameter " + std::to_string(k));
        const std::vector<float> &master = fused.weights(k);
        if (k % 2) {
          expectSameBits(f32Out[k], master);
          continue;
        }
        std::vector<uint16_t> rounded(master.size());
        for (size_t i = 0; i < master.size(); ++i)
          rounded[i] = floatToBfloat16(master[i]);
        EXPECT_EQ(bf16Out[k], rounded);
      }
    }
  });
  // The delicate values came through as floatToBfloat16 rounds them, and the NaN was written.
  EXPECT_EQ(bf16Out[2][0], 0x3f80);
  EXPECT_EQ(bf16Out[2][1], 0x3f82);
  EXPECT_EQ(bf16Out[2][2], 0xbf81);
  EXPECT_EQ(bf16Out[2][3], 0x7f80);
  EXPECT_EQ(bf16Out[2][4], 0x0001);
  EXPECT_EQ(bf16Out[2][5], 0x8000);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(bf16Out[4][100])));
}

TEST(AdamWTest, Bf16GradientsStepAsTheirWidenedCopies) {
  const std::vector<size_t> sizes = {3, 16385, 40001};
  Problem prob = Problem::random(9, sizes, 3, 0.1f);
  AdamWConfig config;
  config.maxGradNorm = 0.5; // clips every step: the squared norms must agree exactly as well
  AdamW widened = prob.optimizer(config), narrow = prob.optimizer(config);
  withThreads(3, [&] {
    for (int s = 0; s < 3; ++s) {
      SCOPED_TRACE("step " + std::to_string(s + 1));
      std::vector<std::vector<uint16_t>> bf16(sizes.size());
      std::vector<std::vector<float>> wide(sizes.size());
      std::vector<ParamGrad> wideGroup, narrowGroup;
      for (size_t k = 0; k < sizes.size(); ++k) {
        for (float g : prob.grads[s][k]) {
          bf16[k].push_back(floatToBfloat16(g));
          wide[k].push_back(bfloat16ToFloat(bf16[k].back()));
        }
        wideGroup.push_back({k, wide[k].data()});
        ParamGrad pg{k};
        pg.bf16Grad = bf16[k].data();
        narrowGroup.push_back(pg);
      }
      std::vector<double> wideSquares = widened.gradSquaredNorms(wideGroup);
      std::vector<double> narrowSquares = narrow.gradSquaredNorms(narrowGroup);
      ASSERT_EQ(narrowSquares.size(), sizes.size());
      double sum = 0;
      for (size_t k = 0; k < sizes.size(); ++k) {
        EXPECT_EQ(narrowSquares[k], wideSquares[k]) << "parameter " << k;
        EXPECT_EQ(narrowSquares[k], narrow.gradSquaredNorm({narrowGroup[k]}));
        sum += narrowSquares[k];
      }
      EXPECT_EQ(narrow.gradSquaredNorm(narrowGroup), sum);
      widened.stepGroup(wideGroup, widened.clipCoefficient(sum));
      narrow.stepGroup(narrowGroup, narrow.clipCoefficient(sum));
      widened.finishStep();
      narrow.finishStep();
      expectSameState(widened, narrow);
    }
  });
}

TEST(AdamWTest, RestoredStateContinuesBitIdentically) {
  Problem prob = Problem::random(6, {1000, 33}, 6);
  AdamWConfig config;
  config.warmupSteps = 2;
  config.decaySteps = 5;
  config.maxGradNorm = 5.0;
  AdamW original = prob.optimizer(config);
  for (int s = 0; s < 3; ++s)
    original.step(prob.gradsAt(s));

  // What a checkpoint would hold, into a fresh optimizer whose initial weights are something else.
  AdamW resumed(config);
  for (size_t i = 0; i < original.parameterCount(); ++i) {
    resumed.addParameter(original.name(i), std::vector<float>(original.size(i), 7.0f));
    resumed.setWeights(i, original.weights(i));
    resumed.setExpAvg(i, original.expAvg(i));
    resumed.setExpAvgSq(i, original.expAvgSq(i));
  }
  resumed.setStep(original.step());
  expectSameState(original, resumed);
  for (int s = 3; s < 6; ++s) {
    original.step(prob.gradsAt(s));
    resumed.step(prob.gradsAt(s));
  }
  expectSameState(original, resumed);
}

TEST(AdamWTest, RefusesBadConfigs) {
  auto refused = [](auto edit) {
    AdamWConfig c;
    edit(c);
    return errorOf([&] { AdamW opt(c); });
  };
  EXPECT_THAT(refused([](AdamWConfig &c) { c.lr = -1e-3; }), HasSubstr("lr must not be negative"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.beta1 = 1.0; }), HasSubstr("beta1 must be in [0, 1)"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.beta2 = 1.5; }), HasSubstr("beta2 must be in [0, 1)"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.eps = std::numeric_limits<double>::quiet_NaN(); }),
              HasSubstr("eps must be finite"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.weightDecay = -0.1; }), HasSubstr("weightDecay"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.maxGradNorm = -1; }), HasSubstr("maxGradNorm"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.warmupSteps = -1; }), HasSubstr("warmupSteps"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.decaySteps = -1; }), HasSubstr("decaySteps"));
  EXPECT_THAT(refused([](AdamWConfig &c) { c.minLr = -1; }), HasSubstr("minLr"));
}

TEST(AdamWTest, RefusesMisuseWithoutChangingState) {
  AdamW opt{AdamWConfig{}};
  opt.addParameter("a", {1.0f, 2.0f});
  opt.addParameter("b", {3.0f});
  std::vector<float> ga = {0.5f, 0.5f}, gb = {0.5f};

  EXPECT_THAT(errorOf([&] { opt.step({ga.data()}); }), HasSubstr("1 gradients for 2 parameters"));
  EXPECT_THAT(errorOf([&] {
                opt.stepGroup({{2, ga.data()}});
              }),
              HasSubstr("parameter index 2 is out of range"));
  EXPECT_THAT(errorOf([&] {
                opt.stepGroup({{0, nullptr}});
              }),
              HasSubstr("no gradient for parameter 'a'"));
  EXPECT_THAT(errorOf([&] {
                opt.stepGroup({{0, ga.data()}, {0, ga.data()}});
              }),
              HasSubstr("'a' stepped twice in step 1"));
  uint16_t ga16[2] = {0x3f00, 0x3f00};
  float out[2];
  uint16_t out16[2];
  EXPECT_THAT(errorOf([&] { opt.stepGroup({{0, ga.data(), ga16}}); }),
              HasSubstr("two gradients (f32 and bf16) for parameter 'a'"));
  EXPECT_THAT(errorOf([&] { opt.gradSquaredNorms({{0, ga.data(), ga16}}); }),
              HasSubstr("two gradients (f32 and bf16) for parameter 'a'"));
  EXPECT_THAT(errorOf([&] { opt.stepGroup({{0, ga.data(), nullptr, out, out16}}); }),
              HasSubstr("two weight outputs (f32 and bf16) for parameter 'a'"));
  EXPECT_EQ(opt.weights(0), (std::vector<float>{1.0f, 2.0f}));

  opt.stepGroup({{0, ga.data()}});
  std::vector<float> afterA = opt.weights(0);
  EXPECT_THAT(errorOf([&] {
                opt.stepGroup({{1, gb.data()}, {0, ga.data()}});
              }),
              HasSubstr("'a' stepped twice in step 1"));
  EXPECT_EQ(opt.weights(1), (std::vector<float>{3.0f})); // b untouched by the refused group
  EXPECT_THAT(errorOf([&] { opt.finishStep(); }), HasSubstr("without stepping parameter 'b'"));
  EXPECT_THAT(errorOf([&] { opt.setWeights(1, {0.0f}); }), HasSubstr("middle of step 1"));
  EXPECT_THAT(errorOf([&] { opt.setStep(4); }), HasSubstr("middle of step 1"));
  opt.stepGroup({{1, gb.data()}});
  opt.finishStep();
  EXPECT_EQ(opt.step(), 1);
  expectSameBits(opt.weights(0), afterA);

  EXPECT_THAT(errorOf([&] { opt.addParameter("c", {1.0f}); }),
              HasSubstr("'c' added after the first step"));
  EXPECT_THAT(errorOf([&] { opt.setExpAvg(0, {1.0f}); }),
              HasSubstr("exp_avg of 'a' has 1 elements, the parameter has 2"));
  EXPECT_THAT(errorOf([&] { opt.setStep(-1); }), HasSubstr("must not be negative"));
}

} // namespace
} // namespace slrt::test
