// The CPU backend's f64 kernels: the same templates as the f32 ones, instantiated for double so
// that gradients can be checked in float64. Forward kernels are checked against naive double loops
// on fresh random inputs (to 1e-12: a kernel that computed in float would be off by 1e-7), the
// gradient kernels against central differences of the f64 forward kernels (to 1e-7). The f32
// kernels must be unchanged by the templating: the elementwise ones are checked bit for bit
// against float arithmetic here, and test/unit/cpu_kernels_digest_main.cc digests every f32 kernel
// so that a build before and after a change can be compared whole.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "backends/cpu/vector_math.h"
#include "slrt/backend.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using namespace sl::schedule;
using Values = std::vector<double>;

// An operand: f64 values, or i64 ones (labels, indices).
struct Arg {
  Shape shape;
  Values values;
  std::vector<int64_t> ints = {};
};

size_t count(const Shape &shape) { return numel(shape).value(); }

class CpuF64Test : public ::testing::Test {
protected:
  Values random(const Shape &shape, double low = -1.0, double high = 1.0) {
    std::uniform_real_distribution<double> dist(low, high);
    Values v(count(shape));
    for (double &x : v)
      x = dist(rng);
    return v;
  }
  Arg arg(const Shape &shape) { return Arg{shape, random(shape)}; }

  // Runs `kernel` on f64 (and i64) operands into f64 results of `shapes`.
  std::vector<Values> run(const Kernel &kernel, const std::vector<Arg> &operands,
                          const std::vector<Shape> &shapes) {
    std::vector<Values> doubles(operands.size());
    std::vector<std::vector<int64_t>> ints(operands.size());
    std::vector<TensorRef> refs(operands.size() + shapes.size());
    std::vector<const TensorRef *> in, out;
    for (size_t i = 0; i < operands.size(); ++i) {
      const Arg &a = operands[i];
      EXPECT_EQ(a.values.size() + a.ints.size(), count(a.shape));
      std::byte *data;
      uint64_t bytes;
      DType dtype;
      if (!a.ints.empty()) {
        ints[i] = a.ints;
        data = reinterpret_cast<std::byte *>(ints[i].data());
        bytes = ints[i].size() * 8;
        dtype = I64;
      } else {
        doubles[i] = a.values;
        data = reinterpret_cast<std::byte *>(doubles[i].data());
        bytes = doubles[i].size() * 8;
        dtype = F64;
      }
      refs[i] = TensorRef{data, DEVICE, dtype, a.shape, bytes};
      in.push_back(&refs[i]);
    }
    std::vector<Values> results;
    for (const Shape &s : shapes)
      results.emplace_back(count(s), std::numeric_limits<double>::quiet_NaN());
    for (size_t r = 0; r < shapes.size(); ++r) {
      TensorRef &ref = refs[operands.size() + r];
      ref = TensorRef{reinterpret_cast<std::byte *>(results[r].data()), DEVICE, F64, shapes[r],
                      results[r].size() * 8};
      out.push_back(&ref);
    }
    backend->execute(kernel, in, out);
    return results;
  }

  Values run1(const Kernel &kernel, const std::vector<Arg> &operands, const Shape &shape) {
    return run(kernel, operands, {shape})[0];
  }

  std::unique_ptr<Backend> backend = createCpuBackend();
  std::mt19937 rng{20240607};
};

// |actual - expected| <= tolerance * (1 + |expected|) everywhere.
void expectClose(const std::string &what, const Values &actual, const Values &expected,
                 double tolerance = 1e-12) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_TRUE(std::isfinite(actual[i])) << what << " element " << i;
    worst = std::max(worst, std::fabs(actual[i] - expected[i]) / (1 + std::fabs(expected[i])));
  }
  ::testing::Test::RecordProperty(what, ::testing::PrintToString(worst));
  EXPECT_LE(worst, tolerance) << what;
}

template <typename F> void forEachIndex(const Shape &shape, F f) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t i = 0, n = count(shape); i < n; ++i) {
    f(index);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

double gelu(double x, bool tanhForm) {
  if (tanhForm)
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// --- forward kernels against naive double loops ------------------------------------------------

TEST_F(CpuF64Test, MatmulAndGemmMatchNaive) {
  for (bool sharedB : {true, false}) {
    Shape aShape{2, 1, 5, 7}, bShape = sharedB ? Shape{7, 4} : Shape{3, 7, 4};
    Shape yShape{2, sharedB ? 1 : 3, 5, 4};
    Arg a = arg(aShape), b = arg(bShape);
    Values expected;
    forEachIndex(yShape, [&](const std::vector<int64_t> &i) {
      double acc = 0;
      for (int64_t p = 0; p < 7; ++p)
        acc += a.values[(i[0] * 5 + i[2]) * 7 + p] *
               b.values[(sharedB ? 0 : i[1] * 28) + p * 4 + i[3]];
      expected.push_back(acc);
    });
    expectClose(sharedB ? "matmul shared B" : "matmul batched B",
                run1(makeKernel(MATMUL), {a, b}, yShape), expected);
  }
  for (int t = 0; t < 4; ++t) {
    bool ta = t & 1, tb = t & 2;
    Arg a = arg(ta ? Shape{6, 3} : Shape{3, 6}), b = arg(tb ? Shape{5, 6} : Shape{6, 5});
    Arg c = arg({5});
    Kernel k = makeKernel(GEMM);
    k.mutable_gemm()->set_trans_a(ta);
    k.mutable_gemm()->set_trans_b(tb);
    k.mutable_gemm()->set_alpha(0.75f);
    k.mutable_gemm()->set_beta(1.5f);
    Values expected;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 5; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < 6; ++p)
          acc += a.values[ta ? p * 3 + i : i * 6 + p] * b.values[tb ? j * 6 + p : p * 5 + j];
        expected.push_back(0.75 * acc + 1.5 * c.values[j]);
      }
    expectClose("gemm " + std::to_string(t), run1(k, {a, b, c}, {3, 5}), expected);
  }
}

TEST_F(CpuF64Test, ElementwiseAndReductionsMatchNaive) {
  Shape shape{4, 9};
  Arg a = arg(shape), b = arg(shape), row = arg({9});
  auto each = [&](const Values &x, const std::function<double(double)> &f) {
    Values y;
    for (double v : x)
      y.push_back(f(v));
    return y;
  };
  Values sum, quotient;
  forEachIndex(shape, [&](const std::vector<int64_t> &i) {
    sum.push_back(a.values[i[0] * 9 + i[1]] + row.values[i[1]]);
    quotient.push_back(a.values[i[0] * 9 + i[1]] / b.values[i[0] * 9 + i[1]]);
  });
  expectClose("add", run1(makeKernel(ADD), {a, row}, shape), sum);
  expectClose("div", run1(makeKernel(DIV), {a, b}, shape), quotient);
  const std::pair<OpKind, double (*)(double)> unary[] = {
      {EXP, [](double v) { return std::exp(v); }},
      {TANH, [](double v) { return std::tanh(v); }},
      {ERF, [](double v) { return std::erf(v); }},
      {SIGMOID, sigmoid},
      {SILU, [](double v) { return v * sigmoid(v); }},
      {RECIPROCAL, [](double v) { return 1 / v; }},
  };
  for (auto [op, f] : unary)
    expectClose(OpKind_Name(op), run1(makeKernel(op), {a}, shape), each(a.values, f));
  for (bool tanhForm : {false, true}) {
    Kernel k = makeKernel(GELU);
    k.mutable_gelu()->set_tanh(tanhForm);
    expectClose(tanhForm ? "gelu tanh" : "gelu erf", run1(k, {a}, shape),
                each(a.values, [&](double v) { return gelu(v, tanhForm); }));
  }
  Values swiglu;
  for (size_t i = 0; i < a.values.size(); ++i)
    swiglu.push_back(a.values[i] * sigmoid(a.values[i]) * b.values[i]);
  expectClose("swiglu", run1(makeKernel(SWIGLU), {a, b}, shape), swiglu);

  Kernel mean = makeKernel(REDUCE_MEAN);
  mean.mutable_reduce()->add_axes(0);
  Values means(9, 0.0);
  for (size_t i = 0; i < a.values.size(); ++i)
    means[i % 9] += a.values[i] / 4;
  expectClose("reduce_mean", run1(mean, {a}, {9}), means);
}

TEST_F(CpuF64Test, SoftmaxNormsRotaryAndLossMatchNaive) {
  // Softmax over the middle axis of [3, 5, 4].
  Arg x = arg({3, 5, 4});
  Values soft(x.values.size());
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t in = 0; in < 4; ++in) {
      double total = 0;
      for (int64_t j = 0; j < 5; ++j)
        total += std::exp(x.values[(o * 5 + j) * 4 + in]);
      for (int64_t j = 0; j < 5; ++j)
        soft[(o * 5 + j) * 4 + in] = std::exp(x.values[(o * 5 + j) * 4 + in]) / total;
    }
  Kernel softmax = makeKernel(SOFTMAX);
  softmax.mutable_axis()->set_axis(1);
  expectClose("softmax", run1(softmax, {x}, x.shape), soft);

  // LayerNorm and RMSNorm over rows of 16.
  Arg rows = arg({6, 16}), scale = arg({16}), bias = arg({16});
  Values layer, rms;
  for (int64_t r = 0; r < 6; ++r) {
    double mean = 0, var = 0, squares = 0;
    for (int64_t j = 0; j < 16; ++j)
      mean += rows.values[r * 16 + j] / 16;
    for (int64_t j = 0; j < 16; ++j) {
      double v = rows.values[r * 16 + j];
      var += (v - mean) * (v - mean) / 16;
      squares += v * v / 16;
    }
    for (int64_t j = 0; j < 16; ++j) {
      double v = rows.values[r * 16 + j];
      layer.push_back((v - mean) / std::sqrt(var + 1e-5f) * scale.values[j] + bias.values[j]);
      rms.push_back(v / std::sqrt(squares + 1e-6f) * scale.values[j]);
    }
  }
  Kernel ln = makeKernel(LAYER_NORM);
  ln.mutable_norm()->set_axis(1);
  ln.mutable_norm()->set_epsilon(1e-5f);
  expectClose("layer_norm", run1(ln, {rows, scale, bias}, rows.shape), layer);
  Kernel rn = makeKernel(RMS_NORM);
  rn.mutable_norm()->set_axis(1);
  rn.mutable_norm()->set_epsilon(1e-6f);
  expectClose("rms_norm", run1(rn, {rows, scale}, rows.shape), rms);

  // Rotary, rotate-half, with tables broadcast over the batch.
  Arg rx = arg({2, 3, 8}), cos = arg({3, 8}), sin = arg({3, 8});
  Values rotated;
  forEachIndex(rx.shape, [&](const std::vector<int64_t> &i) {
    int64_t c = i[2], partner = c < 4 ? c + 4 : c - 4;
    double other = (c < 4 ? -1.0 : 1.0) * rx.values[(i[0] * 3 + i[1]) * 8 + partner];
    rotated.push_back(rx.values[(i[0] * 3 + i[1]) * 8 + c] * cos.values[i[1] * 8 + c] +
                      other * sin.values[i[1] * 8 + c]);
  });
  Kernel rot = makeKernel(ROTARY);
  rot.mutable_rotary()->set_interleaved(false);
  expectClose("rotary", run1(rot, {rx, cos, sin}, rx.shape), rotated);

  // Cross-entropy with one ignored row.
  Arg logits = arg({4, 9});
  Arg labels{{4}, {}, {3, -100, 0, 8}};
  double total = 0;
  for (int64_t r : {0, 2, 3}) {
    double z = 0;
    for (int64_t v = 0; v < 9; ++v)
      z += std::exp(logits.values[r * 9 + v]);
    total += std::log(z) - logits.values[r * 9 + labels.ints[r]];
  }
  Kernel ce = makeKernel(CROSS_ENTROPY);
  ce.mutable_cross_entropy()->set_ignore_index(-100);
  expectClose("cross_entropy", run1(ce, {logits, labels}, {}), {total / 3});
}

TEST_F(CpuF64Test, AttentionMatchesNaive) {
  // Grouped-query, causal, with a mask: q [1, 4, 5, 8], k [1, 2, 6, 8], v [1, 2, 6, 3].
  const int64_t hq = 4, hkv = 2, s = 5, t = 6, d = 8, dv = 3;
  Arg q = arg({1, hq, s, d}), k = arg({1, hkv, t, d}), v = arg({1, hkv, t, dv}), mask = arg({s, t});
  const double scale = 0.375;
  Values expected;
  for (int64_t h = 0; h < hq; ++h)
    for (int64_t i = 0; i < s; ++i) {
      int64_t kv = h / (hq / hkv);
      Values p;
      double total = 0;
      for (int64_t j = 0; j <= i + t - s; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q.values[(h * s + i) * d + c] * k.values[(kv * t + j) * d + c];
        p.push_back(std::exp(dot * scale + mask.values[i * t + j]));
        total += p.back();
      }
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (size_t j = 0; j < p.size(); ++j)
          acc += p[j] / total * v.values[(kv * t + j) * dv + c];
        expected.push_back(acc);
      }
    }
  Kernel kernel = makeKernel(ATTENTION);
  kernel.mutable_attention()->set_causal(true);
  kernel.mutable_attention()->set_scale(static_cast<float>(scale));
  expectClose("attention", run1(kernel, {q, k, v, mask}, {1, hq, s, dv}), expected);
}

// --- gradient kernels against central differences of the f64 forwards --------------------------

// One backward kernel: `forward` maps the differentiable inputs to the forward's result,
// `backward` maps them and dy to their gradients (in the same order).
struct GradCase {
  std::string name;
  std::vector<Shape> inputs;
  Shape result;
  std::function<Values(const std::vector<Values> &)> forward;
  std::function<std::vector<Values>(const std::vector<Values> &, const Values &)> backward;
};

TEST_F(CpuF64Test, GradientKernelsMatchFiniteDifferences) {
  auto withAxis = [](OpKind op, int64_t axis) {
    Kernel k = makeKernel(op);
    k.mutable_axis()->set_axis(axis);
    return k;
  };
  auto withNorm = [](OpKind op, int64_t axis, float epsilon) {
    Kernel k = makeKernel(op);
    k.mutable_norm()->set_axis(axis);
    k.mutable_norm()->set_epsilon(epsilon);
    return k;
  };
  auto withAttention = [](OpKind op) {
    Kernel k = makeKernel(op);
    k.mutable_attention()->set_causal(true);
    k.mutable_attention()->set_scale(0.5f);
    return k;
  };
  auto withCrossEntropy = [](OpKind op) {
    Kernel k = makeKernel(op);
    k.mutable_cross_entropy()->set_ignore_index(-100);
    return k;
  };
  auto withRotary = [](OpKind op) {
    Kernel k = makeKernel(op);
    k.mutable_rotary()->set_interleaved(true);
    return k;
  };
  auto withSlice = [](OpKind op) {
    Kernel k = makeKernel(op);
    for (int64_t v : {1, 3})
      k.mutable_slice()->add_starts(v);
    for (int64_t v : {2, -1})
      k.mutable_slice()->add_steps(v);
    return k;
  };
  const Arg cos = arg({3, 8}), sin = arg({3, 8}), mask = arg({3, 4});
  const Arg labels{{3}, {}, {2, -100, 6}}, indices{{2, 3}, {}, {1, -1, 1, 0, 4, 1}};
  const Shape x23{2, 3, 4}, rows{3, 16};
  const Shape q{1, 4, 3, 4}, kv{1, 2, 4, 4};

  std::vector<GradCase> cases = {
      {"softmax_grad", {x23}, x23,
       [&](auto in) { return run1(withAxis(SOFTMAX, 1), {{x23, in[0]}}, x23); },
       [&](auto in, auto dy) {
         Values y = run1(withAxis(SOFTMAX, 1), {{x23, in[0]}}, x23);
         return run(withAxis(SOFTMAX_GRAD, 1), {{x23, y}, {x23, dy}}, {x23});
       }},
      {"layer_norm_grad", {rows, {16}}, rows,
       [&](auto in) {
         return run1(withNorm(LAYER_NORM, 1, 1e-5f), {{rows, in[0]}, {{16}, in[1]}}, rows);
       },
       [&](auto in, auto dy) {
         auto g = run(withNorm(LAYER_NORM_GRAD, 1, 1e-5f),
                      {{rows, in[0]}, {{16}, in[1]}, {rows, dy}}, {rows, {16}, {16}});
         return std::vector<Values>{g[0], g[1]};
       }},
      {"rms_norm_grad", {rows, {16}}, rows,
       [&](auto in) {
         return run1(withNorm(RMS_NORM, 1, 1e-6f), {{rows, in[0]}, {{16}, in[1]}}, rows);
       },
       [&](auto in, auto dy) {
         return run(withNorm(RMS_NORM_GRAD, 1, 1e-6f), {{rows, in[0]}, {{16}, in[1]}, {rows, dy}},
                    {rows, {16}});
       }},
      {"rotary_grad", {{2, 3, 8}}, {2, 3, 8},
       [&](auto in) { return run1(withRotary(ROTARY), {{{2, 3, 8}, in[0]}, cos, sin}, {2, 3, 8}); },
       [&](auto, auto dy) {
         return run(withRotary(ROTARY_GRAD), {{{2, 3, 8}, dy}, cos, sin}, {{2, 3, 8}});
       }},
      {"attention_grad", {q, kv, kv}, q,
       [&](auto in) {
         return run1(withAttention(ATTENTION), {{q, in[0]}, {kv, in[1]}, {kv, in[2]}, mask}, q);
       },
       [&](auto in, auto dy) {
         return run(withAttention(ATTENTION_GRAD),
                    {{q, in[0]}, {kv, in[1]}, {kv, in[2]}, {q, dy}, mask}, {q, kv, kv});
       }},
      {"swiglu_grad", {x23, x23}, x23,
       [&](auto in) { return run1(makeKernel(SWIGLU), {{x23, in[0]}, {x23, in[1]}}, x23); },
       [&](auto in, auto dy) {
         return run(makeKernel(SWIGLU_GRAD), {{x23, in[0]}, {x23, in[1]}, {x23, dy}}, {x23, x23});
       }},
      {"cross_entropy_grad", {{3, 7}}, {},
       [&](auto in) { return run1(withCrossEntropy(CROSS_ENTROPY), {{{3, 7}, in[0]}, labels}, {}); },
       [&](auto in, auto dy) {
         return run(withCrossEntropy(CROSS_ENTROPY_GRAD), {labels, {{}, dy}, {{3, 7}, in[0]}},
                    {{3, 7}});
       }},
      {"gather_grad", {{5, 3}}, {2, 3, 3},
       [&](auto in) { return run1(withAxis(GATHER, 0), {{{5, 3}, in[0]}, indices}, {2, 3, 3}); },
       [&](auto, auto dy) {
         return run(withAxis(GATHER_GRAD, 0), {indices, {{2, 3, 3}, dy}}, {{5, 3}});
       }},
      {"slice_grad", {{6, 5}}, {3, 4},
       [&](auto in) { return run1(withSlice(SLICE), {{{6, 5}, in[0]}}, {3, 4}); },
       [&](auto, auto dy) { return run(withSlice(SLICE_GRAD), {{{3, 4}, dy}}, {{6, 5}}); }},
  };
  for (bool tanhForm : {false, true}) {
    Kernel fwd = makeKernel(GELU), bwd = makeKernel(GELU_GRAD);
    fwd.mutable_gelu()->set_tanh(tanhForm);
    bwd.mutable_gelu()->set_tanh(tanhForm);
    cases.push_back({tanhForm ? "gelu_grad tanh" : "gelu_grad erf", {x23}, x23,
                     [=](auto in) { return run1(fwd, {{x23, in[0]}}, x23); },
                     [=](auto in, auto dy) { return run(bwd, {{x23, in[0]}, {x23, dy}}, {x23}); }});
  }

  constexpr double kStep = 1e-6;
  for (const GradCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Values> inputs;
    for (const Shape &s : c.inputs)
      inputs.push_back(random(s));
    Values dy = random(c.result);
    auto loss = [&](const std::vector<Values> &in) {
      Values y = c.forward(in);
      double sum = 0;
      for (size_t i = 0; i < y.size(); ++i)
        sum += y[i] * dy[i];
      return sum;
    };
    std::vector<Values> analytic = c.backward(inputs, dy);
    ASSERT_EQ(analytic.size(), inputs.size());
    for (size_t which = 0; which < inputs.size(); ++which) {
      Values numeric(inputs[which].size());
      for (size_t i = 0; i < numeric.size(); ++i) {
        std::vector<Values> plus = inputs, minus = inputs;
        plus[which][i] += kStep;
        minus[which][i] -= kStep;
        numeric[i] = (loss(plus) - loss(minus)) / (plus[which][i] - minus[which][i]);
      }
      double largest = 1e-3;
      for (double n : numeric)
        largest = std::max(largest, std::fabs(n));
      Values scaled = analytic[which], reference = numeric;
      for (double &v : scaled)
        v /= largest;
      for (double &v : reference)
        v /= largest;
      // Relative to the gradient's scale: an exact rule agrees to about 1e-9 here.
      expectClose(c.name + " input " + std::to_string(which), scaled, reference, 1e-7);
    }
  }
}

// --- the f32 kernels are still the float ones ---------------------------------------------------

// f32 elementwise kernels round every operation to float, exactly as before the kernels became
// templates: bit for bit equal to float arithmetic (and not, say, double arithmetic rounded once).
TEST_F(CpuF64Test, F32ElementwiseKernelsAreFloatArithmeticBitForBit) {
  const Shape shape{3, 50};
  std::vector<float> a = randomFloats(rng, 150), b = randomFloats(rng, 150);
  std::vector<float> y(150);
  auto ref = [&](std::vector<float> &v) {
    return TensorRef{reinterpret_cast<std::byte *>(v.data()), DEVICE, F32, shape, v.size() * 4};
  };
  TensorRef ra = ref(a), rb = ref(b), ry = ref(y);
  auto check = [&](OpKind op, bool binary, const std::function<float(float, float)> &f,
                   const std::function<void(Kernel &)> &attributes = {}) {
    Kernel kernel = makeKernel(op);
    if (attributes)
      attributes(kernel);
    std::vector<const TensorRef *> operands{&ra};
    if (binary)
      operands.push_back(&rb);
    backend->execute(kernel, operands, {&ry});
    for (size_t i = 0; i < y.size(); ++i) {
      float expected = f(a[i], b[i]);
      ASSERT_EQ(std::memcmp(&y[i], &expected, 4), 0)
          << OpKind_Name(op) << " element " << i << ": " << y[i] << " vs " << expected;
    }
  };
  check(ADD, true, [](float p, float q) { return p + q; });
  check(MUL, true, [](float p, float q) { return p * q; });
  check(DIV, true, [](float p, float q) { return p / q; });
  check(RECIPROCAL, false, [](float p, float) { return 1.0f / p; });
  check(EXP, false, [](float p, float) { return std::exp(p); });
  check(TANH, false, [](float p, float) { return std::tanh(p); });
  check(ERF, false, [](float p, float) { return std::erf(p); });
  check(ACCUMULATE, true, [](float p, float q) { return p + q; });
#ifndef __FP_FAST_FMAF
  // Several operations per element: the compiler could fuse multiply-adds differently in the
  // kernel and here on a target with fast FMA, so these are checked only where it has none.
  // SIGMOID, SILU and SWIGLU take exp from the vectorised loops (vector_math.h), whose exp is
  // checked against std::exp in vector_math_test.
  auto sigmoidF = [](float x) {
    float e = cpu::vec::exp(-std::fabs(x));
    return (x >= 0 ? 1.0f : e) / (1.0f + e);
  };
  check(SIGMOID, false, [&](float p, float) { return sigmoidF(p); });
  check(SILU, false, [&](float p, float) { return p * sigmoidF(p); });
  check(SWIGLU, true, [&](float p, float q) { return p * sigmoidF(p) * q; });
  check(
      GELU, false,
      [](float x, float) {
        return 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      },
      [](Kernel &k) { k.mutable_gelu()->set_tanh(true); });
  check(
      GELU, false,
      [](float x, float) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); },
      [](Kernel &k) { k.mutable_gelu()->set_tanh(false); });
#endif
}

} // namespace
} // namespace slrt::test
