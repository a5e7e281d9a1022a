#include "test_support.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "slrt/schedule_verifier.h"

namespace slrt::test {

using namespace sl::schedule;

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "slrt-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

void writeSchedule(const Schedule &schedule, const std::string &path) {
  writeBytes(path, schedule.SerializeAsString());
}

std::vector<float> randomFloats(std::mt19937 &rng, size_t count) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float &v : values)
    v = dist(rng);
  return values;
}

HostTensor f32Tensor(Shape shape, const std::vector<float> &values) {
  HostTensor t = HostTensor::zeros(F32, std::move(shape));
  if (t.numel() != values.size())
    throw std::runtime_error("f32Tensor: value count does not match the shape");
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::vector<float> toFloats(const HostTensor &tensor) {
  return std::vector<float>(tensor.as<float>(), tensor.as<float>() + tensor.numel());
}

namespace {

constexpr uint64_t kParamsHeader = 16;

void addBuffer(Schedule &s, const std::string &name, MemorySpace space, uint64_t offset,
               Shape shape) {
  Buffer *b = s.add_buffers();
  b->set_id(static_cast<uint32_t>(s.buffers_size() - 1));
  b->set_name(name);
  b->set_space(space);
  b->set_offset(offset);
  b->set_dtype(F32);
  uint64_t n = 1;
  for (int64_t d : shape) {
    b->add_shape(d);
    n *= static_cast<uint64_t>(d);
  }
  b->set_bytes(4 * n);
}

Kernel *addKernel(Schedule &s, OpKind op, const std::string &name, std::vector<uint32_t> operands,
                  uint32_t result, uint32_t stream, std::vector<uint32_t> waits,
                  std::vector<uint32_t> records) {
  Kernel *k = s.add_kernels();
  k->set_op(op);
  k->set_name(name);
  for (uint32_t id : operands)
    k->add_operands(id);
  k->add_results(result);
  k->set_stream(stream);
  for (uint32_t e : waits)
    k->add_wait_events(e);
  for (uint32_t e : records)
    k->add_record_events(e);
  return k;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

} // namespace

TinyMlp TinyMlp::build(uint32_t seed, const std::string &paramsFile) {
  TinyMlp mlp;
  std::mt19937 rng(seed);
  mlp.w1 = randomFloats(rng, kIn * kHidden);
  mlp.b1 = randomFloats(rng, kHidden);
  mlp.w2 = randomFloats(rng, kOut * kHidden);
  mlp.b2 = randomFloats(rng, kOut);

  Schedule &s = mlp.schedule;
  s.set_magic(kScheduleMagic);
  s.set_version(kScheduleVersion);
  s.set_end_magic(kScheduleMagic);
  s.set_kind("infer");
  s.set_producer("slrt unit tests (hand-built)");
  s.set_host_pool_bytes(512);
  s.set_device_arena_bytes(832);

  // Host pool: the input, the parameters and the output, each 64-byte aligned.
  addBuffer(s, "x", HOST, 0, {kBatch, kIn});
  addBuffer(s, "w1", HOST, 64, {kIn, kHidden});
  addBuffer(s, "b1", HOST, 192, {kHidden});
  addBuffer(s, "w2", HOST, 256, {kOut, kHidden});
  addBuffer(s, "b2", HOST, 384, {kOut});
  addBuffer(s, "y", HOST, 448, {kBatch, kOut});
  // Device arena: copies of the above and the activations; hr is relu(h2) in place.
  addBuffer(s, "x.dev", DEVICE, 0, {kBatch, kIn});
  addBuffer(s, "w1.dev", DEVICE, 64, {kIn, kHidden});
  addBuffer(s, "b1.dev", DEVICE, 192, {kHidden});
  addBuffer(s, "w2.dev", DEVICE, 256, {kOut, kHidden});
  addBuffer(s, "b2.dev", DEVICE, 384, {kOut});
  addBuffer(s, "h", DEVICE, 448, {kBatch, kHidden});
  addBuffer(s, "h2", DEVICE, 512, {kBatch, kHidden});
  addBuffer(s, "hr", DEVICE, 512, {kBatch, kHidden});
  addBuffer(s, "z", DEVICE, 576, {kBatch, kOut});
  addBuffer(s, "s", DEVICE, 640, {kBatch, kOut});
  addBuffer(s, "g", DEVICE, 704, {kBatch, kOut});
  addBuffer(s, "y.dev", DEVICE, 768, {kBatch, kOut});

  uint64_t fileOffset = kParamsHeader;
  for (uint32_t id : {W1, B1, W2, B2}) {
    const Buffer &b = s.buffers(static_cast<int>(id));
    Parameter *p = s.add_parameters();
    p->set_name(b.name());
    p->set_buffer(id);
    p->set_file(paramsFile);
    p->set_file_offset(fileOffset);
    p->set_bytes(b.bytes());
    p->set_dtype(b.dtype());
    *p->mutable_shape() = b.shape();
    fileOffset += b.bytes();
  }
  Binding *in = s.add_inputs();
  in->set_name("x");
  in->set_buffer(X);
  Binding *out = s.add_outputs();
  out->set_name("y");
  out->set_buffer(Y);

  enum : uint32_t { kCompute, kH2D, kD2H };
  for (StreamKind kind : {COMPUTE, HOST_TO_DEVICE, DEVICE_TO_HOST}) {
    Stream *stream = s.add_streams();
    stream->set_id(static_cast<uint32_t>(s.streams_size() - 1));
    stream->set_kind(kind);
  }
  s.set_num_events(6);

  addKernel(s, COPY, "x.h2d", {X}, DX, kH2D, {}, {0});
  addKernel(s, COPY, "w1.h2d", {W1}, DW1, kH2D, {}, {1});
  addKernel(s, COPY, "b1.h2d", {B1}, DB1, kH2D, {}, {2});
  addKernel(s, COPY, "w2.h2d", {W2}, DW2, kH2D, {}, {3});
  addKernel(s, COPY, "b2.h2d", {B2}, DB2, kH2D, {}, {4});
  addKernel(s, MATMUL, "fc1.matmul", {DX, DW1}, H, kCompute, {0, 1}, {});
  addKernel(s, ADD, "fc1.bias", {H, DB1}, H2, kCompute, {2}, {});
  addKernel(s, RELU, "relu", {H2}, HR, kCompute, {}, {});
  Kernel *gemm = addKernel(s, GEMM, "fc2", {HR, DW2, DB2}, Z, kCompute, {3, 4}, {});
  gemm->mutable_gemm()->set_trans_b(true);
  gemm->mutable_gemm()->set_alpha(1.0f);
  gemm->mutable_gemm()->set_beta(1.0f);
  addKernel(s, SILU, "silu", {Z}, S, kCompute, {}, {});
  addKernel(s, SIGMOID, "sigmoid", {Z}, G, kCompute, {}, {});
  addKernel(s, MUL, "gate", {S, G}, DY, kCompute, {}, {5});
  addKernel(s, COPY, "y.d2h", {DY}, Y, kD2H, {5}, {});
  return mlp;
}

std::string TinyMlp::paramsFileBytes() const {
  std::string bytes(kParamsHeader, 'P');
  for (const std::vector<float> *values : {&w1, &b1, &w2, &b2})
    bytes.append(reinterpret_cast<const char *>(values->data()), values->size() * sizeof(float));
  return bytes;
}

std::string TinyMlp::write(const std::string &dir) const {
  writeBytes(dir + "/" + schedule.parameters(0).file(), paramsFileBytes());
  std::string path = dir + "/tiny_mlp.slsched";
  writeSchedule(schedule, path);
  return path;
}

std::vector<float> TinyMlp::reference(const std::vector<float> &x) const {
  std::vector<float> y(kBatch * kOut);
  for (int64_t r = 0; r < kBatch; ++r) {
    std::vector<float> h(kHidden);
    for (int64_t j = 0; j < kHidden; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < kIn; ++i)
        acc += x[r * kIn + i] * w1[i * kHidden + j];
      h[j] = std::max(0.0f, acc + b1[j]);
    }
    for (int64_t o = 0; o < kOut; ++o) {
      float z = b2[o];
      for (int64_t j = 0; j < kHidden; ++j)
        z += h[j] * w2[o * kHidden + j];
      y[r * kOut + o] = z * sigmoid(z) * sigmoid(z);
    }
  }
  return y;
}

} // namespace slrt::test
