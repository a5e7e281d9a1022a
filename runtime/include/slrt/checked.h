// Overflow-checked integer arithmetic for sizes, counts and times: the runtime's one helper (the
// compiler's is include/sl/Support/CheckedArith.h; the runtime includes nothing of llvm/ or mlir/).
// Sizes come from files (schedules, checkpoints, .npy headers) and the command line, so a product
// or sum that wraps would turn a huge request into a small one.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace slrt {

template <typename T> std::optional<T> checkedMul(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T product;
  if (__builtin_mul_overflow(a, b, &product))
    return std::nullopt;
  return product;
}

template <typename T> std::optional<T> checkedAdd(T a, T b) {
  static_assert(std::is_integral_v<T>);
  T sum;
  if (__builtin_add_overflow(a, b, &sum))
    return std::nullopt;
  return sum;
}

// a * b or a + b, or the largest T when that overflows: for limits and estimates of sizes, where
// "more than anything" is the right answer to an overflow. Unsigned only: a signed product could
// also overflow downwards.
template <typename T> T saturatingMul(T a, T b) {
  static_assert(std::is_unsigned_v<T>);
  std::optional<T> product = checkedMul(a, b);
  return product ? *product : std::numeric_limits<T>::max();
}

template <typename T> T saturatingAdd(T a, T b) {
  static_assert(std::is_unsigned_v<T>);
  std::optional<T> sum = checkedAdd(a, b);
  return sum ? *sum : std::numeric_limits<T>::max();
}

// a * b + c, or the largest T when that overflows: for limits, where "more than anything" is the
// right answer to an overflow.
template <typename T> T saturatingMulAdd(T a, T b, T c) {
  std::optional<T> product = checkedMul(a, b);
  std::optional<T> sum = product ? checkedAdd(*product, c) : std::nullopt;
  return sum ? *sum : std::numeric_limits<T>::max();
}

// Whole nanoseconds of `seconds`, or nullopt when it is not a finite non-negative number of at
// most `maxSeconds` (std::chrono's int64 nanoseconds hold 292 years; a deadline now + d must not
// wrap either).
inline std::optional<int64_t> checkedNanoseconds(double seconds, double maxSeconds) {
  if (!(seconds >= 0) || !(seconds <= maxSeconds) || !(maxSeconds < 9.2e9))
    return std::nullopt;
  return static_cast<int64_t>(seconds * 1e9);
}

} // namespace slrt
