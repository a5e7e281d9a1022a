// Helpers shared by the runtime's unit tests.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "schedule/schedule.pb.h"
#include "slrt/host_tensor.h"

namespace slrt::test {

// A kernel of op `op`, named after it (the executor's messages name kernels).
inline sl::schedule::Kernel makeKernel(sl::schedule::OpKind op) {
  sl::schedule::Kernel k;
  k.set_op(op);
  k.set_name(sl::schedule::OpKind_Name(op));
  return k;
}

// The message of the slrt::Error that `f` throws; a test failure (and "") when it throws none.
// (In error_of.cc.)
std::string errorOf(const std::function<void()> &f);

// verifySchedule's message for `schedule`, or "no error". (In error_of.cc.)
std::string verifyError(const sl::schedule::Schedule &schedule);

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

// The names in `dir`, sorted.
std::vector<std::string> listDir(const std::string &dir);

// Serializes `schedule` to `path` exactly as sl-opt would.
void writeSchedule(const sl::schedule::Schedule &schedule, const std::string &path);
void writeBytes(const std::string &path, const std::string &bytes);

// `count` floats uniform in [-1, 1) from `rng`.
std::vector<float> randomFloats(std::mt19937 &rng, size_t count);

HostTensor f32Tensor(Shape shape, const std::vector<float> &values);
HostTensor i64Tensor(Shape shape, const std::vector<int64_t> &values);
std::vector<float> toFloats(const HostTensor &tensor);

// What sl-opt precision=bf16 makes of a schedule: every f32 buffer becomes bf16 (half the bytes,
// the offsets kept), f32 constants are rounded to bf16, and every f32 parameter is a bf16 one read
// from its f32 bytes in the file (file_dtype f32, its bytes unchanged).
void toBfloat16(sl::schedule::Schedule &schedule);

// Sets an environment variable (or, with a null value, unsets it) for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

// Builds schedules buffer by buffer: each new buffer is placed, 64-byte aligned, after the last one
// of its memory space, and the arena and pool grow to fit. Streams 0, 1, 2 are COMPUTE,
// HOST_TO_DEVICE and DEVICE_TO_HOST.
class ScheduleBuilder {
public:
  enum : uint32_t { kCompute, kHostToDevice, kDeviceToHost };

  ScheduleBuilder();
  uint32_t buffer(const std::string &name, sl::schedule::MemorySpace space,
                  sl::schedule::DType dtype, Shape shape);
  // Another view of buffer `of`: the same bytes and dtype, another shape (a reshape).
  uint32_t alias(const std::string &name, uint32_t of, Shape shape);
  // COPY goes on the host-to-device stream when its result is on the device, else on the
  // device-to-host one; every other op on the compute stream.
  sl::schedule::Kernel &kernel(sl::schedule::OpKind op, const std::string &name,
                               std::vector<uint32_t> operands, uint32_t result);
  void input(const std::string &name, uint32_t buffer, uint32_t program = 0);
  void output(const std::string &name, uint32_t buffer, uint32_t program = 0);
  void parameter(uint32_t buffer, const std::string &file, uint64_t fileOffset);
  void constant(uint32_t buffer, const std::string &data);
  template <typename T> void constant(uint32_t buffer, const std::vector<T> &values) {
    constant(buffer,
             std::string(reinterpret_cast<const char *>(values.data()), values.size() * sizeof(T)));
  }

  sl::schedule::Schedule schedule;
};

// A tiny attention block on token ids, built with ScheduleBuilder the way sl-opt would schedule it
// (copies in, compute, copies out, ordered by events). It exercises the version 2 ops and
// constants:
//   h = GATHER(emb, ids)                    ids i64 [1, S], one of them negative
//   n = RMS_NORM(h, g)
//   q, k, v = n @ wq, n @ wk, n @ wv       q viewed as [1, S, Hq, Dh] and TRANSPOSEd to heads
//   q, k = ROTARY(q | k, cos, sin)         in place; cos and sin are full-size constants
//   a = ATTENTION(q, k, v, causal)         Hq = 2 query heads share Hkv = 1 key/value head
//   r = TRANSPOSE(a) viewed as [1, S, D] + h
//   keep = LESS(ids, limit)                limit an i64 splat constant
//   y = WHERE(keep, r, fill)               fill an f32 splat constant
// with outputs y (f32 [1, S, D]) and keep (bool [1, S]).
struct TinyAttention {
  static constexpr int64_t kVocab = 6, kSeq = 4, kDim = 8, kHeads = 2, kHeadDim = 4;
  static constexpr int64_t kLimit = 3;
  static constexpr float kFill = -1.0f, kEpsilon = 1e-5f, kScale = 0.5f;

  sl::schedule::Schedule schedule;
  std::vector<float> emb, g, wq, wk, wv, cos, sin;
  int gatherKernel = -1;

  static TinyAttention build(uint32_t seed);
  std::string paramsFileBytes() const;
  std::string write(const std::string &dir) const;
  // The same block as naive loops: y and keep (0 or 1) for the ids.
  std::vector<float> referenceY(const std::vector<int64_t> &ids) const;
  std::vector<uint8_t> referenceKeep(const std::vector<int64_t> &ids) const;
};

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

// A schedule whose streams overlap and whose device arena is reused, as sl-allocate would lay it
// out, with accumulation on the host:
//   k0 x.h2d     COPY x -> a                  stream 1 (h2d), records event 0
//   k1 relu      RELU a -> b                  stream 0 (compute), waits 0, records 1
//   k2 b.d2h     COPY b -> y                  stream 2 (d2h), waits 1
//   k3 sigmoid   SIGMOID b -> c               stream 0; c reuses a's bytes (a is dead), records 2
//   k4 c.d2h     COPY c -> z                  stream 2, waits 2, records 3
//   k5 sum       ACCUMULATE (y, z) -> y       stream 3 (host compute), in place, waits 3
// x f32 [kSize] is the input; y = relu(x) + sigmoid(relu(x)) and z = sigmoid(relu(x)) the outputs.
struct StreamedSchedule {
  static constexpr int64_t kSize = 5;
  enum : uint32_t { X, Y, Z, A, B, C };
  enum : uint32_t { kHostCompute = 3 };
  static sl::schedule::Schedule build();
};

// A schedule whose GATHER indices are computed, not an input (so the executor cannot check them
// before the run; the kernel must): y = GATHER(emb, ids + 1) with emb a constant [4, 2] holding
// 0..7 and ids i64 [3] the input. ids {0, 3, 1} makes kernel kLookupKernel ('lookup') fail on
// index 4 (element 1); ids {0, 2, 1} gives y = {2, 3, 6, 7, 4, 5}.
struct ShiftedLookup {
  enum : int { kLookupKernel = 4 };
  static sl::schedule::Schedule build();
};

// A tiny train schedule (kind "train", slrt/trainer.h) built from forward kernels, so that its loss
// and gradients are easy to compute by hand:
//   x = GATHER(emb, input_ids)                       [B, S, D], emb a constant [V, D]
//   r = x @ w + b - GATHER(target, labels)           [B, S, K], target a constant [V, K]
//   loss = REDUCE_MEAN(r * r)                        f32 []
//   g = r * (2 / (B*S*K))                            dloss/dr
//   grad:w = TRANSPOSE(x viewed [B*S, D]) @ (g viewed [B*S, K]),   grad:b = REDUCE_SUM(g, {0, 1})
// with parameters w [D, K] and b [K] read from a parameter file. Row kNanToken of emb is NaN, so a
// step whose inputs hold that token has a NaN loss. With a poisonToken, grad:w also gets
// REDUCE_SUM(GATHER(poison, labels), {0, 1}) added, poison a constant [V, D, K] of zeros but NaN
// in the token's row: a step whose labels hold that token has a NaN grad:w, while its loss and
// grad:b stay finite.
struct TinyTrain {
  static constexpr int64_t kVocab = 8, kDim = 4, kNanToken = 7;

  int64_t batch = 2, seq = 3, out = 3;
  sl::schedule::Schedule schedule;
  std::vector<float> w, b, emb, target;
  int embedKernel = -1;

  // `name` names the schedule and parameter files write() creates.
  // With `bf16Parameters`, w and b are bf16 buffers read from the f32 file (file_dtype F32) and
  // widened by CAST kernels on the device; the loss and grad:w stay f32 (mixed precision), grad:b
  // is rounded to bf16.
  static TinyTrain build(uint32_t seed, int64_t batch = 2, int64_t seq = 3, int64_t out = 3,
                         const std::string &name = "tiny_train", int64_t poisonToken = -1,
                         bool bf16Parameters = false);
  // Appends a HOST_COMPUTE stream and one OPTIMIZER_STEP per group of parameter indices (0: w,
  // 1: b), in the order given, after the copies of the loss and gradients to the host (the first
  // waits for the last of them).
  void addOptimizerSteps(const std::vector<std::vector<uint32_t>> &groups);
  // Writes the parameter file and the schedule into `dir`; returns the schedule's path.
  std::string write(const std::string &dir) const;

  struct Result {
    double loss;
    std::vector<double> gradW, gradB;
  };
  // The loss and gradients, in double, for the weights `w` and `b` and one batch.
  Result reference(const std::vector<float> &w, const std::vector<float> &b,
                   const std::vector<int64_t> &ids, const std::vector<int64_t> &labels) const;

  std::string name;
};

// A tiny generate schedule (kind "generate", slrt/generator.h), hand-built the way sl-opt would
// schedule it, whose "model" is one attention layer without projections: a token's embedding row
// is its query, key and value, and the next token's logits after a sequence s are
//   logits(s) = head^T attention(q = emb[s_last], k = v = emb[s_0..s_last])    (scale kScale)
// with emb [vocab, kDim] and head [kDim, vocab] constants. Streams 0..2 as ScheduleBuilder's and
// 3 HOST_COMPUTE; the KV cache is a host buffer [batch, 2, 1, cache_len, kDim].
//   prefill  h = GATHER(emb, input_ids) [B, P, D], a = ATTENTION(h, h, h, causal),
//            logits = TAKE_ROWS(a, last_index) @ head; h copied to the host and KV_WRITE'd into
//            cache positions [0, P)
//   decode   x = GATHER(emb, input_ids) [B, 1, D], the cache copied to the device,
//            a = DECODE_ATTENTION(x, x, x, cache, position), logits = a @ head; x copied to the
//            host and KV_WRITE'd at position
// Decode's logits are right only if prefill and every earlier decode wrote the cache right.
struct TinyGenerate {
  static constexpr int64_t kDim = 8;
  static constexpr float kScale = 0.5f;

  int64_t batch = 2, maxPrompt = 4, maxNew = 5, vocab = 16;
  sl::schedule::Schedule schedule;
  std::vector<float> emb, head;
  // Kernel indices of interest.
  int kvWriteKernel = -1, decodeAttentionKernel = -1;

  static TinyGenerate build(uint32_t seed, int64_t batch = 2, int64_t maxPrompt = 4,
                            int64_t maxNew = 5, int64_t vocab = 16);
  // Writes the schedule into `dir` as NAME.slsched; returns its path.
  std::string write(const std::string &dir, const std::string &name = "tiny_generate") const;
  // The logits after the sequence `tokens`, in double.
  std::vector<double> referenceLogits(const std::vector<int64_t> &tokens) const;
  // The greedy continuation of `prompt`: up to `count` tokens, ending after a token of `stop`.
  // `margin`, when given, gets the smallest gap between the best and the second-best logit of
  // any step (a tiny one would let float rounding pick another token).
  std::vector<int64_t> referenceGreedy(const std::vector<int64_t> &prompt, int64_t count,
                                       const std::vector<int64_t> &stop = {},
                                       double *margin = nullptr) const;
};

} // namespace slrt::test
