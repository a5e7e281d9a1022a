// The training loss: mean softmax cross-entropy over the labelled positions.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vector_math.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

template <typename T>
void crossEntropyAs(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *logitsRef = operands[0], *labelsRef = operands[1];
  const int64_t vocab = logitsRef->shape.back();
  const int64_t rows = elementCount(labelsRef->shape);
  const T *logits = in<T>(logitsRef);
  const int64_t *labels = in<int64_t>(labelsRef);
  const int64_t ignore = kernel.cross_entropy().ignore_index();

  // Labels first, so that a bad one is reported before any work (and nothing is written).
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] != ignore && (labels[r] < 0 || labels[r] >= vocab))
      throw makeError("label ", labels[r], " at position ", r, " is outside the vocabulary [0, ",
                      vocab, ")");

  // Each row's loss in double, by one thread; the mean sums them in row order afterwards, so the
  // result does not depend on the thread count. In f32 the exps are the vectorised float ones
  // (vector_math.h), summed in double.
  std::vector<double> rowLoss(static_cast<size_t>(rows), 0.0);
  parallelFor(rows, 3 * vocab, [&](int64_t begin, int64_t end) {
    std::vector<float> exps(std::is_same_v<T, float> ? static_cast<size_t>(vocab) : 0);
    for (int64_t r = begin; r < end; ++r) {
      if (labels[r] == ignore)
        continue;
      const T *row = logits + r * vocab;
      T max = -std::numeric_limits<T>::infinity();
      for (int64_t v = 0; v < vocab; ++v)
        max = std::max(max, row[v]);
      double sum = 0;
      if constexpr (std::is_same_v<T, float>) {
        sum = vec::expShifted(row, max, exps.data(), vocab);
      } else {
        for (int64_t v = 0; v < vocab; ++v)
          sum += std::exp(row[v] - max);
      }
      rowLoss[size_t(r)] = double(max) + std::log(sum) - double(row[labels[r]]);
    }
  });
  double total = 0;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] != ignore) {
      total += rowLoss[size_t(r)];
      ++counted;
    }
  *out<T>(y) = counted == 0 ? std::numeric_limits<T>::quiet_NaN()
                            : static_cast<T>(total / double(counted));
}

} // namespace

void crossEntropy(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) { crossEntropyAs<decltype(type)>(kernel, operands, y); });
}

} // namespace slrt::cpu
