// The CPU backend's generation kernels (KV_WRITE, DECODE_ATTENTION, TAKE_ROWS), in f32 and f64,
// against naive loops on fresh random inputs, with every result element poisoned (NaN) before the
// run so that an element the kernel fails to write shows; and DECODE_ATTENTION against ATTENTION.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/backend.h"
#include "slrt/error.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

template <typename T> constexpr DType kDTypeOf = DTYPE_UNSPECIFIED;
template <> constexpr DType kDTypeOf<float> = F32;
template <> constexpr DType kDTypeOf<double> = F64;
template <> constexpr DType kDTypeOf<int64_t> = I64;
template <> constexpr DType kDTypeOf<int32_t> = I32;

// Values in plain host memory and the TensorRef a kernel sees.
template <typename T> struct Tensor {
  Shape shape;
  std::vector<T> values;
  TensorRef ref;

  Tensor(Shape s, std::vector<T> v) : shape(std::move(s)), values(std::move(v)) {
    EXPECT_EQ(values.size(), numel(shape).value());
    ref = TensorRef{reinterpret_cast<std::byte *>(values.data()), DEVICE, kDTypeOf<T>, shape,
                    values.size() * sizeof(T)};
  }
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;
};

template <typename T> Tensor<T> randomTensor(std::mt19937 &rng, Shape shape) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(numel(shape).value());
  for (T &x : v)
    x = static_cast<T>(dist(rng));
  return Tensor<T>(std::move(shape), std::move(v));
}

template <typename T> Tensor<T> poisoned(Shape shape) {
  return Tensor<T>(shape,
                   std::vector<T>(numel(shape).value(), std::numeric_limits<T>::quiet_NaN()));
}

Tensor<int64_t> ints(Shape shape, std::vector<int64_t> values) {
  return Tensor<int64_t>(std::move(shape), std::move(values));
}

Kernel attentionKernel(OpKind op, float scale, bool causal = false, bool alibi = false) {
  Kernel k = makeKernel(op);
  k.mutable_attention()->set_scale(scale);
  k.mutable_attention()->set_causal(causal);
  k.mutable_attention()->set_alibi(alibi);
  return k;
}

template <typename T> class GenerationKernelsTest : public ::testing::Test {
protected:
  template <typename... Operands>
  void run(const Kernel &kernel, TensorRef &result, Operands &...operands) {
    backend->execute(kernel, {&operands.ref...}, {&result});
  }

  template <typename... Operands>
  std::string runError(const Kernel &kernel, TensorRef &result, Operands &...operands) {
    try {
      run(kernel, result, operands...);
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an slrt::Error";
    return "";
  }

  // Results of f64 kernels match the double references to rounding; f32 ones to float rounding.
  static constexpr double kTolerance = std::is_same_v<T, double> ? 1e-12 : 2e-6;

  std::unique_ptr<Backend> backend = createCpuBackend();
  std::mt19937 rng{2024};
};

using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GenerationKernelsTest, FloatTypes);

// cache [B, 2, Hkv, C, D]: the index of element (b, kv, h, position, c).
int64_t cacheIndex(const Shape &cache, int64_t b, int64_t kv, int64_t h, int64_t position,
                   int64_t c) {
  return (((b * 2 + kv) * cache[2] + h) * cache[3] + position) * cache[4] + c;
}

TYPED_TEST(GenerationKernelsTest, KvWriteWritesExactlyItsPositions) {
  using T = TypeParam;
  const int64_t b = 3, heads = 2, capacity = 7, d = 4;
  Shape cacheShape{b, 2, heads, capacity, d};
  for (int64_t t : {int64_t{1}, int64_t{3}, capacity}) {
    SCOPED_TRACE(t);
    for (bool withStart : {false, true}) {
      Tensor<T> cache = randomTensor<T>(this->rng, cacheShape);
      std::vector<T> before = cache.values;
      Tensor<T> k = randomTensor<T>(this->rng, {b, heads, t, d});
      Tensor<T> v = randomTensor<T>(this->rng, {b, heads, t, d});
      std::uniform_int_distribution<int64_t> where(0, capacity - t);
      std::vector<int64_t> starts(b, 0);
      if (withStart)
        for (int64_t &s : starts)
          s = where(this->rng);
      Tensor<int64_t> start = ints({b}, starts);
      if (withStart)
        this->run(makeKernel(KV_WRITE), cache.ref, cache, k, v, start);
      else
        this->run(makeKernel(KV_WRITE), cache.ref, cache, k, v);
      // Every element: the new key or value where the kernel writes, the old value elsewhere.
      for (int64_t i = 0; i < b; ++i)
        for (int64_t kv = 0; kv < 2; ++kv)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t p = 0; p < capacity; ++p)
              for (int64_t c = 0; c < d; ++c) {
                int64_t at = cacheIndex(cacheShape, i, kv, h, p, c);
                int64_t s = starts[static_cast<size_t>(i)];
                T expected = before[at];
                if (p >= s && p < s + t)
                  expected = (kv == 0 ? k : v).values[((i * heads + h) * t + (p - s)) * d + c];
                ASSERT_EQ(cache.values[at], expected) << i << " " << kv << " " << h << " " << p;
              }
    }
  }
}

// With kv_write.layout BSHD, k and v are [B, T, Hkv, D]: the same cache as BHSD k and v that are
// their head permutation, written from the projections' order without a transpose.
TYPED_TEST(GenerationKernelsTest, KvWriteFromBshdEqualsTheTransposedWrite) {
  using T = TypeParam;
  const int64_t b = 2, heads = 3, capacity = 6, d = 5, t = 4;
  Shape cacheShape{b, 2, heads, capacity, d};
  Tensor<T> cache = randomTensor<T>(this->rng, cacheShape);
  Tensor<T> bhsdCache(cacheShape, cache.values);
  Tensor<T> k = randomTensor<T>(this->rng, {b, t, heads, d});
  Tensor<T> v = randomTensor<T>(this->rng, {b, t, heads, d});
  // The head permutation of k and v, by index.
  auto permuted = [&](const Tensor<T> &x) {
    std::vector<T> y(x.values.size());
    for (int64_t i = 0; i < b; ++i)
      for (int64_t p = 0; p < t; ++p)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t c = 0; c < d; ++c)
            y[((i * heads + h) * t + p) * d + c] = x.values[((i * t + p) * heads + h) * d + c];
    return y;
  };
  Tensor<T> kBhsd({b, heads, t, d}, permuted(k)), vBhsd({b, heads, t, d}, permuted(v));
  Tensor<int64_t> start = ints({b}, {2, 0});
  Kernel bshd = makeKernel(KV_WRITE);
  bshd.mutable_kv_write()->set_layout(sl::schedule::AttentionAttributes::BSHD);
  this->run(bshd, cache.ref, cache, k, v, start);
  this->run(makeKernel(KV_WRITE), bhsdCache.ref, bhsdCache, kBhsd, vBhsd, start);
  EXPECT_EQ(cache.values, bhsdCache.values);
  // T counts positions from dimension 1: a start that leaves no room for 4 is refused.
  Tensor<int64_t> late = ints({b}, {3, 0});
  EXPECT_THAT(this->runError(bshd, cache.ref, cache, k, v, late),
              HasSubstr("start 3 (element 0 of the starts [2]) is outside [0, 2]: 4 new "
                        "positions"));
}

TYPED_TEST(GenerationKernelsTest, KvWriteStartOutOfRangeIsAnErrorAndWritesNothing) {
  using T = TypeParam;
  Tensor<T> cache = randomTensor<T>(this->rng, {2, 2, 1, 5, 3});
  std::vector<T> before = cache.values;
  Tensor<T> k = randomTensor<T>(this->rng, {2, 1, 2, 3});
  Tensor<int64_t> start = ints({2}, {0, 4});
  EXPECT_THAT(this->runError(makeKernel(KV_WRITE), cache.ref, cache, k, k, start),
              HasSubstr("start 4 (element 1 of the starts [2]) is outside [0, 3]: 2 new "
                        "positions must fit the cache [2, 2, 1, 5, 3] of 5 positions"));
  start.values = {-1, 0};
  EXPECT_THAT(this->runError(makeKernel(KV_WRITE), cache.ref, cache, k, k, start),
              HasSubstr("start -1 (element 0 of the starts [2]) is outside [0, 3]"));
  EXPECT_EQ(cache.values, before);
}

// softmax over [cache positions 0..length) + the new token, in double; with slopes, ALiBi as
// BLOOM writes it: slope[h] times the key's absolute position.
template <typename T>
std::vector<double> naiveDecodeAttention(const Tensor<T> &q, const Tensor<T> &k, const Tensor<T> &v,
                                         const Tensor<T> &cache,
                                         const std::vector<int64_t> &lengths, double scale,
                                         const Tensor<T> *slopes = nullptr) {
  int64_t b = q.shape[0], hq = q.shape[1], d = q.shape[3], hkv = k.shape[1];
  std::vector<double> y;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t h = 0; h < hq; ++h) {
      int64_t kvHead = h / (hq / hkv), length = lengths[static_cast<size_t>(i)];
      auto key = [&](int64_t j, int64_t c) -> double {
        return j < length ? cache.values[cacheIndex(cache.shape, i, 0, kvHead, j, c)]
                          : k.values[(i * hkv + kvHead) * d + c];
      };
      auto value = [&](int64_t j, int64_t c) -> double {
        return j < length ? cache.values[cacheIndex(cache.shape, i, 1, kvHead, j, c)]
                          : v.values[(i * hkv + kvHead) * d + c];
      };
      std::vector<double> p(static_cast<size_t>(length + 1));
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= length; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += double(q.values[(i * hq + h) * d + c]) * key(j, c);
        p[j] = dot * scale + (slopes ? double(slopes->values[h]) * double(j) : 0.0);
        max = std::max(max, p[j]);
      }
      for (double &e : p)
        sum += (e = std::exp(e - max));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t j = 0; j <= length; ++j)
          acc += p[j] / sum * value(j, c);
        y.push_back(acc);
      }
    }
  return y;
}

template <typename T>
void expectNear(const std::vector<T> &actual, const std::vector<double> &expected,
                double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance * (1 + std::fabs(expected[i])))
        << "element " << i;
}

TYPED_TEST(GenerationKernelsTest, DecodeAttentionMatchesNaiveWithGroupedHeads) {
  using T = TypeParam;
  struct Case {
    int64_t b, hq, hkv, capacity, d;
  };
  for (Case c : {Case{3, 4, 2, 6, 8}, Case{2, 3, 3, 5, 4}, Case{1, 4, 1, 9, 2}}) {
    SCOPED_TRACE(::testing::Message() << c.hq << "/" << c.hkv);
    Tensor<T> q = randomTensor<T>(this->rng, {c.b, c.hq, 1, c.d});
    Tensor<T> k = randomTensor<T>(this->rng, {c.b, c.hkv, 1, c.d});
    Tensor<T> v = randomTensor<T>(this->rng, {c.b, c.hkv, 1, c.d});
    Tensor<T> cache = randomTensor<T>(this->rng, {c.b, 2, c.hkv, c.capacity, c.d});
    // Lengths from empty (the token sees only itself) to the whole cache.
    std::vector<int64_t> lengths;
    for (int64_t i = 0; i < c.b; ++i)
      lengths.push_back(i == 0 ? 0 : i == 1 ? c.capacity : c.capacity / 2);
    // What lies at and past each length must not be read: poison it.
    for (int64_t i = 0; i < c.b; ++i)
      for (int64_t kv = 0; kv < 2; ++kv)
        for (int64_t h = 0; h < c.hkv; ++h)
          for (int64_t p = lengths[static_cast<size_t>(i)]; p < c.capacity; ++p)
            for (int64_t e = 0; e < c.d; ++e)
              cache.values[cacheIndex(cache.shape, i, kv, h, p, e)] =
                  std::numeric_limits<T>::quiet_NaN();
    Tensor<int64_t> length = ints({c.b}, lengths);
    Tensor<T> y = poisoned<T>({c.b, c.hq, 1, c.d});
    double scale = 1 / std::sqrt(double(c.d));
    this->run(attentionKernel(DECODE_ATTENTION, static_cast<float>(scale)), y.ref, q, k, v, cache,
              length);
    expectNear(y.values, naiveDecodeAttention(q, k, v, cache, lengths, static_cast<float>(scale)),
               this->kTolerance);
  }
}

TYPED_TEST(GenerationKernelsTest, DecodeAttentionIsStableForLargeScores) {
  using T = TypeParam;
  // Scores around 1e4: exp without the maximum subtracted would overflow.
  Tensor<T> q = randomTensor<T>(this->rng, {1, 2, 1, 4});
  Tensor<T> k = randomTensor<T>(this->rng, {1, 1, 1, 4});
  Tensor<T> cache = randomTensor<T>(this->rng, {1, 2, 1, 3, 4});
  for (T &x : q.values)
    x *= 100;
  for (T &x : cache.values)
    x *= 100;
  Tensor<int64_t> length = ints({1}, {3});
  Tensor<T> y = poisoned<T>({1, 2, 1, 4});
  this->run(attentionKernel(DECODE_ATTENTION, 1.0f), y.ref, q, k, k, cache, length);
  for (T value : y.values)
    EXPECT_TRUE(std::isfinite(value));
  expectNear(y.values, naiveDecodeAttention(q, k, k, cache, {3}, 1.0), this->kTolerance);
}

// ALiBi slopes [Hq] as a sixth operand: each sequence's new token at its own position.
TYPED_TEST(GenerationKernelsTest, DecodeAttentionWithAlibiMatchesNaive) {
  using T = TypeParam;
  const int64_t b = 3, hq = 4, hkv = 2, capacity = 7, d = 8;
  Tensor<T> q = randomTensor<T>(this->rng, {b, hq, 1, d});
  Tensor<T> k = randomTensor<T>(this->rng, {b, hkv, 1, d});
  Tensor<T> v = randomTensor<T>(this->rng, {b, hkv, 1, d});
  Tensor<T> cache = randomTensor<T>(this->rng, {b, 2, hkv, capacity, d});
  Tensor<T> slopes = randomTensor<T>(this->rng, {hq});
  std::vector<int64_t> lengths{0, capacity, 3};
  Tensor<int64_t> length = ints({b}, lengths);
  Tensor<T> y = poisoned<T>({b, hq, 1, d});
  this->run(attentionKernel(DECODE_ATTENTION, 0.5f, false, /*alibi=*/true), y.ref, q, k, v, cache,
            length, slopes);
  expectNear(y.values, naiveDecodeAttention(q, k, v, cache, lengths, 0.5, &slopes),
             this->kTolerance);
  // The slopes matter: without them the result differs.
  std::vector<double> plain = naiveDecodeAttention(q, k, v, cache, lengths, 0.5);
  double largest = 0;
  for (size_t i = 0; i < plain.size(); ++i)
    largest = std::max(largest, std::fabs(plain[i] - double(y.values[i])));
  EXPECT_GT(largest, 1e-3);
}

// DECODE_ATTENTION with length L over a cache holding positions [0, L) is the last row of causal
// ATTENTION over those L positions and the new one, with or without ALiBi slopes.
TYPED_TEST(GenerationKernelsTest, DecodeAttentionIsTheLastRowOfCausalAttention) {
  for (bool alibi : {false, true}) {
    using T = TypeParam;
    SCOPED_TRACE(alibi ? "alibi" : "plain");
    const int64_t b = 2, hq = 4, hkv = 2, capacity = 6, d = 4, length = 4;
    Tensor<T> q = randomTensor<T>(this->rng, {b, hq, 1, d});
    Tensor<T> k = randomTensor<T>(this->rng, {b, hkv, 1, d});
    Tensor<T> v = randomTensor<T>(this->rng, {b, hkv, 1, d});
    Tensor<T> cache = randomTensor<T>(this->rng, {b, 2, hkv, capacity, d});
    Tensor<int64_t> lengths = ints({b}, {length, length});
    Tensor<T> y = poisoned<T>({b, hq, 1, d});
    Tensor<T> slopes = randomTensor<T>(this->rng, {hq});
    float scale = 0.7f;
    Kernel decode = attentionKernel(DECODE_ATTENTION, scale, false, alibi);
    if (alibi)
      this->run(decode, y.ref, q, k, v, cache, lengths, slopes);
    else
      this->run(decode, y.ref, q, k, v, cache, lengths);

    // The same keys and values laid out [B, Hkv, L + 1, D]; the query as the last of L + 1 rows
    // (the rows before it random: they do not change the last row).
    Tensor<T> fullQ = randomTensor<T>(this->rng, {b, hq, length + 1, d});
    Tensor<T> fullK = poisoned<T>({b, hkv, length + 1, d});
    Tensor<T> fullV = poisoned<T>({b, hkv, length + 1, d});
    for (int64_t i = 0; i < b; ++i)
      for (int64_t h = 0; h < hkv; ++h)
        for (int64_t p = 0; p <= length; ++p)
          for (int64_t c = 0; c < d; ++c) {
            int64_t at = ((i * hkv + h) * (length + 1) + p) * d + c;
            fullK.values[at] = p < length ? cache.values[cacheIndex(cache.shape, i, 0, h, p, c)]
                                          : k.values[(i * hkv + h) * d + c];
            fullV.values[at] = p < length ? cache.values[cacheIndex(cache.shape, i, 1, h, p, c)]
                                          : v.values[(i * hkv + h) * d + c];
          }
    for (int64_t i = 0; i < b; ++i)
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t c = 0; c < d; ++c)
          fullQ.values[((i * hq + h) * (length + 1) + length) * d + c] =
              q.values[(i * hq + h) * d + c];
    Tensor<T> full = poisoned<T>({b, hq, length + 1, d});
    Kernel attention = attentionKernel(ATTENTION, scale, /*causal=*/true, alibi);
    if (alibi)
      this->run(attention, full.ref, fullQ, fullK, fullV, slopes);
    else
      this->run(attention, full.ref, fullQ, fullK, fullV);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t c = 0; c < d; ++c)
          EXPECT_NEAR(y.values[(i * hq + h) * d + c],
                      full.values[((i * hq + h) * (length + 1) + length) * d + c],
                      this->kTolerance);
  }
}

TYPED_TEST(GenerationKernelsTest, DecodeAttentionLengthOutOfRangeIsAnError) {
  using T = TypeParam;
  Tensor<T> q = randomTensor<T>(this->rng, {2, 1, 1, 2});
  Tensor<T> cache = randomTensor<T>(this->rng, {2, 2, 1, 3, 2});
  Tensor<int64_t> length = ints({2}, {3, 4});
  Tensor<T> y = poisoned<T>({2, 1, 1, 2});
  Kernel kernel = attentionKernel(DECODE_ATTENTION, 1.0f);
  EXPECT_THAT(this->runError(kernel, y.ref, q, q, q, cache, length),
              HasSubstr("length 4 (element 1 of the lengths [2]) is out of range for the cache "
                        "[2, 2, 1, 3, 2] of 3 positions"));
  length.values = {-1, 0};
  EXPECT_THAT(this->runError(kernel, y.ref, q, q, q, cache, length),
              HasSubstr("length -1 (element 0 of the lengths [2]) is out of range"));
  for (T value : y.values)
    EXPECT_TRUE(std::isnan(value)); // nothing written
}

TYPED_TEST(GenerationKernelsTest, TakeRowsPicksOneRowPerSequence) {
  using T = TypeParam;
  Tensor<T> x = randomTensor<T>(this->rng, {3, 5, 4});
  Tensor<int64_t> index = ints({3}, {4, 0, 2});
  Tensor<T> y = poisoned<T>({3, 1, 4});
  this->run(makeKernel(TAKE_ROWS), y.ref, x, index);
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(y.values[b * 4 + c], x.values[(b * 5 + index.values[b]) * 4 + c]);

  index.values = {0, 5, 1};
  Tensor<T> untouched = poisoned<T>({3, 1, 4});
  EXPECT_THAT(this->runError(makeKernel(TAKE_ROWS), untouched.ref, x, index),
              HasSubstr("index 5 (element 1 of the indices [3]) is out of range for the 5 rows "
                        "of x [3, 5, 4]"));
  index.values = {-1, 0, 0};
  EXPECT_THAT(this->runError(makeKernel(TAKE_ROWS), untouched.ref, x, index),
              HasSubstr("index -1 (element 0 of the indices [3]) is out of range"));
  for (T value : untouched.values)
    EXPECT_TRUE(std::isnan(value));
}

TEST(GenerationKernelsAnyDTypeTest, TakeRowsMovesAnyDType) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  Tensor<int32_t> x({2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor<int64_t> index = ints({2}, {1, 2});
  Tensor<int32_t> y({2, 1, 2}, {-1, -1, -1, -1});
  backend->execute(makeKernel(TAKE_ROWS), {&x.ref, &index.ref}, {&y.ref});
  EXPECT_EQ(y.values, (std::vector<int32_t>{2, 3, 10, 11}));
}

} // namespace
} // namespace slrt::test
