// Elementwise kernels, one thread per result element: each element reads only the operand
// elements at its own (broadcast) position, so every kernel here runs exactly in place. Float
// kernels take the storage type T and compute in Compute<T> (load/store, cuda_device.cuh).
#include <climits>

#include "backends/cuda/cuda_device.cuh"

namespace slrt::cuda {
namespace {

// --- binary -------------------------------------------------------------------------------------

template <typename T, typename R, typename Op>
__global__ void binaryDense(const T *a, const T *b, R *y, int64_t n, Op op) {
  SLRT_GRID_LOOP(i, n) { y[i] = store<R>(op(load(a[i]), load(b[i]))); }
}

template <typename T, typename R, typename Op>
__global__ void binaryStrided(const T *a, const T *b, R *y, int64_t n, Strided<2> s, Op op) {
  SLRT_GRID_LOOP(i, n) {
    int64_t at[2];
    s.at(i, at);
    y[i] = store<R>(op(load(a[at[0]]), load(b[at[1]])));
  }
}

// y[i] = op(a[i'], b[i']) with numpy broadcasting of a and b to y's shape.
template <typename T, typename R, typename Op>
void broadcastBinary(Context &ctx, const Tensor &a, const Tensor &b, const Tensor &y, Op op) {
  int64_t n = y.numel();
  if (a.shape == y.shape && b.shape == y.shape)
    return launch(ctx, "binary", binaryDense<T, R, Op>, blocksFor(n), kThreads, 0, a.as<T>(),
                  b.as<T>(), y.as<R>(), n, op);
  launch(ctx, "binary (broadcast)", binaryStrided<T, R, Op>, blocksFor(n), kThreads, 0, a.as<T>(),
         b.as<T>(), y.as<R>(), n,
         makeStrided<2>(y.shape,
                        {broadcastStrides(a.shape, y.shape), broadcastStrides(b.shape, y.shape)}),
         op);
}

struct Add {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <typename T> __device__ T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <typename T> __device__ T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <typename T> __device__ T operator()(T a, T b) const { return a / b; }
};
struct Pow {
  template <typename T> __device__ T operator()(T a, T b) const { return dm::pow(a, b); }
};

// i64 arithmetic wraps around (two's complement) as on the CPU backend.
__device__ __forceinline__ int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }
struct AddI64 {
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  }
};
struct SubI64 {
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  }
};
struct MulI64 {
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  }
};
// Truncates toward zero; INT64_MIN / -1 wraps to INT64_MIN. Zero divisors were refused first.
struct DivI64 {
  __device__ int64_t operator()(int64_t a, int64_t b) const {
    return b == -1 ? wrap(0 - static_cast<uint64_t>(a)) : a / b;
  }
};

template <typename T>
__global__ void findZero(const T *values, int64_t n, unsigned long long *firstBad) {
  SLRT_GRID_LOOP(i, n) {
    if (values[i] == T(0))
      atomicMin(firstBad, static_cast<unsigned long long>(i));
  }
}

// --- unary --------------------------------------------------------------------------------------

template <typename T, typename Op> __global__ void map(const T *x, T *y, int64_t n, Op op) {
  SLRT_GRID_LOOP(i, n) { y[i] = store<T>(op(load(x[i]))); }
}

template <typename T> __device__ T gelu(T x, bool tanhApproximation) {
  if (tanhApproximation) {
    const T kSqrt2OverPi = T(0.7978845608028654);
    return T(0.5) * x * (T(1) + dm::tanh(kSqrt2OverPi * (x + T(0.044715) * x * x * x)));
  }
  const T kSqrtHalf = T(0.7071067811865476);
  return T(0.5) * x * (T(1) + dm::erf(x * kSqrtHalf));
}

struct Unary {
  UnaryOp op;
  bool geluTanh;
  template <typename T> __device__ T operator()(T v) const {
    switch (op) {
    case UnaryOp::kRelu:
      return v > T(0) ? v : T(0);
    case UnaryOp::kSigmoid:
      return sigmoid(v);
    case UnaryOp::kSilu:
      return v * sigmoid(v);
    case UnaryOp::kSqrt:
      return dm::sqrt(v);
    case UnaryOp::kReciprocal:
      return T(1) / v;
    case UnaryOp::kNeg:
      return -v;
    case UnaryOp::kExp:
      return dm::exp(v);
    case UnaryOp::kErf:
      return dm::erf(v);
    case UnaryOp::kTanh:
      return dm::tanh(v);
    case UnaryOp::kCos:
      return dm::cos(v);
    case UnaryOp::kSin:
      return dm::sin(v);
    case UnaryOp::kGelu:
      return gelu(v, geluTanh);
    }
    return v;
  }
};

struct NegI64 {
  __device__ int64_t operator()(int64_t v) const { return wrap(0 - static_cast<uint64_t>(v)); }
};

// --- comparisons, where, cast -------------------------------------------------------------------

struct Compare {
  bool less;
  template <typename T> __device__ uint8_t operator()(T a, T b) const {
    return static_cast<uint8_t>(less ? a < b : a == b);
  }
};

template <typename T>
__global__ void whereKernel(const uint8_t *condition, const T *x, const T *otherwise, T *y,
                            int64_t n, Strided<3> s) {
  SLRT_GRID_LOOP(i, n) {
    int64_t at[3];
    s.at(i, at);
    y[i] = condition[at[0]] != 0 ? x[at[1]] : otherwise[at[2]];
  }
}

// BOOL elements are bytes, true when non-zero.
struct BoolByte {
  uint8_t value;
};

template <typename To> struct IntLimits;
template <> struct IntLimits<int64_t> {
  static constexpr int kDigits = 63;
  static constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
};
template <> struct IntLimits<int32_t> {
  static constexpr int kDigits = 31;
  static constexpr int32_t kMax = INT32_MAX, kMin = INT32_MIN;
};

// The CPU backend's castValue: float to integer truncates toward zero, saturates out of range and
// gives 0 for NaN; integer narrowing wraps; anything to bool is x != 0 (NaN is true). bf16 is
// read as the float it widens to (exactly), and a bf16 result is the f32 result rounded once to
// bf16 (so f64, i64 and i32 reach bf16 through f32, as on the CPU backend).
template <typename To, typename From> __device__ To castValue(From x) {
  if constexpr (std::is_same_v<From, bf16>) {
    return castValue<To>(load(x));
  } else if constexpr (std::is_same_v<To, bf16>) {
    return store<bf16>(castValue<float>(x));
  } else if constexpr (std::is_same_v<From, BoolByte>) {
    return castValue<To>(static_cast<int32_t>(x.value != 0));
  } else if constexpr (std::is_same_v<To, BoolByte>) {
    return BoolByte{static_cast<uint8_t>(x != From(0))};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    const From limit = static_cast<From>(1ull << IntLimits<To>::kDigits); // max + 1, exact
    if (dm::isnan(x))
      return To(0);
    if (x >= limit)
      return IntLimits<To>::kMax;
    if (x < -limit)
      return IntLimits<To>::kMin;
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}

template <typename From, typename To> __global__ void castKernel(const From *x, To *y, int64_t n) {
  SLRT_GRID_LOOP(i, n) { y[i] = castValue<To>(x[i]); }
}

template <typename F> void withCastType(Element element, F f) {
  switch (element) {
  case Element::kF32:
    return f(float{});
  case Element::kF64:
    return f(double{});
  case Element::kBF16:
    return f(bf16{});
  case Element::kI64:
    return f(int64_t{});
  case Element::kI32:
    return f(int32_t{});
  case Element::kBool:
    return f(BoolByte{});
  default:
    throw makeError("CAST does not convert this dtype");
  }
}

// --- fused ops and gradients --------------------------------------------------------------------

template <typename T> __global__ void swigluKernel(const T *gate, const T *up, T *y, int64_t n) {
  SLRT_GRID_LOOP(i, n) {
    Compute<T> g = load(gate[i]);
    y[i] = store<T>(g * sigmoid(g) * load(up[i]));
  }
}

// As gradients.cc: exact form from erfc, tanh form without subtracting nearly equal terms.
template <typename S>
__global__ void geluGradKernel(const S *x, const S *dy, S *dx, int64_t n, bool tanhApproximation) {
  using T = Compute<S>;
  const T kSqrt2OverPi = T(0.7978845608028654), kCubic = T(0.044715);
  const T kSqrtHalf = T(0.7071067811865476), kInvSqrt2Pi = T(0.3989422804014327);
  SLRT_GRID_LOOP(i, n) {
    T v = load(x[i]), derivative;
    if (tanhApproximation) {
      T u = kSqrt2OverPi * (v + kCubic * v * v * v);
      T s = sigmoid(T(2) * u);
      derivative = s * (T(1) + T(2) * v * sigmoid(T(-2) * u) * kSqrt2OverPi *
                                   (T(1) + T(3) * kCubic * v * v));
    } else {
      derivative = T(0.5) * dm::erfc(-v * kSqrtHalf) + v * kInvSqrt2Pi * dm::exp(T(-0.5) * v * v);
    }
    dx[i] = store<S>(load(dy[i]) * derivative);
  }
}

template <typename S>
__global__ void swigluGradKernel(const S *gate, const S *up, const S *dy, S *dgate, S *dup,
                                 int64_t n) {
  using T = Compute<S>;
  SLRT_GRID_LOOP(i, n) {
    T g = load(gate[i]), u = load(up[i]), d = load(dy[i]);
    T sg = sigmoid(g);
    dgate[i] = store<S>(d * u * (sg * (T(1) + g * (T(1) - sg))));
    dup[i] = store<S>(d * (g * sg));
  }
}

template <typename S> __global__ void scaleKernel(S *y, int64_t n, Compute<S> factor) {
  using T = Compute<S>;
  SLRT_GRID_LOOP(i, n) { y[i] = store<S>(factor == T(0) ? T(0) : factor * load(y[i])); }
}

} // namespace

void binary(Context &ctx, BinaryOp op, const Tensor &a, const Tensor &b, const Tensor &y) {
  if (y.element == Element::kI64) {
    switch (op) {
    case BinaryOp::kAdd:
      return broadcastBinary<int64_t, int64_t>(ctx, a, b, y, AddI64{});
    case BinaryOp::kSub:
      return broadcastBinary<int64_t, int64_t>(ctx, a, b, y, SubI64{});
    case BinaryOp::kMul:
      return broadcastBinary<int64_t, int64_t>(ctx, a, b, y, MulI64{});
    case BinaryOp::kDiv: {
      // Checked before anything is written; the error names the first zero, as on the CPU.
      int64_t n = b.numel();
      ctx.resetCheck();
      launch(ctx, "findZero", findZero<int64_t>, blocksFor(n), kThreads, 0, b.as<int64_t>(), n,
             ctx.checkWords());
      Context::Check check = ctx.readCheck();
      if (check.failed())
        throw makeError("integer division by zero (element ", check.firstBad, " of the divisor ",
                        formatShape(b.shape), ")");
      return broadcastBinary<int64_t, int64_t>(ctx, a, b, y, DivI64{});
    }
    default:
      throw makeError("POW does not compute i64");
    }
  }
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    switch (op) {
    case BinaryOp::kAdd:
      return broadcastBinary<T, T>(ctx, a, b, y, Add{});
    case BinaryOp::kSub:
      return broadcastBinary<T, T>(ctx, a, b, y, Sub{});
    case BinaryOp::kMul:
      return broadcastBinary<T, T>(ctx, a, b, y, Mul{});
    case BinaryOp::kDiv:
      return broadcastBinary<T, T>(ctx, a, b, y, Div{});
    case BinaryOp::kPow:
      return broadcastBinary<T, T>(ctx, a, b, y, Pow{});
    }
  });
}

void unary(Context &ctx, UnaryOp op, bool geluTanh, const Tensor &x, const Tensor &y) {
  int64_t n = y.numel();
  if (y.element == Element::kI64) {
    if (op != UnaryOp::kNeg)
      throw makeError("only NEG computes i64");
    return launch(ctx, "neg (i64)", map<int64_t, NegI64>, blocksFor(n), kThreads, 0,
                  x.as<int64_t>(), y.as<int64_t>(), n, NegI64{});
  }
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "unary", map<T, Unary>, blocksFor(n), kThreads, 0, x.as<T>(), y.as<T>(), n,
           Unary{op, geluTanh});
  });
}

void compare(Context &ctx, bool less, const Tensor &a, const Tensor &b, const Tensor &y) {
  auto run = [&](auto type) {
    using T = decltype(type);
    broadcastBinary<T, uint8_t>(ctx, a, b, y, Compare{less});
  };
  switch (a.element) {
  case Element::kF32:
    return run(float{});
  case Element::kF64:
    return run(double{});
  case Element::kBF16:
    return run(bf16{});
  case Element::kI64:
    return run(int64_t{});
  default:
    throw makeError(less ? "LESS" : "EQUAL", " compares f32, f64, bf16 or i64 only");
  }
}

void where(Context &ctx, const Tensor &condition, const Tensor &x, const Tensor &otherwise,
           const Tensor &y) {
  int64_t n = y.numel();
  Strided<3> s = makeStrided<3>(y.shape, {broadcastStrides(condition.shape, y.shape),
                                          broadcastStrides(x.shape, y.shape),
                                          broadcastStrides(otherwise.shape, y.shape)});
  withElementBits(y.elementSize, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "where", whereKernel<T>, blocksFor(n), kThreads, 0, condition.as<uint8_t>(),
           x.as<T>(), otherwise.as<T>(), y.as<T>(), n, s);
  });
}

void cast(Context &ctx, const Tensor &x, const Tensor &y) {
  int64_t n = y.numel();
  withCastType(x.element, [&](auto fromType) {
    withCastType(y.element, [&](auto toType) {
      using From = decltype(fromType);
      using To = decltype(toType);
      launch(ctx, "cast", castKernel<From, To>, blocksFor(n), kThreads, 0, x.as<From>(), y.as<To>(),
             n);
    });
  });
}

void swiglu(Context &ctx, const Tensor &gate, const Tensor &up, const Tensor &y) {
  int64_t n = y.numel();
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "swiglu", swigluKernel<T>, blocksFor(n), kThreads, 0, gate.as<T>(), up.as<T>(),
           y.as<T>(), n);
  });
}

void accumulate(Context &ctx, const Tensor &a, const Tensor &b, const Tensor &y) {
  int64_t n = y.numel();
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "accumulate", binaryDense<T, T, Add>, blocksFor(n), kThreads, 0, a.as<T>(),
           b.as<T>(), y.as<T>(), n, Add{});
  });
}

void geluGrad(Context &ctx, bool tanhApproximation, const Tensor &x, const Tensor &dy,
              const Tensor &dx) {
  int64_t n = dx.numel();
  withFloatType(dx.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "geluGrad", geluGradKernel<T>, blocksFor(n), kThreads, 0, x.as<T>(), dy.as<T>(),
           dx.as<T>(), n, tanhApproximation);
  });
}

void swigluGrad(Context &ctx, const Tensor &gate, const Tensor &up, const Tensor &dy,
                const Tensor &dgate, const Tensor &dup) {
  int64_t n = dgate.numel();
  withFloatType(dgate.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "swigluGrad", swigluGradKernel<T>, blocksFor(n), kThreads, 0, gate.as<T>(),
           up.as<T>(), dy.as<T>(), dgate.as<T>(), dup.as<T>(), n);
  });
}

void scale(Context &ctx, double factor, const Tensor &y) {
  int64_t n = y.numel();
  withFloatType(y.element, [&](auto type) {
    using T = decltype(type);
    launch(ctx, "scale", scaleKernel<T>, blocksFor(n), kThreads, 0, y.as<T>(), n,
           static_cast<Compute<T>>(factor));
  });
}

} // namespace slrt::cuda
