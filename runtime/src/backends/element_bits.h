// Dispatch on element size for kernels that only move elements (any dtype), shared by the CPU
// and CUDA backends.
#pragma once

#include <cstdint>

namespace slrt {

// Calls f(T{}) with the unsigned integer type of `size` bytes (1, 2, 4, else 8).
template <typename F> void withElementBits(uint64_t size, F f) {
  switch (size) {
  case 1:
    return f(uint8_t{});
  case 2:
    return f(uint16_t{});
  case 4:
    return f(uint32_t{});
  default:
    return f(uint64_t{});
  }
}

} // namespace slrt
