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

// `t` with its last two dimensions swapped, stored row-major: what a MATMUL transpose flag reads.
Tensor swappedLastTwo(const Tensor &t) {
  Shape shape = t.shape;
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  std::swap(shape[shape.size() - 2], shape.back());
  std::vector<float> values(t.values.size());
  if (rows * cols == 0) // an empty matrix: nothing to move (and no count of matrices to divide)
    return Tensor(shape, std::move(values));
  for (size_t matrix = 0; matrix < values.size() / size_t(rows * cols); ++matrix)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        values[matrix * rows * cols + j * rows + i] = t.values[matrix * rows * cols + i * cols + j];
  return Tensor(shape, std::move(values));
}

TEST_F(CpuKernelsTest, MatmulTransposeFlagsMatchNaiveInAllFourCombinations) {
  // Shapes of op(A) and op(B), as multiplied.
  const MatmulCase cases[] = {
      {{3, 4}, {4, 5}},           // plain
      {{2, 3, 4}, {4, 5}},        // shared weight: the folded GEMM (or per batch when transA)
      {{70, 90}, {90, 50}},       // several row blocks of the blocked GEMM
      {{2, 1, 3, 4}, {3, 4, 5}},  // batch broadcast both ways
      {{1, 3, 4}, {2, 4, 5}},     // A broadcast across B's batch
      {{2, 3, 3, 4}, {2, 3, 4, 2}}, // equal batches
      {{3, 0}, {0, 2}},           // empty sum: zeros
  };
  for (const MatmulCase &c : cases)
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        SCOPED_TRACE(::testing::Message() << formatShape(c.a) << " @ " << formatShape(c.b)
                                          << " transA " << transA << " transB " << transB);
        Tensor a = Tensor::random(rng, c.a), b = Tensor::random(rng, c.b);
        Tensor aStored = transA ? swappedLastTwo(a) : Tensor(a.shape, a.values);
        Tensor bStored = transB ? swappedLastTwo(b) : Tensor(b.shape, b.values);
        Shape yShape = matmulShape(aStored.shape, bStored.shape, transA, transB).value();
        ASSERT_EQ(yShape, matmulShape(c.a, c.b).value());
        Tensor y = Tensor::empty(yShape);
        Kernel kernel = makeKernel(MATMUL);
        kernel.mutable_matmul()->set_trans_a(transA);
        kernel.mutable_matmul()->set_trans_b(transB);
        run(kernel, {&aStored, &bStored}, y);
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
  for (OpKind op : {SQRT, RECIPROCAL, NEG, EXP, ERF, TANH, COS, SIN, GELU}) {
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
                                              : op == COS        ? std::cos(v)
                                              : op == SIN        ? std::sin(v)
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

// Large enough to be split across threads and vectorised; exactly one fp32 addition per element,
// a + b in that order, into a fresh result or in place over a.
TEST_F(CpuKernelsTest, AccumulateIsExactElementwiseAddition) {
  Tensor a = Tensor::random(rng, {3, 40000}), b = Tensor::random(rng, {3, 40000});
  b.values[7] = -a.values[7];
  std::vector<float> expected(a.values.size());
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] = a.values[i] + b.values[i];
  Tensor y = Tensor::empty({3, 40000});
  run(makeKernel(ACCUMULATE), {&a, &b}, y);
  EXPECT_EQ(y.values, expected);
  run(makeKernel(ACCUMULATE), {&a, &b}, a);
  EXPECT_EQ(a.values, expected);
  EXPECT_EQ(a.values[7], 0.0f);
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

// CUMSUM along every axis, each way, against a naive running sum; i64 wraps.
TEST_F(CpuKernelsTest, CumSumMatchesNaive) {
  const Shape shape = {2, 3, 4};
  for (int64_t axis = 0; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        SCOPED_TRACE("axis " + std::to_string(axis) + (exclusive ? " exclusive" : "") +
                     (reverse ? " reverse" : ""));
        Kernel kernel = makeKernel(CUMSUM);
        kernel.mutable_cumsum()->set_axis(axis);
        kernel.mutable_cumsum()->set_exclusive(exclusive);
        kernel.mutable_cumsum()->set_reverse(reverse);
        Tensor x = Tensor::random(rng, shape);
        I64Tensor xi = I64Tensor::random(rng, shape);
        std::vector<float> expected;
        std::vector<int64_t> expectedInts;
        forEachIndex(shape, [&](const std::vector<int64_t> &index) {
          double sum = 0;
          int64_t intSum = 0;
          for (int64_t j = 0; j < shape[static_cast<size_t>(axis)]; ++j) {
            int64_t i = index[static_cast<size_t>(axis)];
            if (reverse ? (exclusive ? j <= i : j < i) : (exclusive ? j >= i : j > i))
              continue;
            std::vector<int64_t> at = index;
            at[static_cast<size_t>(axis)] = j;
            sum += x.values[static_cast<size_t>(broadcastIndex(shape, shape, at))];
            intSum += xi.values[static_cast<size_t>(broadcastIndex(shape, shape, at))];
          }
          expected.push_back(static_cast<float>(sum));
          expectedInts.push_back(intSum);
        });
        Tensor y = Tensor::empty(shape);
        run(kernel, {&x}, y);
        expectNear(y.values, expected);
        I64Tensor yi = I64Tensor::empty(shape);
        run(kernel, {&xi}, yi);
        EXPECT_EQ(yi.values, expectedInts);
      }
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  Kernel kernel = makeKernel(CUMSUM);
  kernel.mutable_cumsum()->set_axis(0);
  I64Tensor big({2}, {kMax, 1});
  I64Tensor wrapped = I64Tensor::empty({2});
  run(kernel, {&big}, wrapped);
  EXPECT_EQ(wrapped.values, (std::vector<int64_t>{kMax, std::numeric_limits<int64_t>::min()}));
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
  bool alibi = false;    // ALiBi slopes [hq] as the last operand
};

// softmax(q k^T * scale + mask + slope[h] * j) v over the keys the causal rule allows, in double,
// with a query row that may attend to nothing giving zeros. ALiBi as BLOOM writes it: the slope
// times the key's absolute position (the kernels use its offset from the query, the same softmax).
std::vector<float> naiveAttention(const AttentionCase &c, const Tensor &q, const Tensor &k,
                                  const Tensor &v, const Tensor *mask, float scale,
                                  const Tensor *slopes = nullptr) {
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
                 (mask ? mask->values[broadcastIndex(mask->shape, scores, {b, h, i, j})] : 0.0) +
                 (slopes ? double(slopes->values[h]) * double(j) : 0.0);
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
      {"AlibiGqaCausal", 2, 4, 2, 5, 5, 8, 6, true, {}, false, true},
      {"AlibiFewerQueriesMask", 2, 4, 1, 3, 6, 4, 4, true, {3, 6}, false, true},
      {"AlibiNotCausalMaskedRows", 2, 2, 1, 3, 4, 4, 2, false, {2, 1, 3, 4}, true, true},
      // Several query blocks of the GEMM tiles (64 rows), a partial last one, and the causal
      // prefix of the keys that each block sees.
      {"LongGqaCausal", 2, 4, 2, 150, 150, 16, 8, true, {}},
      {"LongPastCausalMask", 1, 2, 1, 70, 100, 8, 8, true, {70, 100}},
      {"LongAlibiNotCausal", 1, 2, 1, 70, 90, 8, 8, false, {}, false, true},
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
    // Slopes of either sign, one per query head.
    Tensor slopes = Tensor::random(rng, c.alibi ? Shape{c.hq} : Shape{});
    Kernel kernel = makeKernel(ATTENTION);
    kernel.mutable_attention()->set_causal(c.causal);
    kernel.mutable_attention()->set_scale(scale);
    kernel.mutable_attention()->set_alibi(c.alibi);
    Tensor y = Tensor::empty({c.b, c.hq, c.s, c.dv});
    std::vector<const TensorBase *> operands{&q, &k, &v};
    if (!c.mask.empty())
      operands.push_back(&mask);
    if (c.alibi)
      operands.push_back(&slopes);
    run(kernel, operands, y);
    expectNear(y.values, naiveAttention(c, q, k, v, c.mask.empty() ? nullptr : &mask, scale,
                                        c.alibi ? &slopes : nullptr));
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
      {attention, {{2, 4, 150, 32}, {2, 2, 150, 32}, {2, 2, 150, 32}}, {2, 4, 150, 32}},
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

// --- backward kernels ---------------------------------------------------------------------------
// Each gradient kernel is checked against central differences of its forward, written here again
// in double: with random weights w (the incoming gradient dy) and L = sum(w * forward(inputs)),
// the kernel's gradient for input x must match (L(x + h e_i) - L(x - h e_i)) / 2h at every element
// i. Where the gradient has a simple closed form it is also checked against that.

using Values = std::vector<double>;

Values toDouble(const std::vector<float> &v) { return Values(v.begin(), v.end()); }

// dL/d(inputs[which]) by central differences, L = sum(w * f(inputs)).
template <typename F>
Values numericGradient(F f, std::vector<Values> inputs, size_t which, const Values &w) {
  constexpr double kStep = 1e-5;
  auto loss = [&] {
    Values y = f(inputs);
    EXPECT_EQ(y.size(), w.size());
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i)
      sum += w[i] * y[i];
    return sum;
  };
  Values &x = inputs[which];
  Values gradient(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double saved = x[i];
    x[i] = saved + kStep;
    double plus = loss();
    x[i] = saved - kStep;
    double minus = loss();
    x[i] = saved;
    gradient[i] = (plus - minus) / (2 * kStep);
  }
  return gradient;
}

// The largest elementwise relative error of `analytic` against `numeric`, each element measured
// against its own magnitude but no less than 1% of the tensor's largest, so that elements that are
// 0 up to rounding are compared in absolute terms.
double maxRelativeError(const std::vector<float> &analytic, const Values &numeric) {
  double largest = 0;
  for (double n : numeric)
    largest = std::max(largest, std::fabs(n));
  double floor = std::max(1e-2 * largest, 1e-12);
  double worst = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    if (!std::isfinite(analytic[i]))
      return INFINITY;
    worst = std::max(worst,
                     std::fabs(analytic[i] - numeric[i]) / std::max(std::fabs(numeric[i]), floor));
  }
  return worst;
}

// Checks one gradient against finite differences; the error is recorded as a test property
// (--gtest_output=json lists them).
void expectGradient(const std::string &what, const std::vector<float> &analytic,
                    const Values &numeric, double tolerance = 1e-3) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double error = maxRelativeError(analytic, numeric);
  ::testing::Test::RecordProperty(what, ::testing::PrintToString(error));
  EXPECT_LE(error, tolerance) << what;
}

Values weightsFor(std::mt19937 &rng, const Shape &shape) {
  return toDouble(randomFloats(rng, numel(shape).value()));
}

class CpuGradientTest : public CpuKernelsTest {
protected:
  void runAll(const Kernel &kernel, std::vector<const TensorBase *> operands,
              std::vector<TensorBase *> results) {
    std::vector<const TensorRef *> in, out;
    for (const TensorBase *t : operands)
      in.push_back(&t->ref);
    for (TensorBase *t : results)
      out.push_back(&t->ref);
    backend->execute(kernel, in, out);
  }

  std::string runAllError(const Kernel &kernel, std::vector<const TensorBase *> operands,
                          std::vector<TensorBase *> results) {
    try {
      runAll(kernel, std::move(operands), std::move(results));
    } catch (const Error &e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an slrt::Error";
    return "";
  }
};

// --- CROSS_ENTROPY_GRAD

Values crossEntropyForward(const Values &logits, const std::vector<int64_t> &labels, int64_t vocab,
                           int64_t ignore) {
  double total = 0;
  int64_t counted = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    if (labels[r] == ignore)
      continue;
    double max = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      max = std::max(max, logits[r * vocab + v]);
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(logits[r * vocab + v] - max);
    total += max + std::log(sum) - logits[r * vocab + labels[r]];
    ++counted;
  }
  return {total / counted};
}

TEST_F(CpuGradientTest, CrossEntropyGradMatchesFiniteDifferences) {
  const int64_t vocab = 7;
  Tensor logits = Tensor::random(rng, {2, 3, vocab});
  for (float &v : logits.values)
    v *= 3.0f;
  logits.values[0] = 40.0f; // a dominant logit: the row max is subtracted
  I64Tensor labels({2, 3}, {0, 6, -100, 3, -100, 5});
  Tensor dloss({}, {2.5f});
  Tensor dlogits = Tensor::empty(logits.shape);
  Kernel kernel = crossEntropyKernel(-100);
  kernel.set_op(CROSS_ENTROPY_GRAD);
  runAll(kernel, {&labels, &dloss, &logits}, {&dlogits});

  Values numeric = numericGradient(
      [&](const std::vector<Values> &in) {
        return crossEntropyForward(in[0], labels.values, vocab, -100);
      },
      {toDouble(logits.values)}, 0, {2.5});
  expectGradient("CROSS_ENTROPY_GRAD dlogits", dlogits.values, numeric);

  // Closed form: (softmax - onehot) * dloss / count, zeros on ignored rows.
  std::vector<float> expected;
  for (int64_t r = 0; r < 6; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      max = std::max(max, double(logits.values[r * vocab + v]));
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(logits.values[r * vocab + v] - max);
    for (int64_t v = 0; v < vocab; ++v) {
      double p = std::exp(logits.values[r * vocab + v] - max) / sum;
      bool ignored = labels.values[r] == -100;
      expected.push_back(ignored ? 0.0f
                                 : static_cast<float>((p - (v == labels.values[r])) * 2.5 / 4));
    }
  }
  expectNear(dlogits.values, expected);

  // In place on the logits.
  runAll(kernel, {&labels, &dloss, &logits}, {&logits});
  EXPECT_EQ(logits.values, dlogits.values);
}

TEST_F(CpuGradientTest, CrossEntropyGradAllIgnoredIsZeroAndBadLabelIsAnError) {
  Tensor logits = Tensor::random(rng, {3, 5});
  Tensor dloss({}, {1.0f});
  Tensor dlogits = Tensor::empty({3, 5});
  Kernel kernel = crossEntropyKernel(-1);
  kernel.set_op(CROSS_ENTROPY_GRAD);
  I64Tensor ignored({3}, {-1, -1, -1});
  runAll(kernel, {&ignored, &dloss, &logits}, {&dlogits});
  EXPECT_EQ(dlogits.values, std::vector<float>(15, 0.0f)); // zeros, not NaN

  I64Tensor bad({3}, {0, 5, -1});
  Tensor untouched = Tensor::empty({3, 5});
  EXPECT_THAT(runAllError(kernel, {&bad, &dloss, &logits}, {&untouched}),
              ::testing::HasSubstr("label 5 at position 1 is outside the vocabulary [0, 5)"));
  for (float v : untouched.values)
    EXPECT_TRUE(std::isnan(v)); // nothing written
}

// --- SOFTMAX_GRAD

Values softmaxForward(const Values &x, const Shape &shape, int64_t axis) {
  Values y(x.size());
  forEachIndex(shape, [&](const std::vector<int64_t> &index) {
    if (index[axis] != 0)
      return;
    std::vector<int64_t> at = index;
    double max = -INFINITY, sum = 0;
    for (at[axis] = 0; at[axis] < shape[axis]; ++at[axis])
      max = std::max(max, x[broadcastIndex(shape, shape, at)]);
    for (at[axis] = 0; at[axis] < shape[axis]; ++at[axis])
      sum += std::exp(x[broadcastIndex(shape, shape, at)] - max);
    for (at[axis] = 0; at[axis] < shape[axis]; ++at[axis]) {
      int64_t i = broadcastIndex(shape, shape, at);
      y[i] = std::exp(x[i] - max) / sum;
    }
  });
  return y;
}

TEST_F(CpuGradientTest, SoftmaxGradMatchesFiniteDifferencesOnMiddleAndLastAxes) {
  const Shape shape{2, 3, 4};
  for (int64_t axis : {1, 2}) {
    SCOPED_TRACE(axis);
    Tensor x = Tensor::random(rng, shape);
    for (float &v : x.values)
      v *= 4.0f;
    Values y = softmaxForward(toDouble(x.values), shape, axis);
    Tensor yT(shape, std::vector<float>(y.begin(), y.end()));
    Tensor dy = Tensor::random(rng, shape);
    Tensor dx = Tensor::empty(shape);
    runAll(axisKernel(SOFTMAX_GRAD, axis), {&yT, &dy}, {&dx});

    Values numeric = numericGradient(
        [&](const std::vector<Values> &in) { return softmaxForward(in[0], shape, axis); },
        {toDouble(x.values)}, 0, toDouble(dy.values));
    expectGradient("SOFTMAX_GRAD axis " + std::to_string(axis) + " dx", dx.values, numeric);

    // Closed form: y * (dy - sum(dy * y)) along the axis.
    std::vector<float> expected(dx.values.size());
    forEachIndex(shape, [&](const std::vector<int64_t> &index) {
      std::vector<int64_t> at = index;
      double dot = 0;
      for (at[axis] = 0; at[axis] < shape[axis]; ++at[axis]) {
        int64_t j = broadcastIndex(shape, shape, at);
        dot += double(dy.values[j]) * yT.values[j];
      }
      int64_t i = broadcastIndex(shape, shape, index);
      expected[i] = static_cast<float>(yT.values[i] * (dy.values[i] - dot));
    });
    expectNear(dx.values, expected);

    runAll(axisKernel(SOFTMAX_GRAD, axis), {&yT, &dy}, {&dy}); // in place on dy
    EXPECT_EQ(dy.values, dx.values);
  }
}

TEST_F(CpuGradientTest, SoftmaxGradOfMaskedRowIsZero) {
  // The forward of a fully -inf row is zeros, and so is its gradient.
  Tensor y({2, 3}, {0, 0, 0, 0.2f, 0.3f, 0.5f});
  Tensor dy({2, 3}, {5, -3, 7, 1, 2, 3});
  Tensor dx = Tensor::empty({2, 3});
  runAll(axisKernel(SOFTMAX_GRAD, 1), {&y, &dy}, {&dx});
  double dot = 0.2 * 1 + 0.3 * 2 + 0.5 * 3;
  expectNear(dx.values,
             {0, 0, 0, float(0.2 * (1 - dot)), float(0.3 * (2 - dot)), float(0.5 * (3 - dot))});
}

// --- RMS_NORM_GRAD, LAYER_NORM_GRAD

Values rmsNormForward(const Values &x, const Values &scale, double epsilon) {
  size_t n = scale.size();
  Values y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double squares = 0;
    for (size_t j = 0; j < n; ++j)
      squares += x[r * n + j] * x[r * n + j];
    double rstd = 1 / std::sqrt(squares / n + epsilon);
    for (size_t j = 0; j < n; ++j)
      y[r * n + j] = x[r * n + j] * rstd * scale[j];
  }
  return y;
}

TEST_F(CpuGradientTest, RmsNormGradMatchesFiniteDifferences) {
  const Shape shape{3, 5, 8};
  const double epsilon = 1e-6;
  Tensor x = Tensor::random(rng, shape), scale = Tensor::random(rng, {8});
  Tensor dy = Tensor::random(rng, shape);
  Kernel kernel = makeKernel(RMS_NORM_GRAD);
  kernel.mutable_norm()->set_axis(2);
  kernel.mutable_norm()->set_epsilon(float(epsilon));
  Tensor dx = Tensor::empty(shape), dscale = Tensor::empty({8});
  runAll(kernel, {&x, &scale, &dy}, {&dx, &dscale});

  auto forward = [&](const std::vector<Values> &in) {
    return rmsNormForward(in[0], in[1], float(epsilon));
  };
  std::vector<Values> inputs{toDouble(x.values), toDouble(scale.values)};
  Values w = toDouble(dy.values);
  expectGradient("RMS_NORM_GRAD dx", dx.values, numericGradient(forward, inputs, 0, w));
  expectGradient("RMS_NORM_GRAD dscale", dscale.values, numericGradient(forward, inputs, 1, w));

  Tensor dscale2 = Tensor::empty({8});
  runAll(kernel, {&x, &scale, &dy}, {&dy, &dscale2}); // dx in place on dy
  EXPECT_EQ(dy.values, dx.values);
  EXPECT_EQ(dscale2.values, dscale.values);
}

// y = (x - mean) / sqrt(var + epsilon) * scale + bias over rows of n, scale and bias dense [n].
Values layerNormForward(const Values &x, const Values &scale, const Values &bias, double epsilon) {
  size_t n = scale.size();
  Values y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < n; ++j)
      mean += x[r * n + j] / n;
    for (size_t j = 0; j < n; ++j)
      var += (x[r * n + j] - mean) * (x[r * n + j] - mean) / n;
    for (size_t j = 0; j < n; ++j)
      y[r * n + j] = (x[r * n + j] - mean) / std::sqrt(var + epsilon) * scale[j] + bias[j];
  }
  return y;
}

TEST_F(CpuGradientTest, LayerNormGradMatchesFiniteDifferencesWithAndWithoutBias) {
  struct Case {
    const char *name;
    Shape x;
    int64_t axis;
    Shape scale;
    bool bias; // whether the forward had one; dbias is produced either way
  };
  const Case cases[] = {
      {"LastAxisBias", {2, 3, 8}, 2, {8}, true},
      {"LastAxisNoBias", {2, 3, 8}, 2, {8}, false},
      {"TwoAxesBroadcastScale", {2, 3, 4}, 1, {4}, true}, // dscale is [3, 4]
      {"WholeTensor", {5, 6}, 0, {5, 6}, false},
  };
  const double epsilon = 1e-5;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    Shape normalized(c.x.begin() + c.axis, c.x.end());
    int64_t n = numel(normalized).value();
    Tensor x = Tensor::random(rng, c.x);
    for (float &v : x.values)
      v = 10.0f + 2.0f * v; // a mean far from 0
    Tensor scale = Tensor::random(rng, c.scale), dy = Tensor::random(rng, c.x);
    Values bias = c.bias ? weightsFor(rng, normalized) : Values(n, 0.0);
    Kernel kernel = makeKernel(LAYER_NORM_GRAD);
    kernel.mutable_norm()->set_axis(c.axis);
    kernel.mutable_norm()->set_epsilon(float(epsilon));
    Tensor dx = Tensor::empty(c.x), dscale = Tensor::empty(normalized);
    Tensor dbias = Tensor::empty(normalized);
    runAll(kernel, {&x, &scale, &dy}, {&dx, &dscale, &dbias});

    // The scale as the forward sees it, broadcast to the normalised dimensions: dscale is the
    // gradient with respect to that.
    Values denseScale;
    forEachIndex(normalized, [&](const std::vector<int64_t> &index) {
      denseScale.push_back(scale.values[broadcastIndex(c.scale, normalized, index)]);
    });
    auto forward = [&](const std::vector<Values> &in) {
      return layerNormForward(in[0], in[1], in[2], float(epsilon));
    };
    std::vector<Values> inputs{toDouble(x.values), denseScale, bias};
    Values w = toDouble(dy.values);
    std::string name = std::string("LAYER_NORM_GRAD ") + c.name;
    expectGradient(name + " dx", dx.values, numericGradient(forward, inputs, 0, w));
    expectGradient(name + " dscale", dscale.values, numericGradient(forward, inputs, 1, w));
    expectGradient(name + " dbias", dbias.values, numericGradient(forward, inputs, 2, w));

    Tensor dscale2 = Tensor::empty(normalized), dbias2 = Tensor::empty(normalized);
    runAll(kernel, {&x, &scale, &dy}, {&x, &dscale2, &dbias2}); // dx in place on x
    EXPECT_EQ(x.values, dx.values);
    EXPECT_EQ(dscale2.values, dscale.values);
    EXPECT_EQ(dbias2.values, dbias.values);
  }
}

// --- ROTARY_GRAD

Values rotaryForward(const Values &x, const Shape &shape, const Tensor &cos, const Tensor &sin,
                     bool interleaved) {
  Values y;
  int64_t half = shape.back() / 2;
  forEachIndex(shape, [&](const std::vector<int64_t> &index) {
    int64_t c = index.back();
    std::vector<int64_t> partner = index;
    double sign;
    if (interleaved) {
      partner.back() = c % 2 == 0 ? c + 1 : c - 1;
      sign = c % 2 == 0 ? -1.0 : 1.0;
    } else {
      partner.back() = c < half ? c + half : c - half;
      sign = c < half ? -1.0 : 1.0;
    }
    y.push_back(x[broadcastIndex(shape, shape, index)] *
                    cos.values[broadcastIndex(cos.shape, shape, index)] +
                sign * x[broadcastIndex(shape, shape, partner)] *
                    sin.values[broadcastIndex(sin.shape, shape, index)]);
  });
  return y;
}

TEST_F(CpuGradientTest, RotaryGradMatchesFiniteDifferencesBothLayouts) {
  const Shape shape{2, 3, 5, 8};
  for (bool interleaved : {false, true}) {
    SCOPED_TRACE(interleaved ? "interleaved" : "rotate-half");
    // cos and sin as sl-opt emits them: [1, 1, S, D] constants, broadcast over batch and heads.
    Tensor cos = Tensor::random(rng, {1, 1, 5, 8}), sin = Tensor::random(rng, {1, 1, 5, 8});
    Tensor x = Tensor::random(rng, shape), dy = Tensor::random(rng, shape);
    Kernel kernel = makeKernel(ROTARY_GRAD);
    kernel.mutable_rotary()->set_interleaved(interleaved);
    Tensor dx = Tensor::empty(shape);
    runAll(kernel, {&dy, &cos, &sin}, {&dx});
    Values numeric = numericGradient(
        [&](const std::vector<Values> &in) {
          return rotaryForward(in[0], shape, cos, sin, interleaved);
        },
        {toDouble(x.values)}, 0, toDouble(dy.values));
    expectGradient(std::string("ROTARY_GRAD ") + (interleaved ? "interleaved" : "rotate-half") +
                       " dx",
                   dx.values, numeric);
    runAll(kernel, {&dy, &cos, &sin}, {&dy}); // in place
    EXPECT_EQ(dy.values, dx.values);
  }
}

// --- ATTENTION_GRAD

Values attentionForward(const AttentionCase &c, const Values &q, const Values &k, const Values &v,
                        const Tensor *mask, double scale, const Tensor *slopes = nullptr) {
  Values y;
  Shape scores{c.b, c.hq, c.s, c.t};
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t i = 0; i < c.s; ++i) {
        int64_t kv = h / (c.hq / c.hkv);
        Values p(c.t, -INFINITY);
        double max = -INFINITY;
        for (int64_t j = 0; j < c.t; ++j) {
          if (c.causal && j > i + c.t - c.s)
            continue;
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot +=
                q[((b * c.hq + h) * c.s + i) * c.d + e] * k[((b * c.hkv + kv) * c.t + j) * c.d + e];
          p[j] = dot * scale +
                 (mask ? mask->values[broadcastIndex(mask->shape, scores, {b, h, i, j})] : 0.0) +
                 (slopes ? double(slopes->values[h]) * double(j) : 0.0);
          max = std::max(max, p[j]);
        }
        double sum = 0;
        for (double &e : p)
          sum += (e = max == -INFINITY ? 0 : std::exp(e - max));
        for (int64_t e = 0; e < c.dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < c.t; ++j)
            acc += p[j] * v[((b * c.hkv + kv) * c.t + j) * c.dv + e];
          y.push_back(max == -INFINITY ? 0.0 : acc / sum);
        }
      }
  return y;
}

TEST_F(CpuGradientTest, AttentionGradMatchesFiniteDifferences) {
  const AttentionCase cases[] = {
      {"MhaCausal", 1, 2, 2, 4, 4, 4, 4, true, {}},
      {"MhaNoMask", 2, 2, 2, 3, 5, 4, 3, false, {}},
      {"GqaCausalMask", 2, 4, 2, 3, 5, 8, 6, true, {3, 5}},
      {"GqaMaskNotCausal", 1, 4, 1, 4, 6, 4, 4, false, {1, 4, 4, 6}},
      {"DecodeOneQuery", 2, 4, 1, 1, 7, 8, 8, true, {2, 1, 1, 7}},
      {"MoreQueriesThanKeys", 1, 2, 1, 5, 3, 4, 4, true, {}}, // rows 0 and 1 see no key
      {"MaskedRows", 2, 2, 1, 3, 4, 4, 2, false, {2, 1, 3, 4}, true},
      {"AlibiGqaCausal", 2, 4, 2, 5, 5, 8, 6, true, {}, false, true},
      {"AlibiFewerQueriesMask", 1, 4, 1, 3, 6, 4, 4, true, {3, 6}, false, true},
      {"AlibiNotCausal", 1, 2, 2, 3, 4, 4, 3, false, {}, false, true},
      // Two query blocks of the GEMM tiles, each with its causal prefix of the keys.
      {"TwoBlocksCausalPast", 1, 1, 1, 66, 70, 4, 3, true, {}},
  };
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(c.name);
    Tensor q = Tensor::random(rng, {c.b, c.hq, c.s, c.d});
    Tensor k = Tensor::random(rng, {c.b, c.hkv, c.t, c.d});
    Tensor v = Tensor::random(rng, {c.b, c.hkv, c.t, c.dv});
    for (Tensor *t : {&q, &k})
      for (float &e : t->values)
        e *= 2.0f; // peaked enough that the softmax matters
    Tensor dy = Tensor::random(rng, {c.b, c.hq, c.s, c.dv});
    Tensor mask = Tensor::random(rng, c.mask);
    if (c.maskRows) {
      // Every key of query row 1 masked, and some of row 2.
      forEachIndex(c.mask, [&](const std::vector<int64_t> &index) {
        if (index[2] == 1 || (index[2] == 2 && index[3] % 2 == 0))
          mask.values[broadcastIndex(c.mask, c.mask, index)] = -INFINITY;
      });
    }
    float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    // Slopes of either sign, one per query head.
    Tensor slopes = Tensor::random(rng, c.alibi ? Shape{c.hq} : Shape{});
    Kernel kernel = makeKernel(ATTENTION_GRAD);
    kernel.mutable_attention()->set_causal(c.causal);
    kernel.mutable_attention()->set_scale(scale);
    kernel.mutable_attention()->set_alibi(c.alibi);
    Tensor dq = Tensor::empty(q.shape), dk = Tensor::empty(k.shape), dv = Tensor::empty(v.shape);
    std::vector<const TensorBase *> operands{&q, &k, &v, &dy};
    const Tensor *maskOrNull = c.mask.empty() ? nullptr : &mask;
    if (maskOrNull)
      operands.push_back(&mask);
    if (c.alibi)
      operands.push_back(&slopes);
    runAll(kernel, operands, {&dq, &dk, &dv});

    auto forward = [&](const std::vector<Values> &in) {
      return attentionForward(c, in[0], in[1], in[2], maskOrNull, scale,
                              c.alibi ? &slopes : nullptr);
    };
    std::vector<Values> inputs{toDouble(q.values), toDouble(k.values), toDouble(v.values)};
    Values w = toDouble(dy.values);
    std::string name = std::string("ATTENTION_GRAD ") + c.name;
    expectGradient(name + " dq", dq.values, numericGradient(forward, inputs, 0, w));
    expectGradient(name + " dk", dk.values, numericGradient(forward, inputs, 1, w));
    expectGradient(name + " dv", dv.values, numericGradient(forward, inputs, 2, w));
    if (c.maskRows || c.s > c.t) {
      // A query row that sees no key has a zero gradient (and gives none to k and v).
      int64_t blind = c.maskRows ? 1 : 0;
      for (int64_t e = 0; e < c.d; ++e)
        EXPECT_EQ(dq.values[blind * c.d + e], 0.0f);
    }
  }
}

// --- attention.layout BSHD

// x [d0, d1, d2, d3] with dimensions 1 and 2 exchanged: [B, H, S, D] <-> [B, S, H, D].
Tensor swapHeads(const Tensor &x) {
  const Shape &s = x.shape;
  std::vector<float> values(x.values.size());
  for (int64_t a = 0; a < s[0]; ++a)
    for (int64_t b = 0; b < s[1]; ++b)
      for (int64_t c = 0; c < s[2]; ++c)
        for (int64_t e = 0; e < s[3]; ++e)
          values[((a * s[2] + c) * s[1] + b) * s[3] + e] =
              x.values[((a * s[1] + b) * s[2] + c) * s[3] + e];
  return Tensor({s[0], s[2], s[1], s[3]}, std::move(values));
}

// ATTENTION and ATTENTION_GRAD read and write [B, S, H, D] with layout BSHD and compute exactly
// what they compute on the permuted tensors in the default [B, H, S, D]: the same bits, on fresh
// random inputs (grouped-query, causal, with a mask and ALiBi, and more query rows than one
// block of the gradient's GEMMs).
TEST_F(CpuGradientTest, BshdLayoutGivesTheBhsdResults) {
  const AttentionCase cases[] = {
      {"GqaCausal", 2, 4, 2, 5, 5, 8, 6, true, {}},
      {"GqaCausalFewerQueriesMask", 2, 4, 1, 3, 6, 8, 8, true, {3, 6}},
      {"MhaAlibiNotCausal", 1, 2, 2, 3, 4, 4, 3, false, {}, false, true},
      {"GqaCausalLong", 1, 4, 2, 70, 70, 8, 8, true, {}},
  };
  for (const AttentionCase &c : cases) {
    SCOPED_TRACE(c.name);
    Tensor q = Tensor::random(rng, {c.b, c.hq, c.s, c.d});
    Tensor k = Tensor::random(rng, {c.b, c.hkv, c.t, c.d});
    Tensor v = Tensor::random(rng, {c.b, c.hkv, c.t, c.dv});
    Tensor dy = Tensor::random(rng, {c.b, c.hq, c.s, c.dv});
    Tensor mask = Tensor::random(rng, c.mask);
    Tensor slopes = Tensor::random(rng, c.alibi ? Shape{c.hq} : Shape{});
    Tensor qs = swapHeads(q), ks = swapHeads(k), vs = swapHeads(v), dys = swapHeads(dy);
    for (OpKind op : {ATTENTION, ATTENTION_GRAD}) {
      SCOPED_TRACE(op == ATTENTION ? "ATTENTION" : "ATTENTION_GRAD");
      Kernel kernel = makeKernel(op);
      kernel.mutable_attention()->set_causal(c.causal);
      kernel.mutable_attention()->set_scale(1.0f / std::sqrt(static_cast<float>(c.d)));
      kernel.mutable_attention()->set_alibi(c.alibi);
      Kernel bshd = kernel;
      bshd.mutable_attention()->set_layout(sl::schedule::AttentionAttributes::BSHD);
      auto withExtras = [&](std::vector<const TensorBase *> operands) {
        if (!c.mask.empty())
          operands.push_back(&mask);
        if (c.alibi)
          operands.push_back(&slopes);
        return operands;
      };
      if (op == ATTENTION) {
        Tensor y = Tensor::empty({c.b, c.hq, c.s, c.dv}), ys = Tensor::empty({c.b, c.s, c.hq, c.dv});
        run(kernel, withExtras({&q, &k, &v}), y);
        run(bshd, withExtras({&qs, &ks, &vs}), ys);
        EXPECT_EQ(swapHeads(ys).values, y.values);
        continue;
      }
      Tensor dq = Tensor::empty(q.shape), dk = Tensor::empty(k.shape), dv = Tensor::empty(v.shape);
      Tensor dqs = Tensor::empty(qs.shape), dks = Tensor::empty(ks.shape);
      Tensor dvs = Tensor::empty(vs.shape);
      runAll(kernel, withExtras({&q, &k, &v, &dy}), {&dq, &dk, &dv});
      runAll(bshd, withExtras({&qs, &ks, &vs, &dys}), {&dqs, &dks, &dvs});
      EXPECT_EQ(swapHeads(dqs).values, dq.values);
      EXPECT_EQ(swapHeads(dks).values, dk.values);
      EXPECT_EQ(swapHeads(dvs).values, dv.values);
    }
  }
}

// --- GELU_GRAD, SWIGLU_GRAD

double geluForward(double x, bool tanhApproximation) {
  return tanhApproximation
             ? 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))
             : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

TEST_F(CpuGradientTest, GeluGradMatchesFiniteDifferencesBothForms) {
  Tensor x = Tensor::random(rng, {4, 9});
  for (float &v : x.values)
    v *= 4.0f;
  x.values[0] = 0.0f;
  x.values[1] = -12.0f;
  x.values[2] = 12.0f;
  Tensor dy = Tensor::random(rng, x.shape);
  for (bool tanhApproximation : {false, true}) {
    SCOPED_TRACE(tanhApproximation ? "tanh" : "exact");
    Kernel kernel = makeKernel(GELU_GRAD);
    kernel.mutable_gelu()->set_tanh(tanhApproximation);
    Tensor dx = Tensor::empty(x.shape);
    runAll(kernel, {&x, &dy}, {&dx});
    Values numeric = numericGradient(
        [&](const std::vector<Values> &in) {
          Values y;
          for (double v : in[0])
            y.push_back(geluForward(v, tanhApproximation));
          return y;
        },
        {toDouble(x.values)}, 0, toDouble(dy.values));
    expectGradient(std::string("GELU_GRAD ") + (tanhApproximation ? "tanh" : "exact") + " dx",
                   dx.values, numeric);

    // Closed form: exact Phi(x) + x phi(x); tanh form by the chain rule.
    std::vector<float> expected;
    for (size_t i = 0; i < x.values.size(); ++i) {
      double v = x.values[i], derivative;
      if (tanhApproximation) {
        double k = std::sqrt(2 / M_PI), t = std::tanh(k * (v + 0.044715 * v * v * v));
        derivative = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * 0.044715 * v * v);
      } else {
        derivative = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                     v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
      }
      expected.push_back(static_cast<float>(dy.values[i] * derivative));
    }
    expectNear(dx.values, expected);
  }
}

TEST_F(CpuGradientTest, SwigluGradMatchesFiniteDifferences) {
  Tensor gate = Tensor::random(rng, {3, 7}), up = Tensor::random(rng, {3, 7});
  for (float &v : gate.values)
    v *= 5.0f;
  gate.values[0] = -90.0f; // sigmoid underflows: finite gradients
  gate.values[1] = 90.0f;
  Tensor dy = Tensor::random(rng, {3, 7});
  Tensor dgate = Tensor::empty({3, 7}), dup = Tensor::empty({3, 7});
  runAll(makeKernel(SWIGLU_GRAD), {&gate, &up, &dy}, {&dgate, &dup});
  auto forward = [](const std::vector<Values> &in) {
    Values y;
    for (size_t i = 0; i < in[0].size(); ++i)
      y.push_back(in[0][i] / (1 + std::exp(-in[0][i])) * in[1][i]);
    return y;
  };
  std::vector<Values> inputs{toDouble(gate.values), toDouble(up.values)};
  Values w = toDouble(dy.values);
  expectGradient("SWIGLU_GRAD dgate", dgate.values, numericGradient(forward, inputs, 0, w));
  expectGradient("SWIGLU_GRAD dup", dup.values, numericGradient(forward, inputs, 1, w));

  std::vector<float> expectedGate, expectedUp;
  for (size_t i = 0; i < gate.values.size(); ++i) {
    double g = gate.values[i], s = 1 / (1 + std::exp(-g));
    expectedGate.push_back(static_cast<float>(dy.values[i] * up.values[i] * s * (1 + g * (1 - s))));
    expectedUp.push_back(static_cast<float>(dy.values[i] * g * s));
  }
  expectNear(dgate.values, expectedGate);
  expectNear(dup.values, expectedUp);

  Tensor dup2 = Tensor::empty({3, 7});
  runAll(makeKernel(SWIGLU_GRAD), {&gate, &up, &dy}, {&gate, &dup2}); // dgate in place on gate
  EXPECT_EQ(gate.values, dgate.values);
  EXPECT_EQ(dup2.values, dup.values);
}

// --- GATHER_GRAD, SLICE_GRAD

// GATHER of a double table, by the same multi-index walk as naiveGather.
Values gatherForward(const Values &data, const Shape &dataShape, const I64Tensor &indices,
                     int64_t axis, const Shape &yShape) {
  Values y;
  size_t k = indices.shape.size();
  forEachIndex(yShape, [&](const std::vector<int64_t> &index) {
    std::vector<int64_t> at(index.begin(), index.begin() + axis);
    std::vector<int64_t> which(index.begin() + axis, index.begin() + axis + k);
    int64_t row = indices.values[broadcastIndex(indices.shape, indices.shape, which)];
    at.push_back(row < 0 ? row + dataShape[axis] : row);
    at.insert(at.end(), index.begin() + axis + k, index.end());
    y.push_back(data[broadcastIndex(dataShape, dataShape, at)]);
  });
  return y;
}

TEST_F(CpuGradientTest, GatherGradAccumulatesRepeatedAndNegativeIndices) {
  struct Case {
    const char *name;
    Shape data;
    int64_t axis;
    Shape indices;
    std::vector<int64_t> values;
  };
  const Case cases[] = {
      // Embedding rows: 1 three times (once as -4), 4 twice (once as -1), 2 never.
      {"Axis0", {5, 3}, 0, {2, 3}, {1, -1, 1, 4, 0, -4}},
      {"Axis1", {2, 5, 3}, 1, {4}, {0, -1, 2, 0}},
      {"ScalarIndex", {4, 2}, 1, {}, {-1}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    I64Tensor indices(c.indices, c.values);
    Shape yShape(c.data.begin(), c.data.begin() + c.axis);
    yShape.insert(yShape.end(), c.indices.begin(), c.indices.end());
    yShape.insert(yShape.end(), c.data.begin() + c.axis + 1, c.data.end());
    Tensor dy = Tensor::random(rng, yShape);
    Tensor ddata = Tensor::empty(c.data);
    runAll(axisKernel(GATHER_GRAD, c.axis), {&indices, &dy}, {&ddata});

    Values numeric = numericGradient(
        [&](const std::vector<Values> &in) {
          return gatherForward(in[0], c.data, indices, c.axis, yShape);
        },
        {weightsFor(rng, c.data)}, 0, toDouble(dy.values));
    expectGradient(std::string("GATHER_GRAD ") + c.name + " ddata", ddata.values, numeric);

    // Closed form: scatter-add dy into zeros, in index order.
    std::vector<float> expected(ddata.values.size(), 0.0f);
    size_t k = c.indices.size();
    int64_t i = 0;
    forEachIndex(yShape, [&](const std::vector<int64_t> &index) {
      std::vector<int64_t> at(index.begin(), index.begin() + c.axis);
      std::vector<int64_t> which(index.begin() + c.axis, index.begin() + c.axis + k);
      int64_t row = indices.values[broadcastIndex(c.indices, c.indices, which)];
      at.push_back(row < 0 ? row + c.data[c.axis] : row);
      at.insert(at.end(), index.begin() + c.axis + k, index.end());
      expected[broadcastIndex(c.data, c.data, at)] += dy.values[i++];
    });
    expectNear(ddata.values, expected);
  }

  TensorOf<int32_t> i32({3}, {2, -3, 2});
  Tensor dy = Tensor::random(rng, {3, 2});
  Tensor ddata = Tensor::empty({3, 2});
  runAll(axisKernel(GATHER_GRAD, 0), {&i32, &dy}, {&ddata});
  expectNear(ddata.values, {dy.values[2], dy.values[3], 0, 0, dy.values[0] + dy.values[4],
                            dy.values[1] + dy.values[5]});
}

TEST_F(CpuGradientTest, GatherGradIndexOutOfRangeIsAnError) {
  I64Tensor indices({4}, {0, 4, -5, 5});
  Tensor dy = Tensor::random(rng, {4, 2});
  Tensor ddata = Tensor::empty({5, 2});
  EXPECT_THAT(runAllError(axisKernel(GATHER_GRAD, 0), {&indices, &dy}, {&ddata}),
              ::testing::HasSubstr("index 5 (element 3 of the indices [4]) is out of range for "
                                   "axis 0 of the data [5, 2]"));
  for (float v : ddata.values)
    EXPECT_TRUE(std::isnan(v)); // nothing written
}

TEST_F(CpuGradientTest, SliceGradScattersWithNegativeSteps) {
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
      {{4, 5}, {4, 0}, {1, 1}, {0, 5}},  // empty slice: dx is zeros
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(formatShape(c.x) + " starts " + formatShape(c.starts) + " steps " +
                 formatShape(c.steps));
    Kernel kernel = makeKernel(SLICE_GRAD);
    for (size_t d = 0; d < c.x.size(); ++d) {
      kernel.mutable_slice()->add_starts(c.starts[d]);
      kernel.mutable_slice()->add_steps(c.steps[d]);
    }
    Tensor dy = Tensor::random(rng, c.y);
    Tensor dx = Tensor::empty(c.x);
    runAll(kernel, {&dy}, {&dx});
    auto position = [&](const std::vector<int64_t> &index) {
      std::vector<int64_t> at(index.size());
      for (size_t d = 0; d < at.size(); ++d)
        at[d] = c.starts[d] + index[d] * c.steps[d];
      return broadcastIndex(c.x, c.x, at);
    };
    Values numeric = numericGradient(
        [&](const std::vector<Values> &in) {
          Values y;
          forEachIndex(
              c.y, [&](const std::vector<int64_t> &index) { y.push_back(in[0][position(index)]); });
          return y;
        },
        {weightsFor(rng, c.x)}, 0, toDouble(dy.values));
    expectGradient("SLICE_GRAD " + formatShape(c.x) + " dx", dx.values, numeric);
    std::vector<float> expected(dx.values.size(), 0.0f);
    int64_t i = 0;
    forEachIndex(c.y, [&](const std::vector<int64_t> &index) {
      expected[position(index)] = dy.values[i++];
    });
    expectNear(dx.values, expected, 0.0f);
  }
}

// Like ResultsDoNotDependOnThreadCount, for the backward kernels on inputs large enough to split:
// the parameter gradients of the norms, GATHER_GRAD's accumulation and ATTENTION_GRAD's dk and dv
// must not be summed across threads in scheduler order.
TEST_F(CpuGradientTest, GradientsDoNotDependOnThreadCount) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP: every kernel runs on one thread";
#else
  struct Work {
    Kernel kernel;
    std::vector<std::shared_ptr<TensorBase>> operands;
    std::vector<Shape> results;
  };
  auto f32 = [&](Shape shape) {
    return std::make_shared<Tensor>(shape, randomFloats(rng, numel(shape).value()));
  };
  // Integers in [low, high]: labels, or indices that may be negative.
  auto ids = [&](Shape shape, int64_t low, int64_t high) {
    std::uniform_int_distribution<int64_t> dist(low, high);
    std::vector<int64_t> values(numel(shape).value());
    for (int64_t &v : values)
      v = dist(rng);
    return std::make_shared<I64Tensor>(shape, values);
  };
  Kernel attention = makeKernel(ATTENTION_GRAD);
  attention.mutable_attention()->set_causal(true);
  attention.mutable_attention()->set_scale(0.125f);
  Kernel layerNorm = makeKernel(LAYER_NORM_GRAD), rmsNorm = makeKernel(RMS_NORM_GRAD);
  layerNorm.mutable_norm()->set_axis(1);
  layerNorm.mutable_norm()->set_epsilon(1e-5f);
  rmsNorm.mutable_norm()->set_axis(1);
  rmsNorm.mutable_norm()->set_epsilon(1e-5f);
  Kernel crossEntropy = crossEntropyKernel(-100);
  crossEntropy.set_op(CROSS_ENTROPY_GRAD);
  Kernel slice = makeKernel(SLICE_GRAD);
  for (int64_t v : {511, 0})
    slice.mutable_slice()->add_starts(v);
  for (int64_t v : {-2, 1})
    slice.mutable_slice()->add_steps(v);
  Kernel rotary = makeKernel(ROTARY_GRAD);
  rotary.mutable_rotary();
  Kernel gelu = makeKernel(GELU_GRAD);
  gelu.mutable_gelu();
  const Work work[] = {
      // Fewer (batch, key/value head) items than threads: the GEMMs split instead.
      {attention,
       {f32({1, 4, 64, 32}), f32({1, 2, 64, 32}), f32({1, 2, 64, 32}), f32({1, 4, 64, 32}),
        f32({64, 64})},
       {{1, 4, 64, 32}, {1, 2, 64, 32}, {1, 2, 64, 32}}},
      // As many items as threads or more, several query blocks each.
      {attention,
       {f32({2, 4, 150, 32}), f32({2, 2, 150, 32}), f32({2, 2, 150, 32}), f32({2, 4, 150, 32})},
       {{2, 4, 150, 32}, {2, 2, 150, 32}, {2, 2, 150, 32}}},
      {layerNorm, {f32({256, 512}), f32({512}), f32({256, 512})}, {{256, 512}, {512}, {512}}},
      {rmsNorm, {f32({256, 512}), f32({512}), f32({256, 512})}, {{256, 512}, {512}}},
      {axisKernel(GATHER_GRAD, 0), {ids({4096}, -64, 63), f32({4096, 64})}, {{64, 64}}},
      {crossEntropy, {ids({64}, 0, 1023), f32({}), f32({64, 1024})}, {{64, 1024}}},
      {axisKernel(SOFTMAX_GRAD, 1), {f32({64, 1024}), f32({64, 1024})}, {{64, 1024}}},
      {slice, {f32({256, 256})}, {{512, 256}}},
      {rotary, {f32({8, 64, 128}), f32({64, 128}), f32({64, 128})}, {{8, 64, 128}}},
      {gelu, {f32({256, 256}), f32({256, 256})}, {{256, 256}}},
      {makeKernel(SWIGLU_GRAD),
       {f32({256, 256}), f32({256, 256}), f32({256, 256})},
       {{256, 256}, {256, 256}}},
  };
  int threads = omp_get_max_threads();
  for (const Work &w : work) {
    SCOPED_TRACE(OpKind_Name(w.kernel.op()));
    std::vector<const TensorBase *> operands;
    for (const auto &t : w.operands)
      operands.push_back(t.get());
    std::vector<std::unique_ptr<Tensor>> one, three;
    std::vector<TensorBase *> onePointers, threePointers;
    for (const Shape &shape : w.results) {
      std::vector<float> unset(numel(shape).value(), NAN);
      one.push_back(std::make_unique<Tensor>(shape, unset));
      three.push_back(std::make_unique<Tensor>(shape, unset));
      onePointers.push_back(one.back().get());
      threePointers.push_back(three.back().get());
    }
    omp_set_num_threads(1);
    runAll(w.kernel, operands, onePointers);
    omp_set_num_threads(3);
    runAll(w.kernel, operands, threePointers);
    omp_set_num_threads(threads);
    for (size_t r = 0; r < one.size(); ++r) {
      for (float v : one[r]->values)
        ASSERT_TRUE(std::isfinite(v)) << "result " << r;
      ASSERT_EQ(
          std::memcmp(one[r]->values.data(), three[r]->values.data(), one[r]->values.size() * 4), 0)
          << "result " << r;
    }
  }
#endif
}

} // namespace
} // namespace slrt::test
