#include "gather_indices.h"

#include <algorithm>
#include <set>

#include "kernel_verifier.h"
#include "slrt/error.h"

namespace slrt {
namespace {

// "[1, 2]": the position of flat element `index` in `shape`.
std::string position(uint64_t index, const Shape &shape) {
  Shape at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = static_cast<int64_t>(index % static_cast<uint64_t>(shape[d]));
    index /= static_cast<uint64_t>(shape[d]);
  }
  return formatShape(at);
}

template <typename T>
void checkRange(const HostTensor &tensor, const std::string &name, int64_t extent,
                const std::string &reader) {
  const T *values = tensor.as<T>();
  for (uint64_t i = 0; i < tensor.numel(); ++i) {
    int64_t value = static_cast<int64_t>(values[i]);
    if (value < -extent || value >= extent)
      throw makeError("input '", name, "' holds ", value, " at ", position(i, tensor.shape), ": ",
                      reader, " takes ", -extent, "..", extent - 1);
  }
}

} // namespace

void checkGatherIndices(const sl::schedule::Schedule &schedule, const std::string &name,
                        const HostTensor &tensor) {
  if (tensor.dtype != sl::schedule::I64 && tensor.dtype != sl::schedule::I32)
    return;
  auto binding = std::find_if(schedule.inputs().begin(), schedule.inputs().end(),
                              [&](const sl::schedule::Binding &b) { return b.name() == name; });
  if (binding == schedule.inputs().end())
    return;
  // The input's buffer and every buffer a COPY fills from one of them, in kernel order (a copy
  // reads what an earlier kernel wrote).
  std::set<uint32_t> holders = {binding->buffer()};
  for (int index = 0; index < schedule.kernels_size(); ++index) {
    const sl::schedule::Kernel &k = schedule.kernels(index);
    if (k.op() == sl::schedule::COPY && k.operands_size() == 1 && k.results_size() == 1 &&
        holders.count(k.operands(0)))
      holders.insert(k.results(0));
    if (k.op() != sl::schedule::GATHER || k.operands_size() != 2 || !holders.count(k.operands(1)))
      continue;
    const sl::schedule::Buffer &data = schedule.buffers(static_cast<int>(k.operands(0)));
    int64_t axis = k.axis().axis();
    if (axis < 0)
      axis += data.shape_size();
    if (axis < 0 || axis >= data.shape_size())
      continue; // the verifier refuses it; nothing to check against here
    int64_t extent = data.shape(static_cast<int>(axis));
    std::string reader = kernelText(index, k) + ", which indexes axis " + std::to_string(axis) +
                         " of " + formatShape(toShape(data.shape())) + " with it,";
    if (tensor.dtype == sl::schedule::I64)
      checkRange<int64_t>(tensor, name, extent, reader);
    else
      checkRange<int32_t>(tensor, name, extent, reader);
  }
}

} // namespace slrt
