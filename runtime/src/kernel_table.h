// What the kernel table (ir/schedule/kernel_table.def) says of each OpKind, for the runtime: the
// verifier's per-op rule, which ops only move elements, and which shared kernel family runs an op.
#pragma once

#include <optional>

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

// The shared kernel that runs an op: one per family of the table, kOwn for an op with a kernel of
// its own.
enum class KernelFamily { kOwn, kBinary, kUnary, kCompare, kReduce };

// nullopt for OP_KIND_UNSPECIFIED and values this runtime does not know.
std::optional<OpRule> opRule(sl::schedule::OpKind op);

// Whether the op only moves (or zeroes) elements, never computing on their values (TRANSPOSE,
// GATHER, CONCAT, SLICE, EXPAND, TRILU, WHERE, TAKE_ROWS, KV_WRITE, SLICE_GRAD). The backends run
// these by element size, so a bf16 one moves bf16 bits as they are.
bool movesElementsOnly(sl::schedule::OpKind op);

// kOwn for an op outside every family, and for values this runtime does not know.
KernelFamily kernelFamily(sl::schedule::OpKind op);

} // namespace slrt
