// A dense, row-major tensor in ordinary host memory: what users hand to and get from the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "slrt/dtype.h"
#include "slrt/shape.h"

namespace slrt {

struct HostTensor {
  DType dtype = DType::DTYPE_UNSPECIFIED;
  Shape shape;
  std::vector<std::byte> data;

  // A zero-filled tensor; throws Error for an unknown dtype or an impossible shape.
  static HostTensor zeros(DType dtype, Shape shape);

  uint64_t numel() const;

  // Typed views; the caller picks T to match dtype.
  template <typename T> T *as() { return reinterpret_cast<T *>(data.data()); }
  template <typename T> const T *as() const { return reinterpret_cast<const T *>(data.data()); }
};

struct NamedTensor {
  std::string name;
  HostTensor tensor;
};

} // namespace slrt
