// The NCCL communicator plugin with one rank on a GPU: its kernel collectives on device memory and
// its host collectives. Skips itself where there is no GPU (the plugin is built and linked
// wherever NCCL is found; running it needs a device). Multi-rank NCCL runs need mpirun and a GPU
// per rank: see docs/distributed.md.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "slrt/comm.h"
#include "slrt/cuda_backend.h"

namespace slrt {
namespace {

// The plugin as built beside this test, or where SLRT_NCCL_PLUGIN says: in the runtime bundle on a
// GPU machine (bench/gpu/run-nccl-one-rank.sh), the bundle's lib/libslrt_nccl.so.
std::string pluginPath() {
  const char *path = std::getenv("SLRT_NCCL_PLUGIN");
  return path && *path ? path : SLRT_NCCL_PLUGIN;
}

class NcclCommunicatorTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (cudaDeviceCountOrZero() == 0)
      GTEST_SKIP() << "no CUDA device";
  }
};

TEST_F(NcclCommunicatorTest, OneRankGathersScattersAndSums) {
  CommOptions options;
  options.backend = "cuda";
  options.timeoutSeconds = 60;
  std::unique_ptr<Communicator> comm = loadCommunicatorPlugin(pluginPath(), options);
  ASSERT_EQ(comm->size(), 1);
  ASSERT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->name(), "NCCL");

  std::vector<float> host = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  size_t bytes = host.size() * sizeof(float);
  float *in = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&in, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<float> back(host.size());

  // With one rank the whole is the shard, and the sum over the ranks is the value itself.
  comm->allGather(in, out, host.size(), "test all-gather");
  ASSERT_EQ(cudaMemcpy(back.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);
  ASSERT_EQ(cudaMemset(out, 0, bytes), cudaSuccess);
  comm->reduceScatter(in, out, host.size(), "test reduce-scatter");
  ASSERT_EQ(cudaMemcpy(back.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, host);

  double values[2] = {0.25, -3.0};
  comm->allReduceSum(values, 2, "test sum");
  EXPECT_EQ(values[0], 0.25);
  EXPECT_EQ(values[1], -3.0);
  comm->barrier("test barrier");
  cudaFree(in);
  cudaFree(out);
}

} // namespace
} // namespace slrt
