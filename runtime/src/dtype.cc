#include "slrt/dtype.h"

#include <cstring>

namespace slrt {
namespace {

// Scans elements of `Bits` whose exponent field is `exponent` and sign bit `sign`: all exponent
// bits set is an infinity (zero mantissa) or a NaN.
template <typename Bits>
std::optional<NonFinite> scan(const void *data, uint64_t count, Bits exponent, Bits sign,
                              bool nanOnly) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  for (uint64_t i = 0; i < count; ++i) {
    Bits bits;
    std::memcpy(&bits, bytes + i * sizeof(Bits), sizeof(Bits));
    if ((bits & exponent) != exponent)
      continue;
    if ((bits & ~(exponent | sign)) != 0)
      return NonFinite{i, "NaN"};
    if (!nanOnly)
      return NonFinite{i, (bits & sign) ? "-inf" : "inf"};
  }
  return std::nullopt;
}

} // namespace

std::optional<NonFinite> findNonFinite(const void *data, uint64_t count, DType dtype,
                                       bool nanOnly) {
  switch (dtype) {
  case sl::schedule::F32:
    return scan<uint32_t>(data, count, 0x7f800000u, 0x80000000u, nanOnly);
  case sl::schedule::F64:
    return scan<uint64_t>(data, count, 0x7ff0000000000000ull, 0x8000000000000000ull, nanOnly);
  case sl::schedule::F16:
    return scan<uint16_t>(data, count, 0x7c00, 0x8000, nanOnly);
  case sl::schedule::BF16:
    return scan<uint16_t>(data, count, 0x7f80, 0x8000, nanOnly);
  default:
    return std::nullopt;
  }
}

uint64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case sl::schedule::F32:
    return 4;
  case sl::schedule::F16:
    return 2;
  case sl::schedule::BF16:
    return 2;
  case sl::schedule::F64:
    return 8;
  case sl::schedule::I64:
    return 8;
  case sl::schedule::I32:
    return 4;
  case sl::schedule::BOOL:
    return 1;
  default:
    return 0;
  }
}

std::string dtypeName(DType dtype) {
  switch (dtype) {
  case sl::schedule::DTYPE_UNSPECIFIED:
    return "unspecified";
  case sl::schedule::F32:
    return "f32";
  case sl::schedule::F16:
    return "f16";
  case sl::schedule::BF16:
    return "bf16";
  case sl::schedule::F64:
    return "f64";
  case sl::schedule::I64:
    return "i64";
  case sl::schedule::I32:
    return "i32";
  case sl::schedule::BOOL:
    return "bool";
  default:
    // Proto3 enums are open: a newer compiler may write values this runtime has never heard of.
    return "dtype(" + std::to_string(static_cast<int>(dtype)) + ")";
  }
}

} // namespace slrt
