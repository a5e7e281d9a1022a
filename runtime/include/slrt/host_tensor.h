// A dense, row-major tensor in ordinary host memory: what users hand to and get from the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "slrt/dtype.h"
#include "slrt/shape.h"

namespace slrt {

// A tensor's bytes where they lie (a HostTensor's, or an executor's output buffer), read-only and
// not owned: valid as long as what it views.
struct HostTensorView {
  DType dtype = DType::DTYPE_UNSPECIFIED;
  Shape shape;
  const std::byte *data = nullptr;
  uint64_t bytes = 0;

  uint64_t numel() const;
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(data); }
};

struct HostTensor {
  DType dtype = DType::DTYPE_UNSPECIFIED;
  Shape shape;
  std::vector<std::byte> data;

  // A zero-filled tensor; throws Error for an unknown dtype or an impossible shape.
  static HostTensor zeros(DType dtype, Shape shape);

  uint64_t numel() const;
  HostTensorView view() const { return {dtype, shape, data.data(), data.size()}; }

  // Typed views; the caller picks T to match dtype.
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(data.data()); }
};

// bf16 <-> f32 copies of a tensor (slrt/bfloat16.h): widening is exact, rounding is to nearest
// even. How sl-run writes bf16 outputs as float32 .npy files (NumPy has no bf16) and reads
// float32 .npy files for bf16 inputs. `tensor` must be bf16, respectively f32.
HostTensor widenedToF32(const HostTensor &tensor);
HostTensor roundedToBfloat16(const HostTensor &tensor);

struct NamedTensor {
  std::string name;
  HostTensor tensor;
};

} // namespace slrt
