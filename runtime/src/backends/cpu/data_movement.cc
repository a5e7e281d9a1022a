// Kernels that move elements without computing on them. They work on any dtype by element size.
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

// y[i] = x[base + sum_d i_d * strides[d]]: a transpose, slice or broadcast read of x, written
// densely into y.
void stridedCopy(const TensorRef *x, int64_t base, const std::vector<int64_t> &strides,
                 const TensorRef *y) {
  withElementBits(dtypeSize(y->dtype), [&](auto type) {
    using T = decltype(type);
    const T *px = in<T>(x) + base;
    T *py = out<T>(y);
    parallelForEachElement<1>(
        y->shape, {strides}, 1,
        [&](int64_t i, const std::array<int64_t, 1> &at) { py[i] = px[at[0]]; });
  });
}

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t d = begin; d < end; ++d)
    p *= shape[d];
  return p;
}

} // namespace

// Result dimension i is operand dimension perm[i]: walk the result in order, reading the operand
// with its strides permuted the same way.
void transpose(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  std::vector<int64_t> xStrides = denseStrides(operands[0]->shape), strides;
  for (int64_t axis : kernel.transpose().perm())
    strides.push_back(xStrides[static_cast<size_t>(axis)]);
  stridedCopy(operands[0], 0, strides, y);
}

void slice(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  std::vector<int64_t> xStrides = denseStrides(operands[0]->shape), strides;
  int64_t base = 0;
  const sl::schedule::SliceAttributes &attrs = kernel.slice();
  for (size_t d = 0; d < xStrides.size(); ++d) {
    // Where the result is empty nothing is read, and a start one past the end is allowed.
    if (y->shape[d] > 0)
      base += attrs.starts(static_cast<int>(d)) * xStrides[d];
    strides.push_back(attrs.steps(static_cast<int>(d)) * xStrides[d]);
  }
  stridedCopy(operands[0], base, strides, y);
}

void expand(const Operands &operands, const TensorRef *y) {
  stridedCopy(operands[0], 0, broadcastStrides(operands[0]->shape, y->shape), y);
}

// data [pre..., A, post...] and indices [K...] give [pre..., K..., post...]: for each (pre, k)
// one contiguous run of prod(post) elements.
void gather(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *data = operands[0], *indices = operands[1];
  size_t axis = static_cast<size_t>(kernel.axis().axis());
  int64_t outer = product(data->shape, 0, axis), extent = data->shape[axis];
  int64_t inner = product(data->shape, axis + 1, data->shape.size());
  int64_t count = elementCount(indices->shape);
  // Every index is checked before anything is copied, in order, so the error names the first bad
  // one and the result is untouched.
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t index =
        indices->dtype == sl::schedule::I64 ? in<int64_t>(indices)[i] : in<int32_t>(indices)[i];
    int64_t row = index < 0 ? index + extent : index;
    if (row < 0 || row >= extent)
      throw makeError("index ", index, " (element ", i, " of the indices ",
                      formatShape(indices->shape), ") is out of range for axis ", axis,
                      " of the data ", formatShape(data->shape));
    rows[static_cast<size_t>(i)] = row;
  }
  uint64_t rowBytes = static_cast<uint64_t>(inner) * dtypeSize(data->dtype);
  const std::byte *source = data->data;
  std::byte *target = y->data;
  parallelFor(outer * count, inner, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / count, k = item % count;
      std::memcpy(target + static_cast<uint64_t>(item) * rowBytes,
                  source +
                      static_cast<uint64_t>(o * extent + rows[static_cast<size_t>(k)]) * rowBytes,
                  rowBytes);
    }
  });
}

// Each result row (the dimensions from axis on, flattened) is the operands' rows side by side.
void concat(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  size_t axis = static_cast<size_t>(kernel.axis().axis());
  uint64_t elementSize = dtypeSize(y->dtype);
  int64_t outer = product(y->shape, 0, axis);
  std::vector<uint64_t> pieceBytes, pieceOffset;
  uint64_t rowBytes = 0;
  for (const TensorRef *operand : operands) {
    pieceOffset.push_back(rowBytes);
    pieceBytes.push_back(
        static_cast<uint64_t>(product(operand->shape, axis, operand->shape.size())) * elementSize);
    rowBytes += pieceBytes.back();
  }
  int64_t pieces = static_cast<int64_t>(operands.size());
  parallelFor(outer * pieces, static_cast<int64_t>(rowBytes / (elementSize * pieces) + 1),
              [&](int64_t begin, int64_t end) {
                for (int64_t item = begin; item < end; ++item) {
                  uint64_t o = static_cast<uint64_t>(item / pieces);
                  size_t p = static_cast<size_t>(item % pieces);
                  // An empty operand may have no storage at all; memcpy wants a pointer even
                  // for zero bytes.
                  if (pieceBytes[p] != 0)
                    std::memcpy(y->data + o * rowBytes + pieceOffset[p],
                                operands[p]->data + o * pieceBytes[p], pieceBytes[p]);
                }
              });
}

// Keeps row i's elements j with j - i >= k (upper) or j - i <= k (lower) and zeroes the rest.
// All-zero bytes are zero in every dtype.
void trilu(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  size_t rank = y->shape.size();
  int64_t m = y->shape[rank - 2], n = y->shape[rank - 1];
  int64_t matrices = product(y->shape, 0, rank - 2);
  // Beyond these bounds every k behaves alike; clamping keeps i + k from overflowing.
  int64_t k = std::clamp<int64_t>(kernel.trilu().k(), -m - 1, n + 1);
  bool upper = kernel.trilu().upper();
  uint64_t elementSize = dtypeSize(y->dtype);
  parallelFor(matrices * m, n, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row % m;
      int64_t keepBegin = upper ? std::clamp<int64_t>(i + k, 0, n) : 0;
      int64_t keepEnd = upper ? n : std::clamp<int64_t>(i + k + 1, 0, n);
      uint64_t rowStart = static_cast<uint64_t>(row * n) * elementSize;
      std::byte *target = y->data + rowStart;
      const std::byte *source = x->data + rowStart;
      // memmove: the kernel may run exactly in place.
      if (keepEnd > keepBegin)
        std::memmove(target + keepBegin * elementSize, source + keepBegin * elementSize,
                     static_cast<uint64_t>(keepEnd - keepBegin) * elementSize);
      std::memset(target, 0, static_cast<uint64_t>(keepBegin) * elementSize);
      std::memset(target + keepEnd * elementSize, 0,
                  static_cast<uint64_t>(n - keepEnd) * elementSize);
    }
  });
}

} // namespace slrt::cpu
