// AdamW on the host. The element loops are plain loops the compiler vectorises (this file is built
// with -fno-math-errno, so sqrt vectorises, and -ffp-contract=off, so that no multiply-add is fused
// but the two std::fma calls that stand for torch's); threads split the work by fixed-size chunks
// of each parameter, so neither the result nor the order of any sum depends on the thread count.
#include "slrt/adamw.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "backends/cpu/parallel.h"
#include "slrt/bfloat16.h"
#include "slrt/error.h"

namespace slrt {
namespace {

// Elements per work item. Chunk boundaries sit at fixed offsets of each parameter, so a parameter's
// squared norm is the same sum whichever group it is in and however many threads there are.
constexpr int64_t kChunk = int64_t{1} << 14;
// Rough element operations per element of an update, for the threading threshold.
constexpr int64_t kUpdateCost = 12;
// Python's math.pi, the double nearest pi.
constexpr double kPi = 3.141592653589793;

struct Chunk {
  size_t item; // index into the group
  int64_t begin, end;
};

std::vector<Chunk> chunksOf(const std::vector<size_t> &sizes) {
  std::vector<Chunk> chunks;
  for (size_t k = 0; k < sizes.size(); ++k)
    for (int64_t begin = 0; begin < static_cast<int64_t>(sizes[k]); begin += kChunk)
      chunks.push_back({k, begin, std::min<int64_t>(begin + kChunk, sizes[k])});
  return chunks;
}

// A gradient element as f32: bf16 widens exactly.
template <typename G> inline float gradAt(const G *g, int64_t i) {
  if constexpr (std::is_same_v<G, uint16_t>)
    return bfloat16ToFloat(g[i]);
  else
    return g[i];
}

// Sum of squares in double (each square of a float is exact) over eight interleaved lanes, which
// the compiler can keep in vector registers, combined in a fixed order.
template <typename G> double sumOfSquares(const G *x, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      double e = gradAt(x, i + j);
      lanes[j] += e * e;
    }
  for (int j = 0; i < n; ++i, ++j) {
    double e = gradAt(x, i);
    lanes[j] += e * e;
  }
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// The scalars of one step, rounded to float as torch rounds Python floats against a float tensor.
struct StepScalars {
  float clipCoef, decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, biasCorrection2Sqrt, eps,
      negStepSize;
};

// The weight output a parameter has none of.
struct NoOutput {};

// One update of n elements, the gradient read as G (float or bf16 bits), the updated weights also
// written as W (float, bf16 bits, or NoOutput: not at all) while they are in registers. The two
// moment updates are single-rounding multiply-adds because torch's vectorised CPU kernels
// (Vectorized<float>::fmadd in add_(alpha=), and the compiler's contraction in addcmul_) compute
// them that way.
template <typename G, typename W>
__attribute__((always_inline)) inline void
updateLoop(float *__restrict p, float *__restrict m, float *__restrict v, const G *__restrict g,
           W *__restrict out, int64_t n, const StepScalars &s) {
  const float clipCoef = s.clipCoef, decay = s.decay, beta1 = s.beta1, a1 = s.oneMinusBeta1,
              beta2 = s.beta2, a2 = s.oneMinusBeta2, bc2 = s.biasCorrection2Sqrt, eps = s.eps,
              negStepSize = s.negStepSize;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float grad = gradAt(g, i) * clipCoef;
    float mi = std::fma(a1, grad, m[i] * beta1);
    float vi = std::fma(a2 * grad, grad, v[i] * beta2);
    float denom = std::sqrt(vi) / bc2 + eps;
    float pi = p[i] * decay + (negStepSize * mi) / denom;
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (std::is_same_v<W, float>)
      out[i] = pi;
    else if constexpr (std::is_same_v<W, uint16_t>)
      out[i] = floatToBfloat16(pi);
  }
}

using UpdateFn = void (*)(float *p, float *m, float *v, const void *g, void *out, int64_t n,
                          const StepScalars &s);

// std::fma rounds once on every target, so the versions below compute the same bits: without FMA
// instructions it is a library call (slow, exact), with them the loop vectorises. On x86-64 the
// baseline lacks FMA, so a version for AVX2 and FMA is picked at run time where the CPU has them.
template <typename G, typename W>
void updatePortable(float *p, float *m, float *v, const void *g, void *out, int64_t n,
                    const StepScalars &s) {
  updateLoop(p, m, v, static_cast<const G *>(g), static_cast<W *>(out), n, s);
}

#if defined(__x86_64__) && !defined(__FMA__)
#define SL_ADAMW_FMA_DISPATCH 1
template <typename G, typename W>
__attribute__((target("avx2,fma"))) void updateAvx2Fma(float *p, float *m, float *v,
                                                       const void *g, void *out, int64_t n,
                                                       const StepScalars &s) {
  updateLoop(p, m, v, static_cast<const G *>(g), static_cast<W *>(out), n, s);
}
#endif

template <typename G, typename W> UpdateFn updateFor() {
#ifdef SL_ADAMW_FMA_DISPATCH
  static const bool avx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2Fma)
    return updateAvx2Fma<G, W>;
#endif
  return updatePortable<G, W>;
}

// The update for a gradient of type G and the output `pg` asks for.
template <typename G> UpdateFn updateFor(const ParamGrad &pg) {
  if (pg.weightsOut)
    return updateFor<G, float>();
  if (pg.bf16WeightsOut)
    return updateFor<G, uint16_t>();
  return updateFor<G, NoOutput>();
}

void checkFinite(double value, const char *field) {
  if (!std::isfinite(value))
    throw makeError("AdamW: ", field, " must be finite, got ", value);
}

} // namespace

void AdamWConfig::validate() const {
  const std::pair<double, const char *> fields[] = {{lr, "lr"},
                                                    {beta1, "beta1"},
                                                    {beta2, "beta2"},
                                                    {eps, "eps"},
                                                    {weightDecay, "weightDecay"},
                                                    {maxGradNorm, "maxGradNorm"},
                                                    {minLr, "minLr"}};
  for (auto [value, field] : fields) {
    checkFinite(value, field);
    if (value < 0)
      throw makeError("AdamW: ", field, " must not be negative, got ", value);
  }
  if (beta1 >= 1)
    throw makeError("AdamW: beta1 must be in [0, 1), got ", beta1);
  if (beta2 >= 1)
    throw makeError("AdamW: beta2 must be in [0, 1), got ", beta2);
  if (warmupSteps < 0)
    throw makeError("AdamW: warmupSteps must not be negative, got ", warmupSteps);
  if (decaySteps < 0)
    throw makeError("AdamW: decaySteps must not be negative, got ", decaySteps);
}

double AdamWConfig::lrAt(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  if (step < warmupSteps)
    return lr * static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (decaySteps == 0)
    return lr;
  int64_t decayed = step - warmupSteps;
  if (decayed >= decaySteps)
    return minLr;
  double progress = static_cast<double>(decayed) / static_cast<double>(decaySteps);
  return minLr + (lr - minLr) * (0.5 * (1.0 + std::cos(kPi * progress)));
}

AdamW::AdamW(const AdamWConfig &config) : config_(config) { config_.validate(); }

size_t AdamW::addParameter(std::string name, std::vector<float> weights) {
  // A parameter added later would start its bias correction at the optimizer's step, not at 1.
  if (step_ != 0 || steppedCount_ != 0)
    throw makeError("AdamW: parameter '", name, "' added after the first step");
  size_t n = weights.size();
  params_.push_back({std::move(name), std::move(weights), std::vector<float>(n, 0.0f),
                     std::vector<float>(n, 0.0f)});
  return params_.size() - 1;
}

const AdamW::Param &AdamW::at(size_t param) const {
  if (param >= params_.size())
    throw makeError("AdamW: parameter index ", param, " is out of range (", params_.size(),
                    " parameters)");
  return params_[param];
}

const std::string &AdamW::name(size_t param) const { return at(param).name; }
size_t AdamW::size(size_t param) const { return at(param).weights.size(); }

void AdamW::checkGradient(const ParamGrad &pg) const {
  const Param &param = at(pg.param);
  if (pg.grad && pg.bf16Grad)
    throw makeError("AdamW: two gradients (f32 and bf16) for parameter '", param.name, "'");
  if (!pg.grad && !pg.bf16Grad && !param.weights.empty())
    throw makeError("AdamW: no gradient for parameter '", param.name, "'");
  if (pg.weightsOut && pg.bf16WeightsOut)
    throw makeError("AdamW: two weight outputs (f32 and bf16) for parameter '", param.name, "'");
}

std::vector<double> AdamW::gradSquaredNorms(const std::vector<ParamGrad> &group) const {
  std::vector<size_t> sizes;
  for (const ParamGrad &pg : group) {
    checkGradient(pg);
    sizes.push_back(params_[pg.param].weights.size());
  }
  std::vector<Chunk> chunks = chunksOf(sizes);
  std::vector<double> partial(chunks.size());
  cpu::parallelFor(static_cast<int64_t>(chunks.size()), kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const Chunk &chunk = chunks[c];
      const ParamGrad &pg = group[chunk.item];
      int64_t n = chunk.end - chunk.begin;
      partial[c] = pg.bf16Grad ? sumOfSquares(pg.bf16Grad + chunk.begin, n)
                               : sumOfSquares(pg.grad + chunk.begin, n);
    }
  });
  // Chunks are in group order, each parameter's in offset order.
  std::vector<double> sums(group.size(), 0.0);
  for (size_t c = 0; c < chunks.size(); ++c)
    sums[chunks[c].item] += partial[c];
  return sums;
}

double AdamW::gradSquaredNorm(const std::vector<ParamGrad> &group) const {
  double total = 0;
  for (double sum : gradSquaredNorms(group))
    total += sum;
  return total;
}

float AdamW::clipCoefficient(double totalSquaredNorm) const {
  if (config_.maxGradNorm == 0)
    return 1.0f;
  // torch: clip_coef = max_norm / (total_norm + 1e-6) on a float32 total_norm, where dividing a
  // Python float by a tensor is tensor.reciprocal() * max_norm; then clamp(max=1). A NaN norm
  // gives a NaN coefficient, as in torch.
  float norm = static_cast<float>(std::sqrt(totalSquaredNorm));
  float coef = (1.0f / (norm + 1e-6f)) * static_cast<float>(config_.maxGradNorm);
  return std::min(coef, 1.0f);
}

void AdamW::stepGroup(const std::vector<ParamGrad> &group, float clipCoef) {
  // Check everything before touching anything, so a refused group leaves the state as it was.
  std::vector<size_t> sizes;
  for (size_t k = 0; k < group.size(); ++k) {
    checkGradient(group[k]);
    const Param &param = params_[group[k].param];
    bool repeated = std::any_of(group.begin(), group.begin() + k,
                                [&](const ParamGrad &pg) { return pg.param == group[k].param; });
    if (param.stepped || repeated)
      throw makeError("AdamW: parameter '", param.name, "' stepped twice in step ", step_ + 1);
    sizes.push_back(param.weights.size());
  }

  double t = static_cast<double>(step_ + 1);
  double lr = config_.lrAt(step_);
  double biasCorrection1 = 1.0 - std::pow(config_.beta1, t);
  double biasCorrection2 = 1.0 - std::pow(config_.beta2, t);
  StepScalars s;
  s.clipCoef = clipCoef;
  s.decay = static_cast<float>(1.0 - lr * config_.weightDecay);
  s.beta1 = static_cast<float>(config_.beta1);
  s.oneMinusBeta1 = static_cast<float>(1.0 - config_.beta1);
  s.beta2 = static_cast<float>(config_.beta2);
  s.oneMinusBeta2 = static_cast<float>(1.0 - config_.beta2);
  s.biasCorrection2Sqrt = static_cast<float>(std::sqrt(biasCorrection2));
  s.eps = static_cast<float>(config_.eps);
  s.negStepSize = static_cast<float>(-(lr / biasCorrection1));

  std::vector<UpdateFn> updates;
  for (const ParamGrad &pg : group)
    updates.push_back(pg.bf16Grad ? updateFor<uint16_t>(pg) : updateFor<float>(pg));
  std::vector<Chunk> chunks = chunksOf(sizes);
  cpu::parallelFor(
      static_cast<int64_t>(chunks.size()), kChunk * kUpdateCost, [&](int64_t begin, int64_t end) {
        for (int64_t c = begin; c < end; ++c) {
          const Chunk &chunk = chunks[c];
          const ParamGrad &pg = group[chunk.item];
          Param &param = params_[pg.param];
          int64_t at = chunk.begin;
          const void *grad = pg.bf16Grad ? static_cast<const void *>(pg.bf16Grad + at)
                                         : static_cast<const void *>(pg.grad + at);
          void *out = pg.weightsOut ? static_cast<void *>(pg.weightsOut + at)
                      : pg.bf16WeightsOut ? static_cast<void *>(pg.bf16WeightsOut + at)
                                          : nullptr;
          updates[chunk.item](param.weights.data() + at, param.expAvg.data() + at,
                              param.expAvgSq.data() + at, grad, out, chunk.end - at, s);
        }
      });
  for (const ParamGrad &pg : group)
    params_[pg.param].stepped = true;
  steppedCount_ += group.size();
}

void AdamW::finishStep() {
  for (const Param &param : params_)
    if (!param.stepped)
      throw makeError("AdamW: step ", step_ + 1, " finished without stepping parameter '",
                      param.name, "'");
  for (Param &param : params_)
    param.stepped = false;
  steppedCount_ = 0;
  ++step_;
}

double AdamW::step(const std::vector<const float *> &grads) {
  if (grads.size() != params_.size())
    throw makeError("AdamW: step given ", grads.size(), " gradients for ", params_.size(),
                    " parameters");
  std::vector<ParamGrad> all;
  for (size_t i = 0; i < grads.size(); ++i)
    all.push_back({i, grads[i]});
  double norm = 0;
  float clipCoef = 1.0f;
  if (config_.maxGradNorm > 0) {
    double squares = gradSquaredNorm(all);
    norm = std::sqrt(squares);
    clipCoef = clipCoefficient(squares);
  }
  stepGroup(all, clipCoef);
  finishStep();
  return norm;
}

const std::vector<float> &AdamW::weights(size_t param) const { return at(param).weights; }
const std::vector<float> &AdamW::expAvg(size_t param) const { return at(param).expAvg; }
const std::vector<float> &AdamW::expAvgSq(size_t param) const { return at(param).expAvgSq; }

void AdamW::setState(size_t param, std::vector<float> Param::*field,
                     const std::vector<float> &values, const char *what) {
  const Param &p = at(param);
  if (steppedCount_ != 0)
    throw makeError("AdamW: cannot set the ", what, " of '", p.name, "' in the middle of step ",
                    step_ + 1);
  if (values.size() != p.weights.size())
    throw makeError("AdamW: ", what, " of '", p.name, "' has ", values.size(),
                    " elements, the parameter has ", p.weights.size());
  params_[param].*field = values;
}

void AdamW::setWeights(size_t param, const std::vector<float> &values) {
  setState(param, &Param::weights, values, "weights");
}
void AdamW::setExpAvg(size_t param, const std::vector<float> &values) {
  setState(param, &Param::expAvg, values, "exp_avg");
}
void AdamW::setExpAvgSq(size_t param, const std::vector<float> &values) {
  setState(param, &Param::expAvgSq, values, "exp_avg_sq");
}

void AdamW::setStep(int64_t step) {
  if (steppedCount_ != 0)
    throw makeError("AdamW: cannot set the step count in the middle of step ", step_ + 1);
  if (step < 0)
    throw makeError("AdamW: step count must not be negative, got ", step);
  step_ = step;
}

} // namespace slrt
