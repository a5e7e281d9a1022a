#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "slrt/bfloat16.h"
#include "slrt/dtype.h"
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

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
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

HostTensor i64Tensor(Shape shape, const std::vector<int64_t> &values) {
  HostTensor t = HostTensor::zeros(I64, std::move(shape));
  if (t.numel() != values.size())
    throw std::runtime_error("i64Tensor: value count does not match the shape");
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

void toBfloat16(sl::schedule::Schedule &schedule) {
  using namespace sl::schedule;
  for (Buffer &b : *schedule.mutable_buffers())
    if (b.dtype() == F32) {
      b.set_dtype(BF16);
      b.set_bytes(b.bytes() / 2);
    }
  for (Constant &c : *schedule.mutable_constants()) {
    if (schedule.buffers(static_cast<int>(c.buffer())).dtype() != BF16)
      continue;
    std::vector<float> values(c.data().size() / sizeof(float));
    std::memcpy(values.data(), c.data().data(), c.data().size());
    std::string data(values.size() * sizeof(uint16_t), '\0');
    roundToBfloat16(values.data(), reinterpret_cast<uint16_t *>(data.data()), values.size());
    c.set_data(data);
  }
  for (Parameter &p : *schedule.mutable_parameters())
    if (p.dtype() == F32) {
      p.set_dtype(BF16);
      p.set_file_dtype(F32);
    }
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

ScheduleBuilder::ScheduleBuilder() {
  schedule.set_magic(kScheduleMagic);
  schedule.set_version(kScheduleVersion);
  schedule.set_end_magic(kScheduleMagic);
  schedule.set_kind("infer");
  schedule.set_producer("slrt unit tests (ScheduleBuilder)");
  for (StreamKind kind : {COMPUTE, HOST_TO_DEVICE, DEVICE_TO_HOST}) {
    Stream *stream = schedule.add_streams();
    stream->set_id(static_cast<uint32_t>(schedule.streams_size() - 1));
    stream->set_kind(kind);
  }
}

uint32_t ScheduleBuilder::buffer(const std::string &name, MemorySpace space, DType dtype,
                                 Shape shape) {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  uint64_t bytes = n * dtypeSize(dtype);
  uint64_t end = space == DEVICE ? schedule.device_arena_bytes() : schedule.host_pool_bytes();
  uint64_t offset = (end + 63) / 64 * 64;
  (space == DEVICE ? schedule.set_device_arena_bytes(offset + bytes)
                   : schedule.set_host_pool_bytes(offset + bytes));
  Buffer *b = schedule.add_buffers();
  b->set_id(static_cast<uint32_t>(schedule.buffers_size() - 1));
  b->set_name(name);
  b->set_space(space);
  b->set_offset(offset);
  b->set_bytes(bytes);
  b->set_dtype(dtype);
  for (int64_t d : shape)
    b->add_shape(d);
  return b->id();
}

uint32_t ScheduleBuilder::alias(const std::string &name, uint32_t of, Shape shape) {
  Buffer *b = schedule.add_buffers();
  *b = schedule.buffers(static_cast<int>(of));
  b->set_id(static_cast<uint32_t>(schedule.buffers_size() - 1));
  b->set_name(name);
  b->clear_shape();
  for (int64_t d : shape)
    b->add_shape(d);
  return b->id();
}

Kernel &ScheduleBuilder::kernel(OpKind op, const std::string &name, std::vector<uint32_t> operands,
                                uint32_t result) {
  Kernel *k = schedule.add_kernels();
  k->set_op(op);
  k->set_name(name);
  for (uint32_t id : operands)
    k->add_operands(id);
  k->add_results(result);
  bool toDevice = schedule.buffers(static_cast<int>(result)).space() == DEVICE;
  k->set_stream(op != COPY ? kCompute : toDevice ? kHostToDevice : kDeviceToHost);
  return *k;
}

void ScheduleBuilder::input(const std::string &name, uint32_t buffer, uint32_t program) {
  Binding *b = schedule.add_inputs();
  b->set_name(name);
  b->set_buffer(buffer);
  b->set_program(program);
}

void ScheduleBuilder::output(const std::string &name, uint32_t buffer, uint32_t program) {
  Binding *b = schedule.add_outputs();
  b->set_name(name);
  b->set_buffer(buffer);
  b->set_program(program);
}

void ScheduleBuilder::parameter(uint32_t buffer, const std::string &file, uint64_t fileOffset) {
  const Buffer &b = schedule.buffers(static_cast<int>(buffer));
  Parameter *p = schedule.add_parameters();
  p->set_name(b.name());
  p->set_buffer(buffer);
  p->set_file(file);
  p->set_file_offset(fileOffset);
  p->set_bytes(b.bytes());
  p->set_dtype(b.dtype());
  *p->mutable_shape() = b.shape();
}

void ScheduleBuilder::constant(uint32_t buffer, const std::string &data) {
  Constant *c = schedule.add_constants();
  c->set_buffer(buffer);
  c->set_data(data);
}

namespace {

constexpr const char *kAttentionParams = "tiny_attention.params";

// rotate-half rotary embedding of one head row at position s.
std::vector<double> rotateHalf(const std::vector<double> &x, const std::vector<float> &cos,
                               const std::vector<float> &sin, int64_t s) {
  int64_t d = static_cast<int64_t>(x.size()), half = d / 2;
  std::vector<double> y(x.size());
  for (int64_t c = 0; c < d; ++c) {
    double rotated = c < half ? -x[c + half] : x[c - half];
    y[c] = x[c] * cos[s * d + c] + rotated * sin[s * d + c];
  }
  return y;
}

} // namespace

TinyAttention TinyAttention::build(uint32_t seed) {
  TinyAttention m;
  std::mt19937 rng(seed);
  m.emb = randomFloats(rng, kVocab * kDim);
  m.g = randomFloats(rng, kDim);
  m.wq = randomFloats(rng, kDim * kDim);
  m.wk = randomFloats(rng, kDim * kHeadDim);
  m.wv = randomFloats(rng, kDim * kHeadDim);
  for (int64_t s = 0; s < kSeq; ++s)
    for (int64_t c = 0; c < kHeadDim; ++c) {
      double theta = s / std::pow(10000.0, 2.0 * (c % (kHeadDim / 2)) / kHeadDim);
      m.cos.push_back(static_cast<float>(std::cos(theta)));
      m.sin.push_back(static_cast<float>(std::sin(theta)));
    }

  ScheduleBuilder b;
  auto host = [&](const char *name, DType dtype, Shape shape) {
    return b.buffer(name, HOST, dtype, std::move(shape));
  };
  uint32_t ids = host("ids", I64, {1, kSeq});
  uint32_t emb = host("emb", F32, {kVocab, kDim});
  uint32_t g = host("g", F32, {kDim});
  uint32_t wq = host("wq", F32, {kDim, kDim});
  uint32_t wk = host("wk", F32, {kDim, kHeadDim});
  uint32_t wv = host("wv", F32, {kDim, kHeadDim});
  uint32_t cos = host("cos", F32, {kSeq, kHeadDim});
  uint32_t sin = host("sin", F32, {kSeq, kHeadDim});
  uint32_t limit = host("limit", I64, {1, kSeq});
  uint32_t fill = host("fill", F32, {1, kSeq, kDim});
  uint32_t y = host("y", F32, {1, kSeq, kDim});
  uint32_t keep = host("keep", BOOL, {1, kSeq});
  b.input("ids", ids);
  b.output("y", y);
  b.output("keep", keep);
  uint64_t fileOffset = kParamsHeader;
  for (uint32_t id : {emb, g, wq, wk, wv}) {
    b.parameter(id, kAttentionParams, fileOffset);
    fileOffset += b.schedule.buffers(static_cast<int>(id)).bytes();
  }
  b.constant(cos, m.cos);
  b.constant(sin, m.sin);
  b.constant(limit, std::vector<int64_t>{kLimit});
  b.constant(fill, std::vector<float>{kFill});

  // Every host buffer the block reads goes to the device on the copy stream; the last copy
  // records event 0, which (streams being in order) covers them all.
  std::map<uint32_t, uint32_t> dev;
  for (uint32_t id : {ids, emb, g, wq, wk, wv, cos, sin, limit, fill}) {
    const Buffer &hostBuffer = b.schedule.buffers(static_cast<int>(id));
    dev[id] = b.buffer(hostBuffer.name() + ".dev", DEVICE, hostBuffer.dtype(),
                       toShape(hostBuffer.shape()));
    b.kernel(COPY, hostBuffer.name() + ".h2d", {id}, dev[id]);
  }
  b.schedule.mutable_kernels(b.schedule.kernels_size() - 1)->add_record_events(0);
  b.schedule.set_num_events(2);

  auto device = [&](const char *name, DType dtype, Shape shape) {
    return b.buffer(name, DEVICE, dtype, std::move(shape));
  };
  uint32_t h = device("h", F32, {1, kSeq, kDim});
  uint32_t n = device("n", F32, {1, kSeq, kDim});
  uint32_t q = device("q", F32, {1, kSeq, kDim});
  uint32_t q4 = b.alias("q.heads", q, {1, kSeq, kHeads, kHeadDim});
  uint32_t qt = device("q.t", F32, {1, kHeads, kSeq, kHeadDim});
  uint32_t k = device("k", F32, {1, kSeq, kHeadDim});
  uint32_t k4 = b.alias("k.heads", k, {1, 1, kSeq, kHeadDim});
  uint32_t v = device("v", F32, {1, kSeq, kHeadDim});
  uint32_t v4 = b.alias("v.heads", v, {1, 1, kSeq, kHeadDim});
  uint32_t a = device("a", F32, {1, kHeads, kSeq, kHeadDim});
  uint32_t at = device("a.t", F32, {1, kSeq, kHeads, kHeadDim});
  uint32_t at3 = b.alias("a.merged", at, {1, kSeq, kDim});
  uint32_t r = device("r", F32, {1, kSeq, kDim});
  uint32_t keepDev = device("keep.dev", BOOL, {1, kSeq});
  uint32_t keep3 = b.alias("keep.col", keepDev, {1, kSeq, 1});
  uint32_t yDev = device("y.dev", F32, {1, kSeq, kDim});

  m.gatherKernel = b.schedule.kernels_size();
  Kernel &gather = b.kernel(GATHER, "embed", {dev[emb], dev[ids]}, h);
  gather.add_wait_events(0);
  gather.mutable_axis()->set_axis(0);
  Kernel &norm = b.kernel(RMS_NORM, "norm", {h, dev[g]}, n);
  norm.mutable_norm()->set_axis(2);
  norm.mutable_norm()->set_epsilon(kEpsilon);
  b.kernel(MATMUL, "q.proj", {n, dev[wq]}, q);
  b.kernel(MATMUL, "k.proj", {n, dev[wk]}, k);
  b.kernel(MATMUL, "v.proj", {n, dev[wv]}, v);
  Kernel &split = b.kernel(TRANSPOSE, "q.split", {q4}, qt);
  for (int64_t axis : {0, 2, 1, 3})
    split.mutable_transpose()->add_perm(axis);
  b.kernel(ROTARY, "q.rope", {qt, dev[cos], dev[sin]}, qt).mutable_rotary();
  b.kernel(ROTARY, "k.rope", {k4, dev[cos], dev[sin]}, k4).mutable_rotary();
  Kernel &attention = b.kernel(ATTENTION, "attn", {qt, k4, v4}, a);
  attention.mutable_attention()->set_causal(true);
  attention.mutable_attention()->set_scale(kScale);
  Kernel &merge = b.kernel(TRANSPOSE, "attn.merge", {a}, at);
  for (int64_t axis : {0, 2, 1, 3})
    merge.mutable_transpose()->add_perm(axis);
  b.kernel(ADD, "residual", {at3, h}, r);
  b.kernel(LESS, "keep", {dev[ids], dev[limit]}, keepDev);
  b.kernel(WHERE, "select", {keep3, r, dev[fill]}, yDev).add_record_events(1);
  b.kernel(COPY, "y.d2h", {yDev}, y).add_wait_events(1);
  b.kernel(COPY, "keep.d2h", {keepDev}, keep);
  m.schedule = std::move(b.schedule);
  return m;
}

std::string TinyAttention::paramsFileBytes() const {
  std::string bytes(kParamsHeader, 'P');
  for (const std::vector<float> *values : {&emb, &g, &wq, &wk, &wv})
    bytes.append(reinterpret_cast<const char *>(values->data()), values->size() * sizeof(float));
  return bytes;
}

std::string TinyAttention::write(const std::string &dir) const {
  writeBytes(dir + "/" + kAttentionParams, paramsFileBytes());
  std::string path = dir + "/tiny_attention.slsched";
  writeSchedule(schedule, path);
  return path;
}

std::vector<uint8_t> TinyAttention::referenceKeep(const std::vector<int64_t> &ids) const {
  std::vector<uint8_t> keep;
  for (int64_t id : ids)
    keep.push_back(id < kLimit ? 1 : 0);
  return keep;
}

std::vector<float> TinyAttention::referenceY(const std::vector<int64_t> &ids) const {
  using Rows = std::vector<std::vector<double>>;
  Rows h(kSeq, std::vector<double>(kDim)), q = h;
  Rows k(kSeq, std::vector<double>(kHeadDim)), v = k;
  for (int64_t s = 0; s < kSeq; ++s) {
    int64_t row = ids[s] < 0 ? ids[s] + kVocab : ids[s];
    double squares = 0;
    for (int64_t j = 0; j < kDim; ++j) {
      h[s][j] = emb[row * kDim + j];
      squares += h[s][j] * h[s][j];
    }
    double rms = 1.0 / std::sqrt(squares / kDim + kEpsilon);
    std::vector<double> n(kDim);
    for (int64_t j = 0; j < kDim; ++j)
      n[j] = h[s][j] * rms * g[j];
    for (int64_t j = 0; j < kDim; ++j) {
      for (int64_t o = 0; o < kDim; ++o)
        q[s][o] += n[j] * wq[j * kDim + o];
      for (int64_t o = 0; o < kHeadDim; ++o) {
        k[s][o] += n[j] * wk[j * kHeadDim + o];
        v[s][o] += n[j] * wv[j * kHeadDim + o];
      }
    }
    k[s] = rotateHalf(k[s], cos, sin, s);
  }
  std::vector<float> y(kSeq * kDim);
  for (int64_t head = 0; head < kHeads; ++head)
    for (int64_t s = 0; s < kSeq; ++s) {
      std::vector<double> qh(q[s].begin() + head * kHeadDim, q[s].begin() + (head + 1) * kHeadDim);
      qh = rotateHalf(qh, cos, sin, s);
      // Causal with S == T: query s sees keys 0..s.
      std::vector<double> p(s + 1);
      double max = -INFINITY, sum = 0;
      for (int64_t t = 0; t <= s; ++t) {
        for (int64_t c = 0; c < kHeadDim; ++c)
          p[t] += qh[c] * k[t][c];
        p[t] *= kScale;
        max = std::max(max, p[t]);
      }
      for (double &e : p)
        sum += (e = std::exp(e - max));
      for (int64_t c = 0; c < kHeadDim; ++c) {
        double out = 0;
        for (int64_t t = 0; t <= s; ++t)
          out += p[t] / sum * v[t][c];
        int64_t j = head * kHeadDim + c;
        y[s * kDim + j] = static_cast<float>(ids[s] < kLimit ? out + h[s][j] : kFill);
      }
    }
  return y;
}

Schedule ShiftedLookup::build() {
  ScheduleBuilder b;
  uint32_t ids = b.buffer("ids", HOST, I64, {3});
  uint32_t one = b.buffer("one", HOST, I64, {3});
  uint32_t emb = b.buffer("emb", HOST, F32, {4, 2});
  uint32_t y = b.buffer("y", HOST, F32, {3, 2});
  uint32_t idsDev = b.buffer("ids.dev", DEVICE, I64, {3});
  uint32_t oneDev = b.buffer("one.dev", DEVICE, I64, {3});
  uint32_t embDev = b.buffer("emb.dev", DEVICE, F32, {4, 2});
  uint32_t shifted = b.buffer("shifted", DEVICE, I64, {3});
  uint32_t yDev = b.buffer("y.dev", DEVICE, F32, {3, 2});
  b.input("ids", ids);
  b.output("y", y);
  b.constant(one, std::vector<int64_t>{1});
  b.constant(emb, std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7});
  b.schedule.set_num_events(5);
  b.kernel(COPY, "ids.h2d", {ids}, idsDev).add_record_events(0);
  b.kernel(COPY, "one.h2d", {one}, oneDev).add_record_events(1);
  b.kernel(COPY, "emb.h2d", {emb}, embDev).add_record_events(2);
  Kernel &add = b.kernel(ADD, "shift", {idsDev, oneDev}, shifted);
  add.add_wait_events(0);
  add.add_wait_events(1);
  Kernel &gather = b.kernel(GATHER, "lookup", {embDev, shifted}, yDev);
  gather.mutable_axis()->set_axis(0);
  gather.add_wait_events(2);
  gather.add_record_events(3);
  b.kernel(COPY, "y.d2h", {yDev}, y).add_wait_events(3);

  return b.schedule;
}

Schedule StreamedSchedule::build() {
  ScheduleBuilder b;
  Stream *host = b.schedule.add_streams();
  host->set_id(kHostCompute);
  host->set_kind(HOST_COMPUTE);
  for (const char *name : {"x", "y", "z"})
    b.buffer(name, HOST, F32, {kSize});
  for (const char *name : {"a", "b", "c"})
    b.buffer(name, DEVICE, F32, {kSize});
  b.schedule.mutable_buffers(C)->set_offset(b.schedule.buffers(A).offset());
  b.input("x", X);
  b.output("y", Y);
  b.output("z", Z);
  b.schedule.set_num_events(4);
  b.kernel(COPY, "x.h2d", {X}, A).add_record_events(0);
  Kernel &relu = b.kernel(RELU, "relu", {A}, B);
  relu.add_wait_events(0);
  relu.add_record_events(1);
  b.kernel(COPY, "b.d2h", {B}, Y).add_wait_events(1);
  b.kernel(SIGMOID, "sigmoid", {B}, C).add_record_events(2);
  Kernel &back = b.kernel(COPY, "c.d2h", {C}, Z);
  back.add_wait_events(2);
  back.add_record_events(3);
  Kernel &sum = b.kernel(ACCUMULATE, "sum", {Y, Z}, Y);
  sum.set_stream(kHostCompute);
  sum.add_wait_events(3);
  return b.schedule;
}

void TinyTrain::addOptimizerSteps(const std::vector<std::vector<uint32_t>> &groups) {
  uint32_t stream = static_cast<uint32_t>(schedule.streams_size());
  Stream *host = schedule.add_streams();
  host->set_id(stream);
  host->set_kind(HOST_COMPUTE);
  uint32_t ready = schedule.num_events();
  schedule.set_num_events(ready + 1);
  // The gradient copies come last, one after another on the device-to-host stream.
  schedule.mutable_kernels(schedule.kernels_size() - 1)->add_record_events(ready);
  auto outputBuffer = [&](const std::string &name) {
    for (const Binding &binding : schedule.outputs())
      if (binding.name() == name)
        return binding.buffer();
    throw std::runtime_error("no output " + name);
  };
  for (size_t g = 0; g < groups.size(); ++g) {
    Kernel *k = schedule.add_kernels();
    k->set_op(OPTIMIZER_STEP);
    k->set_name("adamw." + std::to_string(g));
    k->set_stream(stream);
    if (g == 0)
      k->add_wait_events(ready);
    k->add_operands(outputBuffer("loss"));
    OptimizerStepAttributes *attrs = k->mutable_optimizer_step();
    for (uint32_t parameter : groups[g]) {
      attrs->add_parameters(parameter);
      k->add_operands(
          outputBuffer("grad:" + schedule.parameters(static_cast<int>(parameter)).name()));
    }
  }
}

TinyTrain TinyTrain::build(uint32_t seed, int64_t batch, int64_t seq, int64_t out,
                           const std::string &name, int64_t poisonToken, bool bf16Parameters) {
  TinyTrain m;
  m.batch = batch;
  m.seq = seq;
  m.out = out;
  m.name = name;
  std::mt19937 rng(seed);
  m.w = randomFloats(rng, kDim * out);
  m.b = randomFloats(rng, out);
  m.emb = randomFloats(rng, kVocab * kDim);
  m.target = randomFloats(rng, kVocab * out);
  for (int64_t j = 0; j < kDim; ++j)
    m.emb[kNanToken * kDim + j] = NAN;

  ScheduleBuilder b;
  b.schedule.set_kind("train");
  auto host = [&](const char *bufferName, DType dtype, Shape shape) {
    return b.buffer(bufferName, HOST, dtype, std::move(shape));
  };
  uint32_t ids = host("input_ids", I64, {batch, seq});
  uint32_t labels = host("labels", I64, {batch, seq});
  DType paramType = bf16Parameters ? BF16 : F32;
  uint32_t w = host("w", paramType, {kDim, out});
  uint32_t bias = host("b", paramType, {out});
  uint32_t emb = host("emb", F32, {kVocab, kDim});
  uint32_t target = host("target", F32, {kVocab, out});
  uint32_t scale = host("scale", F32, {});
  uint32_t loss = host("loss", F32, {});
  uint32_t gradW = host("grad:w", F32, {kDim, out});
  // With bf16 parameters: grad:w is f32 (accumulated in f32), grad:b bf16 (the trainer widens it).
  uint32_t gradB = host("grad:b", paramType, {out});
  b.input("input_ids", ids);
  b.input("labels", labels);
  b.output("loss", loss);
  b.output("grad:w", gradW);
  b.output("grad:b", gradB);
  b.parameter(w, name + ".params", kParamsHeader);
  b.parameter(bias, name + ".params", kParamsHeader + kDim * out * sizeof(float));
  if (bf16Parameters)
    for (Parameter &p : *b.schedule.mutable_parameters()) {
      p.set_file_dtype(F32); // the file holds f32; the runtime rounds at load
      p.set_bytes(p.bytes() * 2);
    }
  b.constant(emb, m.emb);
  b.constant(target, m.target);
  b.constant(scale, std::vector<float>{2.0f / static_cast<float>(batch * seq * out)});

  std::vector<uint32_t> toDevice = {ids, labels, w, bias, emb, target, scale};
  uint32_t poison = 0;
  if (poisonToken >= 0) {
    std::vector<float> table(static_cast<size_t>(kVocab * kDim * out), 0.0f);
    for (int64_t i = 0; i < kDim * out; ++i)
      table[static_cast<size_t>(poisonToken * kDim * out + i)] = NAN;
    poison = host("poison", F32, {kVocab, kDim, out});
    b.constant(poison, table);
    toDevice.push_back(poison);
  }
  std::map<uint32_t, uint32_t> dev;
  for (uint32_t id : toDevice) {
    const Buffer &hostBuffer = b.schedule.buffers(static_cast<int>(id));
    dev[id] = b.buffer(hostBuffer.name() + ".dev", DEVICE, hostBuffer.dtype(),
                       toShape(hostBuffer.shape()));
    b.kernel(COPY, hostBuffer.name() + ".h2d", {id}, dev[id]);
  }
  b.schedule.mutable_kernels(b.schedule.kernels_size() - 1)->add_record_events(0);
  b.schedule.set_num_events(2);

  auto device = [&](const char *bufferName, Shape shape) {
    return b.buffer(bufferName, DEVICE, F32, std::move(shape));
  };
  uint32_t x = device("x", {batch, seq, kDim});
  uint32_t x2 = b.alias("x.rows", x, {batch * seq, kDim});
  uint32_t xt = device("x.t", {kDim, batch * seq});
  uint32_t y = device("y", {batch, seq, out});
  uint32_t yb = device("y.b", {batch, seq, out});
  uint32_t t = device("t", {batch, seq, out});
  uint32_t r = device("r", {batch, seq, out});
  uint32_t sq = device("sq", {batch, seq, out});
  uint32_t lossDev = device("loss.dev", {});
  uint32_t g = device("g", {batch, seq, out});
  uint32_t g2 = b.alias("g.rows", g, {batch * seq, out});
  uint32_t gradWDev = device("grad:w.dev", {kDim, out});
  uint32_t poisonRows = 0, poisonSum = 0;
  if (poisonToken >= 0) {
    poisonRows = device("poison.rows", {batch, seq, kDim, out});
    poisonSum = device("poison.sum", {kDim, out});
  }
  uint32_t gradBDev = device("grad:b.dev", {out});

  m.embedKernel = b.schedule.kernels_size();
  Kernel &embed = b.kernel(GATHER, "embed", {dev[emb], dev[ids]}, x);
  embed.add_wait_events(0);
  embed.mutable_axis()->set_axis(0);
  if (bf16Parameters) {
    // The kernels compute with the bf16 parameters widened; the gradients stay f32.
    for (uint32_t param : {w, bias}) {
      const Buffer &onDevice = b.schedule.buffers(static_cast<int>(dev[param]));
      uint32_t wide = device((onDevice.name() + ".f32").c_str(), toShape(onDevice.shape()));
      b.kernel(CAST, onDevice.name() + ".widen", {dev[param]}, wide);
      dev[param] = wide;
    }
  }
  b.kernel(GATHER, "target", {dev[target], dev[labels]}, t).mutable_axis()->set_axis(0);
  b.kernel(MATMUL, "proj", {x, dev[w]}, y);
  b.kernel(ADD, "bias", {y, dev[bias]}, yb);
  b.kernel(SUB, "residual", {yb, t}, r);
  b.kernel(MUL, "square", {r, r}, sq);
  b.kernel(REDUCE_MEAN, "loss", {sq}, lossDev).mutable_reduce();
  b.kernel(MUL, "dloss", {r, dev[scale]}, g);
  Kernel &transpose = b.kernel(TRANSPOSE, "x.t", {x2}, xt);
  for (int64_t axis : {1, 0})
    transpose.mutable_transpose()->add_perm(axis);
  b.kernel(MATMUL, "grad.w", {xt, g2}, gradWDev);
  if (poisonToken >= 0) {
    b.kernel(GATHER, "poison.gather", {dev[poison], dev[labels]}, poisonRows)
        .mutable_axis()
        ->set_axis(0);
    Kernel &sum = b.kernel(REDUCE_SUM, "poison.sum", {poisonRows}, poisonSum);
    for (int64_t axis : {0, 1})
      sum.mutable_reduce()->add_axes(axis);
    b.kernel(ADD, "grad.w.poison", {gradWDev, poisonSum}, gradWDev);
  }
  Kernel &sum = b.kernel(REDUCE_SUM, "grad.b", {g}, gradBDev);
  for (int64_t axis : {0, 1})
    sum.mutable_reduce()->add_axes(axis);
  if (bf16Parameters) {
    uint32_t rounded = b.buffer("grad:b.dev.bf16", DEVICE, BF16, {out});
    b.kernel(CAST, "grad.b.round", {gradBDev}, rounded).add_record_events(1);
    gradBDev = rounded;
  } else {
    sum.add_record_events(1);
  }
  b.kernel(COPY, "loss.d2h", {lossDev}, loss).add_wait_events(1);
  b.kernel(COPY, "grad:w.d2h", {gradWDev}, gradW);
  b.kernel(COPY, "grad:b.d2h", {gradBDev}, gradB);
  m.schedule = std::move(b.schedule);
  return m;
}

std::string TinyTrain::write(const std::string &dir) const {
  std::string bytes(kParamsHeader, 'P');
  for (const std::vector<float> *values : {&w, &b})
    bytes.append(reinterpret_cast<const char *>(values->data()), values->size() * sizeof(float));
  writeBytes(dir + "/" + name + ".params", bytes);
  std::string path = dir + "/" + name + ".slsched";
  writeSchedule(schedule, path);
  return path;
}

TinyTrain::Result TinyTrain::reference(const std::vector<float> &wValues,
                                       const std::vector<float> &bValues,
                                       const std::vector<int64_t> &ids,
                                       const std::vector<int64_t> &labels) const {
  Result result{0, std::vector<double>(kDim * out), std::vector<double>(out)};
  double n = static_cast<double>(batch * seq * out);
  for (size_t row = 0; row < ids.size(); ++row) {
    const float *x = &emb[ids[row] * kDim];
    for (int64_t k = 0; k < out; ++k) {
      double y = bValues[k];
      for (int64_t j = 0; j < kDim; ++j)
        y += static_cast<double>(x[j]) * wValues[j * out + k];
      double r = y - target[labels[row] * out + k];
      result.loss += r * r / n;
      double g = 2 * r / n;
      result.gradB[k] += g;
      for (int64_t j = 0; j < kDim; ++j)
        result.gradW[j * out + k] += x[j] * g;
    }
  }
  return result;
}

} // namespace slrt::test

namespace slrt::test {

using namespace sl::schedule;

TinyGenerate TinyGenerate::build(uint32_t seed, int64_t batch, int64_t maxPrompt, int64_t maxNew,
                                 int64_t vocab) {
  TinyGenerate m;
  m.batch = batch;
  m.maxPrompt = maxPrompt;
  m.maxNew = maxNew;
  m.vocab = vocab;
  std::mt19937 rng(seed);
  m.emb = randomFloats(rng, static_cast<size_t>(vocab * kDim));
  m.head = randomFloats(rng, static_cast<size_t>(kDim * vocab));
  for (float &w : m.head)
    w *= 4; // logits a few units apart: greedy choices far from ties
  int64_t cacheLen = maxPrompt + maxNew;

  ScheduleBuilder b;
  Schedule &s = b.schedule;
  s.set_kind("generate");
  enum : uint32_t { kHostCompute = 3 };
  Stream *host = s.add_streams();
  host->set_id(kHostCompute);
  host->set_kind(HOST_COMPUTE);
  auto hostBuffer = [&](const std::string &name, DType dtype, Shape shape) {
    return b.buffer(name, HOST, dtype, std::move(shape));
  };
  auto device = [&](const std::string &name, DType dtype, Shape shape) {
    return b.buffer(name, DEVICE, dtype, std::move(shape));
  };
  uint32_t emb = hostBuffer("emb", F32, {vocab, kDim});
  uint32_t head = hostBuffer("head", F32, {kDim, vocab});
  uint32_t cache = hostBuffer("kv_cache", F32, {batch, 2, 1, cacheLen, kDim});
  b.constant(emb, m.emb);
  b.constant(head, m.head);
  uint32_t embDev = device("emb.dev", F32, {vocab, kDim});
  uint32_t headDev = device("head.dev", F32, {kDim, vocab});

  // --- prefill (program 0): events 0..3 ------------------------------------------------------
  uint32_t ids = hostBuffer("prefill.input_ids", I64, {batch, maxPrompt});
  uint32_t last = hostBuffer("prefill.last_index", I64, {batch});
  uint32_t logits = hostBuffer("prefill.logits", F32, {batch, 1, vocab});
  uint32_t kv = hostBuffer("prefill.kv", F32, {batch, 1, maxPrompt, kDim});
  b.input("input_ids", ids, 0);
  b.input("last_index", last, 0);
  b.output("logits", logits, 0);
  uint32_t idsDev = device("prefill.input_ids.dev", I64, {batch, maxPrompt});
  uint32_t lastDev = device("prefill.last_index.dev", I64, {batch});
  uint32_t h = device("prefill.h", F32, {batch, maxPrompt, kDim});
  uint32_t h4 = b.alias("prefill.h.heads", h, {batch, 1, maxPrompt, kDim});
  uint32_t a = device("prefill.a", F32, {batch, 1, maxPrompt, kDim});
  uint32_t a3 = b.alias("prefill.a.rows", a, {batch, maxPrompt, kDim});
  uint32_t r = device("prefill.r", F32, {batch, 1, kDim});
  uint32_t logitsDev = device("prefill.logits.dev", F32, {batch, 1, vocab});

  b.kernel(COPY, "prefill.ids.h2d", {ids}, idsDev);
  b.kernel(COPY, "prefill.last.h2d", {last}, lastDev);
  b.kernel(COPY, "prefill.emb.h2d", {emb}, embDev);
  b.kernel(COPY, "prefill.head.h2d", {head}, headDev).add_record_events(0);
  Kernel &embed = b.kernel(GATHER, "prefill.embed", {embDev, idsDev}, h);
  embed.mutable_axis()->set_axis(0);
  embed.add_wait_events(0);
  embed.add_record_events(1);
  Kernel &attention = b.kernel(ATTENTION, "prefill.attn", {h4, h4, h4}, a);
  attention.mutable_attention()->set_causal(true);
  attention.mutable_attention()->set_scale(kScale);
  b.kernel(TAKE_ROWS, "prefill.last", {a3, lastDev}, r);
  b.kernel(MATMUL, "prefill.head", {r, headDev}, logitsDev).add_record_events(2);
  Kernel &kvOut = b.kernel(COPY, "prefill.kv.d2h", {h4}, kv);
  kvOut.add_wait_events(1);
  kvOut.add_record_events(3);
  b.kernel(COPY, "prefill.logits.d2h", {logitsDev}, logits).add_wait_events(2);
  Kernel &write = b.kernel(KV_WRITE, "prefill.kv.write", {cache, kv, kv}, cache);
  write.set_stream(kHostCompute);
  write.add_wait_events(3);
  int prefillKernels = s.kernels_size();

  // --- decode (program 1): events 4..7 -------------------------------------------------------
  uint32_t newest = hostBuffer("decode.input_ids", I64, {batch, 1});
  uint32_t position = hostBuffer("decode.position", I64, {batch});
  uint32_t logits1 = hostBuffer("decode.logits", F32, {batch, 1, vocab});
  uint32_t x1 = hostBuffer("decode.x", F32, {batch, 1, 1, kDim});
  b.input("input_ids", newest, 1);
  b.input("position", position, 1);
  b.output("logits", logits1, 1);
  uint32_t newestDev = device("decode.input_ids.dev", I64, {batch, 1});
  uint32_t positionDev = device("decode.position.dev", I64, {batch});
  uint32_t cacheDev = device("decode.kv_cache.dev", F32, {batch, 2, 1, cacheLen, kDim});
  uint32_t x = device("decode.x.dev", F32, {batch, 1, kDim});
  uint32_t x4 = b.alias("decode.x.heads", x, {batch, 1, 1, kDim});
  uint32_t ad = device("decode.a", F32, {batch, 1, 1, kDim});
  uint32_t ad3 = b.alias("decode.a.rows", ad, {batch, 1, kDim});
  uint32_t logits1Dev = device("decode.logits.dev", F32, {batch, 1, vocab});

  b.kernel(COPY, "decode.ids.h2d", {newest}, newestDev);
  b.kernel(COPY, "decode.position.h2d", {position}, positionDev);
  b.kernel(COPY, "decode.kv_cache.h2d", {cache}, cacheDev);
  b.kernel(COPY, "decode.emb.h2d", {emb}, embDev);
  b.kernel(COPY, "decode.head.h2d", {head}, headDev).add_record_events(4);
  Kernel &embed1 = b.kernel(GATHER, "decode.embed", {embDev, newestDev}, x);
  embed1.mutable_axis()->set_axis(0);
  embed1.add_wait_events(4);
  embed1.add_record_events(5);
  m.decodeAttentionKernel = s.kernels_size();
  Kernel &decodeAttention =
      b.kernel(DECODE_ATTENTION, "decode.attn", {x4, x4, x4, cacheDev, positionDev}, ad);
  decodeAttention.mutable_attention()->set_scale(kScale);
  b.kernel(MATMUL, "decode.head", {ad3, headDev}, logits1Dev).add_record_events(6);
  Kernel &xOut = b.kernel(COPY, "decode.x.d2h", {x4}, x1);
  xOut.add_wait_events(5);
  xOut.add_record_events(7);
  b.kernel(COPY, "decode.logits.d2h", {logits1Dev}, logits1).add_wait_events(6);
  m.kvWriteKernel = s.kernels_size();
  Kernel &write1 = b.kernel(KV_WRITE, "decode.kv.write", {cache, x1, x1, position}, cache);
  write1.set_stream(kHostCompute);
  write1.add_wait_events(7);
  s.set_num_events(8);

  Program *prefill = s.add_programs();
  prefill->set_name("prefill");
  prefill->set_first_kernel(0);
  prefill->set_num_kernels(static_cast<uint32_t>(prefillKernels));
  Program *decode = s.add_programs();
  decode->set_name("decode");
  decode->set_first_kernel(static_cast<uint32_t>(prefillKernels));
  decode->set_num_kernels(static_cast<uint32_t>(s.kernels_size() - prefillKernels));

  Generation *g = s.mutable_generation();
  g->set_batch(batch);
  g->set_max_prompt_len(maxPrompt);
  g->set_max_new_tokens(maxNew);
  g->set_vocab(vocab);
  g->set_cache_len(cacheLen);
  g->set_num_sub_batches(1);
  g->set_sub_batch_size(batch);
  g->set_kv_cache_bytes(s.buffers(static_cast<int>(cache)).bytes());
  g->set_parameter_bytes(0);
  m.schedule = std::move(s);
  return m;
}

std::string TinyGenerate::write(const std::string &dir, const std::string &name) const {
  std::string path = dir + "/" + name + ".slsched";
  writeSchedule(schedule, path);
  return path;
}

std::vector<double> TinyGenerate::referenceLogits(const std::vector<int64_t> &tokens) const {
  const float *q = &emb[static_cast<size_t>(tokens.back() * kDim)];
  std::vector<double> scores;
  double max = -INFINITY;
  for (int64_t token : tokens) {
    double dot = 0;
    for (int64_t c = 0; c < kDim; ++c)
      dot += double(q[c]) * emb[static_cast<size_t>(token * kDim + c)];
    scores.push_back(dot * kScale);
    max = std::max(max, scores.back());
  }
  double sum = 0;
  for (double &p : scores)
    sum += (p = std::exp(p - max));
  std::vector<double> a(kDim, 0.0);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int64_t c = 0; c < kDim; ++c)
      a[static_cast<size_t>(c)] += scores[t] / sum * emb[static_cast<size_t>(tokens[t] * kDim + c)];
  std::vector<double> logits(static_cast<size_t>(vocab), 0.0);
  for (int64_t c = 0; c < kDim; ++c)
    for (int64_t v = 0; v < vocab; ++v)
      logits[static_cast<size_t>(v)] +=
          a[static_cast<size_t>(c)] * head[static_cast<size_t>(c * vocab + v)];
  return logits;
}

std::vector<int64_t> TinyGenerate::referenceGreedy(const std::vector<int64_t> &prompt,
                                                   int64_t count, const std::vector<int64_t> &stop,
                                                   double *margin) const {
  std::vector<int64_t> sequence = prompt, out;
  if (margin)
    *margin = INFINITY;
  while (static_cast<int64_t>(out.size()) < count) {
    std::vector<double> logits = referenceLogits(sequence);
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
      if (logits[static_cast<size_t>(v)] > logits[static_cast<size_t>(best)])
        best = v;
    if (margin)
      for (int64_t v = 0; v < vocab; ++v)
        if (v != best)
          *margin =
              std::min(*margin, logits[static_cast<size_t>(best)] - logits[static_cast<size_t>(v)]);
    out.push_back(best);
    sequence.push_back(best);
    if (std::find(stop.begin(), stop.end(), best) != stop.end())
      break;
  }
  return out;
}

} // namespace slrt::test
