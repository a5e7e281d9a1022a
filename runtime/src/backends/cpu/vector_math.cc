// Built with -ffp-contract=off and -fno-math-errno (runtime/CMakeLists.txt): the only fused
// multiply-adds are the explicit std::fma calls, so the portable and the AVX2 versions below round
// alike, and nothing here needs errno.
#include "backends/cpu/vector_math.h"

#include <cmath>
#include <limits>

namespace slrt::cpu::vec {
namespace {

#define SL_INLINE __attribute__((always_inline)) inline

// exp(x) for every float x, branch-free so that loops of it vectorise. Cody-Waite reduction
// x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, the first exact in 9 bits so n * kLn2Hi
// is exact), Cephes' degree-5 polynomial for (exp(r) - 1 - r) / r^2, and the scale 2^n applied as
// two exact powers of two (each within the normal range) so that subnormal results come out
// right. n is rounded to nearest by adding and subtracting 1.5 * 2^23.
SL_INLINE float expCore(float x) {
  constexpr float kHigh = 88.75f; // beyond: +inf (exp(88.7228) is FLT_MAX's neighbourhood)
  constexpr float kLow = -104.0f; // below: 0 (exp(-103.97) is half the smallest subnormal)
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f; // 1.5 * 2^23
  bool nan = x != x;
  float c = nan ? 0.0f : x;
  c = c < kLow ? kLow : c;
  c = c > kHigh ? kHigh : c;
  float n = (c * kLog2e + kRound) - kRound;
  float r = std::fma(-n, kLn2Hi, c);
  r = std::fma(-n, kLn2Lo, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  float y = std::fma(p, r * r, r) + 1.0f;
  // n is in [-150, 128]: 2^n = 2^half * 2^(n - half), both factors normal floats.
  int32_t ni = static_cast<int32_t>(n);
  int32_t half = ni >> 1;
  float scale1 = __builtin_bit_cast(float, (half + 127) << 23);
  float scale2 = __builtin_bit_cast(float, (ni - half + 127) << 23);
  y = y * scale1 * scale2;
  y = x > kHigh ? std::numeric_limits<float>::infinity() : y;
  y = x < kLow ? 0.0f : y;
  return nan ? x : y;
}

// sigmoid without overflow: e = exp(-|x|) <= 1, then 1 / (1 + e) for x >= 0 and e / (1 + e)
// below, the same quotients the scalar kernels compute.
SL_INLINE float sigmoidCore(float x) {
  float e = expCore(-std::fabs(x));
  return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

// Eight interleaved double lanes combined in a fixed order: the same sum whatever the vector
// width (the pattern of AdamW's sum of squares).
SL_INLINE double laneSum(const float *y, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      lanes[j] += double(y[i + j]);
  for (int j = 0; i < n; ++i, ++j)
    lanes[j] += double(y[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

SL_INLINE double dotLoop(const float *a, const float *b, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      lanes[j] += double(a[i + j]) * double(b[i + j]);
  for (int j = 0; i < n; ++i, ++j)
    lanes[j] += double(a[i]) * double(b[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

SL_INLINE double dot3Loop(const float *a, const float *b, const float *c, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      lanes[j] += double(a[i + j]) * double(b[i + j]) * double(c[i + j]);
  for (int j = 0; i < n; ++i, ++j)
    lanes[j] += double(a[i]) * double(b[i]) * double(c[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

SL_INLINE double expShiftedLoop(const float *x, float shift, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = expCore(x[i] - shift);
  return laneSum(y, n);
}

SL_INLINE void sigmoidLoop(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = sigmoidCore(x[i]);
}

SL_INLINE void siluLoop(const float *x, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * sigmoidCore(x[i]);
}

SL_INLINE void swigluLoop(const float *gate, const float *up, float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    y[i] = g * sigmoidCore(g) * up[i];
  }
}

SL_INLINE void swigluGradLoop(const float *gate, const float *up, const float *dy, float *dgate,
                              float *dup, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i], u = up[i], d = dy[i];
    float s = sigmoidCore(g);
    dgate[i] = d * u * (s * (1.0f + g * (1.0f - s)));
    dup[i] = d * (g * s);
  }
}

struct Table {
  double (*dot)(const float *, const float *, int64_t);
  double (*dot3)(const float *, const float *, const float *, int64_t);
  double (*expShifted)(const float *, float, float *, int64_t);
  void (*sigmoid)(const float *, float *, int64_t);
  void (*silu)(const float *, float *, int64_t);
  void (*swiglu)(const float *, const float *, float *, int64_t);
  void (*swigluGrad)(const float *, const float *, const float *, float *, float *, int64_t);
};

// Without FMA instructions std::fma is a library call (slow, exact): the portable version is
// for CPUs older than AVX2 and gives the same bits.
const Table kPortable = {
    [](const float *a, const float *b, int64_t n) { return dotLoop(a, b, n); },
    [](const float *a, const float *b, const float *c, int64_t n) { return dot3Loop(a, b, c, n); },
    [](const float *x, float s, float *y, int64_t n) { return expShiftedLoop(x, s, y, n); },
    [](const float *x, float *y, int64_t n) { sigmoidLoop(x, y, n); },
    [](const float *x, float *y, int64_t n) { siluLoop(x, y, n); },
    [](const float *g, const float *u, float *y, int64_t n) { swigluLoop(g, u, y, n); },
    [](const float *g, const float *u, const float *d, float *dg, float *du, int64_t n) {
      swigluGradLoop(g, u, d, dg, du, n);
    }};

#if defined(__x86_64__) && !defined(__FMA__)
#define SL_VEC_AVX2 __attribute__((target("avx2,fma")))
SL_VEC_AVX2 double dotAvx2(const float *a, const float *b, int64_t n) { return dotLoop(a, b, n); }
SL_VEC_AVX2 double dot3Avx2(const float *a, const float *b, const float *c, int64_t n) {
  return dot3Loop(a, b, c, n);
}
SL_VEC_AVX2 double expShiftedAvx2(const float *x, float s, float *y, int64_t n) {
  return expShiftedLoop(x, s, y, n);
}
SL_VEC_AVX2 void sigmoidAvx2(const float *x, float *y, int64_t n) { sigmoidLoop(x, y, n); }
SL_VEC_AVX2 void siluAvx2(const float *x, float *y, int64_t n) { siluLoop(x, y, n); }
SL_VEC_AVX2 void swigluAvx2(const float *g, const float *u, float *y, int64_t n) {
  swigluLoop(g, u, y, n);
}
SL_VEC_AVX2 void swigluGradAvx2(const float *g, const float *u, const float *d, float *dg,
                                float *du, int64_t n) {
  swigluGradLoop(g, u, d, dg, du, n);
}
const Table kAvx2 = {dotAvx2, dot3Avx2, expShiftedAvx2, sigmoidAvx2, siluAvx2, swigluAvx2, swigluGradAvx2};

const Table &table() {
  static const Table &chosen =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? kAvx2 : kPortable;
  return chosen;
}
#else
const Table &table() { return kPortable; }
#endif

} // namespace

double dotInDouble(const float *a, const float *b, int64_t n) { return table().dot(a, b, n); }

double dot3InDouble(const float *a, const float *b, const float *c, int64_t n) {
  return table().dot3(a, b, c, n);
}

double expShifted(const float *x, float shift, float *y, int64_t n) {
  return table().expShifted(x, shift, y, n);
}

void sigmoid(const float *x, float *y, int64_t n) { table().sigmoid(x, y, n); }

void silu(const float *x, float *y, int64_t n) { table().silu(x, y, n); }

void swiglu(const float *gate, const float *up, float *y, int64_t n) {
  table().swiglu(gate, up, y, n);
}

void swigluGrad(const float *gate, const float *up, const float *dy, float *dgate, float *dup,
                int64_t n) {
  table().swigluGrad(gate, up, dy, dgate, dup, n);
}

float exp(float x) { return expCore(x); }

} // namespace slrt::cpu::vec
