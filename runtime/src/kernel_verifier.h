// The per-op half of the schedule verifier: what each OpKind takes (operand count, dtypes,
// attributes, shapes) and whether its result may alias an operand. schedule_verifier.cc checks the
// rest (buffers, bindings, streams, events) and calls into this once a kernel's buffer ids are
// known to be valid.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedule/schedule.pb.h"

namespace slrt {

struct OpRule {
  static constexpr int kUnbounded = -1;
  int minOperands;
  int maxOperands; // kUnbounded: any number from minOperands up (CONCAT)
  // The attribute message the op takes, or ATTRIBUTES_NOT_SET for none.
  sl::schedule::Kernel::AttributesCase attributes;
  bool attributesRequired;
  // True when result 0 may be exactly an operand (same offset, bytes and element count): the op
  // reads every operand element it needs for a result element before writing that element. Further
  // results (the gradients of a backward kernel) never overlap an operand or another result.
  bool inPlace;
  bool compute; // false only for COPY
  int numResults = 1;
};

// nullopt for OP_KIND_UNSPECIFIED and values this runtime does not know.
std::optional<OpRule> opRule(sl::schedule::OpKind op);

// Checks that a kernel carries the attribute message its op takes (where required) and no other.
// `what` names the kernel ("kernel 3 'fc1' (MATMUL)") and starts every message.
void verifyKernelAttributes(const std::string &what, const sl::schedule::Kernel &kernel);

// Checks a compute kernel's dtypes and shapes (its attributes have been checked) against its op's
// rules, `what` as above. The counts of operands and results have been checked against opRule, and
// every buffer id is valid.
void verifyKernelOperation(const std::string &what, const sl::schedule::Kernel &kernel,
                           const std::vector<const sl::schedule::Buffer *> &operands,
                           const std::vector<const sl::schedule::Buffer *> &results);

} // namespace slrt
