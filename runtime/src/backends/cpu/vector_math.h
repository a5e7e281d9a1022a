// Vectorised float loops for the f32 CPU kernels: exp for softmax rows, the cross-entropy, SiLU,
// SIGMOID and SwiGLU and their gradients, and dot products summed in double (norms, attention). std::exp is a scalar libm call (about 20 cycles per
// float, branches that stop vectorisation); these compute exp as a Cephes-style polynomial, eight
// floats per instruction where the CPU has AVX2 and FMA (chosen at run time), within 2 ulp of the
// correctly rounded exp (vector_math_test checks that bound against std::exp on every 1021st
// float of the whole range, where the worst seen is 1 ulp). The AVX2 and the portable versions compute the same bits (the file is built with
// -ffp-contract=off and every multiply-add is an explicit std::fma), so no result depends on
// the machine's vector width. The double kernels (gradient checks) keep std::exp.
//
// exp(x) is +inf above 88.72, 0 below -103.97 (the subnormal results in between are kept),
// exp(-inf) = 0 and exp(NaN) = NaN: a masked score (-inf) gives weight 0 and a NaN propagates, as
// with std::exp.
#pragma once

#include <cstdint>

namespace slrt::cpu::vec {

// y[i] = exp(x[i] - shift); returns the sum of the y[i] in double, accumulated in eight
// interleaved lanes combined in a fixed order (the same sum on every machine). y may be x.
double expShifted(const float *x, float shift, float *y, int64_t n);

// sum of a[i] * b[i], each product and the sum in double, in eight interleaved lanes combined in
// a fixed order (the same sum on every machine).
double dotInDouble(const float *a, const float *b, int64_t n);

// sum of double(a[i]) * b[i] * c[i] in double, in the same eight lanes.
double dot3InDouble(const float *a, const float *b, const float *c, int64_t n);

// y[i] = sigmoid(x[i]) = 1 / (1 + exp(-x[i])), computed without overflow for either sign.
void sigmoid(const float *x, float *y, int64_t n);

// y[i] = x[i] * sigmoid(x[i]).
void silu(const float *x, float *y, int64_t n);

// y[i] = silu(gate[i]) * up[i]: LLaMA's SwiGLU. y may be gate or up.
void swiglu(const float *gate, const float *up, float *y, int64_t n);

// The transpose of swiglu's derivative applied to dy: with s = sigmoid(gate),
//   dgate = dy * up * s * (1 + gate * (1 - s)),  dup = dy * gate * s.
// The results may be exactly an operand (each element is read before it is written).
void swigluGrad(const float *gate, const float *up, const float *dy, float *dgate, float *dup,
                int64_t n);

// One exp, for tests: the function the loops above apply to each element.
float exp(float x);

} // namespace slrt::cpu::vec
