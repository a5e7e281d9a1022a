// Elementwise kernels: every result element depends only on the operand elements at its own
// (broadcast) position, so each runs exactly in place and splits across threads by element.
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/vector_math.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt::cpu {
namespace {

using namespace sl::schedule;

// y[i] = op(a[i'], b[i']) with numpy broadcasting of a and b to y's shape.
template <typename T, typename R, typename Op>
void broadcastBinary(const TensorRef *a, const TensorRef *b, const TensorRef *y, Op op) {
  const T *pa = in<T>(a), *pb = in<T>(b);
  R *py = out<R>(y);
  if (a->shape == y->shape && b->shape == y->shape) {
    parallelFor(elementCount(y->shape), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        py[i] = op(pa[i], pb[i]);
    });
    return;
  }
  parallelForEachElement<2>(
      y->shape, {broadcastStrides(a->shape, y->shape), broadcastStrides(b->shape, y->shape)}, 1,
      [&](int64_t i, const std::array<int64_t, 2> &at) { py[i] = op(pa[at[0]], pb[at[1]]); });
}

template <typename T, typename Op> void map(const TensorRef *x, const TensorRef *y, Op op) {
  const T *px = in<T>(x);
  T *py = out<T>(y);
  parallelFor(elementCount(y->shape), 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      py[i] = op(px[i]);
  });
}

// f32 maps with a vectorised loop (vector_math.h): each thread runs it over its own span.
void mapSpans(const TensorRef *x, const TensorRef *y, void (*loop)(const float *, float *, int64_t)) {
  const float *px = in<float>(x);
  float *py = out<float>(y);
  parallelFor(elementCount(y->shape), 4,
              [&](int64_t begin, int64_t end) { loop(px + begin, py + begin, end - begin); });
}

// The constants are written once as doubles; rounded to float they are exactly the float literals
// the f32 kernel has always used.
static_assert(float(0.7978845608028654) == 0.7978845608028654f &&
              float(0.044715) == 0.044715f && float(0.7071067811865476) == 0.7071067811865476f);

template <typename T> T gelu(T x, bool tanhApproximation) {
  if (tanhApproximation) {
    constexpr T kSqrt2OverPi = T(0.7978845608028654);
    return T(0.5) * x * (T(1) + std::tanh(kSqrt2OverPi * (x + T(0.044715) * x * x * x)));
  }
  constexpr T kSqrtHalf = T(0.7071067811865476);
  return T(0.5) * x * (T(1) + std::erf(x * kSqrtHalf));
}

// The unary float ops on element type T.
template <typename T> void unaryFloat(const Kernel &kernel, const TensorRef *x, const TensorRef *y) {
  switch (kernel.op()) {
  case RELU:
    return map<T>(x, y, [](T v) { return v > T(0) ? v : T(0); });
  case SIGMOID:
    if constexpr (std::is_same_v<T, float>)
      return mapSpans(x, y, vec::sigmoid);
    return map<T>(x, y, sigmoid<T>);
  case SILU:
    if constexpr (std::is_same_v<T, float>)
      return mapSpans(x, y, vec::silu);
    return map<T>(x, y, [](T v) { return v * sigmoid(v); });
  case SQRT:
    return map<T>(x, y, [](T v) { return std::sqrt(v); });
  case RECIPROCAL:
    return map<T>(x, y, [](T v) { return T(1) / v; });
  case NEG:
    return map<T>(x, y, [](T v) { return -v; });
  case EXP:
    return map<T>(x, y, [](T v) { return std::exp(v); });
  case ERF:
    return map<T>(x, y, [](T v) { return std::erf(v); });
  case TANH:
    return map<T>(x, y, [](T v) { return std::tanh(v); });
  case COS:
    return map<T>(x, y, [](T v) { return std::cos(v); });
  case SIN:
    return map<T>(x, y, [](T v) { return std::sin(v); });
  case GELU: {
    bool tanhApproximation = kernel.gelu().tanh();
    return map<T>(x, y, [=](T v) { return gelu(v, tanhApproximation); });
  }
  default:
    throw makeError(OpKind_Name(kernel.op()), " is not a unary op");
  }
}

// ADD, SUB, MUL, DIV and POW on float element type T; false for another op.
template <typename T>
bool binaryFloat(OpKind op, const TensorRef *a, const TensorRef *b, const TensorRef *y) {
  switch (op) {
  case ADD:
    broadcastBinary<T, T>(a, b, y, [](T p, T q) { return p + q; });
    return true;
  case SUB:
    broadcastBinary<T, T>(a, b, y, [](T p, T q) { return p - q; });
    return true;
  case MUL:
    broadcastBinary<T, T>(a, b, y, [](T p, T q) { return p * q; });
    return true;
  case DIV:
    broadcastBinary<T, T>(a, b, y, [](T p, T q) { return p / q; });
    return true;
  case POW:
    broadcastBinary<T, T>(a, b, y, [](T p, T q) { return std::pow(p, q); });
    return true;
  default:
    return false;
  }
}

// i64 arithmetic wraps around like the hardware (and numpy) instead of being undefined.
int64_t wrap(uint64_t value) { return static_cast<int64_t>(value); }

// ONNX Div on integers truncates toward zero, which is C++'s `/`. INT64_MIN / -1 wraps to
// INT64_MIN; division by zero was refused before the kernel started.
int64_t divide(int64_t a, int64_t b) {
  if (b == -1)
    return wrap(0 - static_cast<uint64_t>(a));
  return a / b;
}

template <typename T> constexpr T powerOfTwo(int exponent) {
  T value = 1;
  for (int i = 0; i < exponent; ++i)
    value *= 2;
  return value;
}

template <typename To, typename From> To castValue(From x) {
  if constexpr (std::is_same_v<From, BoolByte>) {
    return castValue<To>(static_cast<int32_t>(x.value != 0));
  } else if constexpr (std::is_same_v<To, BoolByte>) {
    return BoolByte{static_cast<uint8_t>(x != From(0))}; // NaN != 0: true
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // Truncates toward zero. Out of range saturates and NaN gives 0, where C++ leaves the
    // conversion undefined.
    constexpr From limit = powerOfTwo<From>(std::numeric_limits<To>::digits); // max + 1
    if (std::isnan(x))
      return To(0);
    if (x >= limit)
      return std::numeric_limits<To>::max();
    if (x < -limit)
      return std::numeric_limits<To>::min();
    return static_cast<To>(x);
  } else {
    // Integer narrowing wraps (two's complement), float narrowing rounds to nearest.
    return static_cast<To>(x);
  }
}

// Calls f(T{}) with the C++ element type of a CAST operand or result dtype.
template <typename F> void withCastType(DType dtype, F f) {
  switch (dtype) {
  case F32:
    return f(float{});
  case F64:
    return f(double{});
  case I64:
    return f(int64_t{});
  case I32:
    return f(int32_t{});
  case BOOL:
    return f(BoolByte{});
  default:
    throw makeError("CAST does not convert ", dtypeName(dtype));
  }
}

} // namespace

void binary(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *a = operands[0], *b = operands[1];
  OpKind op = kernel.op();
  if (y->dtype == I64) {
    if (op == DIV) {
      // Checked up front, serially, so the error is the first zero and nothing has been written.
      const int64_t *divisor = in<int64_t>(b);
      for (int64_t i = 0, n = elementCount(b->shape); i < n; ++i)
        if (divisor[i] == 0)
          throw makeError("integer division by zero (element ", i, " of the divisor ",
                          formatShape(b->shape), ")");
      return broadcastBinary<int64_t, int64_t>(a, b, y, divide);
    }
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    switch (op) {
    case ADD:
      return broadcastBinary<int64_t, int64_t>(
          a, b, y, [&](int64_t p, int64_t q) { return wrap(u(p) + u(q)); });
    case SUB:
      return broadcastBinary<int64_t, int64_t>(
          a, b, y, [&](int64_t p, int64_t q) { return wrap(u(p) - u(q)); });
    case MUL:
      return broadcastBinary<int64_t, int64_t>(
          a, b, y, [&](int64_t p, int64_t q) { return wrap(u(p) * u(q)); });
    default:
      break;
    }
  } else if (y->dtype == F32) {
    if (binaryFloat<float>(op, a, b, y))
      return;
  } else if (y->dtype == F64) {
    if (binaryFloat<double>(op, a, b, y))
      return;
  }
  throw makeError(OpKind_Name(op), " does not compute ", dtypeName(y->dtype));
}

void unary(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  if (y->dtype == I64 && kernel.op() == NEG)
    return map<int64_t>(x, y, [](int64_t v) { return wrap(0 - static_cast<uint64_t>(v)); });
  if (y->dtype == F32)
    return unaryFloat<float>(kernel, x, y);
  if (y->dtype == F64)
    return unaryFloat<double>(kernel, x, y);
  throw makeError(OpKind_Name(kernel.op()), " does not compute ", dtypeName(y->dtype));
}

void compare(const Kernel &kernel, const Operands &operands, const TensorRef *y) {
  bool less = kernel.op() == LESS;
  auto run = [&](auto type) {
    using T = decltype(type);
    broadcastBinary<T, BoolByte>(operands[0], operands[1], y, [less](T a, T b) {
      return BoolByte{static_cast<uint8_t>(less ? a < b : a == b)};
    });
  };
  if (operands[0]->dtype == F32)
    return run(float{});
  if (operands[0]->dtype == F64)
    return run(double{});
  if (operands[0]->dtype == I64)
    return run(int64_t{});
  throw makeError(OpKind_Name(kernel.op()), " does not compare ", dtypeName(operands[0]->dtype));
}

void where(const Operands &operands, const TensorRef *y) {
  const TensorRef *c = operands[0], *a = operands[1], *b = operands[2];
  withElementBits(dtypeSize(y->dtype), [&](auto type) {
    using T = decltype(type);
    const BoolByte *pc = in<BoolByte>(c);
    const T *pa = in<T>(a), *pb = in<T>(b);
    T *py = out<T>(y);
    parallelForEachElement<3>(y->shape,
                              {broadcastStrides(c->shape, y->shape),
                               broadcastStrides(a->shape, y->shape),
                               broadcastStrides(b->shape, y->shape)},
                              1, [&](int64_t i, const std::array<int64_t, 3> &at) {
                                py[i] = pc[at[0]].value != 0 ? pa[at[1]] : pb[at[2]];
                              });
  });
}

void cast(const Operands &operands, const TensorRef *y) {
  const TensorRef *x = operands[0];
  withCastType(x->dtype, [&](auto fromType) {
    withCastType(y->dtype, [&](auto toType) {
      using From = decltype(fromType);
      using To = decltype(toType);
      const From *px = in<From>(x);
      To *py = out<To>(y);
      // In place only between types of one size, where element i reads and writes one slot.
      parallelFor(elementCount(y->shape), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          py[i] = castValue<To>(px[i]);
      });
    });
  });
}

void swiglu(const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) {
    using T = decltype(type);
    const T *gate = in<T>(operands[0]), *up = in<T>(operands[1]);
    T *py = out<T>(y);
    parallelFor(elementCount(y->shape), 4, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        vec::swiglu(gate + begin, up + begin, py + begin, end - begin);
      } else {
        for (int64_t i = begin; i < end; ++i)
          py[i] = gate[i] * sigmoid(gate[i]) * up[i];
      }
    });
  });
}

void accumulate(const Operands &operands, const TensorRef *y) {
  withFloatType(y->dtype, [&](auto type) {
    using T = decltype(type);
    const T *a = in<T>(operands[0]), *b = in<T>(operands[1]);
    T *py = out<T>(y);
    // Element i reads only a[i] and b[i], so SIMD is safe even exactly in place (py == a), where
    // the compiler alone would not vectorise for fear of aliasing.
    parallelFor(elementCount(y->shape), 1, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i)
        py[i] = a[i] + b[i];
    });
  });
}

} // namespace slrt::cpu
