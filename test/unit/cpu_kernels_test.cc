// CPU backend kernels against naive loops on random inputs.
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/backend.h"
#include "slrt/error.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;

template <typename T> constexpr DType kDTypeOf = DTYPE_UNSPECIFIED;
template <> constexpr DType kDTypeOf<float> = F32;
template <> constexpr DType kDTypeOf<double> = F64;
template <> constexpr DType kDTypeOf<int64_t> = I64;
template <> constexpr DType kDTypeOf<int32_t> = I32;
template <> constexpr DType kDTypeOf<uint8_t> = BOOL;
template <> constexpr DType kDTypeOf<uint16_t> = F16; // bit patterns, for ops that only move them

// A tensor in plain host memory plus the TensorRef the backend sees. CPU kernels take any host
// pointer, so the tests need no arena.
struct TensorBase {
  TensorRef ref;
};

template <typename T> struct TensorOf : TensorBase {
  Shape shape;
  std::vector<T> values;

  TensorOf(Shape s, std::vector<T> v) : shape(std::move(s)), values(std::move(v)) {
    EXPECT_EQ(values.size(), numel(shape).value());
    ref = TensorRef{reinterpret_cast<std::byte *>(values.data()), DEVICE, kDTypeOf<T>, shape,
                    values.size() * sizeof(T)};
  }
  // ref points into values, so a copy would alias the original.
  TensorOf(const TensorOf &) = delete;
  TensorOf &operator=(const TensorOf &) = delete;

  static TensorOf random(std::mt19937 &rng, Shape s) {
    size_t n = numel(s).value();
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<float> f = randomFloats(rng, n);
      return TensorOf(s, std::vector<T>(f.begin(), f.end()));
    } else {
      std::uniform_int_distribution<int64_t> dist(-9, 9);
      std::vector<T> v(n);
      for (T &x : v)
        x = static_cast<T>(dist(rng));
      return TensorOf(s, std::move(v));
    }
  }
  // Filled with a value no kernel writes by accident (NaN for floats).
  static TensorOf empty(Shape s) {
    T fill = std::is_floating_point_v<T> ? T(NAN) : T(0x5a);
    return TensorOf(s, std::vector<T>(numel(s).value(), fill));
  }
};

using Tensor = TensorOf<float>;
using I64Tensor = TensorOf<int64_t>;
using BoolTensor = TensorOf<uint8_t>;

// Index of `index` (a multi-index into `to`) in a tensor of shape `from` broadcast to `to`.
int64_t broadcastIndex(const Shape &from, const Shape &to, const std::vector<int64_t> &index) {
  int64_t flat = 0;
  size_t lead = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    flat = flat * from[d] + (from[d] == 1 ? 0 : index[lead + d]);
  return flat;
}

// Calls f(multi-index) for every element of `shape` in row-major order.
template <typename F> void forEachIndex(const Shape &shape, F f) {
  int64_t total = static_cast<int64_t>(numel(shape).value());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    f(index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

void expectNear(const std::vector<float> &actual, const std::vector<float> &expected,
                float tolerance = 1e-5f) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (actual[i] == expected[i]) // also infinities
      continue;
    if (std::isnan(expected[i])) {
      ASSERT_TRUE(std::isnan(actual[i])) << "at element " << i << ": " << actual[i];
      continue;
    }
    ASSERT_NEAR(actual[i], expected[i], tolerance * (1.0f + std::fabs(expected[i])))
        << "at element " << i;
  }
}

Kernel makeKernel(OpKind op) {
  Kernel k;
  k.set_op(op);
  k.set_name(OpKind_Name(op));
  return k;
}

class CpuKernelsTest : public ::testing::Test {
protected:
  void run(const Kernel &kernel, std::vector<const TensorBase *> operands, TensorBase &result) {
    std::vector<const TensorRef *> in;
    for (const TensorBase *t : operands)
      in.push_back(&t->ref);
    backend->execute(kernel, in, {&result.ref});
  }

  // The Error run() throws; fails the test when it throws none.
  std::string runError(const Kernel &kernel, std::vector<const TensorBase *> operands,
                       TensorBase &result) {
    try {
      run(kernel, std::move(operands), result);
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an slrt::Error";
    return "";
  }

  std::unique_ptr<Backend> backend = createCpuBackend();
  std::mt19937 rng{1234};
};

// numpy.matmul by definition: promote rank-1 operands, broadcast batch dimensions, sum.
std::vector<float> naiveMatmul(const Tensor &a, const Tensor &b, const Shape &yShape) {
  Shape as = a.shape.size() == 1 ? Shape{1, a.shape[0]} : a.shape;
  Shape bs = b.shape.size() == 1 ? Shape{b.shape[0], 1} : b.shape;
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  Shape batch = *broadcastShapes(aBatch, bBatch);
  std::vector<float> y;
  forEachIndex(batch, [&](const std::vector<int64_t> &index) {
    int64_t aBase = broadcastIndex(aBatch, batch, index) * m * k;
    int64_t bBase = broadcastIndex(bBatch, batch, index) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(a.values[aBase + i * k + p]) * b.values[bBase + p * n + j];
        y.push_back(static_cast<float>(acc));
      }
  });
  EXPECT_EQ(y.size(), numel(yShape).value());
  return y;
}

struct MatmulCase {
  Shape a, b;
};

TEST_F(CpuKernelsTest, MatmulMatchesNaiveWithBroadcastBatches) {
  const MatmulCase cases[] = {
      {{3, 4}, {4, 5}},             // plain
      {{2, 3, 4}, {4, 5}},          // shared weight: one folded GEMM
      {{2, 1, 3, 4}, {3, 4, 5}},    // batch broadcast both ways
      {{1, 3, 4}, {2, 4, 5}},       // A broadcast across B's batch
      {{2, 3, 3, 4}, {2, 3, 4, 2}}, // equal batches
      {{4}, {4, 5}},                // vector-matrix
      {{2, 3, 4}, {4}},             // matrix-vector, batched
      {{4}, {2, 4, 3}},             // vector against a batch
      {{4}, {4}},                   // dot product, scalar result
      {{3, 0}, {0, 2}},             // empty sum: zeros
      {{1, 1, 3, 4}, {1, 4, 5}},    // unit batches
  };
  for (const MatmulCase &c : cases) {
    SCOPED_TRACE(formatShape(c.a) + " @ " + formatShape(c.b));
    Tensor a = Tensor::random(rng, c.a), b = Tensor::random(rng, c.b);
    Shape yShape = matmulShape(c.a, c.b).value();
    Tensor y = Tensor::empty(yShape);
    run(makeKernel(MATMUL), {&a, &b}, y);
    expectNear(y.values, naiveMatmul(a, b, yShape));
  }
}

TEST_F(CpuKernelsTest, GemmMatchesNaiveForAllTransposesAndBroadcastC) {
  const int64_t m = 5, n = 4, k = 3;
  const Shape cShapes[] = {{m, n}, {n}, {1, n}, {m, 1}, {1}, {}};
  for (bool transA : {false, true})
    for (bool transB : {false, true})
      for (int c = -1; c < static_cast<int>(std::size(cShapes)); ++c) {
        float alpha = 0.75f, beta = c < 0 ? 0.0f : -1.5f;
        Shape cShape = c < 0 ? Shape{} : cShapes[c];
        SCOPED_TRACE(::testing::Message() << "transA " << transA << " transB " << transB << " C "
                                          << (c < 0 ? "none" : formatShape(cShape)));
        Tensor a = Tensor::random(rng, transA ? Shape{k, m} : Shape{m, k});
        Tensor b = Tensor::random(rng, transB ? Shape{n, k} : Shape{k, n});
        Tensor cT = Tensor::random(rng, cShape);
        Tensor y = Tensor::empty({m, n});
        Kernel kernel = makeKernel(GEMM);
        kernel.mutable_gemm()->set_trans_a(transA);
        kernel.mutable_gemm()->set_trans_b(transB);
        kernel.mutable_gemm()->set_alpha(alpha);
        kernel.mutable_gemm()->set_beta(beta);
        std::vector<const TensorBase *> operands{&a, &b};
        if (c >= 0)
          operands.push_back(&cT);
        run(kernel, operands, y);

        std::vector<float> expected;
        forEachIndex({m, n}, [&](const std::vector<int64_t> &ij) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) {
            float av = transA ? a.values[p * m + ij[0]] : a.values[ij[0] * k + p];
            float bv = transB ? b.values[ij[1] * k + p] : b.values[p * n + ij[1]];
            acc += double(av) * bv;
          }
          double cv = c < 0 ? 0.0 : cT.values[broadcastIndex(cShape, {m, n}, ij)];
          expected.push_back(static_cast<float>(alpha * acc + beta * cv));
        });
        expectNear(y.values, expected);
      }
}

TEST_F(CpuKernelsTest, GemmWithBetaZeroIgnoresC) {
  Tensor a = Tensor::random(rng, {2, 3}), b = Tensor::random(rng, {3, 2});
  Tensor c({2, 2}, {NAN, NAN, NAN, NAN}); // never read when beta == 0
  Tensor y = Tensor::empty({2, 2});
  Kernel kernel = makeKernel(GEMM);
  kernel.mutable_gemm()->set_alpha(1.0f);
  run(kernel, {&a, &b, &c}, y);
  expectNear(y.values, naiveMatmul(a, b, {2, 2}));
}

struct BinaryCase {
  Shape a, b;
};

TEST_F(CpuKernelsTest, AddAndMulBroadcastLikeNumpy) {
  const BinaryCase cases[] = {
      {{2, 3}, {2, 3}},             // same shape: the flat loop
      {{2, 3, 4}, {4}},             // bias
      {{2, 1, 4}, {3, 1}},          // both sides broadcast
      {{}, {2, 3}},                 // scalar
      {{2, 3}, {}},                 //
      {{5, 1, 1, 2}, {1, 3, 4, 1}}, // rank 4, inner dimension broadcast
      {{2, 1, 3, 1, 2}, {4, 1}},    // rank 5 against rank 2
      {{3, 1}, {1, 0}},             // empty result
      {{1}, {1}},
  };
  for (OpKind op : {ADD, MUL})
    for (const BinaryCase &c : cases) {
      SCOPED_TRACE(OpKind_Name(op) + " " + formatShape(c.a) + " " + formatShape(c.b));
      Tensor a = Tensor::random(rng, c.a), b = Tensor::random(rng, c.b);
      Shape yShape = broadcastShapes(c.a, c.b).value();
      Tensor y = Tensor::empty(yShape);
      run(makeKernel(op), {&a, &b}, y);
      std::vector<float> expected;
      forEachIndex(yShape, [&](const std::vector<int64_t> &index) {
        float av = a.values[broadcastIndex(c.a, yShape, index)];
        float bv = b.values[broadcastIndex(c.b, yShape, index)];
        expected.push_back(op == ADD ? av + bv : av * bv);
      });
      expectNear(y.values, expected, 0.0f);
    }
}

TEST_F(CpuKernelsTest, AddRunsExactlyInPlace) {
  Tensor a = Tensor::random(rng, {3, 4});
  Tensor b = Tensor::random(rng, {4});
  std::vector<float> expected(12);
  for (int i = 0; i < 12; ++i)
    expected[i] = a.values[i] + b.values[i % 4];
  run(makeKernel(ADD), {&a, &b}, a);
  expectNear(a.values, expected, 0.0f);
}

TEST_F(CpuKernelsTest, UnaryOpsMatchNaive) {
  Tensor x = Tensor::random(rng, {3, 7});
  x.values[0] = 0.0f;
  x.values[1] = -100.0f; // sigmoid must not overflow exp
  x.values[2] = 100.0f;
  for (OpKind op : {RELU, SIGMOID, SILU}) {
    SCOPED_TRACE(OpKind_Name(op));
    Tensor y = Tensor::empty(x.shape);
    run(makeKernel(op), {&x}, y);
    std::vector<float> expected;
    for (float v : x.values) {
      double s = 1.0 / (1.0 + std::exp(-double(v)));
      expected.push_back(static_cast<float>(op == RELU      ? std::max(0.0f, v)
                                            : op == SIGMOID ? s
                                                            : v * s));
    }
    expectNear(y.values, expected);
    for (float v : y.values)
      EXPECT_TRUE(std::isfinite(v));
  }
}

TEST_F(CpuKernelsTest, TransposeMatchesNaive) {
  struct Case {
    Shape x;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {
      {{3, 5}, {1, 0}},       {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {2, 0, 1}}, {{2, 3, 4, 5}, {3, 1, 0, 2}},
      {{4, 3}, {0, 1}},       {{}, {}},
      {{2, 0, 3}, {2, 1, 0}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(formatShape(c.x) + " perm " + formatShape(c.perm));
    Tensor x = Tensor::random(rng, c.x);
    Shape yShape;
    for (int64_t axis : c.perm)
      yShape.push_back(c.x[axis]);
    Tensor y = Tensor::empty(yShape);
    Kernel kernel = makeKernel(TRANSPOSE);
    for (int64_t axis : c.perm)
      kernel.mutable_transpose()->add_perm(axis);
    run(kernel, {&x}, y);
    std::vector<float> expected;
    forEachIndex(yShape, [&](const std::vector<int64_t> &yIndex) {
      std::vector<int64_t> xIndex(c.x.size());
      for (size_t i = 0; i < c.perm.size(); ++i)
        xIndex[c.perm[i]] = yIndex[i];
      expected.push_back(x.values[broadcastIndex(c.x, c.x, xIndex)]);
    });
    expectNear(y.values, expected, 0.0f);
  }
}

TEST_F(CpuKernelsTest, CopyMovesBytes) {
  Tensor src = Tensor::random(rng, {4, 4});
  Tensor dst = Tensor::empty({4, 4});
  backend->copy(src.ref, dst.ref);
  EXPECT_EQ(dst.values, src.values);
}

TEST_F(CpuKernelsTest, ArenaAndPoolAre64ByteAligned) {
  backend->allocate(100, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(backend->deviceArena()) % 64, 0u);
  EXPECT_NE(backend->hostPool(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(backend->hostPool()) % 64, 0u);
}

// --- version 2 ops ----------------------------------------------------------------------------

// y[i] = f(a[i'], b[i']) with numpy broadcasting, by multi-index.
template <typename R, typename A, typename B, typename F>
std::vector<R> naiveBroadcast(const TensorOf<A> &a, const TensorOf<B> &b, const Shape &yShape,
                              F f) {
  std::vector<R> y;
  forEachIndex(yShape, [&](const std::vector<int64_t> &index) {
    y.push_back(f(a.values[broadcastIndex(a.shape, yShape, index)],
                  b.values[broadcastIndex(b.shape, yShape, index)]));
  });
  return y;
}

const BinaryCase kBroadcastCases[] = {
    {{2, 3}, {2, 3}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}},
    {{}, {2, 3}},     {{2, 3}, {}},     {{5, 1, 1, 2}, {1, 3, 4, 1}},
    {{3, 1}, {1, 0}},
};

TEST_F(CpuKernelsTest, SubDivPowMatchNaive) {
  for (OpKind op : {SUB, DIV, POW})
    for (const BinaryCase &c : kBroadcastCases) {
      SCOPED_TRACE(OpKind_Name(op) + " " + formatShape(c.a) + " " + formatShape(c.b));
      Tensor a = Tensor::random(rng, c.a), b = Tensor::random(rng, c.b);
      if (op == POW)
        for (float &v : a.values)
          v = std::fabs(v) + 0.1f; // a real power needs a positive base
      Shape yShape = broadcastShapes(c.a, c.b).value();
      Tensor y = Tensor::empty(yShape);
      run(makeKernel(op), {&a, &b}, y);
      expectNear(y.values, naiveBroadcast<float>(a, b, yShape, [&](float p, float q) {
                   return static_cast<float>(op == SUB   ? double(p) - q
                                             : op == DIV ? double(p) / q
                                                         : std::pow(double(p), double(q)));
                 }));
    }
}

TEST_F(CpuKernelsTest, I64ArithmeticTruncatesAndWraps) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  // Hand-checked: division truncates toward zero (ONNX Div, not Python's //), and overflow wraps.
  I64Tensor a({6}, {-7, 7, -7, 7, kMin, kMax});
  I64Tensor b({6}, {2, -2, -2, 2, -1, -1});
  I64Tensor y = I64Tensor::empty({6});
  run(makeKernel(DIV), {&a, &b}, y);
  EXPECT_EQ(y.values, (std::vector<int64_t>{-3, -3, 3, 3, kMin, -kMax}));
  I64Tensor one({}, {1});
  run(makeKernel(NEG), {&a}, y);
  EXPECT_EQ(y.values, (std::vector<int64_t>{7, -7, 7, -7, kMin, -kMax}));
  I64Tensor big({2}, {kMax, kMin});
  I64Tensor sum = I64Tensor::empty({2});
  run(makeKernel(SUB), {&big, &one}, sum);
  EXPECT_EQ(sum.values, (std::vector<int64_t>{kMax - 1, kMax})); // kMin - 1 wraps

  // Random values with broadcasting against the same arithmetic done naively.
  for (OpKind op : {SUB, DIV, NEG})
    for (const BinaryCase &c : kBroadcastCases) {
      SCOPED_TRACE(OpKind_Name(op) + " " + formatShape(c.a) + " " + formatShape(c.b));
      I64Tensor p = I64Tensor::random(rng, c.a), q = I64Tensor::random(rng, c.b);
      for (int64_t &v : q.values)
        v = v == 0 ? 3 : v;
      Shape yShape = op == NEG ? c.a : broadcastShapes(c.a, c.b).value();
      I64Tensor r = I64Tensor::empty(yShape);
      if (op == NEG) {
        run(makeKernel(op), {&p}, r);
        std::vector<int64_t> expected;
        for (int64_t v : p.values)
          expected.push_back(-v);
        EXPECT_EQ(r.values, expected);
        continue;
      }
      run(makeKernel(op), {&p, &q}, r);
      EXPECT_EQ(r.values, naiveBroadcast<int64_t>(p, q, yShape, [&](int64_t u, int64_t v) {
                  return op == SUB ? u - v : u / v;
                }));
    }
}

TEST_F(CpuKernelsTest, I64DivisionByZeroIsAnError) {
  I64Tensor a({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  I64Tensor b({4}, {1, -1, 0, 2});
  I64Tensor y = I64Tensor::empty({2, 4});
  EXPECT_THAT(runError(makeKernel(DIV), {&a, &b}, y),
              ::testing::HasSubstr("integer division by zero (element 2 of the divisor [4])"));
  EXPECT_EQ(y.values, std::vector<int64_t>(8, 0x5a)); // refused before anything was written
}

TEST_F(CpuKernelsTest, NewUnaryOpsMatchNaive) {
  Tensor x = Tensor::random(rng, {4, 9});
  for (float &v : x.values)
    v *= 3.0f;
  x.values[0] = 0.0f;
  x.values[1] = -20.0f;
  x.values[2] = 20.0f;
  for (OpKind op : {SQRT, RECIPROCAL, NEG, EXP, ERF, TANH, GELU}) {
    for (bool tanhApproximation : {false, true}) {
      if (op != GELU && tanhApproximation)
        continue;
      SCOPED_TRACE(OpKind_Name(op) + (tanhApproximation ? " tanh" : ""));
      Kernel kernel = makeKernel(op);
      if (op == GELU)
        kernel.mutable_gelu()->set_tanh(tanhApproximation);
      Tensor y = Tensor::empty(x.shape);
      run(kernel, {&x}, y);
      std::vector<float> expected;
      for (float f : x.values) {
        double v = f;
        double gelu =
            tanhApproximation
                ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        expected.push_back(static_cast<float>(op == SQRT         ? std::sqrt(v)
                                              : op == RECIPROCAL ? 1 / v
                                              : op == NEG        ? -v
                                              : op == EXP        ? std::exp(v)
                                              : op == ERF        ? std::erf(v)
                                              : op == TANH       ? std::tanh(v)
                                                                 : gelu));
      }
      expectNear(y.values, expected);
    }
  }
}

TEST_F(CpuKernelsTest, SwigluMatchesNaive) {
  Tensor gate = Tensor::random(rng, {3, 5}), up = Tensor::random(rng, {3, 5});
  gate.values[0] = -90.0f; // silu of a large negative number is a tiny negative, not NaN
  Tensor y = Tensor::empty({3, 5});
  run(makeKernel(SWIGLU), {&gate, &up}, y);
  std::vector<float> expected;
  for (size_t i = 0; i < gate.values.size(); ++i) {
    double g = gate.values[i];
    expected.push_back(static_cast<float>(g / (1 + std::exp(-g)) * up.values[i]));
  }
  expectNear(y.values, expected);
}

TEST_F(CpuKernelsTest, ComparisonsBroadcastToBool) {
  for (OpKind op : {EQUAL, LESS})
    for (const BinaryCase &c : kBroadcastCases) {
      SCOPED_TRACE(OpKind_Name(op) + " " + formatShape(c.a) + " " + formatShape(c.b));
      Shape yShape = broadcastShapes(c.a, c.b).value();
      // Small integers make ties likely, so EQUAL sees both answers.
      I64Tensor p = I64Tensor::random(rng, c.a), q = I64Tensor::random(rng, c.b);
      BoolTensor r = BoolTensor::empty(yShape);
      run(makeKernel(op), {&p, &q}, r);
      EXPECT_EQ(r.values, naiveBroadcast<uint8_t>(p, q, yShape, [&](int64_t u, int64_t v) {
                  return uint8_t(op == LESS ? u < v : u == v);
                }));
      Tensor f(c.a, std::vector<float>(p.values.begin(), p.values.end()));
      Tensor g(c.b, std::vector<float>(q.values.begin(), q.values.end()));
      if (!g.values.empty())
        g.values[0] = NAN; // compares false either way
      BoolTensor s = BoolTensor::empty(yShape);
      run(makeKernel(op), {&f, &g}, s);
      EXPECT_EQ(s.values, naiveBroadcast<uint8_t>(f, g, yShape, [&](float u, float v) {
                  return uint8_t(op == LESS ? u < v : u == v);
                }));
    }
}

TEST_F(CpuKernelsTest, WhereBroadcastsAnyDType) {
  BoolTensor c({2, 1, 3}, {1, 0, 1, 0, 0, 2}); // any non-zero byte is true
  Tensor x = Tensor::random(rng, {4, 1}), y = Tensor::random(rng, {3});
  Tensor r = Tensor::empty({2, 4, 3});
  run(makeKernel(WHERE), {&c, &x, &y}, r);
  std::vector<float> expected;
  forEachIndex(r.shape, [&](const std::vector<int64_t> &i) {
    bool take = c.values[broadcastIndex(c.shape, r.shape, i)] != 0;
    expected.push_back(take ? x.values[broadcastIndex(x.shape, r.shape, i)]
                            : y.values[broadcastIndex(y.shape, r.shape, i)]);
  });
  expectNear(r.values, expected, 0.0f);

  TensorOf<uint16_t> hx({2}, {0x3c00, 0x4000}), hy({}, {0xbc00}); // f16 bit patterns
  BoolTensor hc({2, 1}, {0, 1});
  TensorOf<uint16_t> hr = TensorOf<uint16_t>::empty({2, 2});
  run(makeKernel(WHERE), {&hc, &hx, &hy}, hr);
  EXPECT_EQ(hr.values, (std::vector<uint16_t>{0xbc00, 0xbc00, 0x3c00, 0x4000}));
}

TEST_F(CpuKernelsTest, CastConvertsEveryPair) {
  // Small integers are exact in every type: every pair against static_cast (bool: != 0).
  std::vector<double> small{-3, -1, 0, 1, 2, 3};
  auto all = [&](auto fromType) {
    using From = decltype(fromType);
    auto to = [&](auto toType) {
      using To = decltype(toType);
      SCOPED_TRACE(dtypeName(kDTypeOf<From>) + " -> " + dtypeName(kDTypeOf<To>));
      std::vector<From> x;
      std::vector<To> expected;
      for (double v : small) {
        From f = std::is_same_v<From, uint8_t> ? From(v != 0) : From(v);
        x.push_back(f);
        expected.push_back(std::is_same_v<To, uint8_t> ? To(f != 0) : To(f));
      }
      TensorOf<From> in({static_cast<int64_t>(x.size())}, x);
      TensorOf<To> out = TensorOf<To>::empty(in.shape);
      run(makeKernel(CAST), {&in}, out);
      EXPECT_EQ(out.values, expected);
    };
    to(float{});
    to(double{});
    to(int64_t{});
    to(int32_t{});
    to(uint8_t{});
  };
  all(float{});
  all(double{});
  all(int64_t{});
  all(int32_t{});
  all(uint8_t{});

  // Float to integer truncates toward zero; NaN is 0 and out of range saturates (C++ leaves both
  // undefined). Any non-NaN, non-zero float is true; any non-zero bool byte is 1.
  const float inf = std::numeric_limits<float>::infinity();
  Tensor f({9}, {-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, NAN, 1e20f, -1e20f, inf});
  I64Tensor i64 = I64Tensor::empty({9});
  run(makeKernel(CAST), {&f}, i64);
  const int64_t kMin = std::numeric_limits<int64_t>::min(),
                kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(i64.values, (std::vector<int64_t>{-2, 0, 0, 0, 2, 0, kMax, kMin, kMax}));
  TensorOf<int32_t> i32 = TensorOf<int32_t>::empty({9});
  run(makeKernel(CAST), {&f}, i32);
  const int32_t iMin = std::numeric_limits<int32_t>::min(),
                iMax = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(i32.values, (std::vector<int32_t>{-2, 0, 0, 0, 2, 0, iMax, iMin, iMax}));
  BoolTensor b = BoolTensor::empty({9});
  run(makeKernel(CAST), {&f}, b);
  EXPECT_EQ(b.values, (std::vector<uint8_t>{1, 1, 0, 1, 1, 1, 1, 1, 1}));
  I64Tensor wide({3}, {(int64_t{1} << 32) + 5, -1, kMin});
  TensorOf<int32_t> narrow = TensorOf<int32_t>::empty({3});
  run(makeKernel(CAST), {&wide}, narrow);
  EXPECT_EQ(narrow.values, (std::vector<int32_t>{5, -1, 0})); // wraps, as numpy's astype
  BoolTensor bytes({3}, {0, 1, 7});
  Tensor fromBool = Tensor::empty({3});
  run(makeKernel(CAST), {&bytes}, fromBool);
  EXPECT_EQ(fromBool.values, (std::vector<float>{0, 1, 1}));
}

// Softmax along `axis`, in double, with a fully -inf row giving zeros.
std::vector<float> naiveSoftmax(const Tensor &x, int64_t axis) {
  std::vector<float> y(x.values.size());
  forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
    if (index[axis] != 0)
      return;
    std::vector<int64_t> at = index;
    double max = -INFINITY, sum = 0;
    for (at[axis] = 0; at[axis] < x.shape[axis]; ++at[axis])
      max = std::max(max, double(x.values[broadcastIndex(x.shape, x.shape, at)]));
    for (at[axis] = 0; at[axis] < x.shape[axis]; ++at[axis])
      sum += max == -INFINITY ? 0 : std::exp(x.values[broadcastIndex(x.shape, x.shape, at)] - max);
    for (at[axis] = 0; at[axis] < x.shape[axis]; ++at[axis]) {
      int64_t i = broadcastIndex(x.shape, x.shape, at);
      y[i] = max == -INFINITY ? 0.0f : static_cast<float>(std::exp(x.values[i] - max) / sum);
    }
  });
  return y;
}

Kernel axisKernel(OpKind op, int64_t axis) {
  Kernel k = makeKernel(op);
  k.mutable_axis()->set_axis(axis);
  return k;
}

TEST_F(CpuKernelsTest, SoftmaxMatchesNaiveOnEveryAxis) {
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    Tensor x = Tensor::random(rng, {3, 4, 5});
    for (float &v : x.values)
      v *= 20.0f;
    Tensor y = Tensor::empty(x.shape);
    run(axisKernel(SOFTMAX, axis), {&x}, y);
    expectNear(y.values, naiveSoftmax(x, axis));
  }
}

TEST_F(CpuKernelsTest, SoftmaxIsStableAndMaskedRowsAreZero) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x({4, 3}, {1000, 1001, 1002,      // exp would overflow without the max
                    -inf, 0, -inf,         // masked entries get no weight
                    -inf, -inf, -inf,      // fully masked: zeros, not NaN
                    -1000, -1000, -1000}); // exp would underflow without the max
  run(axisKernel(SOFTMAX, 1), {&x}, x);    // in place
  expectNear(x.values, {0.09003057f, 0.24472847f, 0.66524096f, 0, 1, 0, 0, 0, 0, 1.0f / 3, 1.0f / 3,
                        1.0f / 3});
}

Kernel reduceKernel(OpKind op, const std::vector<int64_t> &axes, bool keepdims) {
  Kernel k = makeKernel(op);
  for (int64_t a : axes)
    k.mutable_reduce()->add_axes(a);
  k.mutable_reduce()->set_keepdims(keepdims);
  return k;
}

// The result of reducing `x` over `axes` (all when empty), by summing into a multi-index map.
std::pair<Shape, std::vector<float>> naiveReduce(const Tensor &x, const std::vector<int64_t> &axes,
                                                 bool keepdims, bool mean) {
  std::vector<bool> reduced(x.shape.size(), axes.empty());
  for (int64_t a : axes)
    reduced[a] = true;
  Shape kept, shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    kept.push_back(reduced[d] ? 1 : x.shape[d]);
    if (!reduced[d] || keepdims)
      shape.push_back(reduced[d] ? 1 : x.shape[d]);
  }
  std::vector<double> sums(numel(kept).value());
  int64_t count = 1;
  for (size_t d = 0; d < x.shape.size(); ++d)
    count *= reduced[d] ? x.shape[d] : 1;
  int64_t i = 0;
  forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
    std::vector<int64_t> at = index;
    for (size_t d = 0; d < at.size(); ++d)
      at[d] = reduced[d] ? 0 : at[d];
    sums[broadcastIndex(kept, kept, at)] += x.values[i++];
  });
  std::vector<float> y;
  for (double s : sums)
    y.push_back(static_cast<float>(mean ? s / count : s));
  return {shape, y};
}

TEST_F(CpuKernelsTest, ReduceMatchesNaive) {
  Tensor x = Tensor::random(rng, {2, 3, 4, 5});
  const std::vector<int64_t> axesCases[] = {{}, {0}, {1, 3}, {2}, {0, 1, 2, 3}, {0, 2, 3}};
  for (OpKind op : {REDUCE_SUM, REDUCE_MEAN})
    for (const std::vector<int64_t> &axes : axesCases)
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE(OpKind_Name(op) + " axes " + formatShape(axes) + " keepdims " +
                     std::to_string(keepdims));
        auto [shape, expected] = naiveReduce(x, axes, keepdims, op == REDUCE_MEAN);
        Tensor y = Tensor::empty(shape);
        run(reduceKernel(op, axes, keepdims), {&x}, y);
        expectNear(y.values, expected);
      }
}

TEST_F(CpuKernelsTest, ReduceOverLongAndEmptyAxes) {
  // Longer than one work chunk (2^14 elements), so partial sums are combined.
  Tensor x = Tensor::random(rng, {3, 40000});
  for (bool mean : {false, true})
    for (const std::vector<int64_t> &axes : {std::vector<int64_t>{1}, std::vector<int64_t>{}}) {
      auto [shape, expected] = naiveReduce(x, axes, false, mean);
      Tensor y = Tensor::empty(shape);
      run(reduceKernel(mean ? REDUCE_MEAN : REDUCE_SUM, axes, false), {&x}, y);
      expectNear(y.values, expected, 1e-4f);
    }
  // Summing nothing gives 0; the mean of nothing is NaN, as in numpy.
  Tensor empty = Tensor::empty({2, 0, 3});
  Tensor sum = Tensor::empty({2, 3}), mean = Tensor::empty({2, 3});
  run(reduceKernel(REDUCE_SUM, {1}, false), {&empty}, sum);
  run(reduceKernel(REDUCE_MEAN, {1}, false), {&empty}, mean);
  EXPECT_EQ(sum.values, std::vector<float>(6, 0.0f));
  for (float v : mean.values)
    EXPECT_TRUE(std::isnan(v));
}

template <typename T, typename I>
std::vector<T> naiveGather(const TensorOf<T> &data, const TensorOf<I> &indices, int64_t axis,
                           const Shape &yShape) {
  std::vector<T> y;
  size_t k = indices.shape.size();
  forEachIndex(yShape, [&](const std::vector<int64_t> &index) {
    std::vector<int64_t> at(index.begin(), index.begin() + axis);
    std::vector<int64_t> which(index.begin() + axis, index.begin() + axis + k);
    int64_t row = indices.values[broadcastIndex(indices.shape, indices.shape, which)];
    at.push_back(row < 0 ? row + data.shape[axis] : row);
    at.insert(at.end(), index.begin() + axis + k, index.end());
    y.push_back(data.values[broadcastIndex(data.shape, data.shape, at)]);
  });
  return y;
}

TEST_F(CpuKernelsTest, GatherMatchesNaiveWithNegativeIndices) {
  Tensor data = Tensor::random(rng, {3, 5, 2});
  I64Tensor indices({4, 2}, {0, 4, -1, -5, 2, 2, 3, -2});
  Tensor y = Tensor::empty({3, 4, 2, 2});
  run(axisKernel(GATHER, 1), {&data, &indices}, y);
  expectNear(y.values, naiveGather(data, indices, 1, y.shape), 0.0f);
  TensorOf<int32_t> rows({2}, {-3, 1});
  Tensor byRow = Tensor::empty({2, 5, 2});
  run(axisKernel(GATHER, 0), {&data, &rows}, byRow);
  expectNear(byRow.values, naiveGather(data, rows, 0, byRow.shape), 0.0f);
  TensorOf<int32_t> last({}, {-1}); // a scalar index drops the axis
  Tensor column = Tensor::empty({3, 5});
  run(axisKernel(GATHER, 2), {&data, &last}, column);
  expectNear(column.values, naiveGather(data, last, 2, column.shape), 0.0f);
  I64Tensor table = I64Tensor::random(rng, {6, 3}); // any dtype: an i64 table
  I64Tensor ids({2, 2}, {5, 0, -6, 2});
  I64Tensor looked = I64Tensor::empty({2, 2, 3});
  run(axisKernel(GATHER, 0), {&table, &ids}, looked);
  EXPECT_EQ(looked.values, naiveGather(table, ids, 0, looked.shape));
}

TEST_F(CpuKernelsTest, GatherIndexOutOfRangeIsAnError) {
  Tensor data = Tensor::random(rng, {3, 5, 2});
  I64Tensor indices({4}, {0, 4, -5, 5});
  Tensor y = Tensor::empty({3, 4, 2});
  EXPECT_THAT(runError(axisKernel(GATHER, 1), {&data, &indices}, y),
              ::testing::HasSubstr("index 5 (element 3 of the indices [4]) is out of range for "
                                   "axis 1 of the data [3, 5, 2]"));
  for (float v : y.values)
    EXPECT_TRUE(std::isnan(v)); // nothing written
  indices.values[3] = -6;
  EXPECT_THAT(runError(axisKernel(GATHER, 1), {&data, &indices}, y),
              ::testing::HasSubstr("index -6 (element 3 of the indices [4]) is out of range"));
}

TEST_F(CpuKernelsTest, ConcatMatchesNaive) {
  for (int64_t axis : {0, 1, 2}) {
    SCOPED_TRACE(axis);
    std::vector<Shape> shapes(3, Shape{2, 3, 2});
    for (int i = 0; i < 3; ++i)
      shapes[i][axis] = i; // 0, 1 and 2 along the axis: one operand is empty
    Tensor a = Tensor::random(rng, shapes[0]), b = Tensor::random(rng, shapes[1]),
           c = Tensor::random(rng, shapes[2]);
    Shape yShape{2, 3, 2};
    yShape[axis] = 3;
    Tensor y = Tensor::empty(yShape);
    run(axisKernel(CONCAT, axis), {&a, &b, &c}, y);
    std::vector<float> expected;
    forEachIndex(yShape, [&](const std::vector<int64_t> &index) {
      std::vector<int64_t> at = index;
      // a is empty along the axis, b holds position 0, c positions 1 and 2.
      const Tensor *from = at[axis] < 1 ? &b : &c;
      at[axis] -= at[axis] < 1 ? 0 : 1;
      expected.push_back(from->values[broadcastIndex(from->shape, from->shape, at)]);
    });
    expectNear(y.values, expected, 0.0f);
  }
  I64Tensor p({2, 1}, {1, 2}), q({2, 2}, {3, 4, 5, 6});
  I64Tensor pq = I64Tensor::empty({2, 3});
  run(axisKernel(CONCAT, 1), {&p, &q}, pq);
  EXPECT_EQ(pq.values, (std::vector<int64_t>{1, 3, 4, 2, 5, 6}));
}

TEST_F(CpuKernelsTest, SliceMatchesNaiveWithNegativeSteps) {
  struct Case {
    Shape x;
    std::vector<int64_t> starts, steps;
    Shape y;
  };
  const Case cases[] = {
      {{10}, {1}, {3}, {3}},   // 1, 4, 7
      {{10}, {9}, {-1}, {10}}, // reversed
      {{10}, {8}, {-3}, {3}},  // 8, 5, 2
      {{4, 5, 6}, {3, 0, 5}, {-1, 2, -2}, {4, 3, 3}},
      {{4, 5}, {1, 4}, {2, -4}, {2, 2}}, // rows 1, 3; columns 4, 0
      {{4, 5}, {4, 0}, {1, 1}, {0, 5}},  // empty, starting one past the end
      {{3, 1}, {2, 0}, {-1, 1}, {3, 1}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(formatShape(c.x) + " starts " + formatShape(c.starts) + " steps " +
                 formatShape(c.steps));
    Tensor x = Tensor::random(rng, c.x);
    Tensor y = Tensor::empty(c.y);
    Kernel kernel = makeKernel(SLICE);
    for (size_t d = 0; d < c.x.size(); ++d) {
      kernel.mutable_slice()->add_starts(c.starts[d]);
      kernel.mutable_slice()->add_steps(c.steps[d]);
    }
    run(kernel, {&x}, y);
    std::vector<float> expected;
    forEachIndex(c.y, [&](const std::vector<int64_t> &index) {
      std::vector<int64_t> at(index.size());
      for (size_t d = 0; d < at.size(); ++d)
        at[d] = c.starts[d] + index[d] * c.steps[d];
      expected.push_back(x.values[broadcastIndex(c.x, c.x, at)]);
    });
    expectNear(y.values, expected, 0.0f);
  }
}

TEST_F(CpuKernelsTest, ExpandMatchesNaive) {
  const std::pair<Shape, Shape> cases[] = {
      {{3, 1}, {2, 3, 4}}, {{}, {2, 2}}, {{1}, {5}}, {{2, 3}, {2, 3}}, {{1, 4}, {0, 4}}};
  for (const auto &[from, to] : cases) {
    SCOPED_TRACE(formatShape(from) + " -> " + formatShape(to));
    BoolTensor x = BoolTensor::random(rng, from);
    BoolTensor y = BoolTensor::empty(to);
    run(makeKernel(EXPAND), {&x}, y);
    std::vector<uint8_t> expected;
    forEachIndex(to, [&](const std::vector<int64_t> &index) {
      expected.push_back(x.values[broadcastIndex(from, to, index)]);
    });
    EXPECT_EQ(y.values, expected);
  }
}

TEST_F(CpuKernelsTest, TriluMatchesNaive) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (bool upper : {false, true})
    for (int64_t k : std::initializer_list<int64_t>{-kMax, -5, -1, 0, 1, 2, 100, kMax}) {
      SCOPED_TRACE((upper ? "upper k " : "lower k ") + std::to_string(k));
      Kernel kernel = makeKernel(TRILU);
      kernel.mutable_trilu()->set_upper(upper);
      kernel.mutable_trilu()->set_k(k);
      Tensor x = Tensor::random(rng, {2, 3, 4});
      std::vector<float> expected;
      forEachIndex(x.shape, [&](const std::vector<int64_t> &index) {
        // Compared in long double so that k near the int64 limits cannot overflow.
        long double diagonal = static_cast<long double>(index[2]) - index[1];
        bool keep = upper ? diagonal >= k : diagonal <= k;
        expected.push_back(keep ? x.values[broadcastIndex(x.shape, x.shape, index)] : 0.0f);
      });
      Tensor y = Tensor::empty(x.shape);
      run(kernel, {&x}, y);
      expectNear(y.values, expected, 0.0f);
      run(kernel, {&x}, x); // in place
      expectNear(x.values, expected, 0.0f);
    }
}

TEST_F(CpuKernelsTest, LayerNormMatchesNaive) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale, bias; // bias {} with hasBias false: none
    bool hasBias;
  };
  const Case cases[] = {
      {{2, 3, 8}, 2, {8}, {8}, true},
      {{2, 3, 4}, 1, {1, 4}, {}, false},
      {{2, 3, 4}, 1, {3, 4}, {4}, true},
      {{5, 6}, 0, {6}, {5, 6}, true},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(formatShape(c.x) + " axis " + std::to_string(c.axis));
    Tensor x = Tensor::random(rng, c.x);
    for (float &v : x.values)
      v = 100.0f + 2.0f * v; // a large mean: a one-pass variance would lose digits
    Tensor scale = Tensor::random(rng, c.scale), bias = Tensor::random(rng, c.bias);
    Kernel kernel = makeKernel(LAYER_NORM);
    kernel.mutable_norm()->set_axis(c.axis);
    kernel.mutable_norm()->set_epsilon(1e-5f);
    Tensor y = Tensor::empty(c.x);
    std::vector<const TensorBase *> operands{&x, &scale};
    if (c.hasBias)
      operands.push_back(&bias);
    run(kernel, operands, y);

    Shape normalized(c.x.begin() + c.axis, c.x.end());
    int64_t n = numel(normalized).value();
    std::vector<float> expected;
    for (size_t row = 0; row < x.values.size() / n; ++row) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < n; ++j)
        mean += x.values[row * n + j] / double(n);
      for (int64_t j = 0; j < n; ++j)
        var += (x.values[row * n + j] - mean) * (x.values[row * n + j] - mean) / n;
      int64_t j = 0;
      forEachIndex(normalized, [&](const std::vector<int64_t> &index) {
        double v = (x.values[row * n + j] - mean) / std::sqrt(var + 1e-5) *
                   scale.values[broadcastIndex(c.scale, normalized, index)];
        if (c.hasBias)
          v += bias.values[broadcastIndex(c.bias, normalized, index)];
        expected.push_back(static_cast<float>(v));
        ++j;
      });
    }
    expectNear(y.values, expected, 1e-4f);
  }
}

TEST_F(CpuKernelsTest, RmsNormMatchesNaive) {
  Tensor x = Tensor::random(rng, {2, 3, 16}), scale = Tensor::random(rng, {16});
  Kernel kernel = makeKernel(RMS_NORM);
  kernel.mutable_norm()->set_axis(2);
  kernel.mutable_norm()->set_epsilon(1e-6f);
  std::vector<float> expected;
  for (size_t row = 0; row < 6; ++row) {
    double squares = 0;
    for (size_t j = 0; j < 16; ++j)
      squares += double(x.values[row * 16 + j]) * x.values[row * 16 + j];
    for (size_t j = 0; j < 16; ++j)
      expected.push_back(static_cast<float>(x.values[row * 16 + j] /
                                            std::sqrt(squares / 16 + 1e-6) * scale.values[j]));
  }
  run(kernel, {&x, &scale}, x); // in place
  expectNear(x.values, expected);
}

TEST_F(CpuKernelsTest, RotaryMatchesNaiveBothLayouts) {
  const Shape xShape{2, 3, 5, 8};
  for (bool interleaved : {false, true})
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(std::string(interleaved ? "interleaved" : "rotate-half") +
                   (inPlace ? " in place" : ""));
      Tensor x = Tensor::random(rng, xShape);
      Tensor cos = Tensor::random(rng, {5, 8}), sin = Tensor::random(rng, {1, 1, 5, 8});
      std::vector<float> expected;
      forEachIndex(xShape, [&](const std::vector<int64_t> &index) {
        int64_t c = index[3];
        std::vector<int64_t> partner = index;
        double rotated;
        if (interleaved) {
          partner[3] = c % 2 == 0 ? c + 1 : c - 1;
          rotated = (c % 2 == 0 ? -1.0 : 1.0) * x.values[broadcastIndex(xShape, xShape, partner)];
        } else {
          partner[3] = c < 4 ? c + 4 : c - 4;
          rotated = (c < 4 ? -1.0 : 1.0) * x.values[broadcastIndex(xShape, xShape, partner)];
        }
        expected.push_back(
            static_cast<float>(x.values[broadcastIndex(xShape, xShape, index)] *
                                   cos.values[broadcastIndex(cos.shape, xShape, index)] +
                               rotated * sin.values[broadcastIndex(sin.shape, xShape, index)]));
      });
      Kernel kernel = makeKernel(ROTARY);
      kernel.mutable_rotary()->set_interleaved(interleaved);
      Tensor y = Tensor::empty(xShape);
      Tensor &result = inPlace ? x : y;
      run(kernel, {&x, &cos, &sin}, result);
      expectNear(result.values, expected);
    }
}

struct AttentionCase {
  const char *name;
  int64_t b, hq, hkv, s, t, d, dv;
  bool causal;
  Shape mask;            // empty: no mask
  bool maskRows = false; // put -inf in the mask, fully masking some rows
};

// softmax(q k^T * scale + mask) v over the keys the causal rule allows, in double, with a query row
// that may attend to nothing giving zeros.
std::vector<float> naiveAttention(const AttentionCase &c, const Tensor &q, const Tensor &k,
                                  const Tensor &v, const Tensor *mask, float scale) {
  std::vector<float> y;
  Shape scores{c.b, c.hq, c.s, c.t};
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.s; ++i) {
        int64_t kv = h / (c.hq / c.hkv);
        std::vector<double> p(c.t, -INFINITY);
        double max = -INFINITY;
        for (int64_t j = 0; j < c.t; ++j) {
          if (c.causal && j > i + c.t - c.s)
            continue;
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += double(q.values[((b * c.hq + h) * c.s + i) * c.d + e]) *
                   k.values[((b * c.hkv + kv) * c.t + j) * c.d + e];
          p[j] = dot * scale +
                 (mask ? mask->values[broadcastIndex(mask->shape, scores, {b, h, i, j})] : 0.0);
          max = std::max(max, p[j]);
        }
        double sum = 0;
        for (double &e : p)
          sum += (e = max == -INFINITY ? 0 : std::exp(e - max));
        for (int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < c.t; ++j)
            acc += p[j] * v.values[((b * c.hkv + kv) * c.t + j) * c.dv + e];
          y.push_back(static_cast<float>(max == -INFINITY ? 0.0 : acc / sum));
        }
      }
  return y;
}

TEST_F(CpuKernelsTest, AttentionMatchesNaive) {
  const AttentionCase cases[] = {
      {"GqaCausalMask", 2, 4, 2, 3, 5, 8, 6, true, {3, 5}},
      {"MhaCausal", 1, 2, 2, 4, 4, 4, 4, true, {}},
      {"DecodeOneQuery", 2, 4, 1, 1, 7, 8, 8, true, {2, 1, 1, 7}},
      {"MoreQueriesThanKeys", 1, 2, 1, 5, 3, 4, 4, true, {}}, // rows 0 and 1 see no key
      {"MaskedRows", 2, 2, 1, 3, 4, 4, 2, false, {2, 1, 3, 4}, true},
      {"NoKeys", 1, 1, 1, 2, 0, 4, 3, false, {}},
  };
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(c.name);
    Tensor q = Tensor::random(rng, {c.b, c.hq, c.s, c.d});
    Tensor k = Tensor::random(rng, {c.b, c.hkv, c.t, c.d});
    Tensor v = Tensor::random(rng, {c.b, c.hkv, c.t, c.dv});
    Tensor mask = Tensor::random(rng, c.mask);
    if (c.maskRows) {
      // Every key of query row 1 masked, and some of row 2.
      forEachIndex(c.mask, [&](const std::vector<int64_t> &index) {
        if (index[2] == 1 || (index[2] == 2 && index[3] % 2 == 0))
          mask.values[broadcastIndex(c.mask, c.mask, index)] = -INFINITY;
      });
    }
    float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    Kernel kernel = makeKernel(ATTENTION);
    kernel.mutable_attention()->set_causal(c.causal);
    kernel.mutable_attention()->set_scale(scale);
    Tensor y = Tensor::empty({c.b, c.hq, c.s, c.dv});
    std::vector<const TensorBase *> operands{&q, &k, &v};
    if (!c.mask.empty())
      operands.push_back(&mask);
    run(kernel, operands, y);
    expectNear(y.values, naiveAttention(c, q, k, v, c.mask.empty() ? nullptr : &mask, scale));
  }
}

// The same kernel on the same large inputs with 1 and with 3 threads gives identical bits: no
// floating-point sum is split across threads in an order the scheduler picks.
TEST_F(CpuKernelsTest, ResultsDoNotDependOnThreadCount) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP: every kernel runs on one thread";
#else
  struct Work {
    Kernel kernel;
    std::vector<Shape> operands;
    Shape result;
  };
  Kernel attention = makeKernel(ATTENTION);
  attention.mutable_attention()->set_causal(true);
  attention.mutable_attention()->set_scale(0.125f);
  Kernel layerNorm = makeKernel(LAYER_NORM);
  layerNorm.mutable_norm()->set_axis(1);
  layerNorm.mutable_norm()->set_epsilon(1e-5f);
  const Work work[] = {
      {reduceKernel(REDUCE_SUM, {}, false), {{300000}}, {}},
      {reduceKernel(REDUCE_MEAN, {0}, false), {{2000, 64}}, {64}},
      {axisKernel(SOFTMAX, 1), {{64, 1024}}, {64, 1024}},
      {attention, {{1, 4, 64, 32}, {1, 2, 64, 32}, {1, 2, 64, 32}}, {1, 4, 64, 32}},
      {layerNorm, {{256, 512}, {512}, {512}}, {256, 512}},
      {makeKernel(ADD), {{512, 512}, {512}}, {512, 512}},
  };
  int threads = omp_get_max_threads();
  for (const Work &w : work) {
    SCOPED_TRACE(OpKind_Name(w.kernel.op()));
    std::vector<std::unique_ptr<Tensor>> operands;
    std::vector<const TensorBase *> pointers;
    for (const Shape &shape : w.operands) {
      operands.push_back(std::make_unique<Tensor>(shape, randomFloats(rng, numel(shape).value())));
      pointers.push_back(operands.back().get());
    }
    Tensor one = Tensor::empty(w.result), three = Tensor::empty(w.result);
    omp_set_num_threads(1);
    run(w.kernel, pointers, one);
    omp_set_num_threads(3);
    run(w.kernel, pointers, three);
    omp_set_num_threads(threads);
    ASSERT_EQ(std::memcmp(one.values.data(), three.values.data(), one.values.size() * 4), 0);
  }
#endif
}


Kernel crossEntropyKernel(int64_t ignoreIndex) {
  Kernel k = makeKernel(CROSS_ENTROPY);
  k.mutable_cross_entropy()->set_ignore_index(ignoreIndex);
  return k;
}

TEST_F(CpuKernelsTest, CrossEntropyMatchesNaiveAndSkipsIgnoredLabels) {
  Tensor logits = Tensor::random(rng, {2, 3, 7});
  logits.values[0] = 80.0f; // large logits stay finite: the row max is subtracted
  I64Tensor labels({2, 3}, {0, 6, -100, 3, 1, 5});
  Tensor loss = Tensor::empty({});
  run(crossEntropyKernel(-100), {&logits, &labels}, loss);
  double total = 0;
  int counted = 0;
  for (int r = 0; r < 6; ++r) {
    if (labels.values[r] == -100)
      continue;
    double max = -INFINITY, sum = 0;
    for (int v = 0; v < 7; ++v)
      max = std::max(max, double(logits.values[r * 7 + v]));
    for (int v = 0; v < 7; ++v)
      sum += std::exp(double(logits.values[r * 7 + v]) - max);
    total += max + std::log(sum) - logits.values[r * 7 + labels.values[r]];
    ++counted;
  }
  expectNear(loss.values, {float(total / counted)});

  I64Tensor ignored({2, 3}, std::vector<int64_t>(6, -1));
  run(crossEntropyKernel(-1), {&logits, &ignored}, loss);
  EXPECT_TRUE(std::isnan(loss.values[0])); // as PyTorch: nothing to average
}

TEST_F(CpuKernelsTest, CrossEntropyLabelOutsideVocabularyIsAnError) {
  Tensor logits = Tensor::random(rng, {4, 5});
  I64Tensor labels({4}, {0, 1, 5, 2});
  Tensor loss = Tensor::empty({});
  EXPECT_THAT(runError(crossEntropyKernel(-100), {&logits, &labels}, loss),
              ::testing::HasSubstr("label 5 at position 2 is outside the vocabulary [0, 5)"));
  EXPECT_TRUE(std::isnan(loss.values[0])); // nothing written
}

} // namespace
} // namespace slrt::test
