// CPU backend kernels against naive loops on random inputs.
#include <cmath>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/backend.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;

// A tensor in plain host memory plus the TensorRef the backend sees. CPU kernels take any host
// pointer, so the tests need no arena.
struct Tensor {
  Shape shape;
  std::vector<float> values;
  TensorRef ref;

  Tensor(Shape s, std::vector<float> v) : shape(std::move(s)), values(std::move(v)) {
    ref = TensorRef{reinterpret_cast<std::byte *>(values.data()), DEVICE, F32, shape,
                    values.size() * sizeof(float)};
  }
  // ref points into values, so a copy would alias the original.
  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;

  static Tensor random(std::mt19937 &rng, Shape s) {
    size_t n = numel(s).value();
    return Tensor(s, randomFloats(rng, n));
  }
  static Tensor empty(Shape s) { return Tensor(s, std::vector<float>(numel(s).value(), NAN)); }
};

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
  for (size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance * (1.0f + std::fabs(expected[i])))
        << "at element " << i;
}

Kernel makeKernel(OpKind op) {
  Kernel k;
  k.set_op(op);
  k.set_name(OpKind_Name(op));
  return k;
}

class CpuKernelsTest : public ::testing::Test {
protected:
  void run(const Kernel &kernel, std::vector<const Tensor *> operands, Tensor &result) {
    std::vector<const TensorRef *> in;
    for (const Tensor *t : operands)
      in.push_back(&t->ref);
    backend->execute(kernel, in, {&result.ref});
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
        std::vector<const Tensor *> operands{&a, &b};
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

} // namespace
} // namespace slrt::test
