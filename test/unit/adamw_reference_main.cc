// Test-only: runs the host AdamW on gradients from .npy files, for the cross-check against
// torch.optim.AdamW (python/tests/test_adamw_vs_torch.py).
//
//   adamw_reference_main --dir D --steps K [--sizes N1,N2,...] [--lr X] [--beta1 X] [--beta2 X]
//                        [--eps X] [--weight-decay X] [--max-grad-norm X] [--warmup-steps N]
//                        [--decay-steps N] [--min-lr X]
//
// reads D/params.npy and D/grads_0.npy .. D/grads_<K-1>.npy (f32, all of one element count), splits
// the flattened elements into parameters of the given sizes (one parameter by default), runs K
// steps and writes D/params_out.npy, D/exp_avg_out.npy and D/exp_avg_sq_out.npy in the shape of
// params.npy. Each step goes the way the executor's would: one group per parameter, the squared
// norms taken (when clipping) and the groups stepped in reverse order, as backward finishes them.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "slrt/adamw.h"
#include "slrt/error.h"
#include "slrt/npy.h"

namespace {

using namespace slrt;

HostTensor readF32(const std::string &path, uint64_t expectedCount) {
  HostTensor t = readNpy(path);
  if (t.dtype != sl::schedule::F32)
    throw makeError(path, ": expected f32, got ", dtypeName(t.dtype));
  if (expectedCount != 0 && t.numel() != expectedCount)
    throw makeError(path, ": expected ", expectedCount, " elements, got ", t.numel());
  return t;
}

void writeConcatenated(const std::string &path, const Shape &shape,
                       const std::vector<const std::vector<float> *> &parts) {
  HostTensor t = HostTensor::zeros(sl::schedule::F32, shape);
  float *out = t.as<float>();
  for (const std::vector<float> *part : parts)
    out = std::copy(part->begin(), part->end(), out);
  writeNpy(path, t);
}

int run(int argc, char **argv) {
  CLI::App app("Runs the host AdamW on .npy gradients (a test helper)");
  std::string dir;
  int steps = 0;
  std::vector<uint64_t> sizes;
  AdamWConfig config;
  app.add_option("--dir", dir, "directory with params.npy and grads_<k>.npy")->required();
  app.add_option("--steps", steps, "number of steps")->required();
  app.add_option("--sizes", sizes, "element counts of the parameters")->delimiter(',');
  app.add_option("--lr", config.lr);
  app.add_option("--beta1", config.beta1);
  app.add_option("--beta2", config.beta2);
  app.add_option("--eps", config.eps);
  app.add_option("--weight-decay", config.weightDecay);
  app.add_option("--max-grad-norm", config.maxGradNorm);
  app.add_option("--warmup-steps", config.warmupSteps);
  app.add_option("--decay-steps", config.decaySteps);
  app.add_option("--min-lr", config.minLr);
  CLI11_PARSE(app, argc, argv);

  HostTensor params = readF32(dir + "/params.npy", 0);
  uint64_t total = params.numel();
  if (sizes.empty())
    sizes.push_back(total);
  uint64_t sum = 0;
  for (uint64_t n : sizes)
    sum += n;
  if (sum != total)
    throw makeError("--sizes add up to ", sum, " elements, params.npy has ", total);

  AdamW opt(config);
  const float *at = params.as<float>();
  for (size_t i = 0; i < sizes.size(); at += sizes[i], ++i)
    opt.addParameter("p" + std::to_string(i), std::vector<float>(at, at + sizes[i]));

  for (int k = 0; k < steps; ++k) {
    HostTensor grads = readF32(dir + "/grads_" + std::to_string(k) + ".npy", total);
    std::vector<ParamGrad> groups;
    const float *g = grads.as<float>();
    for (size_t i = 0; i < sizes.size(); g += sizes[i], ++i)
      groups.push_back({i, g});
    float coef = 1.0f;
    if (config.maxGradNorm > 0) {
      std::vector<double> squares(groups.size());
      for (size_t i = groups.size(); i-- > 0;)
        squares[i] = opt.gradSquaredNorm({groups[i]});
      double totalSquares = 0;
      for (double s : squares)
        totalSquares += s;
      coef = opt.clipCoefficient(totalSquares);
    }
    for (size_t i = groups.size(); i-- > 0;)
      opt.stepGroup({groups[i]}, coef);
    opt.finishStep();
  }

  std::vector<const std::vector<float> *> weights, expAvg, expAvgSq;
  for (size_t i = 0; i < opt.parameterCount(); ++i) {
    weights.push_back(&opt.weights(i));
    expAvg.push_back(&opt.expAvg(i));
    expAvgSq.push_back(&opt.expAvgSq(i));
  }
  writeConcatenated(dir + "/params_out.npy", params.shape, weights);
  writeConcatenated(dir + "/exp_avg_out.npy", params.shape, expAvg);
  writeConcatenated(dir + "/exp_avg_sq_out.npy", params.shape, expAvgSq);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const slrt::Error &e) {
    std::fprintf(stderr, "adamw_reference_main: %s\n", e.what());
    return 1;
  }
}
