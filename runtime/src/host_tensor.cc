#include "slrt/host_tensor.h"

#include "slrt/bfloat16.h"
#include "slrt/checked.h"
#include "slrt/error.h"

namespace slrt {

HostTensor HostTensor::zeros(DType dtype, Shape shape) {
  uint64_t size = dtypeSize(dtype);
  if (size == 0)
    throw makeError("cannot make a tensor of dtype ", dtypeName(dtype));
  std::optional<uint64_t> count = slrt::numel(shape);
  std::optional<uint64_t> checkedBytes = count ? checkedMul(*count, size) : std::nullopt;
  if (!checkedBytes)
    throw makeError("invalid tensor shape ", formatShape(shape));
  uint64_t bytes = *checkedBytes;
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data.resize(bytes);
  return tensor;
}

uint64_t HostTensor::numel() const { return slrt::numel(shape).value_or(0); }

uint64_t HostTensorView::numel() const { return slrt::numel(shape).value_or(0); }

HostTensor widenedToF32(const HostTensor &tensor) {
  if (tensor.dtype != sl::schedule::BF16)
    throw makeError("widenedToF32 takes a bf16 tensor, not ", dtypeName(tensor.dtype));
  HostTensor wide = HostTensor::zeros(sl::schedule::F32, tensor.shape);
  widenBfloat16(tensor.as<uint16_t>(), wide.as<float>(), tensor.numel());
  return wide;
}

HostTensor roundedToBfloat16(const HostTensor &tensor) {
  if (tensor.dtype != sl::schedule::F32)
    throw makeError("roundedToBfloat16 takes an f32 tensor, not ", dtypeName(tensor.dtype));
  HostTensor narrow = HostTensor::zeros(sl::schedule::BF16, tensor.shape);
  roundToBfloat16(tensor.as<float>(), narrow.as<uint16_t>(), tensor.numel());
  return narrow;
}

} // namespace slrt
