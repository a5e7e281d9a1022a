// The vectorised exp loops of the f32 CPU kernels (runtime/src/backends/cpu/vector_math.h) against
// libm and double-precision references, on fresh random inputs and at the edges of the float range.
#include "backends/cpu/vector_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

namespace vec = slrt::cpu::vec;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Distance in units in the last place between two finite floats of the same sign (subnormals
// included: their bit patterns are consecutive too).
int64_t ulps(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::abs(int64_t{ia} - int64_t{ib});
}

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Every 1021st float from -104 to 88.75 (about 2 million, both signs, subnormal results included),
// through the scalar function and through the dispatched loop: within 2 ulp of std::exp, and the
// loop gives the scalar function's bits.
TEST(VectorMath, ExpIsWithinTwoUlpOfStdExpOverTheFloatRange) {
  std::vector<float> xs;
  for (uint32_t u = 0; u <= bitsOf(88.75f); u += 1021) {
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  for (uint32_t u = 0x80000000u; u <= bitsOf(-104.0f); u += 1021) {
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  std::vector<float> ys(xs.size());
  double sum = vec::expShifted(xs.data(), 0.0f, ys.data(), static_cast<int64_t>(xs.size()));
  int64_t worst = 0;
  float worstAt = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = std::exp(xs[i]);
    ASSERT_EQ(bitsOf(ys[i]), bitsOf(vec::exp(xs[i]))) << "at x = " << xs[i];
    ASSERT_TRUE(std::isfinite(ys[i]) == std::isfinite(want)) << "at x = " << xs[i];
    if (std::isfinite(want) && ulps(ys[i], want) > worst) {
      worst = ulps(ys[i], want);
      worstAt = xs[i];
    }
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worstAt;
  EXPECT_EQ(sum, kInf); // the results beyond FLT_MAX are in it
}

TEST(VectorMath, ExpEdgesFollowStdExp) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(vec::exp(0.0f), 1.0f);
  EXPECT_EQ(vec::exp(-0.0f), 1.0f);
  EXPECT_EQ(vec::exp(-kInf), 0.0f);
  EXPECT_EQ(vec::exp(kInf), kInf);
  EXPECT_TRUE(std::isnan(vec::exp(nan)));
  EXPECT_EQ(vec::exp(89.0f), kInf);
  EXPECT_EQ(vec::exp(1000.0f), kInf);
  EXPECT_EQ(vec::exp(-105.0f), 0.0f);
  EXPECT_EQ(vec::exp(-1000.0f), 0.0f);
  // The largest float whose exp is finite, and the smallest positive results.
  EXPECT_TRUE(std::isfinite(vec::exp(88.7228317f)));
  EXPECT_LE(ulps(vec::exp(88.7228317f), std::exp(88.7228317f)), 2);
  EXPECT_GT(vec::exp(-103.0f), 0.0f);
  EXPECT_LE(ulps(vec::exp(-103.0f), std::exp(-103.0f)), 2);
}

// A softmax row's use: shifted by its max, -inf scores weigh 0, in place.
TEST(VectorMath, ExpShiftedRunsInPlaceAndMasksMinusInfinity) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
  for (int64_t n : {0, 1, 7, 8, 9, 257}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float &e : x)
      e = dist(rng);
    if (n > 2)
      x[1] = -kInf;
    float max = -kInf;
    for (float e : x)
      max = std::max(max, e);
    std::vector<float> y = x;
    double sum = vec::expShifted(y.data(), max, y.data(), n);
    double want = 0;
    for (int64_t i = 0; i < n; ++i) {
      // The difference is a float, as in the kernels; its exp is the function's to get right.
      double e = std::exp(double(x[size_t(i)] - max));
      EXPECT_NEAR(y[size_t(i)], e, 2.5e-7 * e) << "n = " << n << ", i = " << i;
      want += e;
    }
    EXPECT_NEAR(sum, want, 1e-6 * want) << "n = " << n;
  }
}

TEST(VectorMath, DotsSumInDouble) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t n : {0, 1, 5, 8, 13, 1000}) {
    std::vector<float> a(static_cast<size_t>(n)), b(a), c(a);
    double want = 0, want3 = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = dist(rng);
      b[i] = dist(rng);
      c[i] = dist(rng);
      want += double(a[i]) * double(b[i]);
      want3 += double(a[i]) * double(b[i]) * double(c[i]);
    }
    EXPECT_NEAR(vec::dotInDouble(a.data(), b.data(), n), want, 1e-13) << "n = " << n;
    EXPECT_NEAR(vec::dot3InDouble(a.data(), b.data(), c.data(), n), want3, 1e-13) << "n = " << n;
  }
}

double sigmoidOf(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Random inputs of every scale plus the extremes, against double references; the kernels' results
// may be exactly their operands.
TEST(VectorMath, SigmoidSiluAndSwigluMatchDoubleReferences) {
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 6.0f);
  std::vector<float> g(1003), u(1003), dy(1003);
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] = dist(rng);
    u[i] = dist(rng);
    dy[i] = dist(rng);
  }
  const float edges[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.0f, -88.0f, 1e-30f, -1e-30f};
  for (size_t i = 0; i < std::size(edges); ++i)
    g[i] = edges[i];
  const int64_t n = static_cast<int64_t>(g.size());
  std::vector<float> s(g.size()), silu(g.size()), y(g.size()), dg = dy, du = u;
  vec::sigmoid(g.data(), s.data(), n);
  vec::silu(g.data(), silu.data(), n);
  vec::swiglu(g.data(), u.data(), y.data(), n);
  vec::swigluGrad(g.data(), u.data(), dy.data(), dg.data(), du.data(), n); // in place on dy, up
  for (size_t i = 0; i < g.size(); ++i) {
    SCOPED_TRACE(g[i]);
    double x = g[i];
    double tolerance = 1e-6;
    // Results below FLT_MIN (sigmoid(-100)) keep fewer digits: a few subnormal steps. The others
    // are checked against their formulas of the sigmoid checked here, so that the subnormal
    // sigmoid's relative error does not carry into them.
    const double kSubnormalSlack = 1e-44;
    EXPECT_NEAR(s[i], sigmoidOf(x), tolerance * sigmoidOf(x) + kSubnormalSlack);
    double sg = s[i];
    EXPECT_NEAR(silu[i], x * sg, tolerance * std::abs(x * sg) + kSubnormalSlack);
    EXPECT_NEAR(y[i], x * sg * u[i], tolerance * std::abs(x * sg * u[i]) + kSubnormalSlack);
    double wantDg = double(dy[i]) * u[i] * sg * (1 + x * (1 - sg));
    double wantDu = double(dy[i]) * x * sg;
    // dgate's factor 1 + x (1 - s) cancels near x = -1.28: bound by the terms' size.
    double scaleDg = std::abs(double(dy[i]) * u[i] * sg) * (1 + std::abs(x * (1 - sg)));
    EXPECT_NEAR(dg[i], wantDg, 4 * tolerance * scaleDg + kSubnormalSlack);
    EXPECT_NEAR(du[i], wantDu, tolerance * std::abs(wantDu) + kSubnormalSlack);
  }
}

TEST(VectorMath, SigmoidOfInfinitiesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float x[] = {kInf, -kInf, nan}, y[3];
  vec::sigmoid(x, y, 3);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_TRUE(std::isnan(y[2]));
}

} // namespace
