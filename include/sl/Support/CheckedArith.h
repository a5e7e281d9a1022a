//===- CheckedArith.h - overflow-checked shape, element and byte arithmetic ---------------------===//
//
// Every shape, element count and byte size the compiler derives from a model goes through these:
// a model may name any int64 dimension, and a product that wraps around would pass a size limit
// (a fold's, the planner's) as a small or negative number. nullopt means "does not fit in int64";
// callers turn it into an error naming the op and the dimensions. (The runtime has its own, in
// runtime/include/slrt/checked.h: it never includes llvm/ or mlir/.)
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_SUPPORT_CHECKEDARITH_H
#define SL_SUPPORT_CHECKEDARITH_H

#include "mlir/IR/BuiltinTypeInterfaces.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace sl {

inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product))
    return std::nullopt;
  return product;
}

inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum))
    return std::nullopt;
  return sum;
}

/// The product of the static dimensions of `shape` (dynamic ones are left out), or nullopt when a
/// dimension is negative or the product does not fit in int64.
inline std::optional<int64_t> checkedElementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim == mlir::ShapedType::kDynamic)
      continue;
    if (dim < 0 || __builtin_mul_overflow(count, dim, &count))
      return std::nullopt;
  }
  return count;
}

/// Bytes of a tensor of `shape` (static dimensions) with `elementBits` bits an element (rounded up
/// to whole bytes), or nullopt when that is 2^63 bytes or more.
inline std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape,
                                              unsigned elementBits) {
  std::optional<int64_t> count = checkedElementCount(shape);
  if (!count)
    return std::nullopt;
  return checkedMul(*count, int64_t(std::max(1u, (elementBits + 7) / 8)));
}

/// "[3, 4611686018427387904]"; a dynamic dimension is "?".
inline std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") +
            (shape[i] == mlir::ShapedType::kDynamic ? std::string("?") : std::to_string(shape[i]));
  return text + "]";
}

} // namespace sl

#endif // SL_SUPPORT_CHECKEDARITH_H
