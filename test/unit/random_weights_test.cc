// sl-run --random-weights: seeded normal values in each parameter's dtype, the same whatever the
// thread count, order of parameters or neighbours; f32 -> bf16 rounding.
#include <cmath>
#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/bfloat16.h"
#include "slrt/random_weights.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

std::vector<float> draw(const std::string &name, uint64_t count, uint64_t seed,
                        unsigned threads = 0) {
  std::vector<float> values(count, std::nanf(""));
  fillRandomWeights({{name, values.data(), count, sl::schedule::F32}}, seed, threads);
  return values;
}

TEST(RandomWeightsTest, NormalWithStdPointZeroTwo) {
  std::vector<float> v = draw("w", 1 << 20, 7);
  double sum = 0, squares = 0, beyondThree = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    squares += double(x) * x;
    beyondThree += std::abs(x) > 3 * kRandomWeightStd;
  }
  double mean = sum / v.size(), std = std::sqrt(squares / v.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(std, kRandomWeightStd, kRandomWeightStd * 0.005);
  // A normal has 0.27% of its mass beyond 3 sigma (a sum of uniforms would have none).
  EXPECT_NEAR(beyondThree / v.size(), 0.0027, 0.0004);
}

TEST(RandomWeightsTest, SameSeedSameValuesOnAnyThreadCount) {
  // Several chunks (2^20 elements each), an odd length (the last pair half used).
  uint64_t n = (3u << 20) + 7;
  std::vector<float> one = draw("layers.0.w", n, 42, 1), three = draw("layers.0.w", n, 42, 3);
  EXPECT_EQ(0, std::memcmp(one.data(), three.data(), n * sizeof(float)));
  EXPECT_EQ(draw("layers.0.w", n, 42, 0), one);
  // A prefix of a longer parameter of the same name is the same: element i depends on i alone.
  std::vector<float> shorter = draw("layers.0.w", 1001, 42, 2);
  EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), one.begin()));
}

TEST(RandomWeightsTest, SeedAndNameChangeTheValues) {
  std::vector<float> a = draw("w", 1000, 1), b = draw("w", 1000, 2), c = draw("v", 1000, 1);
  int sameAB = 0, sameAC = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sameAB += a[i] == b[i];
    sameAC += a[i] == c[i];
  }
  EXPECT_EQ(sameAB, 0);
  EXPECT_EQ(sameAC, 0);
}

TEST(RandomWeightsTest, OtherParametersAndOrderDoNotMatter) {
  std::vector<float> x(5000), y(300), alone = draw("x", 5000, 9);
  fillRandomWeights({{"y", y.data(), y.size(), sl::schedule::F32},
                     {"x", x.data(), x.size(), sl::schedule::F32}},
                    9, 2);
  EXPECT_EQ(x, alone);
  EXPECT_EQ(y, draw("y", 300, 9));
}

TEST(RandomWeightsTest, Bf16AndF64HoldTheF32ValuesInTheirType) {
  std::vector<float> f = draw("w", 4097, 3);
  std::vector<uint16_t> h(4097);
  std::vector<double> d(4097);
  fillRandomWeights({{"w", h.data(), h.size(), sl::schedule::BF16},
                     {"w", d.data(), d.size(), sl::schedule::F64}},
                    3);
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(h[i], floatToBfloat16(f[i])) << i;
    ASSERT_EQ(d[i], double(f[i])) << i;
  }
}


TEST(RandomWeightsTest, RefusesIntegerParametersBeforeWritingAnything) {
  std::vector<float> f(10, 1.0f);
  std::vector<int64_t> i(10, 5);
  std::string error = errorOf([&] {
    fillRandomWeights({{"f", f.data(), f.size(), sl::schedule::F32},
                       {"ids", i.data(), i.size(), sl::schedule::I64}},
                      0);
  });
  EXPECT_THAT(error, HasSubstr("parameter 'ids' is i64"));
  EXPECT_EQ(f, std::vector<float>(10, 1.0f));
}

} // namespace
} // namespace slrt::test
