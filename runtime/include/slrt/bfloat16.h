// bfloat16 <-> float, the one conversion the runtime uses everywhere (parameter loading, the CPU
// backend's bf16 kernels, reading bf16 outputs and writing bf16 inputs).
//
// A bf16 element is the upper half of an IEEE binary32: widening is exact (the low 16 bits become
// zero). Rounding to bf16 is to nearest, ties to even, like IEEE arithmetic (and torch's
// tensor.to(torch.bfloat16)): subnormals round like any other value, and a finite value beyond the
// largest bf16 rounds to an infinity of its sign. A NaN stays a NaN of its sign, made quiet: its
// upper 16 bits with the quiet bit set, so that widening a bf16 NaN and rounding it back gives the
// very same bits (torch writes one canonical NaN instead; any NaN is NaN to every reader).
#pragma once

#include <cstdint>
#include <cstring>

namespace slrt {

inline float bfloat16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t floatToBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign and upper payload, set the quiet bit
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff rounds up exactly when the low half is above one half; the low bit of the kept
  // half breaks a tie toward even. A carry out of the mantissa bumps the exponent, which is right,
  // up to the largest finite values, which carry into the infinity.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The same over arrays of `count` elements, split across threads when they are long. `to` and
// `from` must not overlap.
void widenBfloat16(const uint16_t *from, float *to, uint64_t count);
void roundToBfloat16(const float *from, uint16_t *to, uint64_t count);

} // namespace slrt
