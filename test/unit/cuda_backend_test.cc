// The CUDA backend against the CPU backend, the reference: every kernel on fresh random inputs
// (the seed is printed with each failure; SLRT_TEST_SEED=N repeats a run), results poisoned before
// each run so that an element left unwritten fails, and whole schedules through the executor and
// the trainer. Every test that needs a GPU skips itself where none is visible (ctest label gpu).
//
// bf16: every float kernel family runs in f32, f64 and bf16. A bf16 case has random inputs rounded
// to bf16; its reference is the CPU backend's f32 kernel on the same values widened (exactly), and
// the CUDA result, widened, must be that reference rounded once to bf16 (expectAgreeBf16 says how
// closely). Kernels that only move elements run in bf16 on both backends and agree bit for bit.
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/backend.h"
#include "slrt/bfloat16.h"
#include "slrt/cuda_backend.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/trace.h"
#include "slrt/trainer.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

bool haveGpu() {
  static const bool have = cudaDeviceCountOrZero() > 0;
  return have;
}

#define SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                             \
    if (!haveGpu())                                                                                \
      GTEST_SKIP() << "no CUDA device is visible";                                                 \
  } while (0)

uint32_t freshSeed() {
  if (const char *fixed = std::getenv("SLRT_TEST_SEED"))
    return static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10));
  return std::random_device{}();
}

// --- values --------------------------------------------------------------------------------------

// A tensor in ordinary host memory.
struct Value {
  DType dtype = F32;
  Shape shape;
  std::vector<std::byte> bytes;

  int64_t numel() const { return static_cast<int64_t>(slrt::numel(shape).value()); }
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes.data()); }
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(bytes.data()); }
};

template <typename T> Value valueOf(DType dtype, Shape shape, const std::vector<T> &values) {
  Value v{dtype, std::move(shape), {}};
  EXPECT_EQ(static_cast<int64_t>(values.size()), v.numel());
  v.bytes.resize(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(v.bytes.data(), values.data(), v.bytes.size());
  return v;
}

bool isFloat(DType dtype) { return dtype == F32 || dtype == F64 || dtype == BF16; }

// The quiet NaN that poisons bf16 results.
constexpr uint16_t kBf16Nan = 0x7fc0;

// Element i of a float Value (f32, f64 or bf16; a bf16 element is rounded from x through f32).
void setFloat(Value &v, int64_t i, double x) {
  if (v.dtype == F64)
    v.as<double>()[i] = x;
  else if (v.dtype == BF16)
    v.as<uint16_t>()[i] = floatToBfloat16(static_cast<float>(x));
  else
    v.as<float>()[i] = static_cast<float>(x);
}

double getFloat(const Value &v, int64_t i) {
  if (v.dtype == F64)
    return v.as<double>()[i];
  if (v.dtype == BF16)
    return bfloat16ToFloat(v.as<uint16_t>()[i]);
  return v.as<float>()[i];
}

// Uniform in [lo, hi), as f32, f64 or bf16 (rounded).
Value uniform(std::mt19937 &rng, Shape shape, DType dtype = F32, double lo = -1, double hi = 1) {
  Value v{dtype, std::move(shape), {}};
  std::uniform_real_distribution<double> dist(lo, hi);
  int64_t n = v.numel();
  v.bytes.resize(static_cast<size_t>(n) * dtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i)
    setFloat(v, i, dist(rng));
  return v;
}

// Uniform magnitude in [lo, hi) with a random sign: divisors and reciprocals away from zero.
Value awayFromZero(std::mt19937 &rng, Shape shape, DType dtype = F32, double lo = 0.5,
                   double hi = 1.5) {
  Value v = uniform(rng, std::move(shape), dtype, lo, hi);
  std::bernoulli_distribution flip(0.5);
  for (int64_t i = 0; i < v.numel(); ++i)
    if (flip(rng))
      setFloat(v, i, -getFloat(v, i));
  return v;
}

Value integers(std::mt19937 &rng, Shape shape, int64_t lo, int64_t hi, DType dtype = I64) {
  Value v{dtype, std::move(shape), {}};
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  int64_t n = v.numel();
  v.bytes.resize(static_cast<size_t>(n) * dtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == I64)
      v.as<int64_t>()[i] = dist(rng);
    else if (dtype == I32)
      v.as<int32_t>()[i] = static_cast<int32_t>(dist(rng));
    else if (dtypeSize(dtype) == 2) // f16, bf16: bit patterns, for ops that only move them
      v.as<uint16_t>()[i] = static_cast<uint16_t>(dist(rng));
    else
      v.as<uint8_t>()[i] = static_cast<uint8_t>(dist(rng));
  }
  return v;
}

// What a result holds before the kernel runs: NaN for floats (bf16 too), 0x5a bytes otherwise. No
// kernel writes either by accident, so an element left unwritten shows.
void poison(std::byte *data, DType dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == F32)
      reinterpret_cast<float *>(data)[i] = std::numeric_limits<float>::quiet_NaN();
    else if (dtype == F64)
      reinterpret_cast<double *>(data)[i] = std::numeric_limits<double>::quiet_NaN();
    else if (dtype == BF16)
      std::memcpy(data + i * 2, &kBf16Nan, 2);
    else
      std::memset(data + i * dtypeSize(dtype), 0x5a, dtypeSize(dtype));
  }
}

// --- running one kernel
// ---------------------------------------------------------------------------

struct ResultSpec {
  DType dtype;
  Shape shape;
  // >= 0: the result is that operand's very buffer (a kernel run in place).
  int aliasOf = -1;
};

struct Outcome {
  std::vector<Value> results;
  std::string error; // the Error's message, or empty
};

// Runs `kernel` on `backend` as the executor would: every operand is written to the host pool and
// copied to the device arena, every result is poisoned there, the kernel runs on the arena (on the
// pool for a host kernel), and the results are copied back.
Outcome runOn(Backend &backend, const Kernel &kernel, const std::vector<Value> &operands,
              const std::vector<ResultSpec> &results, bool onHost = false) {
  constexpr uint64_t kAlign = 256;
  uint64_t end = 0;
  auto place = [&](uint64_t bytes) {
    uint64_t at = (end + kAlign - 1) / kAlign * kAlign;
    end = at + bytes;
    return at;
  };
  std::vector<uint64_t> operandAt, resultAt;
  for (const Value &v : operands)
    operandAt.push_back(place(v.bytes.size()));
  for (const ResultSpec &r : results)
    resultAt.push_back(r.aliasOf >= 0 ? operandAt[static_cast<size_t>(r.aliasOf)]
                                      : place(numel(r.shape).value() * dtypeSize(r.dtype)));
  backend.allocate(end, end);
  std::byte *pool = backend.hostPool(), *arena = backend.deviceArena();
  auto refs = [&](uint64_t at, DType dtype, const Shape &shape, TensorRef &host,
                  TensorRef &device) {
    uint64_t bytes = numel(shape).value() * dtypeSize(dtype);
    host = TensorRef{pool + at, HOST, dtype, shape, bytes};
    device = TensorRef{arena + at, DEVICE, dtype, shape, bytes};
  };
  std::vector<TensorRef> hostIn(operands.size()), deviceIn(operands.size());
  std::vector<TensorRef> hostOut(results.size()), deviceOut(results.size());
  for (size_t i = 0; i < operands.size(); ++i) {
    refs(operandAt[i], operands[i].dtype, operands[i].shape, hostIn[i], deviceIn[i]);
    if (!operands[i].bytes.empty())
      std::memcpy(hostIn[i].data, operands[i].bytes.data(), operands[i].bytes.size());
    backend.copy(hostIn[i], deviceIn[i]);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    refs(resultAt[i], results[i].dtype, results[i].shape, hostOut[i], deviceOut[i]);
    if (results[i].aliasOf >= 0)
      continue;
    poison(hostOut[i].data, results[i].dtype, numel(results[i].shape).value());
    backend.copy(hostOut[i], deviceOut[i]);
  }
  std::vector<const TensorRef *> in, out;
  for (size_t i = 0; i < operands.size(); ++i)
    in.push_back(onHost ? &hostIn[i] : &deviceIn[i]);
  for (size_t i = 0; i < results.size(); ++i)
    out.push_back(onHost ? &hostOut[i] : &deviceOut[i]);
  Outcome outcome;
  try {
    // A kernel the host runs reads and writes the pool at once: the uploads of its poisoned
    // results must be done first (copies are asynchronous).
    if (onHost)
      backend.synchronize();
    backend.execute(kernel, in, out);
    backend.synchronize();
  } catch (const Error &e) {
    outcome.error = e.what();
  }
  if (!onHost)
    for (size_t i = 0; i < results.size(); ++i)
      backend.copy(deviceOut[i], hostOut[i]);
  backend.synchronize(); // the downloads, before the host reads them
  for (size_t i = 0; i < results.size(); ++i) {
    Value v{results[i].dtype, results[i].shape, {}};
    v.bytes.assign(hostOut[i].data, hostOut[i].data + hostOut[i].bytes);
    outcome.results.push_back(std::move(v));
  }
  return outcome;
}

// Element i of a float result agrees with the reference when both are NaN, both the same
// infinity, or |actual - expected| <= tolerance * (1 + |expected|). Other dtypes must match
// exactly.
void expectAgree(const Value &actual, const Value &expected, double tolerance,
                 const std::string &what) {
  ASSERT_EQ(actual.bytes.size(), expected.bytes.size()) << what;
  if (!isFloat(expected.dtype)) {
    for (size_t i = 0; i < actual.bytes.size(); ++i)
      ASSERT_EQ(actual.bytes[i], expected.bytes[i])
          << what << ": byte " << i << " (element " << i / dtypeSize(expected.dtype) << ")";
    return;
  }
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double a = getFloat(actual, i), e = getFloat(expected, i);
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(a)) << what << ": element " << i << " is " << a << ", expected NaN";
      continue;
    }
    if (std::isinf(e)) {
      ASSERT_EQ(a, e) << what << ": element " << i;
      continue;
    }
    ASSERT_LE(std::fabs(a - e), tolerance * (1 + std::fabs(e)))
        << what << ": element " << i << " is " << a << ", the CPU backend's " << e;
  }
}

// Tolerances, relative (see expectAgree): elementwise maps differ from the CPU's libm by an ulp or
// two; sums, GEMMs, norms and attention also by their order of summation.
constexpr double kExact = 0;
constexpr double kElementwise = 1e-5;
constexpr double kReduction = 1e-4;

// A bf16 result g against its reference, the CPU backend's f32 result r on the same (widened)
// inputs. The CUDA kernel computes an f32 value x on the GPU, within d = tolerance * (1 + |r|) of r
// (the f32 tests check that bound for the same kernels; 1% is added), and rounds it once to bf16,
// to nearest even. Rounding is monotonic, so, element by element:
//   round(r - d) <= g <= round(r + d): where d is small next to r's bf16 spacing (most elements)
//   g must be exactly r rounded to bf16, and at most a neighbour where r lies within d of a
//   rounding boundary; with tolerance 0 (moves, CAST, a GEMM's k = 0) exactly round(r);
//   the same infinity where r is infinite, NaN where r is NaN.
// Over the whole result, the norm-wise bound that one rounding per element keeps however long
// the sums or GEMMs behind it (|round(x) - x| <= 2^-8 |x| with 8 significant bits):
//   ||g - r|| <= 2^-8 ||r|| + 1.01 * tolerance * ||1 + |r|||.
// A kernel that rounds toward zero, reads a bf16 element as something else, accumulates in bf16,
// skips an element or writes the wrong one fails the first.
constexpr double kBf16Rounding = 1.0 / 256; // 2^-8

void expectAgreeBf16(const Value &actual, const Value &expected, double tolerance,
                     const std::string &what) {
  ASSERT_EQ(actual.dtype, BF16) << what;
  ASSERT_EQ(expected.dtype, F32) << what;
  ASSERT_EQ(actual.numel(), expected.numel()) << what;
  double error = 0, norm = 0, floor = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    uint16_t bits = actual.as<uint16_t>()[i];
    float e = expected.as<float>()[i];
    double g = bfloat16ToFloat(bits);
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(g)) << what << ": element " << i << " is " << g << ", expected NaN";
      continue;
    }
    if (tolerance == 0) {
      ASSERT_EQ(bits, floatToBfloat16(e))
          << what << ": element " << i << " is " << g << ", the CPU backend's " << e
          << " rounded to bf16 is " << bfloat16ToFloat(floatToBfloat16(e));
      continue;
    }
    if (std::isinf(e)) {
      ASSERT_EQ(g, static_cast<double>(e)) << what << ": element " << i;
      continue;
    }
    double r = e, d = 1.01 * tolerance * (1 + std::fabs(r));
    double lo = bfloat16ToFloat(floatToBfloat16(static_cast<float>(r - d)));
    double hi = bfloat16ToFloat(floatToBfloat16(static_cast<float>(r + d)));
    ASSERT_TRUE(lo <= g && g <= hi)
        << what << ": element " << i << " is " << g << ", the CPU backend's f32 result " << r
        << " rounded to bf16 within " << d << " is in [" << lo << ", " << hi << "]";
    error += (g - r) * (g - r);
    norm += r * r;
    floor += (1 + std::fabs(r)) * (1 + std::fabs(r));
  }
  EXPECT_LE(std::sqrt(error), kBf16Rounding * std::sqrt(norm) + 1.01 * tolerance * std::sqrt(floor))
      << what << ": the norm of the error against the CPU backend's f32 result (norm "
      << std::sqrt(norm) << ")";
}

// Kernels that only move elements: they run in bf16 on the CPU backend too, and must agree bit
// for bit. Every other kernel with a bf16 buffer is checked against the CPU backend's f32 kernel.
bool onlyMoves(OpKind op) {
  switch (op) {
  case TRANSPOSE:
  case SLICE:
  case EXPAND:
  case CONCAT:
  case TRILU:
  case GATHER:
  case TAKE_ROWS:
  case WHERE:
    return true;
  default:
    return false;
  }
}

// The f32 Value holding a bf16 Value's elements (exactly); other dtypes as they are.
Value widened(const Value &v) {
  if (v.dtype != BF16)
    return v;
  Value wide{F32, v.shape, {}};
  wide.bytes.resize(static_cast<size_t>(v.numel()) * sizeof(float));
  for (int64_t i = 0; i < v.numel(); ++i)
    wide.as<float>()[i] = bfloat16ToFloat(v.as<uint16_t>()[i]);
  return wide;
}

std::string describe(const Kernel &kernel, const std::vector<Value> &operands) {
  std::string text = OpKind_Name(kernel.op()) + "(";
  for (size_t i = 0; i < operands.size(); ++i)
    text += (i ? ", " : "") + dtypeName(operands[i].dtype) + " " + formatShape(operands[i].shape);
  text += ")";
  if (kernel.attributes_case() != Kernel::ATTRIBUTES_NOT_SET)
    text += " {" + kernel.ShortDebugString() + "}";
  return text;
}

class CudaKernelTest : public ::testing::Test {
protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    seed = freshSeed();
    rng.seed(seed);
    gpu = createCudaBackend();
  }

  // Runs the kernel on both backends and checks that they agree: the same Error message, or
  // results within `tolerance` (for bf16 results, see expectAgreeBf16). Returns the CUDA backend's
  // outcome.
  Outcome check(const Kernel &kernel, const std::vector<Value> &operands,
                const std::vector<ResultSpec> &results, double tolerance, bool onHost = false) {
    std::string what = describe(kernel, operands) + " (seed " + std::to_string(seed) + ")";
    // A kernel that computes on bf16 buffers: the CPU reference is its f32 kernel on the same
    // values, widened, with f32 results.
    bool bf16 = false;
    for (const Value &v : operands)
      bf16 |= v.dtype == BF16;
    for (const ResultSpec &r : results)
      bf16 |= r.dtype == BF16;
    bf16 &= !onlyMoves(kernel.op());
    std::vector<Value> referenceOperands = operands;
    std::vector<ResultSpec> referenceResults = results;
    if (bf16) {
      for (Value &v : referenceOperands)
        v = widened(v);
      for (ResultSpec &r : referenceResults)
        if (r.dtype == BF16)
          r.dtype = F32;
    }
    Outcome want = runOn(*cpu, kernel, referenceOperands, referenceResults, onHost);
    Outcome got = runOn(*gpu, kernel, operands, results, onHost);
    EXPECT_EQ(got.error, want.error) << what;
    if (got.error.empty() && want.error.empty())
      for (size_t i = 0; i < results.size(); ++i) {
        std::string which = what + " result " + std::to_string(i);
        if (bf16 && results[i].dtype == BF16)
          expectAgreeBf16(got.results[i], want.results[i], tolerance, which);
        else
          expectAgree(got.results[i], want.results[i], tolerance, which);
      }
    return got;
  }

  // A kernel whose data makes it fail: the same message on both backends, and on the GPU nothing
  // written (every result still poisoned).
  void checkError(const Kernel &kernel, const std::vector<Value> &operands,
                  const std::vector<ResultSpec> &results, const std::string &expected) {
    Outcome got = check(kernel, operands, results, kExact);
    EXPECT_THAT(got.error, HasSubstr(expected));
    for (size_t i = 0; i < results.size(); ++i) {
      Value poisoned{results[i].dtype, results[i].shape, {}};
      poisoned.bytes.resize(got.results[i].bytes.size());
      poison(poisoned.bytes.data(), poisoned.dtype, poisoned.numel());
      EXPECT_EQ(
          std::memcmp(poisoned.bytes.data(), got.results[i].bytes.data(), poisoned.bytes.size()), 0)
          << describe(kernel, operands) << ": result " << i << " was written before the error";
    }
  }

  uint32_t seed = 0;
  std::mt19937 rng;
  std::unique_ptr<Backend> cpu = createCpuBackend();
  std::unique_ptr<Backend> gpu;
};

// Every float kernel family runs in each (bf16: stored in bf16, computed in fp32).
const DType kFloats[] = {F32, F64, BF16};

// --- elementwise
// ----------------------------------------------------------------------------------

TEST_F(CudaKernelTest, BinaryFloat) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 5, 7}, {3, 5, 7}}, {{4, 1, 6}, {5, 1}}, {{}, {2, 3}}, {{300, 257}, {257}}};
  for (DType dtype : kFloats)
    for (OpKind op : {ADD, SUB, MUL, DIV, POW})
      for (const auto &[sa, sb] : shapes) {
        Value a = op == POW ? uniform(rng, sa, dtype, 0.1, 2) : uniform(rng, sa, dtype);
        Value b = op == DIV ? awayFromZero(rng, sb, dtype) : uniform(rng, sb, dtype, -2, 2);
        Shape y = *broadcastShapes(sa, sb);
        check(makeKernel(op), {a, b}, {{dtype, y}}, kElementwise);
        if (sa == y)
          check(makeKernel(op), {a, b}, {{dtype, y, 0}}, kElementwise);
      }
}

TEST_F(CudaKernelTest, BinaryI64WrapsAndTruncates) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  Value a = valueOf<int64_t>(I64, {2, 4}, {kMax, kMin, -7, 7, 9, -9, 0, 5});
  Value b = valueOf<int64_t>(I64, {4}, {1, -1, 2, -2});
  for (OpKind op : {ADD, SUB, MUL, DIV})
    check(makeKernel(op), {a, b}, {{I64, {2, 4}}}, kExact);
  Value random = integers(rng, {6, 5}, -1000, 1000), divisor = integers(rng, {5}, 1, 30);
  for (OpKind op : {ADD, SUB, MUL, DIV})
    check(makeKernel(op), {random, divisor}, {{I64, {6, 5}, 0}}, kExact);
  Value zero = valueOf<int64_t>(I64, {4}, {3, 1, 0, 0});
  checkError(makeKernel(DIV), {a, zero}, {{I64, {2, 4}}}, "integer division by zero (element 2");
}

TEST_F(CudaKernelTest, UnaryFloat) {
  for (DType dtype : kFloats)
    for (OpKind op : {RELU, SIGMOID, SILU, SQRT, RECIPROCAL, NEG, EXP, ERF, TANH, COS, SIN, GELU})
      for (const Shape &shape : {Shape{}, Shape{7, 9}, Shape{70001}}) {
        Value x = op == SQRT         ? uniform(rng, shape, dtype, 0, 4)
                  : op == RECIPROCAL ? awayFromZero(rng, shape, dtype)
                                     : uniform(rng, shape, dtype, -6, 6);
        for (bool tanh : {false, true}) {
          Kernel k = makeKernel(op);
          if (op == GELU)
            k.mutable_gelu()->set_tanh(tanh);
          else if (tanh)
            continue;
          check(k, {x}, {{dtype, shape}}, kElementwise);
          check(k, {x}, {{dtype, shape, 0}}, kElementwise);
        }
      }
  for (DType dtype : {F32, BF16}) {
    Value big{dtype, {4}, std::vector<std::byte>(4 * dtypeSize(dtype))};
    for (int64_t i = 0; i < 4; ++i)
      setFloat(big, i, std::vector<double>{-100, 100, -INFINITY, NAN}[static_cast<size_t>(i)]);
    for (OpKind op : {SIGMOID, SILU, EXP, TANH, RELU})
      check(makeKernel(op), {big}, {{dtype, {4}}}, kElementwise);
  }
  check(makeKernel(NEG), {valueOf<int64_t>(I64, {3}, {std::numeric_limits<int64_t>::min(), 4, -5})},
        {{I64, {3}}}, kExact);
}

// Small integers, as `dtype`: floats that EQUAL finds equal, bits of any element size.
Value smallValues(std::mt19937 &rng, Shape shape, DType dtype, int64_t lo, int64_t hi) {
  if (!isFloat(dtype))
    return integers(rng, std::move(shape), lo, hi, dtype);
  Value whole = integers(rng, shape, lo, hi), v{dtype, std::move(shape), {}};
  v.bytes.resize(static_cast<size_t>(whole.numel()) * dtypeSize(dtype));
  for (int64_t i = 0; i < whole.numel(); ++i)
    setFloat(v, i, static_cast<double>(whole.as<int64_t>()[i]));
  return v;
}

TEST_F(CudaKernelTest, CompareAndWhere) {
  for (DType dtype : {F32, F64, BF16, I64})
    for (OpKind op : {EQUAL, LESS})
      check(makeKernel(op),
            {smallValues(rng, {4, 1, 5}, dtype, -2, 2), smallValues(rng, {3, 1}, dtype, -2, 2)},
            {{BOOL, {4, 3, 5}}}, kExact);
  Value condition = integers(rng, {3, 1}, 0, 3, BOOL); // 2 and 3 are true too
  for (DType dtype : {F32, F64, I64, I32, BOOL, BF16}) {
    Value x =
        isFloat(dtype) ? uniform(rng, {2, 3, 4}, dtype) : smallValues(rng, {2, 3, 4}, dtype, 0, 1);
    Value y = isFloat(dtype) ? uniform(rng, {4}, dtype) : smallValues(rng, {4}, dtype, 0, 1);
    check(makeKernel(WHERE), {condition, x, y}, {{dtype, {2, 3, 4}}}, kExact);
  }
}

TEST_F(CudaKernelTest, CastEveryPair) {
  // The last row for bf16: ties to even (1 + 2^-8, 1 + 3 * 2^-8), a value that f64 -> f32 makes
  // a tie (bf16 rounds through f32), past the largest bf16 (to infinity), an f32 subnormal, and
  // integers that bf16 rounds.
  const std::vector<double> specials = {
      0.0,    -0.0,   2.7,     -2.7,         0.5,        -1e20,      1e20,
      3e9,    -3e9,   1e-30,   255.9,        -129.5,     INFINITY,   -INFINITY,
      NAN,    9.3e18, -9.3e18, 2147483647.0, 1.00390625, 1.01171875, 1.00390625 + 1e-12,
      3.4e38, 1e-40,  257.0,   -1001.0};
  for (DType from : {F32, F64, BF16, I64, I32, BOOL}) {
    Value x{from, {static_cast<int64_t>(specials.size())}, {}};
    x.bytes.resize(specials.size() * dtypeSize(from));
    for (size_t i = 0; i < specials.size(); ++i) {
      double s = specials[i];
      if (isFloat(from))
        setFloat(x, static_cast<int64_t>(i), s);
      else if (from == I64)
        x.as<int64_t>()[i] = std::isfinite(s) && std::fabs(s) < 9e18
                                 ? static_cast<int64_t>(s)
                                 : static_cast<int64_t>(i) << 40;
      else if (from == I32)
        x.as<int32_t>()[i] = static_cast<int32_t>(std::isfinite(s) && std::fabs(s) < 2e9 ? s : i);
      else
        x.as<uint8_t>()[i] = static_cast<uint8_t>(i % 3); // 2 is true too
    }
    for (DType to : {F32, F64, BF16, I64, I32, BOOL})
      check(makeKernel(CAST), {x}, {{to, x.shape}}, kExact);
  }
}

TEST_F(CudaKernelTest, FusedElementwiseAndGradients) {
  for (DType dtype : kFloats) {
    Shape shape = {5, 67};
    Value gate = uniform(rng, shape, dtype, -4, 4), up = uniform(rng, shape, dtype);
    Value dy = uniform(rng, shape, dtype);
    check(makeKernel(SWIGLU), {gate, up}, {{dtype, shape}}, kElementwise);
    check(makeKernel(SWIGLU), {gate, up}, {{dtype, shape, 1}}, kElementwise);
    check(makeKernel(ACCUMULATE), {gate, up}, {{dtype, shape, 0}}, kElementwise);
    check(makeKernel(SWIGLU_GRAD), {gate, up, dy}, {{dtype, shape, 2}, {dtype, shape}},
          kElementwise);
    for (bool tanh : {false, true}) {
      Kernel k = makeKernel(GELU_GRAD);
      k.mutable_gelu()->set_tanh(tanh);
      check(k, {gate, dy}, {{dtype, shape}}, kElementwise);
      check(k, {gate, dy}, {{dtype, shape, 1}}, kElementwise);
    }
  }
}

TEST_F(CudaKernelTest, HostAccumulateRunsOnTheHost) {
  Value a = uniform(rng, {3, 9}), b = uniform(rng, {3, 9});
  check(makeKernel(ACCUMULATE), {a, b}, {{F32, {3, 9}, 0}}, kExact, /*onHost=*/true);
}

// --- reductions, softmax, norms
// -------------------------------------------------------------------

TEST_F(CudaKernelTest, Reduce) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  const std::vector<Case> cases = {{{4, 5, 6}, {}, false},    {{4, 5, 6}, {0}, false},
                                   {{4, 5, 6}, {1}, true},    {{4, 5, 6}, {2}, false},
                                   {{4, 5, 6}, {0, 2}, true}, {{3, 5000}, {1}, false},
                                   {{5000, 3}, {0}, false},   {{3, 0}, {1}, false},
                                   {{}, {}, false},           {{2, 3, 4, 5, 6}, {1, 3}, false}};
  for (DType dtype : kFloats)
    for (OpKind op : {REDUCE_MEAN, REDUCE_SUM})
      for (const Case &c : cases) {
        Kernel k = makeKernel(op);
        for (int64_t axis : c.axes)
          k.mutable_reduce()->add_axes(axis);
        k.mutable_reduce()->set_keepdims(c.keepdims);
        Shape y;
        for (size_t d = 0; d < c.shape.size(); ++d) {
          bool reduced =
              c.axes.empty() || std::find(c.axes.begin(), c.axes.end(), int64_t(d)) != c.axes.end();
          if (!reduced)
            y.push_back(c.shape[d]);
          else if (c.keepdims)
            y.push_back(1);
        }
        check(k, {uniform(rng, c.shape, dtype)}, {{dtype, y}}, kReduction);
      }
}

TEST_F(CudaKernelTest, CumSum) {
  for (int64_t axis : {0, 1, 2})
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        Kernel k = makeKernel(CUMSUM);
        k.mutable_cumsum()->set_axis(axis);
        k.mutable_cumsum()->set_exclusive(exclusive);
        k.mutable_cumsum()->set_reverse(reverse);
        for (DType dtype : kFloats)
          check(k, {uniform(rng, {3, 70, 5}, dtype)}, {{dtype, {3, 70, 5}}}, kReduction);
        check(k, {integers(rng, {3, 70, 5}, -50000, 50000, I64)}, {{I64, {3, 70, 5}}}, kExact);
      }
}

TEST_F(CudaKernelTest, SoftmaxAndItsGradient) {
  for (DType dtype : kFloats)
    for (int64_t axis : {0, 1, 2}) {
      Shape shape = {3, 300, 7};
      Value x = uniform(rng, shape, dtype, -5, 5);
      // Masked scores, a row (along axis 2) of only -inf, and a NaN.
      for (int64_t i = 0; i < x.numel(); i += 5)
        setFloat(x, i, -INFINITY);
      for (int64_t i = 0; i < 7; ++i)
        setFloat(x, 7 * 11 + i, -INFINITY);
      setFloat(x, 7 * 13 + 3, NAN);
      Kernel k = makeKernel(SOFTMAX);
      k.mutable_axis()->set_axis(axis);
      Outcome y = check(k, {x}, {{dtype, shape}}, kReduction);
      check(k, {x}, {{dtype, shape, 0}}, kReduction);
      Kernel grad = makeKernel(SOFTMAX_GRAD);
      grad.mutable_axis()->set_axis(axis);
      Value probabilities = uniform(rng, shape, dtype, 0, 1), dy = uniform(rng, shape, dtype);
      check(grad, {probabilities, dy}, {{dtype, shape}}, kReduction);
      check(grad, {probabilities, dy}, {{dtype, shape, 1}}, kReduction);
    }
}

TEST_F(CudaKernelTest, LayerNormAndItsGradient) {
  struct Case {
    Shape x;
    int64_t axis;
    Shape scale;
  };
  for (DType dtype : kFloats)
    for (const Case &c : {Case{{2, 3, 8}, 2, {8}}, Case{{2, 3, 8}, 1, {3, 8}},
                          Case{{2, 3, 8}, 1, {1, 8}}, Case{{5, 1000}, 1, {1000}},
                          // Several row chunks and column tiles of the gradient's column sums,
                          // neither a multiple of its tile.
                          Case{{3, 100, 45}, 2, {45}}})
      for (bool withBias : {false, true}) {
        Kernel k = makeKernel(LAYER_NORM);
        k.mutable_norm()->set_axis(c.axis);
        k.mutable_norm()->set_epsilon(1e-5f);
        Value x = uniform(rng, c.x, dtype, -3, 3), scale = uniform(rng, c.scale, dtype);
        std::vector<Value> operands = {x, scale};
        if (withBias)
          operands.push_back(uniform(rng, c.scale, dtype));
        check(k, operands, {{dtype, c.x}}, kReduction);
        check(k, operands, {{dtype, c.x, 0}}, kReduction);
        if (withBias)
          continue;
        // The gradient takes the scale of the normalised dimensions' shape.
        Shape normalized(c.x.begin() + c.axis, c.x.end());
        Value dense = uniform(rng, normalized, dtype), dy = uniform(rng, c.x, dtype);
        Kernel grad = makeKernel(LAYER_NORM_GRAD);
        *grad.mutable_norm() = k.norm();
        check(grad, {x, dense, dy}, {{dtype, c.x}, {dtype, normalized}, {dtype, normalized}},
              kReduction);
        check(grad, {x, dense, dy}, {{dtype, c.x, 2}, {dtype, normalized}, {dtype, normalized}},
              kReduction);
      }
}

TEST_F(CudaKernelTest, RmsNormAndItsGradient) {
  for (DType dtype : kFloats)
    for (const Shape &shape : {Shape{3, 5, 16}, Shape{1, 4096}, Shape{7, 1}, Shape{300, 70}}) {
      Kernel k = makeKernel(RMS_NORM);
      k.mutable_norm()->set_axis(static_cast<int64_t>(shape.size()) - 1);
      k.mutable_norm()->set_epsilon(1e-6f);
      Shape d = {shape.back()};
      Value x = uniform(rng, shape, dtype, -3, 3), scale = uniform(rng, d, dtype);
      Value dy = uniform(rng, shape, dtype);
      check(k, {x, scale}, {{dtype, shape}}, kReduction);
      check(k, {x, scale}, {{dtype, shape, 0}}, kReduction);
      Kernel grad = makeKernel(RMS_NORM_GRAD);
      *grad.mutable_norm() = k.norm();
      check(grad, {x, scale, dy}, {{dtype, shape}, {dtype, d}}, kReduction);
      check(grad, {x, scale, dy}, {{dtype, shape, 0}, {dtype, d}}, kReduction);
      check(grad, {x, scale, dy}, {{dtype, shape, 2}, {dtype, d}}, kReduction);
    }
}

// --- data movement
// ----------------------------------------------------------------------------------

TEST_F(CudaKernelTest, TransposeSliceExpandTrilu) {
  for (DType dtype : {F32, F64, I64, I32, BOOL, BF16}) {
    auto data = [&](Shape shape) {
      return isFloat(dtype) ? uniform(rng, shape, dtype)
                            : integers(rng, shape, 0, dtype == BOOL ? 1 : 50000, dtype);
    };
    Kernel transpose = makeKernel(TRANSPOSE);
    for (int64_t axis : {2, 0, 3, 1})
      transpose.mutable_transpose()->add_perm(axis);
    check(transpose, {data({2, 3, 4, 5})}, {{dtype, {4, 2, 5, 3}}}, kExact);
    check(makeKernel(TRANSPOSE), {data({})}, {{dtype, {}}}, kExact);

    Kernel slice = makeKernel(SLICE);
    for (int64_t start : {1, 9, 0})
      slice.mutable_slice()->add_starts(start);
    for (int64_t step : {2, -3, 1})
      slice.mutable_slice()->add_steps(step);
    check(slice, {data({6, 10, 4})}, {{dtype, {3, 4, 4}}}, kExact);

    check(makeKernel(EXPAND), {data({3, 1})}, {{dtype, {2, 3, 5}}}, kExact);

    Value x = data({2, 5, 7});
    for (bool upper : {false, true})
      for (int64_t k : {int64_t{0}, int64_t{2}, int64_t{-3}, int64_t{100}, int64_t{-100}}) {
        Kernel trilu = makeKernel(TRILU);
        trilu.mutable_trilu()->set_upper(upper);
        trilu.mutable_trilu()->set_k(k);
        check(trilu, {x}, {{dtype, {2, 5, 7}}}, kExact);
        check(trilu, {x}, {{dtype, {2, 5, 7}, 0}}, kExact);
      }
  }
}

TEST_F(CudaKernelTest, SliceGradient) {
  for (DType dtype : kFloats) {
    Kernel grad = makeKernel(SLICE_GRAD);
    for (int64_t start : {1, 9, 0})
      grad.mutable_slice()->add_starts(start);
    for (int64_t step : {2, -3, 1})
      grad.mutable_slice()->add_steps(step);
    check(grad, {uniform(rng, {3, 4, 4}, dtype)}, {{dtype, {6, 10, 4}}}, kExact);
  }
}

TEST_F(CudaKernelTest, GatherAndConcat) {
  Value table = uniform(rng, {10, 6});
  for (DType indexType : {I64, I32}) {
    Value ids = integers(rng, {3, 4}, -10, 9, indexType);
    Kernel gather = makeKernel(GATHER);
    gather.mutable_axis()->set_axis(0);
    check(gather, {table, ids}, {{F32, {3, 4, 6}}}, kExact);
    gather.mutable_axis()->set_axis(1);
    check(gather, {table, integers(rng, {5}, -6, 5, indexType)}, {{F32, {10, 5}}}, kExact);
    gather.mutable_axis()->set_axis(0);
    Value bad = integers(rng, {3, 4}, 0, 9, indexType);
    if (indexType == I64) {
      bad.as<int64_t>()[5] = 10;
      bad.as<int64_t>()[7] = -11;
    } else {
      bad.as<int32_t>()[5] = 10;
      bad.as<int32_t>()[7] = -11;
    }
    checkError(gather, {table, bad}, {{F32, {3, 4, 6}}}, "index 10 (element 5 of the indices");
  }
  Value boolTable = integers(rng, {4, 3}, 0, 1, BOOL);
  Kernel gather = makeKernel(GATHER);
  gather.mutable_axis()->set_axis(0);
  check(gather, {boolTable, integers(rng, {7}, 0, 3)}, {{BOOL, {7, 3}}}, kExact);
  check(gather, {uniform(rng, {9, 5}, BF16), integers(rng, {2, 3}, -9, 8)}, {{BF16, {2, 3, 5}}},
        kExact);

  Kernel concat = makeKernel(CONCAT);
  concat.mutable_axis()->set_axis(1);
  check(concat, {uniform(rng, {2, 3, 4}), uniform(rng, {2, 0, 4}), uniform(rng, {2, 5, 4})},
        {{F32, {2, 8, 4}}}, kExact);
  concat.mutable_axis()->set_axis(0);
  check(concat, {integers(rng, {1, 3}, -5, 5), integers(rng, {2, 3}, -5, 5)}, {{I64, {3, 3}}},
        kExact);
  concat.mutable_axis()->set_axis(2);
  check(concat, {uniform(rng, {2, 3, 1}, BF16), uniform(rng, {2, 3, 6}, BF16)}, {{BF16, {2, 3, 7}}},
        kExact);
}

TEST_F(CudaKernelTest, GatherGradient) {
  for (DType dtype : kFloats)
    for (DType indexType : {I64, I32}) {
      Kernel grad = makeKernel(GATHER_GRAD);
      grad.mutable_axis()->set_axis(0);
      // Repeated and negative indices accumulate.
      Value ids = integers(rng, {4, 5}, -7, 6, indexType);
      check(grad, {ids, uniform(rng, {4, 5, 3}, dtype)}, {{dtype, {7, 3}}}, kReduction);
      grad.mutable_axis()->set_axis(1);
      check(grad, {integers(rng, {6}, -4, 3, indexType), uniform(rng, {2, 6, 3}, dtype)},
            {{dtype, {2, 4, 3}}}, kReduction);
      grad.mutable_axis()->set_axis(0);
      Value bad = integers(rng, {4}, 0, 6, I64);
      bad.as<int64_t>()[2] = 7;
      checkError(grad, {bad, uniform(rng, {4, 3}, dtype)}, {{dtype, {7, 3}}},
                 "index 7 (element 2 of the indices");
    }
}

// --- GEMMs
// ----------------------------------------------------------------------------------------

TEST_F(CudaKernelTest, Matmul) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4, 5}, {5, 6}},  {{3, 4, 5}, {3, 5, 6}},
      {{4, 5}, {2, 5, 6}},     {{2, 1, 4, 5}, {1, 3, 5, 6}},
      {{5}, {5, 6}},           {{3, 4, 5}, {5}},
      {{3, 0}, {0, 4}},        {{1, 1, 4, 5}, {3, 5, 6}},
      {{130, 257}, {257, 129}}};
  for (DType dtype : kFloats)
    for (const auto &[sa, sb] : shapes)
      check(makeKernel(MATMUL), {uniform(rng, sa, dtype), uniform(rng, sb, dtype)},
            {{dtype, *matmulShape(sa, sb)}}, kReduction);
}

TEST_F(CudaKernelTest, MatmulTransposeFlags) {
  // Stored shapes: A [..., K, M] with transA, B [..., N, K] with transB. The shared weight (one
  // GEMM of batch * m rows, or per batch with transA), strided batches, batches broadcast both
  // ways, and blocks larger than one tile.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 5, 4}, {6, 5}}, {{3, 5, 4}, {3, 6, 5}}, {{2, 1, 5, 4}, {1, 3, 6, 5}},
      {{257, 130}, {129, 257}}};
  for (DType dtype : kFloats)
    for (const auto &[sa, sb] : shapes)
      for (int flags = 1; flags < 4; ++flags) {
        bool transA = flags & 1, transB = flags & 2;
        // The operand without its flag is stored as multiplied.
        Shape a = sa, b = sb;
        if (!transA)
          std::swap(a[a.size() - 1], a[a.size() - 2]);
        if (!transB)
          std::swap(b[b.size() - 1], b[b.size() - 2]);
        Kernel kernel = makeKernel(MATMUL);
        kernel.mutable_matmul()->set_trans_a(transA);
        kernel.mutable_matmul()->set_trans_b(transB);
        check(kernel, {uniform(rng, a, dtype), uniform(rng, b, dtype)},
              {{dtype, *matmulShape(a, b, transA, transB)}}, kReduction);
      }
}

TEST_F(CudaKernelTest, Gemm) {
  struct Bias {
    std::vector<int64_t> c; // {} for no C; -1 stands for m, -2 for n
    float beta;
  };
  // A row added as is (beta 1, C [n] or [1, n]) is cuBLASLt's bias epilogue for bf16; the others
  // (and bf16 shapes that cuBLASLt has no algorithm for) go through Y = C, then beta * Y.
  const std::vector<Bias> biases = {{{-2}, -0.5f},    {{-2}, 1.0f},     {{1, -2}, 1.0f},
                                    {{-1, 1}, -0.5f}, {{-1, -2}, 1.0f}, {{}, 0.0f}};
  for (DType dtype : kFloats)
    for (const auto &[m, n, k] : {std::array<int64_t, 3>{33, 17, 45}, {64, 128, 96}})
      for (bool transA : {false, true})
        for (bool transB : {false, true})
          for (const Bias &bias : biases) {
            Kernel gemm = makeKernel(GEMM);
            gemm.mutable_gemm()->set_trans_a(transA);
            gemm.mutable_gemm()->set_trans_b(transB);
            gemm.mutable_gemm()->set_alpha(1.25f);
            gemm.mutable_gemm()->set_beta(bias.beta);
            std::vector<Value> operands = {uniform(rng, transA ? Shape{k, m} : Shape{m, k}, dtype),
                                           uniform(rng, transB ? Shape{n, k} : Shape{k, n}, dtype)};
            if (!bias.c.empty()) {
              Shape c;
              for (int64_t d : bias.c)
                c.push_back(d == -1 ? m : d == -2 ? n : d);
              operands.push_back(uniform(rng, c, dtype));
            }
            check(gemm, operands, {{dtype, {m, n}}}, kReduction);
          }
  for (DType dtype : kFloats) {
    // k = 0: Y = beta * C; and a C that beta 0 leaves unread.
    Kernel gemm = makeKernel(GEMM);
    gemm.mutable_gemm()->set_alpha(1.0f);
    gemm.mutable_gemm()->set_beta(2.0f);
    check(gemm,
          {uniform(rng, {4, 0}, dtype), uniform(rng, {0, 3}, dtype), uniform(rng, {3}, dtype)},
          {{dtype, {4, 3}}}, kExact);
    gemm.mutable_gemm()->set_beta(0.0f);
    Value nanC = uniform(rng, {3}, dtype);
    for (int64_t i = 0; i < 3; ++i)
      setFloat(nanC, i, NAN);
    check(gemm, {uniform(rng, {4, 5}, dtype), uniform(rng, {5, 3}, dtype), nanC}, {{dtype, {4, 3}}},
          kReduction);
  }
}

// --- attention and rotary
// -------------------------------------------------------------------------

struct AttentionCase {
  int64_t batch, heads, kvHeads, s, t, d, dv;
  bool causal, mask;
};

const AttentionCase kAttentionCases[] = {
    {2, 4, 4, 9, 9, 16, 16, true, false},     // MHA, causal
    {1, 4, 2, 7, 7, 8, 8, false, false},      // GQA
    {2, 6, 2, 5, 12, 8, 12, true, false},     // S < T (a prefix is visible), dv != d
    {1, 2, 1, 12, 5, 4, 4, true, false},      // S > T: the first rows see nothing
    {1, 2, 2, 6, 6, 8, 8, false, true},       // additive mask with -inf, a fully masked row
    {1, 2, 1, 300, 300, 32, 32, true, false}, // several key tiles per row
    {2, 2, 2, 3, 200, 64, 64, false, true},   // long rows and a broadcast mask
};

std::vector<Value> attentionOperands(std::mt19937 &rng, const AttentionCase &c, DType dtype,
                                     bool withDy) {
  std::vector<Value> operands = {uniform(rng, {c.batch, c.heads, c.s, c.d}, dtype, -2, 2),
                                 uniform(rng, {c.batch, c.kvHeads, c.t, c.d}, dtype, -2, 2),
                                 uniform(rng, {c.batch, c.kvHeads, c.t, c.dv}, dtype)};
  if (withDy)
    operands.push_back(uniform(rng, {c.batch, c.heads, c.s, c.dv}, dtype));
  if (c.mask) {
    Shape shape = c.t > 100 ? Shape{c.batch, 1, 1, c.t} : Shape{1, c.heads, c.s, c.t};
    Value mask = uniform(rng, shape, dtype, -1, 1);
    for (int64_t i = 0; i < mask.numel(); i += 3)
      setFloat(mask, i, -INFINITY);
    if (c.t <= 100)
      for (int64_t j = 0; j < c.t; ++j)
        setFloat(mask, 2 * c.t + j, -INFINITY); // row 2 of head 0 sees nothing
    operands.push_back(mask);
  }
  return operands;
}

TEST_F(CudaKernelTest, Attention) {
  for (DType dtype : kFloats)
    for (const AttentionCase &c : kAttentionCases) {
      Kernel k = makeKernel(ATTENTION);
      k.mutable_attention()->set_causal(c.causal);
      k.mutable_attention()->set_scale(1.0f / std::sqrt(static_cast<float>(c.d)));
      check(k, attentionOperands(rng, c, dtype, false), {{dtype, {c.batch, c.heads, c.s, c.dv}}},
            kReduction);
    }
}

TEST_F(CudaKernelTest, AttentionGradient) {
  for (DType dtype : kFloats)
    for (const AttentionCase &c : kAttentionCases) {
      Kernel k = makeKernel(ATTENTION_GRAD);
      k.mutable_attention()->set_causal(c.causal);
      k.mutable_attention()->set_scale(1.0f / std::sqrt(static_cast<float>(c.d)));
      check(k, attentionOperands(rng, c, dtype, true),
            {{dtype, {c.batch, c.heads, c.s, c.d}},
             {dtype, {c.batch, c.kvHeads, c.t, c.d}},
             {dtype, {c.batch, c.kvHeads, c.t, c.dv}}},
            kReduction);
    }
}

// attention.layout BSHD (sl-fold-head-transposes): q, k, v, dy and the results stored
// [B, S, H, D]. The inputs are random either way, so the BHSD operands with dimensions 1 and 2
// exchanged are BSHD operands; the CPU backend's BSHD kernels give the BHSD results bit for bit
// (CpuGradientTest.BshdLayoutGivesTheBhsdResults), and check() compares against them.
TEST_F(CudaKernelTest, AttentionBshdLayout) {
  auto bshd = [](Shape shape) {
    std::swap(shape[1], shape[2]);
    return shape;
  };
  for (DType dtype : kFloats)
    for (const AttentionCase &c : kAttentionCases)
      for (OpKind op : {ATTENTION, ATTENTION_GRAD}) {
        bool grad = op == ATTENTION_GRAD;
        Kernel k = makeKernel(op);
        k.mutable_attention()->set_causal(c.causal);
        k.mutable_attention()->set_scale(1.0f / std::sqrt(static_cast<float>(c.d)));
        k.mutable_attention()->set_layout(AttentionAttributes::BSHD);
        std::vector<Value> operands = attentionOperands(rng, c, dtype, grad);
        for (size_t i = 0; i < (grad ? 4u : 3u); ++i)
          operands[i].shape = bshd(operands[i].shape);
        std::vector<ResultSpec> results = {{dtype, bshd({c.batch, c.heads, c.s, c.dv})}};
        if (grad)
          results = {{dtype, bshd({c.batch, c.heads, c.s, c.d})},
                     {dtype, bshd({c.batch, c.kvHeads, c.t, c.d})},
                     {dtype, bshd({c.batch, c.kvHeads, c.t, c.dv})}};
        check(k, operands, results, kReduction);
      }
}

// cuDNN's fused attention (cudnn_attention.cc) against the reference kernels on the same GPU, bf16,
// at the head dims it takes: MHA, GQA and MQA, causal or not, rows longer than one tile. cuDNN
// multiplies the probabilities by V in bf16 (the reference keeps them in fp32), so the tolerance is
// bf16's: norm-wise ||cudnn - ref|| <= 1e-2 ||ref|| (2e-2 for gradients, which sum over more
// rounded terms), and each element within 2^-4 (1 + |ref|); NaN never passes. It needs cuDNN 9 on
// the machine (SLRT_CUDNN_ATTENTION=require makes its absence a failure, not a fallback).
void expectNear(const Value &got, const Value &ref, double normTolerance, const std::string &what) {
  ASSERT_EQ(got.numel(), ref.numel()) << what;
  double diff = 0, norm = 0;
  int64_t bad = -1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double g = getFloat(got, i), r = getFloat(ref, i);
    ASSERT_FALSE(std::isnan(g)) << what << ": element " << i << " is NaN";
    diff += (g - r) * (g - r);
    norm += r * r;
    if (bad < 0 && std::abs(g - r) > 0.0625 * (1 + std::abs(r)))
      bad = i;
  }
  EXPECT_LE(std::sqrt(diff), normTolerance * std::sqrt(norm)) << what;
  EXPECT_LT(bad, 0) << what << ": element " << bad << " is " << getFloat(got, bad)
                    << ", the reference kernel's " << getFloat(ref, bad);
}

TEST_F(CudaKernelTest, CudnnAttentionAgainstTheReferenceKernel) {
  const AttentionCase cases[] = {
      {2, 4, 4, 256, 256, 64, 64, true, false},    // MHA, causal
      {1, 8, 2, 200, 200, 128, 128, true, false},  // GQA, causal, a partial tile
      {2, 4, 1, 130, 130, 96, 96, false, false},   // MQA, not causal
  };
  // In either attention.layout: BSHD is the same cuDNN graph with other strides.
  auto stored = [](bool bshd, Shape shape) {
    if (bshd)
      std::swap(shape[1], shape[2]);
    return shape;
  };
  for (const AttentionCase &c : cases)
    for (OpKind op : {ATTENTION, ATTENTION_GRAD})
      for (bool bshd : {false, true}) {
        Kernel k = makeKernel(op);
        k.mutable_attention()->set_causal(c.causal);
        k.mutable_attention()->set_scale(1.0f / std::sqrt(static_cast<float>(c.d)));
        if (bshd)
          k.mutable_attention()->set_layout(AttentionAttributes::BSHD);
        bool grad = op == ATTENTION_GRAD;
        std::vector<Value> operands = attentionOperands(rng, c, BF16, grad);
        for (Value &operand : operands)
          operand.shape = stored(bshd, operand.shape);
        std::vector<ResultSpec> results = {
            {BF16, stored(bshd, {c.batch, c.heads, c.s, grad ? c.d : c.dv})}};
        if (grad) {
          results.push_back({BF16, stored(bshd, {c.batch, c.kvHeads, c.t, c.d})});
          results.push_back({BF16, stored(bshd, {c.batch, c.kvHeads, c.t, c.dv})});
        }
        Outcome fused, reference;
        {
          ScopedEnv env("SLRT_CUDNN_ATTENTION", "require");
          fused = runOn(*gpu, k, operands, results);
        }
        {
          ScopedEnv env("SLRT_CUDNN_ATTENTION", "0");
          reference = runOn(*gpu, k, operands, results);
        }
        std::string what = describe(k, operands) + " (seed " + std::to_string(seed) + ")";
        ASSERT_EQ(fused.error, "") << what;
        ASSERT_EQ(reference.error, "") << what;
        for (size_t r = 0; r < results.size(); ++r)
          expectNear(fused.results[r], reference.results[r], grad ? 2e-2 : 1e-2,
                     what + " result " + std::to_string(r));
      }
}

TEST_F(CudaKernelTest, RotaryAndItsGradient) {
  for (DType dtype : kFloats)
    for (bool interleaved : {false, true})
      for (const Shape &table : {Shape{6, 8}, Shape{1, 1, 6, 8}, Shape{2, 1, 6, 8}}) {
        Shape x = {2, 3, 6, 8};
        Value cos = uniform(rng, table, dtype), sin = uniform(rng, table, dtype);
        for (OpKind op : {ROTARY, ROTARY_GRAD}) {
          Kernel k = makeKernel(op);
          k.mutable_rotary()->set_interleaved(interleaved);
          Value input = uniform(rng, x, dtype);
          check(k, {input, cos, sin}, {{dtype, x}}, kElementwise);
          check(k, {input, cos, sin}, {{dtype, x, 0}}, kElementwise);
        }
      }
}

// --- loss
// -----------------------------------------------------------------------------------------

TEST_F(CudaKernelTest, CrossEntropyAndItsGradient) {
  for (DType dtype : kFloats)
    for (int64_t vocab : {int64_t{7}, int64_t{1000}}) {
      Value logits = uniform(rng, {3, 5, vocab}, dtype, -4, 4);
      Value labels = integers(rng, {3, 5}, 0, vocab - 1);
      labels.as<int64_t>()[4] = -100;
      labels.as<int64_t>()[9] = -100;
      Kernel loss = makeKernel(CROSS_ENTROPY);
      loss.mutable_cross_entropy()->set_ignore_index(-100);
      check(loss, {logits, labels}, {{dtype, {}}}, kReduction);
      Kernel grad = makeKernel(CROSS_ENTROPY_GRAD);
      *grad.mutable_cross_entropy() = loss.cross_entropy();
      Value dloss = uniform(rng, {}, dtype, 0.5, 2);
      check(grad, {labels, dloss, logits}, {{dtype, {3, 5, vocab}}}, kReduction);
      check(grad, {labels, dloss, logits}, {{dtype, {3, 5, vocab}, 2}}, kReduction);

      Value ignored = valueOf<int64_t>(I64, {2}, {-100, -100});
      Value two = uniform(rng, {2, vocab}, dtype);
      check(loss, {two, ignored}, {{dtype, {}}}, kExact); // NaN, as PyTorch
      check(grad, {ignored, dloss, two}, {{dtype, {2, vocab}}}, kExact);

      Value bad = integers(rng, {3, 5}, 0, vocab - 1);
      bad.as<int64_t>()[6] = vocab;
      bad.as<int64_t>()[8] = -1;
      checkError(loss, {logits, bad}, {{dtype, {}}},
                 "label " + std::to_string(vocab) + " at position 6");
      checkError(grad, {bad, dloss, logits}, {{dtype, {3, 5, vocab}}},
                 "label " + std::to_string(vocab) + " at position 6");
    }
  // One logit: dlogits may be dloss itself.
  Kernel grad = makeKernel(CROSS_ENTROPY_GRAD);
  grad.mutable_cross_entropy()->set_ignore_index(-100);
  check(grad, {valueOf<int64_t>(I64, {}, {0}), uniform(rng, {}), uniform(rng, {1})},
        {{F32, {1}, 1}}, kReduction);
}

// --- generation kernels
// ---------------------------------------------------------------------------

TEST_F(CudaKernelTest, TakeRows) {
  for (DType dtype : {F32, F64, BF16, I64, BOOL}) {
    Value x =
        isFloat(dtype) ? uniform(rng, {3, 5, 4}, dtype) : smallValues(rng, {3, 5, 4}, dtype, 0, 1);
    check(makeKernel(TAKE_ROWS), {x, valueOf<int64_t>(I64, {3}, {4, 0, 2})}, {{dtype, {3, 1, 4}}},
          kExact);
    checkError(makeKernel(TAKE_ROWS), {x, valueOf<int64_t>(I64, {3}, {4, 5, -1})},
               {{dtype, {3, 1, 4}}},
               "index 5 (element 1 of the indices [3]) is out of range for the 5 rows of x "
               "[3, 5, 4]");
  }
}

TEST_F(CudaKernelTest, DecodeAttention) {
  for (DType dtype : kFloats) {
    const int64_t batch = 3, heads = 4, kvHeads = 2, capacity = 300, d = 16;
    std::vector<Value> operands = {uniform(rng, {batch, heads, 1, d}, dtype, -2, 2),
                                   uniform(rng, {batch, kvHeads, 1, d}, dtype, -2, 2),
                                   uniform(rng, {batch, kvHeads, 1, d}, dtype),
                                   uniform(rng, {batch, 2, kvHeads, capacity, d}, dtype, -2, 2),
                                   valueOf<int64_t>(I64, {batch}, {0, 17, capacity})};
    Kernel kernel = makeKernel(DECODE_ATTENTION);
    kernel.mutable_attention()->set_scale(0.25f);
    check(kernel, operands, {{dtype, {batch, heads, 1, d}}}, kReduction);
    operands[4] = valueOf<int64_t>(I64, {batch}, {3, capacity + 1, -1});
    checkError(kernel, operands, {{dtype, {batch, heads, 1, d}}},
               "length 301 (element 1 of the lengths [3]) is out of range for the cache "
               "[3, 2, 2, 300, 16] of 300 positions");
  }
}

// KV_WRITE works on the host pool (a HOST_COMPUTE kernel): the CUDA backend hands it to the CPU
// backend's kernel.
TEST_F(CudaKernelTest, KvWriteRunsOnTheHost) {
  Value cache = uniform(rng, {2, 2, 3, 9, 4}), k = uniform(rng, {2, 3, 2, 4});
  Value v = uniform(rng, {2, 3, 2, 4}), start = valueOf<int64_t>(I64, {2}, {0, 7});
  check(makeKernel(KV_WRITE), {cache, k, v, start}, {{F32, cache.shape, 0}}, kExact,
        /*onHost=*/true);
}

// KV_WRITE over a cache kept on the device: the CUDA kernel, in every float dtype (it moves the
// elements; the bf16 reference is the CPU backend's f32 kernel, so the result must be exact).
TEST_F(CudaKernelTest, KvWriteOnTheDevice) {
  for (DType dtype : kFloats) {
    Value cache = uniform(rng, {2, 2, 3, 9, 4}, dtype), k = uniform(rng, {2, 3, 2, 4}, dtype);
    Value v = uniform(rng, {2, 3, 2, 4}, dtype);
    Kernel write = makeKernel(KV_WRITE);
    check(write, {cache, k, v, valueOf<int64_t>(I64, {2}, {0, 7})}, {{dtype, cache.shape, 0}},
          kExact);
    check(write, {cache, k, v}, {{dtype, cache.shape, 0}}, kExact); // no start: position 0
    // A bad start: the same message, and the cache (the result) untouched.
    Outcome bad = check(write, {cache, k, v, valueOf<int64_t>(I64, {2}, {3, 8})},
                        {{dtype, cache.shape, 0}}, kExact);
    EXPECT_THAT(bad.error, HasSubstr("start 8 (element 1 of the starts [2]) is outside [0, 7]"));
    EXPECT_EQ(bad.results[0].bytes, cache.bytes) << "the cache was written before the error";
  }
}

// The same from k and v in [B, T, Hkv, D] (kv_write.layout BSHD), against the CPU backend's kernel.
TEST_F(CudaKernelTest, KvWriteFromBshdOnTheDevice) {
  for (DType dtype : kFloats) {
    Value cache = uniform(rng, {2, 2, 3, 9, 4}, dtype), k = uniform(rng, {2, 2, 3, 4}, dtype);
    Value v = uniform(rng, {2, 2, 3, 4}, dtype);
    Kernel write = makeKernel(KV_WRITE);
    write.mutable_kv_write()->set_layout(sl::schedule::AttentionAttributes::BSHD);
    check(write, {cache, k, v, valueOf<int64_t>(I64, {2}, {0, 7})}, {{dtype, cache.shape, 0}},
          kExact);
  }
}

// --- the backend as a whole
// -----------------------------------------------------------------------

TEST(CudaBackend, SaysClearlyWhenThereIsNoGpu) {
  if (haveGpu())
    GTEST_SKIP() << "a GPU is visible";
  try {
    createCudaBackend();
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("use --backend cpu"));
  }
  try {
    createBackend("cuda");
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("the CUDA backend found no"));
  }
}

TEST(CudaBackend, DeviceCountNeverThrows) { EXPECT_GE(cudaDeviceCountOrZero(), 0); }

// What sl-run checks the arena against before it allocates: the arena comes out of it.
TEST(CudaBackend, FreeMemoryShrinksByTheArena) {
  SKIP_WITHOUT_GPU();
  // Free memory is device-wide: another process (or the driver) freeing memory between the two
  // readings makes one attempt look as if the arena took nothing. The arena must show in one of
  // three attempts; a backend that allocates nothing never does.
  const uint64_t bytes = uint64_t{256} << 20;
  uint64_t lastBefore = 0, lastAfter = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::unique_ptr<Backend> backend = createCudaBackend(0);
    std::optional<uint64_t> before = backend->deviceMemoryAvailable();
    ASSERT_TRUE(before.has_value());
    ASSERT_GT(*before, bytes);
    backend->allocate(bytes, 0);
    std::optional<uint64_t> after = backend->deviceMemoryAvailable();
    ASSERT_TRUE(after.has_value());
    lastBefore = *before;
    lastAfter = *after;
    if (*after <= *before - bytes / 2)
      return;
  }
  ADD_FAILURE() << "free device memory went from " << lastBefore << " to " << lastAfter
                << " bytes around a " << bytes << "-byte arena, in each of three attempts";
}

TEST(CudaBackend, MemoryIsExactAndCopiesRoundTrip) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> backend = createBackend("cuda");
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_THROW(createCudaBackend(cudaDeviceCountOrZero() + 5), Error);
  backend->allocate(1000, 777);
  std::byte *pool = backend->hostPool();
  for (int i = 0; i < 777; ++i)
    pool[i] = static_cast<std::byte>(i * 7);
  TensorRef host{pool + 5, HOST, BOOL, {700}, 700};
  TensorRef device{backend->deviceArena() + 300, DEVICE, BOOL, {700}, 700};
  TensorRef back{pool + 77, HOST, BOOL, {700}, 700};
  backend->copy(host, device);
  std::vector<std::byte> expected(pool + 5, pool + 705);
  backend->copy(device, device); // exactly in place: nothing to do
  backend->copy(device, back);
  backend->synchronize();
  EXPECT_EQ(std::memcmp(expected.data(), pool + 77, 700), 0);
  // An empty schedule still gets a pool address; a second allocate replaces the first.
  backend->allocate(0, 0);
  EXPECT_NE(backend->hostPool(), nullptr);
  EXPECT_THROW(backend->allocate(uint64_t{1} << 62, 0), Error);
}

// The outputs of a whole schedule on both backends.
std::vector<NamedTensor> runSchedule(Backend &backend, const LoadedSchedule &loaded,
                                     const std::map<std::string, HostTensor> &inputs) {
  Executor executor(loaded, backend);
  return executor.run(inputs);
}

void expectSameOutputs(const std::vector<NamedTensor> &got, const std::vector<NamedTensor> &want,
                       double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Value g{got[i].tensor.dtype, got[i].tensor.shape, got[i].tensor.data};
    Value w{want[i].tensor.dtype, want[i].tensor.shape, want[i].tensor.data};
    expectAgree(g, w, tolerance, "output " + want[i].name);
  }
}

TEST(CudaSchedules, HandBuiltSchedulesMatchTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> cpu = createCpuBackend(), gpu = createCudaBackend();
  TempDir dir;
  std::mt19937 rng(freshSeed());

  TinyMlp mlp = TinyMlp::build(rng());
  LoadedSchedule mlpSchedule = loadSchedule(mlp.write(dir.path()));
  std::map<std::string, HostTensor> x = {
      {"x", f32Tensor({TinyMlp::kBatch, TinyMlp::kIn},
                      randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn))}};
  expectSameOutputs(runSchedule(*gpu, mlpSchedule, x), runSchedule(*cpu, mlpSchedule, x),
                    kReduction);

  TinyAttention block = TinyAttention::build(rng());
  LoadedSchedule blockSchedule = loadSchedule(block.write(dir.path()));
  std::map<std::string, HostTensor> ids = {
      {"ids", i64Tensor({1, TinyAttention::kSeq}, {3, -1, 0, 5})}};
  expectSameOutputs(runSchedule(*gpu, blockSchedule, ids), runSchedule(*cpu, blockSchedule, ids),
                    kReduction);

  // Overlapping streams, a reused arena and a host-side ACCUMULATE.
  std::string path = dir.file("streamed.slsched");
  writeSchedule(StreamedSchedule::build(), path);
  LoadedSchedule streamed = loadSchedule(path);
  std::map<std::string, HostTensor> values = {
      {"x", f32Tensor({StreamedSchedule::kSize}, randomFloats(rng, StreamedSchedule::kSize))}};
  expectSameOutputs(runSchedule(*gpu, streamed, values), runSchedule(*cpu, streamed, values),
                    kElementwise);
}

// --tf32: the MLP's f32 GEMMs on tensor cores in TF32 agree with the CPU backend's f32 to TF32's
// rounding (a 10-bit mantissa: 2^-11 relative per input, summed over 16 to 32 products), and are
// not the f32 results (else TF32 never ran).
TEST(CudaSchedules, Tf32GemmsAgreeToTf32Rounding) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> cpu = createCpuBackend(), tf32 = createCudaBackend(0, true);
  TempDir dir;
  std::mt19937 rng(freshSeed());
  TinyMlp mlp = TinyMlp::build(rng());
  LoadedSchedule schedule = loadSchedule(mlp.write(dir.path()));
  std::map<std::string, HostTensor> x = {
      {"x", f32Tensor({TinyMlp::kBatch, TinyMlp::kIn},
                      randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn))}};
  std::vector<NamedTensor> got = runSchedule(*tf32, schedule, x);
  std::vector<NamedTensor> want = runSchedule(*cpu, schedule, x);
  expectSameOutputs(got, want, 1e-2);
  EXPECT_NE(got[0].tensor.data, want[0].tensor.data) << "TF32 gave f32's bits: it did not run";
}

// Indices computed on the device are checked by the CUDA kernel itself (an input's indices are
// checked by the executor before the run, on every backend): its error names the kernel, and the
// executor and the backend run again afterwards.
TEST(CudaSchedules, KernelErrorsNameTheKernel) {
  SKIP_WITHOUT_GPU();
  std::unique_ptr<Backend> gpu = createCudaBackend();
  TempDir dir;
  std::string path = dir.file("shift.slsched");
  writeSchedule(ShiftedLookup::build(), path);
  LoadedSchedule loaded = loadSchedule(path);
  Executor executor(loaded, *gpu);
  try {
    executor.run({{"ids", i64Tensor({3}, {0, 3, 1})}});
    FAIL() << "expected an Error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "kernel 4 'lookup' (GATHER): index 4 (element 1 of the indices [3]) is "
                           "out of range for axis 0 of the data [4, 2]");
  }
  std::vector<NamedTensor> out = executor.run({{"ids", i64Tensor({3}, {0, 2, 1})}});
  EXPECT_EQ(toFloats(out[0].tensor), (std::vector<float>{2, 3, 6, 7, 4, 5}));
}

TEST(CudaSchedules, TrainingTracksTheCpuBackend) {
  SKIP_WITHOUT_GPU();
  TempDir dir;
  TinyTrain model = TinyTrain::build(17, 4, 6, 5);
  model.addOptimizerSteps({{0}, {1}});
  LoadedSchedule loaded = loadSchedule(model.write(dir.path()));
  std::mt19937 rng(freshSeed());
  std::uniform_int_distribution<int> id(0, TinyTrain::kNanToken - 1);
  std::vector<uint16_t> tokens(500);
  for (uint16_t &t : tokens)
    t = static_cast<uint16_t>(id(rng));
  std::string tokensPath = dir.file("tokens.bin");
  writeBytes(tokensPath, std::string(reinterpret_cast<const char *>(tokens.data()),
                                     tokens.size() * sizeof(uint16_t)));
  AdamWConfig adamw;
  adamw.lr = 1e-2;
  std::unique_ptr<Backend> cpu = createCpuBackend(), gpu = createCudaBackend();
  TokenData cpuData = TokenData::open(tokensPath, TokenDType::U16);
  TokenData gpuData = TokenData::open(tokensPath, TokenDType::U16);
  TrainerOptions options;
  options.adamw = adamw;
  options.vocabSize = TinyTrain::kVocab;
  Trainer onCpu(loaded, *cpu, cpuData, options);
  Trainer onGpu(loaded, *gpu, gpuData, options);
  for (int step = 1; step <= 20; ++step) {
    float want = onCpu.step().loss, got = onGpu.step().loss;
    EXPECT_NEAR(got, want, 1e-4 * std::fabs(want)) << "step " << step;
  }
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<float> &want = onCpu.optimizer().weights(i);
    const std::vector<float> &got = onGpu.optimizer().weights(i);
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(got[j], want[j], 1e-4) << "parameter " << i << " element " << j;
  }
}

// --- the device model: events across threads' streams ---------------------------------------------

// A producer thread's long chain of in-place doublings on its stream, then its record; each test
// issues the consumer side right after (the producer's thread returns at once, its work does not),
// so anything the consumer did without the event would see the chain half done.
struct EventRig {
  static constexpr int64_t kElements = int64_t{1} << 22; // 16 MiB of f32
  static constexpr int kDoublings = 24;

  EventRig() : backend(createCudaBackend()) {
    backend->allocate(2 * kBytes, 2 * kBytes);
    backend->createEvents(2);
    input = {backend->hostPool(), HOST, F32, {kElements}, kBytes};
    output = {backend->hostPool() + kBytes, HOST, F32, {kElements}, kBytes};
    device = {backend->deviceArena(), DEVICE, F32, {kElements}, kBytes};
    auto *in = reinterpret_cast<float *>(input.data);
    for (int64_t i = 0; i < kElements; ++i)
      in[i] = static_cast<float>(i % 7);
  }

  // On a thread of its own: the upload, the doublings, the record of slot 0; then `consume` on
  // another thread while the producer's is still alive (a thread that ended may hand its id, and
  // with it its CUDA stream, to the next one, which would order the two without any event).
  void produce(const std::function<void()> &consume = nullptr) {
    std::promise<void> issued, consumed;
    std::thread producer([&] {
      backend->copy(input, device);
      sl::schedule::Kernel add = makeKernel(ADD);
      for (int i = 0; i < kDoublings; ++i)
        backend->execute(add, {&device, &device}, {&device});
      backend->recordEvent(0);
      issued.set_value();
      consumed.get_future().wait();
    });
    issued.get_future().wait();
    if (consume)
      std::thread(consume).join();
    consumed.set_value();
    producer.join();
  }

  void expectDoubled() const {
    const auto *out = reinterpret_cast<const float *>(output.data);
    for (int64_t i = 0; i < kElements; ++i)
      if (out[i] != static_cast<float>(i % 7) * static_cast<float>(1 << kDoublings)) {
        ADD_FAILURE() << "element " << i << " is " << out[i];
        return;
      }
  }

  static constexpr uint64_t kBytes = kElements * sizeof(float);
  std::unique_ptr<Backend> backend;
  TensorRef input, output, device;
};

TEST(CudaEvents, AStreamWaitOrdersAnotherThreadsWork) {
  SKIP_WITHOUT_GPU();
  EventRig rig;
  rig.produce([&] {
    EXPECT_FALSE(rig.backend->waitEvent(0, false)); // never blocks the thread
    rig.backend->copy(rig.device, rig.output);
    rig.backend->synchronize();
  });
  rig.expectDoubled();
}

TEST(CudaEvents, AHostWaitBlocksUntilTheWorkIsDone) {
  SKIP_WITHOUT_GPU();
  EventRig rig;
  // The download goes on the producer's stream too; the host reads the pool after its wait only.
  std::thread([&] {
    rig.backend->copy(rig.input, rig.device);
    sl::schedule::Kernel add = makeKernel(ADD);
    for (int i = 0; i < EventRig::kDoublings; ++i)
      rig.backend->execute(add, {&rig.device, &rig.device}, {&rig.device});
    rig.backend->copy(rig.device, rig.output);
    rig.backend->recordEvent(1);
  }).join();
  rig.backend->waitEvent(1, true);
  rig.expectDoubled();
}

TEST(CudaEvents, AWaitNeedsARecordInThisRun) {
  SKIP_WITHOUT_GPU();
  EventRig rig;
  EXPECT_THAT(errorOf([&] { rig.backend->waitEvent(0, false); }),
              HasSubstr("event slot 0, which has not been recorded in this run"));
  EXPECT_THAT(errorOf([&] { rig.backend->waitEvent(1, true); }), HasSubstr("not been recorded"));
  EXPECT_THAT(errorOf([&] { rig.backend->recordEvent(2); }), HasSubstr("out of range (2 slots)"));
  rig.produce();
  EXPECT_THAT(errorOf([&] { rig.backend->recordEvent(0); }), HasSubstr("recorded twice"));
  rig.backend->waitEvent(0, true);
  rig.backend->resetEvents();
  EXPECT_THAT(errorOf([&] { rig.backend->waitEvent(0, true); }), HasSubstr("not been recorded"));
}

TEST(CudaEvents, SyncModeIsZeroOrOne) {
  SKIP_WITHOUT_GPU();
  ScopedEnv sync("SLRT_CUDA_SYNC", "yes");
  EXPECT_EQ(errorOf([] { createCudaBackend(); }), "SLRT_CUDA_SYNC='yes' is not 0 or 1");
}

// With SLRT_CUDA_SYNC=1 every kernel is waited for as it is issued: the same results, and a run
// that ends with nothing in flight either way.
TEST(CudaSchedules, SynchronousModeMatchesTheCpuBackendToo) {
  SKIP_WITHOUT_GPU();
  ScopedEnv sync("SLRT_CUDA_SYNC", "1");
  std::unique_ptr<Backend> cpu = createCpuBackend(), gpu = createCudaBackend();
  TempDir dir;
  std::mt19937 rng(freshSeed());
  std::string path = dir.file("streamed.slsched");
  writeSchedule(StreamedSchedule::build(), path);
  LoadedSchedule streamed = loadSchedule(path);
  std::map<std::string, HostTensor> values = {
      {"x", f32Tensor({StreamedSchedule::kSize}, randomFloats(rng, StreamedSchedule::kSize))}};
  expectSameOutputs(runSchedule(*gpu, streamed, values), runSchedule(*cpu, streamed, values),
                    kElementwise);
  TinyAttention block = TinyAttention::build(rng());
  LoadedSchedule blockSchedule = loadSchedule(block.write(dir.path()));
  std::map<std::string, HostTensor> ids = {
      {"ids", i64Tensor({1, TinyAttention::kSeq}, {3, -1, 0, 5})}};
  expectSameOutputs(runSchedule(*gpu, blockSchedule, ids), runSchedule(*cpu, blockSchedule, ids),
                    kReduction);
}

// ExecutorOptions::timeKernels on the CUDA backend: a 1024^3 f32 GEMM between two copies in and
// one out, timed with CUDA events. Its seconds and its copies' are the GPU's: more than nothing
// and less than the run's wall time (the host's clock around the calls measured only the issuing
// before), its trace span lies within the run's, and timing changes no result. Asynchronous and
// with SLRT_CUDA_SYNC=1.
void expectDeviceTimedGemm() {
  constexpr int64_t kN = 1024;
  ScheduleBuilder b;
  uint32_t x = b.buffer("x", HOST, F32, {kN, kN}), w = b.buffer("w", HOST, F32, {kN, kN});
  uint32_t y = b.buffer("y", HOST, F32, {kN, kN});
  uint32_t dx = b.buffer("dx", DEVICE, F32, {kN, kN}), dw = b.buffer("dw", DEVICE, F32, {kN, kN});
  uint32_t dy = b.buffer("dy", DEVICE, F32, {kN, kN});
  b.input("x", x);
  b.input("w", w);
  b.output("y", y);
  b.schedule.set_num_events(3);
  b.kernel(COPY, "x.h2d", {x}, dx).add_record_events(0);
  b.kernel(COPY, "w.h2d", {w}, dw).add_record_events(1);
  Kernel &gemm = b.kernel(MATMUL, "gemm", {dx, dw}, dy);
  gemm.add_wait_events(0);
  gemm.add_wait_events(1);
  gemm.add_record_events(2);
  b.kernel(COPY, "y.d2h", {dy}, y).add_wait_events(2);
  TempDir dir;
  writeSchedule(b.schedule, dir.file("gemm.slsched"));
  LoadedSchedule loaded = loadSchedule(dir.file("gemm.slsched"));
  std::mt19937 rng(freshSeed());
  std::map<std::string, HostTensor> inputs = {
      {"x", f32Tensor({kN, kN}, randomFloats(rng, kN * kN))},
      {"w", f32Tensor({kN, kN}, randomFloats(rng, kN * kN))}};

  std::unique_ptr<Backend> gpu = createCudaBackend();
  std::vector<NamedTensor> untimed = runSchedule(*gpu, loaded, inputs);
  ExecutorOptions options;
  options.timeKernels = true;
  options.trace = true;
  Executor executor(loaded, *gpu, options);
  // The second run reuses the first's timing events.
  for (int run = 0; run < 2; ++run) {
    std::vector<NamedTensor> timed = executor.run(inputs);
    EXPECT_EQ(timed[0].tensor.data, untimed[0].tensor.data) << "run " << run;
    const RunStats &stats = executor.stats();
    EXPECT_TRUE(stats.kernelsTimedOnDevice);
    for (const char *op : {"MATMUL", "COPY"}) {
      EXPECT_GT(stats.perOp.at(op).seconds, 0) << op << ", run " << run;
      EXPECT_LT(stats.perOp.at(op).seconds, stats.wallSeconds) << op << ", run " << run;
    }
  }
  const TraceSpan *lastRun = nullptr;
  for (const TraceSpan &span : executor.traceSpans())
    if (span.kind == TraceSpan::Kind::kRun && span.run == 1)
      lastRun = &span;
  ASSERT_NE(lastRun, nullptr);
  int gemms = 0;
  for (const TraceSpan &span : executor.traceSpans()) {
    if (span.kind != TraceSpan::Kind::kKernel || span.run != 1)
      continue;
    EXPECT_TRUE(span.deviceClock) << "kernel " << span.kernel;
    if (loaded.schedule.kernels(span.kernel).op() != MATMUL)
      continue;
    ++gemms;
    // The GPU's clock is placed on the host's by one reference event: a few microseconds apart.
    constexpr double kSlackMicros = 100;
    EXPECT_GE(span.startMicros, lastRun->startMicros - kSlackMicros);
    EXPECT_LE(span.startMicros + span.durationMicros,
              lastRun->startMicros + lastRun->durationMicros + kSlackMicros);
    EXPECT_DOUBLE_EQ(span.durationMicros, executor.stats().perOp.at("MATMUL").seconds * 1e6);
  }
  EXPECT_EQ(gemms, 1);
}

TEST(CudaTiming, AGemmIsTimedOnTheGpu) {
  SKIP_WITHOUT_GPU();
  expectDeviceTimedGemm();
}

TEST(CudaTiming, AGemmIsTimedOnTheGpuInSynchronousModeToo) {
  SKIP_WITHOUT_GPU();
  ScopedEnv sync("SLRT_CUDA_SYNC", "1");
  expectDeviceTimedGemm();
}

} // namespace
} // namespace slrt::test
