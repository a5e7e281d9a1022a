// bf16 on the CPU backend: the conversion itself, every floating-point kernel family in bf16
// against its definition (the f32 kernel on the operands widened to f32, each result rounded once
// to bf16: bit for bit), in-place kernels, and bf16 schedules end to end (parameters converted
// from their f32 file at load, inputs and outputs, generation with bf16 logits).
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/atomic_file.h"
#include "slrt/backend.h"
#include "slrt/bfloat16.h"
#include "slrt/executor.h"
#include "slrt/generator.h"
#include "slrt/onnx_export.h"
#include "slrt/read_file.h"
#include "slrt/schedule_loader.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using ::testing::HasSubstr;

uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
float floatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// --- the conversion -------------------------------------------------------------------------

// Round to nearest, ties to even, worked out in double from the two bf16 neighbours of a finite
// float: independent of the bit trick in bfloat16.h.
uint16_t referenceRound(float f) {
  uint32_t bits = bitsOf(f);
  uint16_t down = static_cast<uint16_t>(bits >> 16); // toward zero
  if ((bits & 0xffffu) == 0)
    return down;
  uint16_t up = static_cast<uint16_t>(down + 1); // away from zero; 0x7f7f + 1 is infinity
  double value = f, low = bfloat16ToFloat(down);
  // The value halfway to `up`, in double (exact): for up infinite, where the next bf16 would be.
  double high = (up & 0x7fffu) == 0x7f80u ? std::ldexp(std::copysign(1.0, value), 128)
                                           : bfloat16ToFloat(up);
  double toLow = std::fabs(value - low), toHigh = std::fabs(high - value);
  if (toLow < toHigh)
    return down;
  if (toHigh < toLow)
    return up;
  return (down & 1u) == 0 ? down : up;
}

TEST(Bfloat16Conversion, TiesGoToEven) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(floatOf(0x3f808000u)), 0x3f80); // halfway, 0x3f80 is even
  EXPECT_EQ(floatToBfloat16(floatOf(0x3f818000u)), 0x3f82); // halfway, 0x3f81 is odd
  EXPECT_EQ(floatToBfloat16(floatOf(0x3f808001u)), 0x3f81); // just above halfway
  EXPECT_EQ(floatToBfloat16(floatOf(0x3f817fffu)), 0x3f81); // just below halfway
  EXPECT_EQ(floatToBfloat16(floatOf(0xbf808000u)), 0xbf80); // negative ties too
  EXPECT_EQ(floatToBfloat16(floatOf(0xbf818000u)), 0xbf82);
  // A carry out of the mantissa moves to the next binade.
  EXPECT_EQ(floatToBfloat16(floatOf(0x3fffc000u)), 0x4000);
}

TEST(Bfloat16Conversion, NaNStaysAQuietNaNOfItsSign) {
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::quiet_NaN()), 0x7fc0);
  EXPECT_EQ(floatToBfloat16(floatOf(0xffc12345u)), 0xffc1);
  // A payload only in the low half must not round to infinity, nor carry into the sign.
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(floatToBfloat16(floatOf(0x7fffffffu)), 0x7fff);
  EXPECT_EQ(floatToBfloat16(floatOf(0xffffffffu)), 0xffff);
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(0x7f81))); // a signalling bf16 NaN widens to a NaN
}

TEST(Bfloat16Conversion, InfinityAndOverflow) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBfloat16(inf), 0x7f80);
  EXPECT_EQ(floatToBfloat16(-inf), 0xff80);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBfloat16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f7f7fffu)), 0x7f7f); // below halfway: the largest bf16
  EXPECT_EQ(floatToBfloat16(floatOf(0x7f7f8000u)), 0x7f80); // halfway to 2^128: even is inf
  EXPECT_EQ(bfloat16ToFloat(0x7f7f), floatOf(0x7f7f0000u));
}

TEST(Bfloat16Conversion, SubnormalsRoundAndAreNotFlushed) {
  EXPECT_EQ(floatToBfloat16(floatOf(0x00010000u)), 0x0001); // the smallest bf16 subnormal
  EXPECT_EQ(floatToBfloat16(floatOf(0x00008000u)), 0x0000); // halfway to it: even is zero
  EXPECT_EQ(floatToBfloat16(floatOf(0x00008001u)), 0x0001);
  EXPECT_EQ(floatToBfloat16(floatOf(0x00018000u)), 0x0002);
  EXPECT_EQ(floatToBfloat16(floatOf(0x80008001u)), 0x8001);
  EXPECT_EQ(floatToBfloat16(floatOf(0x007fc000u)), 0x0080); // rounds up to the smallest normal
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(bitsOf(bfloat16ToFloat(0x0001)), 0x00010000u);
}

TEST(Bfloat16Conversion, WideningIsExactAndRoundTrips) {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    float wide = bfloat16ToFloat(bits);
    ASSERT_EQ(bitsOf(wide), b << 16);
    bool nan = (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0;
    // Every bf16 comes back as itself; a NaN comes back quiet.
    ASSERT_EQ(floatToBfloat16(wide), nan ? (bits | 0x0040u) : bits) << std::hex << b;
  }
}

TEST(Bfloat16Conversion, MatchesTheReferenceOnRandomFloatsAndInBulk) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  // Long enough for the bulk helpers to split across threads.
  std::vector<float> values(200000);
  for (float &v : values) {
    do
      v = floatOf(any(rng));
    while (std::isnan(v));
  }
  std::vector<uint16_t> rounded(values.size());
  roundToBfloat16(values.data(), rounded.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(floatToBfloat16(values[i]), referenceRound(values[i]))
        << std::hex << bitsOf(values[i]);
    ASSERT_EQ(rounded[i], floatToBfloat16(values[i])) << i;
  }
  std::vector<float> widened(values.size());
  widenBfloat16(rounded.data(), widened.data(), rounded.size());
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(bitsOf(widened[i]), static_cast<uint32_t>(rounded[i]) << 16) << i;
}

// --- every float kernel in bf16 against its definition ----------------------------------------

// An operand or result of a kernel under test. kFloat is bf16 in the bf16 run and f32 in the
// reference run; the other kinds are the same in both (a CAST's other side, labels, conditions).
enum class Kind { kFloat, kF32, kI64, kBool };
struct Spec {
  Kind kind;
  Shape shape;
  double low = -2, high = 2;
  std::vector<int64_t> ints = {};
};
Spec fl(Shape shape, double low = -2, double high = 2) {
  return {Kind::kFloat, std::move(shape), low, high};
}
Spec ints(Shape shape, std::vector<int64_t> values) {
  return {Kind::kI64, std::move(shape), 0, 0, std::move(values)};
}

uint64_t sizeOf(Kind kind, bool bf16Run) {
  switch (kind) {
  case Kind::kFloat:
    return bf16Run ? 2 : 4;
  case Kind::kF32:
    return 4;
  case Kind::kI64:
    return 8;
  default:
    return 1;
  }
}
DType dtypeOf(Kind kind, bool bf16Run) {
  switch (kind) {
  case Kind::kFloat:
    return bf16Run ? BF16 : F32;
  case Kind::kF32:
    return F32;
  case Kind::kI64:
    return I64;
  default:
    return BOOL;
  }
}

// What neither run ever writes: a signalling bf16 NaN (rounding always makes NaNs quiet) and a
// byte pattern. An element a kernel leaves unwritten keeps it, and fails the comparison.
constexpr uint16_t kPoisonBf16 = 0x7fa5;
constexpr std::byte kPoisonByte{0x5a};

class Bf16KernelTest : public ::testing::Test {
protected:
  struct Run {
    std::vector<std::vector<std::byte>> storage;
    std::vector<TensorRef> refs;
  };

  // Runs `kernel` in bf16 and, as the reference, in f32 on the bf16 operands widened; every
  // result of the bf16 run must be bit for bit its f32 result rounded to bf16 (kFloat results)
  // or equal to it (others). With `inPlace`, result 0 is operand 0's very buffer in both runs.
  void expectMatchesF32(const std::string &label, const Kernel &kernel,
                        const std::vector<Spec> &operands, const std::vector<Spec> &results,
                        bool inPlace = false) {
    SCOPED_TRACE(OpKind_Name(kernel.op()) + " " + label);
    // Operand values, drawn once: floats as bf16 (so that widening them is exact).
    std::vector<std::vector<std::byte>> values;
    for (const Spec &spec : operands) {
      uint64_t n = numel(spec.shape).value();
      std::vector<std::byte> bytes(n * sizeOf(spec.kind, true));
      std::uniform_real_distribution<double> dist(spec.low, spec.high);
      for (uint64_t i = 0; i < n; ++i) {
        if (spec.kind == Kind::kFloat) {
          uint16_t b = floatToBfloat16(static_cast<float>(dist(rng)));
          std::memcpy(bytes.data() + i * 2, &b, 2);
        } else if (spec.kind == Kind::kF32) {
          float f = static_cast<float>(dist(rng));
          std::memcpy(bytes.data() + i * 4, &f, 4);
        } else if (spec.kind == Kind::kI64) {
          std::memcpy(bytes.data() + i * 8, &spec.ints.at(i), 8);
        } else {
          bytes[i] = std::byte(rng() % 2);
        }
      }
      values.push_back(std::move(bytes));
    }
    Run bf16 = prepare(operands, results, values, true, inPlace);
    Run f32 = prepare(operands, results, values, false, inPlace);
    execute(kernel, bf16, operands.size());
    execute(kernel, f32, operands.size());

    size_t compared = 0, finite = 0;
    for (size_t r = 0; r < results.size(); ++r) {
      size_t at = inPlace && r == 0 ? 0 : operands.size() + r;
      const std::vector<std::byte> &got = bf16.storage[at], &ref = f32.storage[at];
      uint64_t n = numel(results[r].shape).value();
      for (uint64_t i = 0; i < n; ++i) {
        if (results[r].kind == Kind::kFloat) {
          uint16_t actual;
          float wide;
          std::memcpy(&actual, got.data() + i * 2, 2);
          std::memcpy(&wide, ref.data() + i * 4, 4);
          uint16_t expected = floatToBfloat16(wide);
          ASSERT_EQ(actual, expected) << "result " << r << " element " << i << " (f32 " << wide
                                      << ")";
          finite += std::isfinite(wide);
        } else {
          uint64_t size = sizeOf(results[r].kind, true);
          ASSERT_EQ(std::memcmp(got.data() + i * size, ref.data() + i * size, size), 0)
              << "result " << r << " element " << i;
        }
        ++compared;
      }
    }
    EXPECT_GT(compared, 0u);
    // A comparison of NaNs alone would prove little.
    bool floatResults = false;
    for (const Spec &spec : results)
      floatResults |= spec.kind == Kind::kFloat;
    if (floatResults) {
      EXPECT_GT(finite, 0u);
    }
  }

  Run prepare(const std::vector<Spec> &operands, const std::vector<Spec> &results,
              const std::vector<std::vector<std::byte>> &values, bool bf16Run, bool inPlace) {
    Run run;
    for (size_t i = 0; i < operands.size(); ++i) {
      const Spec &spec = operands[i];
      std::vector<std::byte> bytes = values[i];
      if (spec.kind == Kind::kFloat && !bf16Run) {
        std::vector<std::byte> wide(bytes.size() * 2);
        widenBfloat16(reinterpret_cast<const uint16_t *>(bytes.data()),
                      reinterpret_cast<float *>(wide.data()), bytes.size() / 2);
        bytes = std::move(wide);
      }
      run.storage.push_back(std::move(bytes));
    }
    for (const Spec &spec : results) {
      uint64_t n = numel(spec.shape).value();
      std::vector<std::byte> bytes(n * sizeOf(spec.kind, bf16Run), kPoisonByte);
      if (spec.kind == Kind::kFloat && bf16Run)
        for (uint64_t i = 0; i < n; ++i)
          std::memcpy(bytes.data() + i * 2, &kPoisonBf16, 2);
      run.storage.push_back(std::move(bytes));
    }
    std::vector<Spec> all = operands;
    all.insert(all.end(), results.begin(), results.end());
    for (size_t i = 0; i < all.size(); ++i) {
      size_t at = inPlace && i == operands.size() ? 0 : i; // result 0 in place on operand 0
      run.refs.push_back(TensorRef{run.storage[at].data(), DEVICE, dtypeOf(all[i].kind, bf16Run),
                                   all[i].shape, run.storage[at].size()});
    }
    return run;
  }

  void execute(const Kernel &kernel, Run &run, size_t operandCount) {
    std::vector<const TensorRef *> in, out;
    for (size_t i = 0; i < run.refs.size(); ++i)
      (i < operandCount ? in : out).push_back(&run.refs[i]);
    backend->execute(kernel, in, out);
  }

  std::mt19937 rng{20240607};
  std::unique_ptr<Backend> backend = createCpuBackend();
};

TEST_F(Bf16KernelTest, MatmulAndGemm) {
  expectMatchesF32("shared B", makeKernel(MATMUL), {fl({3, 70, 90}), fl({90, 50})},
                   {fl({3, 70, 50})});
  expectMatchesF32("batched B", makeKernel(MATMUL), {fl({3, 7, 9}), fl({3, 9, 5})}, {fl({3, 7, 5})});
  for (int t = 0; t < 4; ++t) {
    Kernel k = makeKernel(GEMM);
    k.mutable_gemm()->set_trans_a(t & 1);
    k.mutable_gemm()->set_trans_b(t & 2);
    k.mutable_gemm()->set_alpha(0.75f);
    k.mutable_gemm()->set_beta(1.5f);
    expectMatchesF32("trans " + std::to_string(t), k,
                     {fl(t & 1 ? Shape{40, 30} : Shape{30, 40}),
                      fl(t & 2 ? Shape{20, 40} : Shape{40, 20}), fl({20})},
                     {fl({30, 20})});
  }
}

TEST_F(Bf16KernelTest, Elementwise) {
  Shape big{300, 257};
  for (OpKind op : {ADD, SUB, MUL, DIV}) {
    expectMatchesF32("same shape", makeKernel(op), {fl(big), fl(big)}, {fl(big)});
    expectMatchesF32("broadcast", makeKernel(op), {fl(big), fl({257})}, {fl(big)});
  }
  expectMatchesF32("", makeKernel(POW), {fl(big, 0.1, 3), fl(big)}, {fl(big)});
  for (OpKind op : {RELU, SIGMOID, SILU, RECIPROCAL, NEG, EXP, ERF, TANH, COS, SIN})
    expectMatchesF32("", makeKernel(op), {fl(big)}, {fl(big)});
  expectMatchesF32("", makeKernel(SQRT), {fl(big, 0, 4)}, {fl(big)});
  for (bool tanh : {false, true}) {
    Kernel k = makeKernel(GELU);
    k.mutable_gelu()->set_tanh(tanh);
    expectMatchesF32(tanh ? "tanh" : "erf", k, {fl(big)}, {fl(big)});
  }
  expectMatchesF32("", makeKernel(SWIGLU), {fl(big), fl(big)}, {fl(big)});
  expectMatchesF32("", makeKernel(ACCUMULATE), {fl(big), fl(big)}, {fl(big)});
  // Comparisons of bf16 values give bool results; WHERE moves bf16 bits.
  expectMatchesF32("", makeKernel(LESS), {fl(big), fl({257})}, {{Kind::kBool, big}});
  expectMatchesF32("", makeKernel(EQUAL), {fl({64}, -1, 1), fl({64}, -1, 1)}, {{Kind::kBool, {64}}});
  expectMatchesF32("", makeKernel(WHERE), {{Kind::kBool, {4, 1}}, fl({4, 6}), fl({6})},
                   {fl({4, 6})});
  // Elementwise kernels may run exactly in place: the result is the operand's buffer.
  expectMatchesF32("in place", makeKernel(SILU), {fl(big)}, {fl(big)}, true);
  expectMatchesF32("in place", makeKernel(MUL), {fl(big), fl({257})}, {fl(big)}, true);
}

TEST_F(Bf16KernelTest, SameOperandTwice) {
  // x * x with one buffer given twice: one widened copy serves both operands.
  std::vector<uint16_t> x(1000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = floatToBfloat16(static_cast<float>(i) * 0.01f - 3.0f);
  std::vector<uint16_t> y(x.size(), kPoisonBf16);
  TensorRef xr{reinterpret_cast<std::byte *>(x.data()), DEVICE, BF16, {1000}, 2000};
  TensorRef yr{reinterpret_cast<std::byte *>(y.data()), DEVICE, BF16, {1000}, 2000};
  backend->execute(makeKernel(MUL), {&xr, &xr}, {&yr});
  for (size_t i = 0; i < x.size(); ++i) {
    float v = bfloat16ToFloat(x[i]);
    ASSERT_EQ(y[i], floatToBfloat16(v * v)) << i;
  }
}

TEST_F(Bf16KernelTest, Cast) {
  Shape shape{50, 33};
  // bf16 to and from every castable dtype, through f32 as the definition says.
  expectMatchesF32("to f32", makeKernel(CAST), {fl(shape)}, {{Kind::kF32, shape}});
  expectMatchesF32("from f32", makeKernel(CAST), {{Kind::kF32, shape}}, {fl(shape)});
  expectMatchesF32("to bool", makeKernel(CAST), {fl(shape)}, {{Kind::kBool, shape}});
  expectMatchesF32("from bool", makeKernel(CAST), {{Kind::kBool, shape}}, {fl(shape)});
  std::vector<int64_t> big;
  for (int64_t i = 0; i < 50 * 33; ++i)
    big.push_back((i * 7919) % 100003 - 50000); // many not representable in bf16
  expectMatchesF32("from i64", makeKernel(CAST), {ints(shape, big)}, {fl(shape)});
  expectMatchesF32("bf16 to bf16", makeKernel(CAST), {fl(shape)}, {fl(shape)});
  // To i64: the f32 cast truncates; compare with values of a few hundred.
  expectMatchesF32("to i64", makeKernel(CAST), {fl(shape, -300, 300)}, {{Kind::kI64, shape}});
}

TEST_F(Bf16KernelTest, ReductionsSoftmaxAndNorms) {
  for (OpKind op : {REDUCE_SUM, REDUCE_MEAN}) {
    Kernel k = makeKernel(op);
    k.mutable_reduce()->add_axes(1);
    expectMatchesF32("axis 1", k, {fl({64, 48, 40})}, {fl({64, 40})});
    Kernel all = makeKernel(op);
    all.mutable_reduce();
    expectMatchesF32("all", all, {fl({100000})}, {fl({})});
  }
  for (int axis : {1, 2}) {
    Kernel k = makeKernel(SOFTMAX);
    k.mutable_axis()->set_axis(axis);
    expectMatchesF32("axis " + std::to_string(axis), k, {fl({16, 48, 40})}, {fl({16, 48, 40})});
    Kernel grad = makeKernel(SOFTMAX_GRAD);
    grad.mutable_axis()->set_axis(axis);
    expectMatchesF32("axis " + std::to_string(axis), grad,
                     {fl({16, 48, 40}, 0, 1), fl({16, 48, 40})}, {fl({16, 48, 40})});
  }
  Kernel softmax = makeKernel(SOFTMAX);
  softmax.mutable_axis()->set_axis(1);
  expectMatchesF32("in place", softmax, {fl({96, 128})}, {fl({96, 128})}, true);

  Kernel ln = makeKernel(LAYER_NORM);
  ln.mutable_norm()->set_axis(1);
  ln.mutable_norm()->set_epsilon(1e-5f);
  expectMatchesF32("bias", ln, {fl({96, 128}), fl({128}), fl({128})}, {fl({96, 128})});
  expectMatchesF32("no bias", ln, {fl({96, 128}), fl({128})}, {fl({96, 128})});
  Kernel lng = makeKernel(LAYER_NORM_GRAD);
  *lng.mutable_norm() = ln.norm();
  expectMatchesF32("", lng, {fl({96, 128}), fl({128}), fl({96, 128})},
                   {fl({96, 128}), fl({128}), fl({128})});
  Kernel rms = makeKernel(RMS_NORM);
  rms.mutable_norm()->set_axis(1);
  rms.mutable_norm()->set_epsilon(1e-6f);
  expectMatchesF32("", rms, {fl({96, 128}), fl({128})}, {fl({96, 128})});
  Kernel rmsg = makeKernel(RMS_NORM_GRAD);
  *rmsg.mutable_norm() = rms.norm();
  expectMatchesF32("", rmsg, {fl({96, 128}), fl({128}), fl({96, 128})},
                   {fl({96, 128}), fl({128})});
}

TEST_F(Bf16KernelTest, RotaryAndAttention) {
  for (bool interleaved : {false, true}) {
    Kernel k = makeKernel(ROTARY);
    k.mutable_rotary()->set_interleaved(interleaved);
    std::string label = interleaved ? "interleaved" : "half";
    expectMatchesF32(label, k, {fl({2, 4, 48, 32}), fl({48, 32}), fl({48, 32})},
                     {fl({2, 4, 48, 32})});
    Kernel grad = makeKernel(ROTARY_GRAD);
    grad.mutable_rotary()->set_interleaved(interleaved);
    expectMatchesF32(label, grad, {fl({2, 4, 48, 32}), fl({48, 32}), fl({48, 32})},
                     {fl({2, 4, 48, 32})});
  }
  for (bool causal : {false, true})
    for (bool masked : {false, true}) {
      Kernel fwd = makeKernel(ATTENTION);
      fwd.mutable_attention()->set_causal(causal);
      fwd.mutable_attention()->set_scale(0.25f);
      std::string label = std::string(causal ? "causal" : "full") + (masked ? " mask" : "");
      std::vector<Spec> ops = {fl({2, 4, 40, 16}), fl({2, 2, 40, 16}), fl({2, 2, 40, 24})};
      if (masked)
        ops.push_back(fl({40, 40}));
      expectMatchesF32(label, fwd, ops, {fl({2, 4, 40, 24})});
      Kernel bwd = makeKernel(ATTENTION_GRAD);
      *bwd.mutable_attention() = fwd.attention();
      std::vector<Spec> bops = {ops[0], ops[1], ops[2], fl({2, 4, 40, 24})};
      if (masked)
        bops.push_back(ops[3]);
      expectMatchesF32(label, bwd, bops,
                       {fl({2, 4, 40, 16}), fl({2, 2, 40, 16}), fl({2, 2, 40, 24})});
    }
}

TEST_F(Bf16KernelTest, LossAndElementGradients) {
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 64; ++i)
    labels.push_back(i % 9 == 0 ? -1 : (i * 37) % 500);
  Kernel ce = makeKernel(CROSS_ENTROPY);
  ce.mutable_cross_entropy()->set_ignore_index(-1);
  expectMatchesF32("", ce, {fl({64, 500}), ints({64}, labels)}, {fl({})});
  Kernel ceg = makeKernel(CROSS_ENTROPY_GRAD);
  *ceg.mutable_cross_entropy() = ce.cross_entropy();
  expectMatchesF32("", ceg, {ints({64}, labels), fl({}), fl({64, 500})}, {fl({64, 500})});

  Shape big{300, 257};
  for (bool tanh : {false, true}) {
    Kernel k = makeKernel(GELU_GRAD);
    k.mutable_gelu()->set_tanh(tanh);
    expectMatchesF32(tanh ? "tanh" : "erf", k, {fl(big), fl(big)}, {fl(big)});
  }
  expectMatchesF32("", makeKernel(SWIGLU_GRAD), {fl(big), fl(big), fl(big)}, {fl(big), fl(big)});

  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 50 * 7; ++i)
    indices.push_back((i * 13) % 80 - 40);
  Kernel gg = makeKernel(GATHER_GRAD);
  gg.mutable_axis()->set_axis(1);
  expectMatchesF32("", gg, {ints({50, 7}, indices), fl({3, 50, 7, 33})}, {fl({3, 40, 33})});
}

TEST_F(Bf16KernelTest, KernelsThatMoveElements) {
  Kernel transpose = makeKernel(TRANSPOSE);
  for (int64_t axis : {2, 0, 1})
    transpose.mutable_transpose()->add_perm(axis);
  expectMatchesF32("", transpose, {fl({5, 6, 7})}, {fl({7, 5, 6})});
  Kernel gather = makeKernel(GATHER);
  gather.mutable_axis()->set_axis(0);
  expectMatchesF32("", gather, {fl({10, 33}), ints({2, 3}, {0, 9, -1, 4, 4, 2})}, {fl({2, 3, 33})});
  Kernel concat = makeKernel(CONCAT);
  concat.mutable_axis()->set_axis(1);
  expectMatchesF32("", concat, {fl({4, 3}), fl({4, 5})}, {fl({4, 8})});
  Kernel slice = makeKernel(SLICE);
  for (int64_t start : {1, 2})
    slice.mutable_slice()->add_starts(start);
  for (int64_t step : {2, 3})
    slice.mutable_slice()->add_steps(step);
  expectMatchesF32("", slice, {fl({9, 20})}, {fl({4, 6})});
  Kernel sliceGrad = makeKernel(SLICE_GRAD);
  *sliceGrad.mutable_slice() = slice.slice();
  expectMatchesF32("", sliceGrad, {fl({4, 6})}, {fl({9, 20})});
  expectMatchesF32("", makeKernel(EXPAND), {fl({3, 1})}, {fl({2, 3, 4})});
  Kernel trilu = makeKernel(TRILU);
  trilu.mutable_trilu()->set_k(1);
  expectMatchesF32("", trilu, {fl({2, 5, 6})}, {fl({2, 5, 6})});
  expectMatchesF32("", makeKernel(TAKE_ROWS), {fl({3, 5, 8}), ints({3}, {4, 0, 2})}, {fl({3, 1, 8})});
}

TEST_F(Bf16KernelTest, GenerationKernels) {
  Kernel decode = makeKernel(DECODE_ATTENTION);
  decode.mutable_attention()->set_scale(0.3f);
  expectMatchesF32("", decode,
                   {fl({2, 4, 1, 16}), fl({2, 2, 1, 16}), fl({2, 2, 1, 16}), fl({2, 2, 2, 9, 16}),
                    ints({2}, {5, 9})},
                   {fl({2, 4, 1, 16})});
  // KV_WRITE writes its cache in place: the cache elements it does not write keep their bits.
  expectMatchesF32("", makeKernel(KV_WRITE),
                   {fl({2, 2, 3, 9, 4}), fl({2, 3, 2, 4}), fl({2, 3, 2, 4}), ints({2}, {0, 7})},
                   {fl({2, 2, 3, 9, 4})}, true);
}

TEST_F(Bf16KernelTest, KvWriteMovesBitsAndLeavesTheRestOfTheCache) {
  // A cache [1, 2, 1, 4, 2] of signalling NaNs (bits no conversion keeps) gets one position.
  std::vector<uint16_t> cache(16, 0x7f81), k = {0x3f80, 0x0001}, v = {0xc000, 0x7f81};
  std::vector<int64_t> start = {2};
  TensorRef cacheRef{reinterpret_cast<std::byte *>(cache.data()), HOST, BF16, {1, 2, 1, 4, 2}, 32};
  TensorRef kRef{reinterpret_cast<std::byte *>(k.data()), HOST, BF16, {1, 1, 1, 2}, 4};
  TensorRef vRef{reinterpret_cast<std::byte *>(v.data()), HOST, BF16, {1, 1, 1, 2}, 4};
  TensorRef startRef{reinterpret_cast<std::byte *>(start.data()), HOST, I64, {1}, 8};
  backend->execute(makeKernel(KV_WRITE), {&cacheRef, &kRef, &vRef, &startRef}, {&cacheRef});
  std::vector<uint16_t> expected(16, 0x7f81);
  expected[4] = 0x3f80;  // keys at position 2
  expected[5] = 0x0001;
  expected[12] = 0xc000; // values at position 2
  expected[13] = 0x7f81;
  EXPECT_EQ(cache, expected);
}

TEST_F(Bf16KernelTest, AccumulateInPlaceOnTheHost) {
  // Gradient accumulation: operand 0 is the result, in the host pool (a HOST_COMPUTE kernel).
  std::vector<uint16_t> acc(5000), add(5000);
  std::vector<uint16_t> expected(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    acc[i] = floatToBfloat16(std::sin(static_cast<float>(i)) * 100.0f);
    add[i] = floatToBfloat16(std::cos(static_cast<float>(i)) * 0.37f);
    expected[i] = floatToBfloat16(bfloat16ToFloat(acc[i]) + bfloat16ToFloat(add[i]));
  }
  TensorRef accRef{reinterpret_cast<std::byte *>(acc.data()), HOST, BF16, {5000}, 10000};
  TensorRef addRef{reinterpret_cast<std::byte *>(add.data()), HOST, BF16, {5000}, 10000};
  backend->execute(makeKernel(ACCUMULATE), {&accRef, &addRef}, {&accRef});
  EXPECT_EQ(acc, expected);
}

// --- schedules in bf16 ------------------------------------------------------------------------

std::vector<uint16_t> roundedAll(const std::vector<float> &values) {
  std::vector<uint16_t> out(values.size());
  roundToBfloat16(values.data(), out.data(), values.size());
  return out;
}

std::vector<uint16_t> bitsOfBuffer(const TensorRef &ref) {
  std::vector<uint16_t> out(ref.bytes / 2);
  std::memcpy(out.data(), ref.data, ref.bytes);
  return out;
}

TEST(Bf16Schedule, ParametersAreConvertedFromTheirF32FileAndTheMlpRuns) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(11);
  toBfloat16(mlp.schedule);
  EXPECT_EQ(verifyError(mlp.schedule), "no error");
  LoadedSchedule loaded = loadSchedule(mlp.write(dir.path()));
  std::unique_ptr<Backend> backend = createCpuBackend();
  Executor executor(loaded, *backend, {});
  const std::vector<float> *weights[] = {&mlp.w1, &mlp.b1, &mlp.w2, &mlp.b2};
  for (int i = 0; i < 4; ++i) {
    const TensorRef &ref = executor.parameterBuffer(i);
    EXPECT_EQ(ref.dtype, BF16);
    EXPECT_EQ(bitsOfBuffer(ref), roundedAll(*weights[i])) << "parameter " << i;
  }
  // The file's f32 bytes are what was read.
  EXPECT_EQ(executor.stats().parameterBytesRead,
            (mlp.w1.size() + mlp.b1.size() + mlp.w2.size() + mlp.b2.size()) * sizeof(float));

  std::mt19937 rng(3);
  std::vector<float> x = randomFloats(rng, TinyMlp::kBatch * TinyMlp::kIn);
  std::vector<NamedTensor> outputs = executor.run(
      {{"x", roundedToBfloat16(f32Tensor({TinyMlp::kBatch, TinyMlp::kIn}, x))}});
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].tensor.dtype, BF16);
  std::vector<float> y = toFloats(widenedToF32(outputs[0].tensor));
  std::vector<float> expected = mlp.reference(x);
  ASSERT_EQ(y.size(), expected.size());
  // A few bf16 roundings (2^-8 relative each) along the way.
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(y[i], expected[i], 0.03 * (1 + std::fabs(expected[i]))) << i;

  // A model exported from these weights writes them back as f32, widened exactly.
  TinyMlp onnx = TinyMlp::build(11, "tiny_mlp.onnx");
  toBfloat16(onnx.schedule);
  LoadedSchedule onnxLoaded = loadSchedule(onnx.write(dir.path()));
  exportTrainedOnnx(onnxLoaded, executor, dir.file("exported.onnx"));
  std::string exported = readFile(dir.file("exported.onnx"));
  for (int i = 0; i < 4; ++i) {
    const Parameter &p = onnxLoaded.schedule.parameters(i);
    std::vector<float> wide(p.bytes() / 4);
    std::memcpy(wide.data(), exported.data() + p.file_offset(), p.bytes());
    std::vector<float> expectedWide(wide.size());
    std::vector<uint16_t> narrow = roundedAll(*weights[i]);
    widenBfloat16(narrow.data(), expectedWide.data(), narrow.size());
    EXPECT_EQ(wide, expectedWide) << "parameter " << i;
  }
}

TEST(Bf16Schedule, NaNAndShortFilesAreStillRefused) {
  TempDir dir;
  TinyMlp mlp = TinyMlp::build(11);
  toBfloat16(mlp.schedule);
  std::unique_ptr<Backend> backend = createCpuBackend();
  mlp.w1[3] = std::numeric_limits<float>::quiet_NaN();
  LoadedSchedule loaded = loadSchedule(mlp.write(dir.path()));
  EXPECT_THAT(errorOf([&] { Executor executor(loaded, *backend, {}); }),
              HasSubstr("parameter 'w1' holds NaN at element 3 of its bf16 [4, 8] (read as f32 "
                        "from offset 16): the model file is corrupt"));
  // The file shrinks after the schedule was loaded.
  mlp.w1[3] = 0.5f;
  loaded = loadSchedule(mlp.write(dir.path()));
  std::string bytes = mlp.paramsFileBytes();
  writeBytes(dir.file(mlp.schedule.parameters(0).file()), bytes.substr(0, 40));
  EXPECT_THAT(errorOf([&] { Executor executor(loaded, *backend, {}); }),
              HasSubstr("file ended early (it changed after the schedule was loaded)"));
}

TEST(Bf16Schedule, GeneratesFromBf16Logits) {
  TempDir dir;
  TinyGenerate f32Model = TinyGenerate::build(5);
  TinyGenerate model = f32Model;
  toBfloat16(model.schedule);
  EXPECT_EQ(verifyError(model.schedule), "no error");
  LoadedSchedule loaded = loadSchedule(model.write(dir.path()));
  ASSERT_EQ(loaded.schedule.buffers(static_cast<int>(loaded.schedule.outputs(0).buffer())).dtype(),
            BF16);
  std::unique_ptr<Backend> backend = createCpuBackend();
  Generator generator(loaded, *backend, GenerationOptions());
  // The prompts whose greedy continuations are far from ties (the best logit ahead of the next
  // by 0.1 at every step, some ten bf16 roundings of logits of a few units): bf16 cannot change
  // them, while logits misread would.
  std::vector<std::vector<int64_t>> candidates = {{3, 1, 4, 1}, {5}, {9, 2}, {6, 5, 3}, {15, 8},
                                                  {0},          {7}, {2, 2}, {11, 4, 13}, {1, 10}};
  std::vector<Prompt> prompts;
  std::vector<std::vector<int64_t>> expected;
  for (const std::vector<int64_t> &tokens : candidates) {
    double margin = 0;
    std::vector<int64_t> greedy = f32Model.referenceGreedy(tokens, model.maxNew, {}, &margin);
    if (margin < 0.1)
      continue;
    prompts.push_back(Prompt{tokens, std::nullopt, prompts.size() + 1});
    expected.push_back(greedy);
  }
  ASSERT_GE(prompts.size(), 3u) << "too few prompts far from ties";
  std::vector<GeneratedSequence> out = generator.generate(prompts);
  ASSERT_EQ(out.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(out[i].tokens, expected[i]) << "prompt " << i;
}

} // namespace
} // namespace slrt::test
