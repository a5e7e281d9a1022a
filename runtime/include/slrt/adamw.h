// The host optimizer: AdamW over fp32 master weights and moments, as torch.optim.AdamW computes it.
//
// One step, in two phases so that groups of parameters can be stepped as soon as their gradients
// are final (overlapped with the backward of the next group), even with global-norm clipping:
//
//   AdamW opt(config);                                 // then addParameter() for each parameter
//   // Phase 1, only when clipping (config.maxGradNorm > 0): as each group's gradients become
//   // final, keep its squared norm, one double per group.
//   squares[g] = opt.gradSquaredNorm(group[g]);
//   // Once every gradient of the step is final: sum the groups in group order (and across ranks),
//   // then take torch's clip coefficient.
//   float coef = opt.clipCoefficient(squares[0] + squares[1] + ...);
//   // Phase 2: step every group once, each with the same coefficient, in any order.
//   opt.stepGroup(group[g], coef);
//   opt.finishStep();
//
// Without clipping, phase 1 is skipped and each group is stepped as soon as its gradient is final
// with coefficient 1. With clipping no parameter can move before the last gradient of the step is
// known (the coefficient depends on all of them), so only phase 1 overlaps the backward.
//
// Each pass reads every byte it touches from memory (a group is far larger than the caches), so a
// step is a few passes, each over the whole group: the squared norms (which also find a NaN or an
// infinity before anything moves), then the update, which also writes each parameter's weights
// into the buffer the next forward reads (ParamGrad::weightsOut, bf16WeightsOut) while they are in
// registers, instead of a pass of its own that would read the masters again.
//
// Numerics: every element is updated in float32 in the order of torch 1.13's AdamW on its AVX2 CPU
// kernels, with the step's scalars computed in double and then rounded to float, as torch does
// with Python floats:
//   g  = grad * clipCoef                                 (exact when clipCoef is 1)
//   p  = p * float(1 - lr * weightDecay)
//   m  = fma(float(1 - beta1), g, m * float(beta1))      (one rounding for the multiply-add)
//   v  = fma(float(1 - beta2) * g, g, v * float(beta2))
//   d  = sqrt(v) / float(sqrt(1 - beta2^t)) + float(eps)
//   p  = p + (float(-lr / (1 - beta1^t)) * m) / d
// where t is the 1-based index of the step and lr = config.lrAt(t - 1); every other operation is
// rounded on its own. Without clipping this gives torch's bits (torch's scalar fallback kernels,
// which round the multiply-adds twice, differ by an ulp here and there). The result is the same on
// every machine and depends neither on the number of threads nor on how parameters are grouped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace slrt {

// Defaults are torch.optim.AdamW's, with a constant learning rate and no clipping.
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  // Decoupled: each step multiplies the weights by 1 - lr * weightDecay, with the scheduled lr.
  double weightDecay = 0.01;
  // Clip the global L2 norm of all gradients to this (torch.nn.utils.clip_grad_norm_); 0 is off.
  double maxGradNorm = 0;
  // Learning-rate schedule, see lrAt. Both 0: constant lr.
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;
  double minLr = 0;

  // Throws Error naming the field for a value torch would refuse (lr, eps or weightDecay negative,
  // a beta outside [0, 1)) or a negative maxGradNorm, step count or minLr. NaN is refused too.
  void validate() const;

  // The learning rate of the update that follows `step` completed steps (0 for the first update):
  // the value torch.optim.lr_scheduler.LambdaLR gives after `step` calls of scheduler.step(), for
  //   step < warmupSteps:                 lr * step / warmupSteps   (0 for the first update)
  //   decaySteps > 0, d < decaySteps:     minLr + (lr - minLr) * (1 + cos(pi * d / decaySteps)) / 2
  //   decaySteps > 0, d >= decaySteps:    minLr
  //   otherwise:                          lr
  // with d = step - warmupSteps.
  // So the warmup reaches lr exactly at step == warmupSteps, where the cosine starts, and the
  // cosine reaches minLr at step == warmupSteps + decaySteps and stays there. This is Hugging
  // Face's get_cosine_schedule_with_warmup with num_training_steps = warmupSteps + decaySteps and
  // a floor of minLr. Negative steps count as 0.
  double lrAt(int64_t step) const;
};

// One parameter's gradient for a step, and where stepGroup writes its updated weights besides the
// masters. A parameter with elements has exactly one gradient: `grad` (size(param) floats) or
// `bf16Grad` (size(param) bf16 values, widened exactly as they are read: the same bits as stepping
// on the widened copy).
struct ParamGrad {
  size_t param;
  const float *grad = nullptr;
  const uint16_t *bf16Grad = nullptr;
  // At most one: stepGroup also writes the updated master weights here, in the same pass over the
  // elements, copied (f32) or rounded to bf16 as floatToBfloat16 rounds (the host buffer of the
  // parameter the next forward reads). size(param) elements, overlapping nothing stepGroup reads.
  float *weightsOut = nullptr;
  uint16_t *bf16WeightsOut = nullptr;
};

class AdamW {
public:
  // Throws Error when config.validate() does.
  explicit AdamW(const AdamWConfig &config);

  const AdamWConfig &config() const { return config_; }

  // Adds a parameter whose master weights start as `weights`, with zero moments; returns its
  // index (0, 1, ...). `name` appears in error messages (and is what a checkpoint keys it by).
  // Parameters may be added only before the first step.
  size_t addParameter(std::string name, std::vector<float> weights);

  size_t parameterCount() const { return params_.size(); }
  const std::string &name(size_t param) const;
  size_t size(size_t param) const;

  // Phase 1: the sum of squares of the gradients of `group` (in double), so that the caller can
  // sum the groups of a step before clipping. The sum is over fixed-size chunks in a fixed order,
  // so it does not depend on the number of threads.
  double gradSquaredNorm(const std::vector<ParamGrad> &group) const;
  // The same per parameter: element k is group[k]'s sum of squares (NaN or infinite when its
  // gradient holds a NaN or an infinity), in one pass over the whole group. gradSquaredNorm is
  // their sum in group order.
  std::vector<double> gradSquaredNorms(const std::vector<ParamGrad> &group) const;

  // The factor every gradient of the step is scaled by, from the sum of squares of all of them:
  // torch's clip_grad_norm_ coefficient max_norm / (norm + 1e-6), computed in float32 from the
  // norm rounded to float32 as torch does, clamped to 1. Exactly 1 when clipping is off.
  float clipCoefficient(double totalSquaredNorm) const;

  // Phase 2: updates the parameters of `group` with their gradients scaled by `clipCoef` (from
  // clipCoefficient; 1 when clipping is off), and writes each updated parameter's weights to its
  // weightsOut or bf16WeightsOut when it has one. Each parameter is stepped once per step; a
  // second time before finishStep is an Error, as is a parameter index out of range, a missing
  // gradient, two gradients or two outputs for one parameter. stepGroup does not look for NaN:
  // a caller that must not step on a non-finite gradient checks gradSquaredNorms first.
  void stepGroup(const std::vector<ParamGrad> &group, float clipCoef = 1.0f);

  // Ends the step: every parameter must have been stepped (Error otherwise); step() grows by one.
  void finishStep();

  // The whole step at once: grads[i] is parameter i's gradient. Clips when the config says so and
  // returns the global gradient norm then (0 when clipping is off, which does not compute it).
  double step(const std::vector<const float *> &grads);

  // The number of completed steps, and the learning rate of the next update (lrAt(step())).
  int64_t step() const { return step_; }
  double currentLr() const { return config_.lrAt(step_); }

  // State for checkpoints. Restoring the weights, both moments and the step count of every
  // parameter into an optimizer with the same config continues bit-identically. The setters
  // throw Error when the size differs from the parameter's, or mid-step (after a stepGroup and
  // before finishStep); setStep refuses a negative count.
  const std::vector<float> &weights(size_t param) const;
  const std::vector<float> &expAvg(size_t param) const;
  const std::vector<float> &expAvgSq(size_t param) const;
  void setWeights(size_t param, const std::vector<float> &values);
  void setExpAvg(size_t param, const std::vector<float> &values);
  void setExpAvgSq(size_t param, const std::vector<float> &values);
  void setStep(int64_t step);

private:
  struct Param {
    std::string name;
    std::vector<float> weights, expAvg, expAvgSq;
    bool stepped = false; // in the step in progress
  };

  const Param &at(size_t param) const;
  // Throws Error for an index out of range, a missing gradient, two gradients or two outputs.
  void checkGradient(const ParamGrad &pg) const;
  void setState(size_t param, std::vector<float> Param::*field, const std::vector<float> &values,
                const char *what);

  AdamWConfig config_;
  std::vector<Param> params_;
  int64_t step_ = 0;
  // Parameters stepped in the step in progress.
  size_t steppedCount_ = 0;
};

} // namespace slrt
