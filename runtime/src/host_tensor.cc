#include "slrt/host_tensor.h"

#include "slrt/error.h"

namespace slrt {

HostTensor HostTensor::zeros(DType dtype, Shape shape) {
  uint64_t size = dtypeSize(dtype);
  if (size == 0)
    throw makeError("cannot make a tensor of dtype ", dtypeName(dtype));
  std::optional<uint64_t> count = slrt::numel(shape);
  uint64_t bytes = 0;
  if (!count || __builtin_mul_overflow(*count, size, &bytes))
    throw makeError("invalid tensor shape ", formatShape(shape));
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data.resize(bytes);
  return tensor;
}

uint64_t HostTensor::numel() const { return slrt::numel(shape).value_or(0); }

} // namespace slrt
