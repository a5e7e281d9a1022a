// The CUDA backend's GEMM against a CPU loop. Each test skips itself where there is no GPU.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "slrt/cuda_backend.h"

namespace slrt {
namespace {

class CudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (cudaDeviceCountOrZero() == 0)
      GTEST_SKIP() << "no CUDA device";
  }
};

std::vector<float> randomFloats(std::mt19937 &rng, size_t n) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

TEST_F(CudaBackendTest, GemmMatchesCpuLoop) {
  CudaBackend backend;
  std::mt19937 rng(11);
  const int64_t m = 67, n = 45, k = 33;
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transA " << transA << " transB " << transB);
      std::vector<float> a = randomFloats(rng, m * k), b = randomFloats(rng, k * n),
                         c = randomFloats(rng, m * n);
      const float alpha = 1.25f, beta = -0.5f;
      std::vector<float> expected(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += double(transA ? a[p * m + i] : a[i * k + p]) *
                   (transB ? b[j * k + p] : b[p * n + j]);
          expected[i * n + j] = static_cast<float>(alpha * acc + beta * c[i * n + j]);
        }

      size_t aBytes = a.size() * sizeof(float), bBytes = b.size() * sizeof(float),
             cBytes = c.size() * sizeof(float);
      auto *da = static_cast<float *>(backend.allocateDevice(aBytes));
      auto *db = static_cast<float *>(backend.allocateDevice(bBytes));
      auto *dc = static_cast<float *>(backend.allocateDevice(cBytes));
      backend.copyToDevice(da, a.data(), aBytes);
      backend.copyToDevice(db, b.data(), bBytes);
      backend.copyToDevice(dc, c.data(), cBytes);
      backend.gemm(CudaGemm{m, n, k, da, db, dc, alpha, beta, transA, transB});
      std::vector<float> actual(m * n);
      backend.copyToHost(actual.data(), dc, cBytes);
      backend.synchronize();
      backend.freeDevice(da);
      backend.freeDevice(db);
      backend.freeDevice(dc);
      for (size_t i = 0; i < actual.size(); ++i)
        ASSERT_NEAR(actual[i], expected[i], 1e-4f * (1.0f + std::fabs(expected[i]))) << i;
    }
}

// What sl-run checks the arena against: an allocation comes out of it.
TEST_F(CudaBackendTest, FreeMemoryShrinksByAnAllocation) {
  CudaBackend backend;
  uint64_t before = backend.freeDeviceMemory();
  const size_t bytes = size_t{256} << 20;
  ASSERT_GT(before, bytes);
  void *p = backend.allocateDevice(bytes);
  uint64_t after = backend.freeDeviceMemory();
  backend.freeDevice(p);
  EXPECT_LE(after, before - bytes / 2);
}

TEST_F(CudaBackendTest, BadDeviceIsAnError) {
  EXPECT_THROW(CudaBackend(cudaDeviceCountOrZero() + 100), std::runtime_error);
}

TEST(CudaDeviceCount, NeverThrows) { EXPECT_GE(cudaDeviceCountOrZero(), 0); }

} // namespace
} // namespace slrt
