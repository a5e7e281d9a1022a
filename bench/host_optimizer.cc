// The trainer's host optimizer step (Trainer::optimizerStep: the finiteness check of every
// gradient, the AdamW update, the weights written into the parameters' host buffers) on LLaMA
// decoder layers, timed per thread count, in two versions that compute the same bits:
//
//   before: what the trainer did until the weight write was fused: each gradient's squared norm
//           on its own (a bf16 gradient widened into an f32 copy first), stepGroup, then each
//           parameter's masters rounded (bf16) or copied (f32) into its buffer, a pass of its own;
//   after:  what it does now: every squared norm of the group in one pass (a bf16 gradient read
//           where it lies), then stepGroup writing the weights in the same pass as the update.
//
// Both run on one AdamW in turns, step by step, so that a busy machine slows both alike; the
// table gives the median step time and the phases' medians. Memory: 12 bytes of AdamW state per
// parameter, plus the gradient, its widened copy (bf16 gradients) and the weight buffer.
//
//   host_optimizer_bench [--hidden 1024] [--layers 2] [--threads 1,2] [--steps 9]
//                        [--param-dtype bf16|f32] [--grad-dtype f32|bf16]
//
// Each layer is one group, as one OPTIMIZER_STEP kernel: two norms [H], q k v o [H, H], gate and
// up [F, H], down [H, F], F = 43 H / 16 (llama2-7b: H 4096, F 11008). Results:
// bench/results/host-optimizer.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "slrt/adamw.h"
#include "slrt/bfloat16.h"
#include "slrt/error.h"

namespace {

using namespace slrt;
using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Parameter {
  size_t index;
  bool bf16;
  std::vector<float> grad;      // f32 gradient, or
  std::vector<uint16_t> grad16; // bf16 gradient
  std::vector<float> wide;      // before: the bf16 gradient widened (Trainer::gradient)
  std::vector<float> out;       // the f32 parameter's buffer, or
  std::vector<uint16_t> out16;  // the bf16 one's
};

// One step's phases, in seconds.
struct Phases {
  double check = 0, update = 0, write = 0;
  double total() const { return check + update + write; }
};

void checkFinite(const std::vector<double> &squares) {
  for (double square : squares)
    if (!std::isfinite(square))
      throw makeError("a gradient holds NaN or infinite values");
}

Phases stepBefore(AdamW &opt, std::vector<std::vector<Parameter>> &layers) {
  Phases t;
  for (auto &layer : layers) {
    auto start = Clock::now();
    std::vector<ParamGrad> group;
    std::vector<double> squares;
    for (Parameter &p : layer) {
      const float *grad = p.grad.data();
      if (!p.grad16.empty()) {
        p.wide.resize(p.grad16.size());
        widenBfloat16(p.grad16.data(), p.wide.data(), p.wide.size());
        grad = p.wide.data();
      }
      ParamGrad pg{p.index, grad};
      squares.push_back(opt.gradSquaredNorm({pg}));
      group.push_back(pg);
    }
    checkFinite(squares);
    t.check += secondsSince(start);
    start = Clock::now();
    opt.stepGroup(group);
    t.update += secondsSince(start);
    start = Clock::now();
    for (Parameter &p : layer) {
      const std::vector<float> &w = opt.weights(p.index);
      if (p.bf16)
        roundToBfloat16(w.data(), p.out16.data(), w.size());
      else
        std::memcpy(p.out.data(), w.data(), w.size() * sizeof(float));
    }
    t.write += secondsSince(start);
  }
  opt.finishStep();
  return t;
}

Phases stepAfter(AdamW &opt, std::vector<std::vector<Parameter>> &layers) {
  Phases t;
  for (auto &layer : layers) {
    auto start = Clock::now();
    std::vector<ParamGrad> group;
    for (Parameter &p : layer) {
      ParamGrad pg{p.index};
      if (p.grad16.empty())
        pg.grad = p.grad.data();
      else
        pg.bf16Grad = p.grad16.data();
      if (p.bf16)
        pg.bf16WeightsOut = p.out16.data();
      else
        pg.weightsOut = p.out.data();
      group.push_back(pg);
    }
    checkFinite(opt.gradSquaredNorms(group));
    t.check += secondsSince(start);
    start = Clock::now();
    opt.stepGroup(group);
    t.update += secondsSince(start);
  }
  opt.finishStep();
  return t;
}

int run(int argc, char **argv) {
  CLI::App app("Times the trainer's host optimizer step, before and after the fused weight write");
  int64_t hidden = 1024;
  int layerCount = 2, steps = 9;
  std::vector<int> threadCounts = {1, 2};
  std::string paramDtype = "bf16", gradDtype = "f32";
  app.add_option("--hidden", hidden, "hidden size H of each layer")->check(CLI::Range(16, 16384));
  app.add_option("--layers", layerCount, "layers, one group each")->check(CLI::Range(1, 1000));
  app.add_option("--threads", threadCounts, "thread counts")->delimiter(',');
  app.add_option("--steps", steps, "timed steps per version and thread count")
      ->check(CLI::Range(1, 1000));
  app.add_option("--param-dtype", paramDtype, "the parameters' buffers")
      ->check(CLI::IsMember({"bf16", "f32"}));
  app.add_option("--grad-dtype", gradDtype, "the gradients' buffers")
      ->check(CLI::IsMember({"f32", "bf16"}));
  CLI11_PARSE(app, argc, argv);

  int64_t ffn = hidden * 43 / 16;
  // The two norms, q k v o, gate up down.
  const std::vector<int64_t> sizes = {hidden,          hidden,          hidden * hidden,
                                      hidden * hidden, hidden * hidden, hidden * hidden,
                                      ffn * hidden,    ffn * hidden,    hidden * ffn};
  AdamW opt{AdamWConfig{}};
  std::vector<std::vector<Parameter>> layers(static_cast<size_t>(layerCount));
  // Uniform values in [-scale, scale) from a linear congruential generator: the timing does not
  // depend on the values (no NaN, no subnormals), and drawing them stays cheap next to a step.
  uint32_t state = 1;
  auto uniform = [&](float scale) {
    state = state * 1664525u + 1013904223u;
    return scale * (static_cast<float>(state >> 8) * 0x1p-23f - 1.0f);
  };
  uint64_t total = 0;
  for (int l = 0; l < layerCount; ++l)
    for (int64_t n : sizes) {
      std::vector<float> w(static_cast<size_t>(n));
      for (float &x : w)
        x = uniform(0.02f);
      Parameter p;
      p.index = opt.addParameter("layer" + std::to_string(l), std::move(w));
      p.bf16 = paramDtype == "bf16";
      std::vector<float> g(static_cast<size_t>(n));
      for (float &x : g)
        x = uniform(1e-3f);
      if (gradDtype == "bf16") {
        p.grad16.resize(g.size());
        roundToBfloat16(g.data(), p.grad16.data(), g.size());
      } else {
        p.grad = std::move(g);
      }
      if (p.bf16)
        p.out16.resize(static_cast<size_t>(n));
      else
        p.out.resize(static_cast<size_t>(n));
      layers[static_cast<size_t>(l)].push_back(std::move(p));
      total += static_cast<uint64_t>(n);
    }

  std::printf("%llu parameters: %d layers of hidden %lld, ffn %lld; %s parameters, %s gradients; "
              "median of %d steps\n\n",
              static_cast<unsigned long long>(total), layerCount, static_cast<long long>(hidden),
              static_cast<long long>(ffn), paramDtype.c_str(), gradDtype.c_str(), steps);
  std::printf("| threads | version | step ms | G params/s | check ms | update ms | write ms | "
              "after / before |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (int threads : threadCounts) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    if (threads != 1)
      throw makeError("built without OpenMP: only --threads 1");
#endif
    // One untimed step of each first: page faults of the outputs and the widened copies.
    stepBefore(opt, layers);
    stepAfter(opt, layers);
    std::vector<Phases> before, after;
    for (int s = 0; s < steps; ++s) {
      before.push_back(stepBefore(opt, layers));
      after.push_back(stepAfter(opt, layers));
    }
    double beforeMedian = 0;
    for (const auto *runs : {&before, &after}) {
      auto pick = [&](double Phases::*f) {
        std::vector<double> v;
        for (const Phases &p : *runs)
          v.push_back(p.*f);
        return median(v) * 1e3;
      };
      std::vector<double> totals;
      for (const Phases &p : *runs)
        totals.push_back(p.total());
      double ms = median(totals) * 1e3;
      bool isBefore = runs == &before;
      if (isBefore)
        beforeMedian = ms;
      char write[32] = "fused", ratio[32] = "";
      if (isBefore)
        std::snprintf(write, sizeof write, "%.2f", pick(&Phases::write));
      else
        std::snprintf(ratio, sizeof ratio, "%.2f", ms / beforeMedian);
      std::printf("| %d | %s | %.2f | %.3f | %.2f | %.2f | %s | %s |\n", threads,
                  isBefore ? "before" : "after", ms, static_cast<double>(total) / ms / 1e6,
                  pick(&Phases::check), pick(&Phases::update), write, ratio);
    }
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "host_optimizer_bench: %s\n", e.what());
    return 1;
  }
}
