// Helpers shared by the runtime's unit tests.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "schedule/schedule.pb.h"
#include "slrt/host_tensor.h"

namespace slrt::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

// Serializes `schedule` to `path` exactly as sl-opt would.
void writeSchedule(const sl::schedule::Schedule &schedule, const std::string &path);
void writeBytes(const std::string &path, const std::string &bytes);

// `count` floats uniform in [-1, 1) from `rng`.
std::vector<float> randomFloats(std::mt19937 &rng, size_t count);

HostTensor f32Tensor(Shape shape, const std::vector<float> &values);
std::vector<float> toFloats(const HostTensor &tensor);

// A tiny MLP, y = silu(z) * sigmoid(z) with z = relu(x @ w1 + b1) @ w2^T + b2, hand-scheduled the
// way sl-opt would: every parameter and the input copied to the device on a host-to-device stream,
// each copy recording an event the compute kernels wait for, the result copied back on a
// device-to-host stream. It exercises every op (COPY, MATMUL, ADD, RELU in place, GEMM with trans_b
// and a broadcast C, SILU, SIGMOID, MUL), streams, events and parameter file offsets.
struct TinyMlp {
  static constexpr int64_t kBatch = 2, kIn = 4, kHidden = 8, kOut = 3;
  // Buffer ids.
  enum : uint32_t { X, W1, B1, W2, B2, Y, DX, DW1, DB1, DW2, DB2, H, H2, HR, Z, S, G, DY };
  // Kernel indices of interest.
  enum : int { kMatmulKernel = 5, kAddKernel = 6, kGemmKernel = 8, kMulKernel = 11 };

  sl::schedule::Schedule schedule;
  std::vector<float> w1, b1, w2, b2; // w2 is stored [kOut, kHidden]

  // Builds the schedule with random weights; parameters point into file `paramsFile`.
  static TinyMlp build(uint32_t seed, const std::string &paramsFile = "tiny_mlp.params");
  // The bytes of the parameter file: a 16-byte header, then w1, b1, w2, b2.
  std::string paramsFileBytes() const;
  // Writes the parameter file and the schedule into `dir`; returns the schedule's path.
  std::string write(const std::string &dir) const;
  // The same function as naive loops.
  std::vector<float> reference(const std::vector<float> &x) const;
};

} // namespace slrt::test
