#include "kernel_table.h"

namespace slrt {

using namespace sl::schedule;

std::optional<OpRule> opRule(OpKind op) {
  switch (op) {
#define SL_KERNEL(NAME, SL_OP, MIN_OPERANDS, MAX_OPERANDS, RESULTS, ATTRIBUTES,                    \
                  ATTRIBUTES_REQUIRED, IN_PLACE, PLACEMENT, MOVES_ELEMENTS_ONLY)                   \
  case NAME:                                                                                       \
    return OpRule{MIN_OPERANDS,        MAX_OPERANDS, Kernel::ATTRIBUTES,                           \
                  ATTRIBUTES_REQUIRED, IN_PLACE,     OpRule::Placement::k##PLACEMENT,              \
                  RESULTS};
#include "schedule/kernel_table.def"
  default:
    return std::nullopt;
  }
}

bool movesElementsOnly(OpKind op) {
  switch (op) {
#define SL_KERNEL(NAME, SL_OP, MIN_OPERANDS, MAX_OPERANDS, RESULTS, ATTRIBUTES,                    \
                  ATTRIBUTES_REQUIRED, IN_PLACE, PLACEMENT, MOVES_ELEMENTS_ONLY)                   \
  case NAME:                                                                                       \
    return MOVES_ELEMENTS_ONLY;
#include "schedule/kernel_table.def"
  default:
    return false;
  }
}

KernelFamily kernelFamily(OpKind op) {
  switch (op) {
#define SL_BINARY_KERNEL(NAME, ...)                                                                \
  case NAME:                                                                                       \
    return KernelFamily::kBinary;
#define SL_UNARY_KERNEL(NAME, ...)                                                                 \
  case NAME:                                                                                       \
    return KernelFamily::kUnary;
#define SL_COMPARE_KERNEL(NAME, ...)                                                               \
  case NAME:                                                                                       \
    return KernelFamily::kCompare;
#define SL_REDUCE_KERNEL(NAME, ...)                                                                \
  case NAME:                                                                                       \
    return KernelFamily::kReduce;
#include "schedule/kernel_table.def"
  default:
    return KernelFamily::kOwn;
  }
}

} // namespace slrt
