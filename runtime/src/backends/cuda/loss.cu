// The training loss, mean softmax cross-entropy over the labelled positions, and its gradient. A
// block per row of logits; everything in double, as the CPU backend (bf16 logits widened as they
// are read, results rounded once: load() and store(), cuda_device.cuh).
#include "backends/cuda/cuda_device.cuh"

namespace slrt::cuda {
namespace {

constexpr int kRowThreads = 256;

// Word 0: the first position whose label is outside [0, vocab) and not ignored; word 1: how many
// positions are counted (not ignored).
__global__ void checkLabels(const int64_t *labels, int64_t rows, int64_t vocab, int64_t ignore,
                            unsigned long long *words) {
  SLRT_GRID_LOOP(r, rows) {
    int64_t label = labels[r];
    if (label == ignore)
      continue;
    if (label < 0 || label >= vocab)
      atomicMin(&words[0], static_cast<unsigned long long>(r));
    atomicAdd(&words[1], 1ull);
  }
}

// The row's maximum (NaN never replaces it) and sum of exp(x - max), in double.
template <typename T>
__device__ void rowSoftmaxStats(const T *row, int64_t vocab, double &max, double &sum) {
  max = -CUDART_INF;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    max = maxIgnoringNan(max, static_cast<double>(load(row[v])));
  max = blockMax(max);
  sum = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    sum += ::exp(static_cast<double>(load(row[v])) - max);
  sum = blockSum(sum);
}

template <typename T>
__global__ void rowLosses(const T *logits, const int64_t *labels, double *loss, int64_t rows,
                          int64_t vocab, int64_t ignore) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (labels[r] == ignore) {
      if (threadIdx.x == 0)
        loss[r] = 0;
      continue;
    }
    const T *row = logits + r * vocab;
    double max, sum;
    rowSoftmaxStats(row, vocab, max, sum);
    if (threadIdx.x == 0)
      loss[r] = max + ::log(sum) - static_cast<double>(load(row[labels[r]]));
  }
}

// One block: the mean of the counted rows' losses (NaN when none is counted, as PyTorch's).
template <typename T>
__global__ void meanLoss(const double *loss, T *y, int64_t rows, unsigned long long counted) {
  double total = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    total += loss[r];
  total = blockSum(total);
  if (threadIdx.x == 0)
    *y = counted == 0 ? store<T>(dm::quietNan<float>())
                      : store<T>(total / static_cast<double>(counted));
}

// dlogits = (softmax(row) - onehot(label)) * dloss / counted, zeros for ignored rows. dloss is read
// before any barrier, so dlogits may be exactly dloss (one logit); each row is read whole before
// the last pass writes it, so dlogits may be exactly the logits.
template <typename T>
__global__ void crossEntropyGradKernel(const int64_t *labels, const T *dloss, const T *logits,
                                       T *dlogits, int64_t rows, int64_t vocab, int64_t ignore,
                                       unsigned long long counted) {
  double factor =
      counted == 0 ? 0.0 : static_cast<double>(load(*dloss)) / static_cast<double>(counted);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T *row = logits + r * vocab;
    T *grad = dlogits + r * vocab;
    int64_t label = labels[r];
    if (label == ignore) {
      for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
        grad[v] = store<T>(0.0);
      continue;
    }
    double max, sum;
    rowSoftmaxStats(row, vocab, max, sum);
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      double p = ::exp(static_cast<double>(load(row[v])) - max) / sum;
      grad[v] = store<T>((p - (v == label ? 1.0 : 0.0)) * factor);
    }
  }
}

// Checks every label before anything is written (the error names the first bad one, in the CPU
// backend's words) and returns how many positions are counted.
unsigned long long checkedCount(Context &ctx, const Tensor &labels, int64_t vocab, int64_t ignore) {
  int64_t rows = labels.numel();
  ctx.resetCheck();
  launch(ctx, "checkLabels", checkLabels, blocksFor(rows), kThreads, 0, labels.as<int64_t>(), rows,
         vocab, ignore, ctx.checkWords());
  Context::Check check = ctx.readCheck();
  if (check.failed()) {
    int64_t label = 0;
    ctx.readBack(&label, labels.as<int64_t>() + check.firstBad, sizeof label);
    throw makeError("label ", label, " at position ", check.firstBad,
                    " is outside the vocabulary [0, ", vocab, ")");
  }
  return check.count;
}

} // namespace

void crossEntropy(Context &ctx, int64_t ignoreIndex, const Tensor &logits, const Tensor &labels,
                  const Tensor &y) {
  int64_t vocab = logits.shape.back(), rows = labels.numel();
  unsigned long long counted = checkedCount(ctx, labels, vocab, ignoreIndex);
  auto *loss = reinterpret_cast<double *>(ctx.scratch(static_cast<size_t>(rows) * sizeof(double)));
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "crossEntropy rows", rowLosses<T>, blocksForRows(rows), kRowThreads, 0,
           logits.as<T>(), labels.as<int64_t>(), loss, rows, vocab, ignoreIndex);
    launch(ctx, "crossEntropy mean", meanLoss<T>, 1, kRowThreads, 0,
           static_cast<const double *>(loss), y.as<T>(), rows, counted);
  });
}

void crossEntropyGrad(Context &ctx, int64_t ignoreIndex, const Tensor &labels, const Tensor &dloss,
                      const Tensor &logits, const Tensor &dlogits) {
  int64_t vocab = logits.shape.back(), rows = labels.numel();
  unsigned long long counted = checkedCount(ctx, labels, vocab, ignoreIndex);
  withFloatType(dlogits.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "crossEntropyGrad", crossEntropyGradKernel<T>, blocksForRows(rows), kRowThreads, 0,
           labels.as<int64_t>(), dloss.as<T>(), logits.as<T>(), dlogits.as<T>(), rows, vocab,
           ignoreIndex, counted);
  });
}

} // namespace slrt::cuda
