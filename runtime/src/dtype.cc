#include "slrt/dtype.h"

namespace slrt {

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
