// Prints a digest (FNV-1a of the result bytes) of every floating-point CPU kernel run on fixed
// pseudo-random inputs, one line per kernel and case, in f32 by default or f64 (--f64). Not a
// test itself: build it before and after a change to the CPU kernels and diff the two outputs to
// show that the change leaves results bit for bit as they were. The inputs are large enough to
// reach the threaded and blocked paths of every kernel.
//
//   cpu_kernels_digest > before.txt   (old build)
//   cpu_kernels_digest > after.txt    (new build)
//   diff before.txt after.txt
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "slrt/backend.h"

namespace {

using namespace sl::schedule;
using slrt::Shape;
using slrt::TensorRef;

struct Buffer {
  std::vector<std::byte> bytes;
  TensorRef ref;
};

class Digest {
public:
  explicit Digest(DType dtype) : dtype_(dtype), size_(dtype == F64 ? 8 : 4) {}

  std::unique_ptr<Buffer> floats(const Shape &shape, double low = -2.0, double high = 2.0) {
    auto b = make(shape, dtype_, size_);
    std::uniform_real_distribution<double> dist(low, high);
    size_t n = b->bytes.size() / size_;
    for (size_t i = 0; i < n; ++i) {
      double v = dist(rng_);
      if (dtype_ == F64)
        std::memcpy(b->bytes.data() + i * 8, &v, 8);
      else {
        float f = static_cast<float>(v);
        std::memcpy(b->bytes.data() + i * 4, &f, 4);
      }
    }
    return b;
  }

  std::unique_ptr<Buffer> ints(const Shape &shape, int64_t low, int64_t high) {
    auto b = make(shape, I64, 8);
    std::uniform_int_distribution<int64_t> dist(low, high);
    for (size_t i = 0; i < b->bytes.size() / 8; ++i) {
      int64_t v = dist(rng_);
      std::memcpy(b->bytes.data() + i * 8, &v, 8);
    }
    return b;
  }

  std::unique_ptr<Buffer> result(const Shape &shape, DType dtype = DTYPE_UNSPECIFIED) {
    DType d = dtype == DTYPE_UNSPECIFIED ? dtype_ : dtype;
    return make(shape, d, d == F64 || d == I64 ? 8 : d == BOOL ? 1 : 4);
  }

  // Runs `kernel` and prints one digest line for all its results together.
  void run(const std::string &label, const Kernel &kernel, const std::vector<Buffer *> &operands,
           const std::vector<Buffer *> &results) {
    std::vector<const TensorRef *> in, out;
    for (Buffer *b : operands)
      in.push_back(&b->ref);
    for (Buffer *b : results)
      out.push_back(&b->ref);
    backend_->execute(kernel, in, out);
    uint64_t hash = 1469598103934665603ull;
    for (Buffer *b : results)
      for (std::byte byte : b->bytes)
        hash = (hash ^ static_cast<uint8_t>(byte)) * 1099511628211ull;
    std::printf("%-22s %-28s %016" PRIx64 "\n", OpKind_Name(kernel.op()).c_str(), label.c_str(),
                hash);
  }

private:
  static std::unique_ptr<Buffer> make(const Shape &shape, DType dtype, size_t size) {
    auto b = std::make_unique<Buffer>();
    size_t n = 1;
    for (int64_t d : shape)
      n *= static_cast<size_t>(d);
    // A pattern no kernel writes, so that an element left unwritten changes the digest.
    b->bytes.assign(n * size, std::byte{0x5a});
    b->ref = TensorRef{b->bytes.data(), DEVICE, dtype, shape, b->bytes.size()};
    return b;
  }

  DType dtype_;
  size_t size_;
  std::mt19937_64 rng_{20240607};
  std::unique_ptr<slrt::Backend> backend_ = slrt::createCpuBackend();
};

Kernel kernelOf(OpKind op) {
  Kernel k;
  k.set_op(op);
  return k;
}

void runAll(Digest &g) {
  // GEMMs.
  {
    auto a = g.floats({3, 70, 90}), b = g.floats({90, 50}), b3 = g.floats({3, 90, 50});
    auto y = g.result({3, 70, 50});
    g.run("shared B", kernelOf(MATMUL), {a.get(), b.get()}, {y.get()});
    g.run("batched B", kernelOf(MATMUL), {a.get(), b3.get()}, {y.get()});
    for (int t = 0; t < 4; ++t) {
      Kernel k = kernelOf(GEMM);
      k.mutable_gemm()->set_trans_a(t & 1);
      k.mutable_gemm()->set_trans_b(t & 2);
      k.mutable_gemm()->set_alpha(0.75f);
      k.mutable_gemm()->set_beta(1.5f);
      auto ga = g.floats(t & 1 ? Shape{40, 30} : Shape{30, 40});
      auto gb = g.floats(t & 2 ? Shape{20, 40} : Shape{40, 20});
      auto c = g.floats({20}), gy = g.result({30, 20});
      g.run("trans " + std::to_string(t), k, {ga.get(), gb.get(), c.get()}, {gy.get()});
    }
  }
  // Elementwise.
  {
    Shape big{300, 257};
    auto a = g.floats(big), b = g.floats(big), row = g.floats({257});
    auto positive = g.floats(big, 0.1, 3.0);
    auto y = g.result(big);
    for (OpKind op : {ADD, SUB, MUL, DIV}) {
      g.run("same shape", kernelOf(op), {a.get(), b.get()}, {y.get()});
      g.run("broadcast", kernelOf(op), {a.get(), row.get()}, {y.get()});
    }
    g.run("same shape", kernelOf(POW), {positive.get(), b.get()}, {y.get()});
    for (OpKind op : {RELU, SIGMOID, SILU, RECIPROCAL, NEG, EXP, ERF, TANH})
      g.run("", kernelOf(op), {a.get()}, {y.get()});
    g.run("", kernelOf(SQRT), {positive.get()}, {y.get()});
    for (bool tanh : {false, true}) {
      Kernel k = kernelOf(GELU);
      k.mutable_gelu()->set_tanh(tanh);
      g.run(tanh ? "tanh" : "erf", k, {a.get()}, {y.get()});
    }
    g.run("", kernelOf(SWIGLU), {a.get(), b.get()}, {y.get()});
    g.run("", kernelOf(ACCUMULATE), {a.get(), b.get()}, {y.get()});
    auto flags = g.result(big, BOOL);
    g.run("", kernelOf(LESS), {a.get(), row.get()}, {flags.get()});
    g.run("", kernelOf(EQUAL), {a.get(), a.get()}, {flags.get()});
  }
  // Reductions, softmax, norms.
  {
    auto x = g.floats({64, 48, 40});
    for (OpKind op : {REDUCE_SUM, REDUCE_MEAN}) {
      Kernel k = kernelOf(op);
      k.mutable_reduce()->add_axes(1);
      auto y = g.result({64, 40});
      g.run("axis 1", k, {x.get()}, {y.get()});
      Kernel all = kernelOf(op);
      all.mutable_reduce();
      auto s = g.result({});
      g.run("all", all, {x.get()}, {s.get()});
    }
    auto long1 = g.floats({100000});
    Kernel all = kernelOf(REDUCE_SUM);
    all.mutable_reduce();
    auto s = g.result({});
    g.run("chunked", all, {long1.get()}, {s.get()});
    for (int axis : {1, 2}) {
      Kernel k = kernelOf(SOFTMAX);
      k.mutable_axis()->set_axis(axis);
      auto y = g.result({64, 48, 40});
      g.run("axis " + std::to_string(axis), k, {x.get()}, {y.get()});
      auto dy = g.floats({64, 48, 40}), dx = g.result({64, 48, 40});
      Kernel grad = kernelOf(SOFTMAX_GRAD);
      grad.mutable_axis()->set_axis(axis);
      g.run("axis " + std::to_string(axis), grad, {y.get(), dy.get()}, {dx.get()});
    }
    auto rows = g.floats({96, 128}), scale = g.floats({128}), bias = g.floats({128});
    auto dy = g.floats({96, 128});
    Kernel ln = kernelOf(LAYER_NORM);
    ln.mutable_norm()->set_axis(1);
    ln.mutable_norm()->set_epsilon(1e-5f);
    auto y = g.result({96, 128});
    g.run("bias", ln, {rows.get(), scale.get(), bias.get()}, {y.get()});
    g.run("no bias", ln, {rows.get(), scale.get()}, {y.get()});
    Kernel lng = kernelOf(LAYER_NORM_GRAD);
    *lng.mutable_norm() = ln.norm();
    auto dx = g.result({96, 128}), dscale = g.result({128}), dbias = g.result({128});
    g.run("", lng, {rows.get(), scale.get(), dy.get()}, {dx.get(), dscale.get(), dbias.get()});
    Kernel rms = kernelOf(RMS_NORM);
    rms.mutable_norm()->set_axis(1);
    rms.mutable_norm()->set_epsilon(1e-6f);
    g.run("", rms, {rows.get(), scale.get()}, {y.get()});
    Kernel rmsg = kernelOf(RMS_NORM_GRAD);
    *rmsg.mutable_norm() = rms.norm();
    g.run("", rmsg, {rows.get(), scale.get(), dy.get()}, {dx.get(), dscale.get()});
  }
  // Rotary, attention.
  {
    auto x = g.floats({2, 4, 48, 32}), cos = g.floats({48, 32}), sin = g.floats({48, 32});
    auto y = g.result({2, 4, 48, 32});
    for (bool interleaved : {false, true}) {
      Kernel k = kernelOf(ROTARY);
      k.mutable_rotary()->set_interleaved(interleaved);
      g.run(interleaved ? "interleaved" : "half", k, {x.get(), cos.get(), sin.get()}, {y.get()});
      Kernel grad = kernelOf(ROTARY_GRAD);
      grad.mutable_rotary()->set_interleaved(interleaved);
      g.run(interleaved ? "interleaved" : "half", grad, {x.get(), cos.get(), sin.get()},
            {y.get()});
    }
    auto q = g.floats({2, 4, 80, 16}), k = g.floats({2, 2, 80, 16}), v = g.floats({2, 2, 80, 24});
    auto mask = g.floats({80, 80}), dy = g.floats({2, 4, 80, 24});
    auto out = g.result({2, 4, 80, 24});
    auto dq = g.result({2, 4, 80, 16}), dk = g.result({2, 2, 80, 16}), dv = g.result({2, 2, 80, 24});
    for (bool causal : {false, true})
      for (bool masked : {false, true}) {
        Kernel fwd = kernelOf(ATTENTION);
        fwd.mutable_attention()->set_causal(causal);
        fwd.mutable_attention()->set_scale(0.25f);
        std::string label = std::string(causal ? "causal" : "full") + (masked ? " mask" : "");
        std::vector<Buffer *> ops = {q.get(), k.get(), v.get()};
        if (masked)
          ops.push_back(mask.get());
        g.run(label, fwd, ops, {out.get()});
        Kernel bwd = kernelOf(ATTENTION_GRAD);
        *bwd.mutable_attention() = fwd.attention();
        std::vector<Buffer *> bops = {q.get(), k.get(), v.get(), dy.get()};
        if (masked)
          bops.push_back(mask.get());
        g.run(label, bwd, bops, {dq.get(), dk.get(), dv.get()});
      }
  }
  // Loss, element gradients, scatters.
  {
    auto logits = g.floats({64, 500}), labels = g.ints({64}, -1, 499), dloss = g.floats({});
    Kernel ce = kernelOf(CROSS_ENTROPY);
    ce.mutable_cross_entropy()->set_ignore_index(-1);
    auto loss = g.result({});
    g.run("", ce, {logits.get(), labels.get()}, {loss.get()});
    Kernel ceg = kernelOf(CROSS_ENTROPY_GRAD);
    *ceg.mutable_cross_entropy() = ce.cross_entropy();
    auto dlogits = g.result({64, 500});
    g.run("", ceg, {labels.get(), dloss.get(), logits.get()}, {dlogits.get()});

    Shape big{300, 257};
    auto x = g.floats(big), up = g.floats(big), dy = g.floats(big);
    auto dx = g.result(big), dup = g.result(big);
    for (bool tanh : {false, true}) {
      Kernel k = kernelOf(GELU_GRAD);
      k.mutable_gelu()->set_tanh(tanh);
      g.run(tanh ? "tanh" : "erf", k, {x.get(), dy.get()}, {dx.get()});
    }
    g.run("", kernelOf(SWIGLU_GRAD), {x.get(), up.get(), dy.get()}, {dx.get(), dup.get()});

    auto indices = g.ints({50, 7}, -40, 39), gdy = g.floats({3, 50, 7, 33});
    Kernel gg = kernelOf(GATHER_GRAD);
    gg.mutable_axis()->set_axis(1);
    auto ddata = g.result({3, 40, 33});
    g.run("", gg, {indices.get(), gdy.get()}, {ddata.get()});

    Kernel sg = kernelOf(SLICE_GRAD);
    for (int64_t start : {1, 2, 0})
      sg.mutable_slice()->add_starts(start);
    for (int64_t step : {2, 3, 1})
      sg.mutable_slice()->add_steps(step);
    auto sdy = g.floats({10, 30, 64}), sdx = g.result({20, 90, 64});
    g.run("", sg, {sdy.get()}, {sdx.get()});
  }
}

} // namespace

int main(int argc, char **argv) {
  bool f64 = argc > 1 && std::string(argv[1]) == "--f64";
  Digest digest(f64 ? F64 : F32);
  runAll(digest);
  return 0;
}
