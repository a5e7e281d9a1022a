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
  // Which streams the op runs on, and so which memory space its buffers are in.
  enum class Placement {
    kCompute,       // a COMPUTE stream, DEVICE buffers
    kCopy,          // a HOST_TO_DEVICE or DEVICE_TO_HOST stream, buffers in any space (COPY)
    kComputeOrHost, // COMPUTE over DEVICE buffers, or HOST_COMPUTE over HOST ones (ACCUMULATE,
                    // KV_WRITE, CONCAT)
    kHostCompute,   // a HOST_COMPUTE stream, HOST buffers (OPTIMIZER_STEP)
    kCollective,    // a COLLECTIVE stream, DEVICE buffers (ALL_GATHER, REDUCE_SCATTER)
  };
  Placement placement = Placement::kCompute;
  int numResults = 1;
};

// "kernel 3 'fc1' (MATMUL)": how every message about a kernel starts.
std::string kernelText(int index, const sl::schedule::Kernel &kernel);
// "buffer 5 'h'" (without the quotes part when the buffer has no name); `id` must be valid.
std::string bufferText(const sl::schedule::Schedule &schedule, uint32_t id);

// nullopt for OP_KIND_UNSPECIFIED and values this runtime does not know.
std::optional<OpRule> opRule(sl::schedule::OpKind op);

// Whether the op only moves (or zeroes) elements, never computing on their values: TRANSPOSE,
// GATHER, CONCAT, SLICE, EXPAND, TRILU, WHERE, TAKE_ROWS, KV_WRITE and SLICE_GRAD. The backends
// run these by element size, so a bf16 one moves bf16 bits as they are.
bool movesElementsOnly(sl::schedule::OpKind op);

// Checks that a kernel carries the attribute message its op takes (where required) and no other.
// `what` names the kernel ("kernel 3 'fc1' (MATMUL)") and starts every message.
void verifyKernelAttributes(const std::string &what, const sl::schedule::Kernel &kernel);

// Checks the dtypes and shapes of a kernel that has results (any op but COPY and OPTIMIZER_STEP;
// its attributes have been checked) against its op's rules, `what` as above. The counts of operands
// and results have been checked against opRule, and every buffer id is valid.
void verifyKernelOperation(const std::string &what, const sl::schedule::Kernel &kernel,
                           const std::vector<const sl::schedule::Buffer *> &operands,
                           const std::vector<const sl::schedule::Buffer *> &results);

} // namespace slrt
