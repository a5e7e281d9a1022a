// The per-op half of the schedule verifier: what each OpKind's dtypes, attributes and shapes must
// be (its operand counts, attribute case and in-place rule are its kernel table row, kernel_table.h).
// schedule_verifier.cc checks the rest (buffers, bindings, streams, events) and calls into this
// once a kernel's buffer ids are known to be valid.
#pragma once

#include <string>
#include <vector>

#include "kernel_table.h"
#include "schedule/schedule.pb.h"

namespace slrt {

// "kernel 3 'fc1' (MATMUL)": how every message about a kernel starts.
std::string kernelText(int index, const sl::schedule::Kernel &kernel);
// "buffer 5 'h'" (without the quotes part when the buffer has no name); `id` must be valid.
std::string bufferText(const sl::schedule::Schedule &schedule, uint32_t id);

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
