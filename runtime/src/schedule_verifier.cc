#include "slrt/schedule_verifier.h"

#include <map>
#include <set>
#include <string>
#include <unordered_set>

#include "kernel_verifier.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/shape.h"

namespace slrt {
namespace {

using namespace sl::schedule;

// "2", "2 or 3", "1 or more".
std::string operandCount(const OpRule &rule) {
  std::string count = std::to_string(rule.minOperands);
  if (rule.maxOperands == OpRule::kUnbounded)
    return count + " or more";
  if (rule.maxOperands != rule.minOperands)
    return count + " or " + std::to_string(rule.maxOperands);
  return count;
}

// "1 result", "3 results".
std::string resultCount(const OpRule &rule) {
  return std::to_string(rule.numResults) + (rule.numResults == 1 ? " result" : " results");
}

std::string spaceName(MemorySpace space) { return space == DEVICE ? "device arena" : "host pool"; }

class Verifier {
public:
  explicit Verifier(const Schedule &schedule) : s_(schedule) {}

  void run() {
    verifyBuffers();
    verifyFillers();
    verifyStreams();
    std::unordered_set<uint32_t> recorded;
    for (int i = 0; i < s_.kernels_size(); ++i)
      verifyKernel(i, s_.kernels(i), recorded);
  }

private:
  std::string bufferText(uint32_t id) const {
    const std::string &name = s_.buffers(static_cast<int>(id)).name();
    return "buffer " + std::to_string(id) + (name.empty() ? "" : " '" + name + "'");
  }

  void verifyBuffers() {
    for (int i = 0; i < s_.buffers_size(); ++i) {
      const Buffer &b = s_.buffers(i);
      if (b.id() != static_cast<uint32_t>(i))
        throw makeError("buffer at index ", i, " has id ", b.id(), " (ids must equal their index)");
      std::string what = bufferText(b.id());
      if (b.space() != DEVICE && b.space() != HOST)
        throw makeError(what, " has no valid memory space (",
                        b.space() == MEMORY_SPACE_UNSPECIFIED ? std::string("unspecified")
                                                              : std::to_string(b.space()),
                        ")");
      uint64_t elementSize = dtypeSize(b.dtype());
      if (elementSize == 0)
        throw makeError(what, " has unknown dtype ", dtypeName(b.dtype()));
      Shape shape = toShape(b.shape());
      for (int64_t dim : shape)
        if (dim < 0)
          throw makeError(what, " has a negative dimension in shape ", formatShape(shape));
      std::optional<uint64_t> count = numel(shape);
      uint64_t needed = 0;
      if (!count || __builtin_mul_overflow(*count, elementSize, &needed))
        throw makeError(what, " shape ", formatShape(shape), " is too large");
      if (b.bytes() != needed)
        throw makeError(what, " has ", b.bytes(), " bytes, but ", dtypeName(b.dtype()), " ",
                        formatShape(shape), " needs ", needed);
      // Backends access elements through typed pointers, so each must be naturally aligned.
      if (b.offset() % elementSize != 0)
        throw makeError(what, " offset ", b.offset(), " is not a multiple of its element size ",
                        elementSize);
      uint64_t capacity = b.space() == DEVICE ? s_.device_arena_bytes() : s_.host_pool_bytes();
      // Written as a subtraction so that an offset near UINT64_MAX cannot wrap around.
      if (b.offset() > capacity || b.bytes() > capacity - b.offset())
        throw makeError(what, " (offset ", b.offset(), ", ", b.bytes(),
                        " bytes) does not fit in the ", spaceName(b.space()), " (",
                        b.space() == DEVICE ? "device_arena_bytes " : "host_pool_bytes ", capacity,
                        ")");
    }
  }

  // Checks that `id` names a HOST buffer; `who` is "parameter 'w'" or "input 'x'".
  const Buffer &hostBuffer(uint32_t id, const std::string &who) const {
    if (id >= static_cast<uint32_t>(s_.buffers_size()))
      throw makeError(who, " refers to buffer ", id, ", but the schedule has ", s_.buffers_size(),
                      " buffers");
    const Buffer &b = s_.buffers(static_cast<int>(id));
    if (b.space() != HOST)
      throw makeError(who, " must be bound to a HOST buffer, but ", bufferText(id),
                      " is in the device arena");
    return b;
  }

  void verifyFillers() {
    // Parameters, constants and inputs fill their buffers before the kernels run; two fillers of
    // one buffer would race, and one would be lost.
    std::map<uint32_t, std::string> filledBy;
    auto fill = [&](uint32_t id, const std::string &who) {
      auto [it, inserted] = filledBy.emplace(id, who);
      if (!inserted)
        throw makeError(bufferText(id), " is filled by both ", it->second, " and ", who);
    };

    for (const Parameter &p : s_.parameters()) {
      std::string who = "parameter '" + p.name() + "'";
      const Buffer &b = hostBuffer(p.buffer(), who);
      if (p.dtype() != b.dtype() || toShape(p.shape()) != toShape(b.shape()) ||
          p.bytes() != b.bytes())
        throw makeError(who, " is ", dtypeName(p.dtype()), " ", formatShape(toShape(p.shape())),
                        " (", p.bytes(), " bytes) but its ", bufferText(p.buffer()), " is ",
                        dtypeName(b.dtype()), " ", formatShape(toShape(b.shape())), " (", b.bytes(),
                        " bytes)");
      if (p.file().empty())
        throw makeError(who, " names no file");
      fill(p.buffer(), who);
    }

    for (int i = 0; i < s_.constants_size(); ++i) {
      const Constant &c = s_.constants(i);
      std::string who = "constant " + std::to_string(i);
      const Buffer &b = hostBuffer(c.buffer(), who);
      uint64_t elementSize = dtypeSize(b.dtype());
      if (c.data().size() != b.bytes() && c.data().size() != elementSize)
        throw makeError(who, " has ", c.data().size(), " bytes of data, but its ",
                        bufferText(c.buffer()), " (", dtypeName(b.dtype()), " ",
                        formatShape(toShape(b.shape())), ") takes ", b.bytes(),
                        " bytes, or one element of ", elementSize, " bytes to repeat");
      fill(c.buffer(), who);
    }

    auto verifyBindings = [&](const auto &bindings, const std::string &kind, bool fills) {
      std::set<std::string> names;
      for (const Binding &binding : bindings) {
        std::string who = kind + " '" + binding.name() + "'";
        if (binding.name().empty())
          throw makeError("an ", kind, " has an empty name");
        if (!names.insert(binding.name()).second)
          throw makeError(who, " is declared twice");
        hostBuffer(binding.buffer(), who);
        if (fills)
          fill(binding.buffer(), who);
      }
    };
    verifyBindings(s_.inputs(), "input", true);
    verifyBindings(s_.outputs(), "output", false);
  }

  void verifyStreams() {
    for (int i = 0; i < s_.streams_size(); ++i) {
      const Stream &stream = s_.streams(i);
      if (stream.id() != static_cast<uint32_t>(i))
        throw makeError("stream at index ", i, " has id ", stream.id(),
                        " (ids must equal their index)");
      if (stream.kind() < COMPUTE || stream.kind() > COLLECTIVE)
        throw makeError("stream ", i, " has no valid kind (", stream.kind(), ")");
    }
  }

  void verifyKernel(int index, const Kernel &k, std::unordered_set<uint32_t> &recorded) {
    std::string opName = OpKind_Name(k.op());
    std::string what = "kernel " + std::to_string(index) +
                       (k.name().empty() ? "" : " '" + k.name() + "'") + " (" +
                       (opName.empty() ? "op " + std::to_string(k.op()) : opName) + ")";
    std::optional<OpRule> rule = opRule(k.op());
    if (!rule)
      throw makeError(what, ": unknown op");

    bool unbounded = rule->maxOperands == OpRule::kUnbounded;
    if (k.operands_size() < rule->minOperands ||
        (!unbounded && k.operands_size() > rule->maxOperands) ||
        k.results_size() != rule->numResults)
      throw makeError(what, ": has ", k.operands_size(), " operands and ", k.results_size(),
                      " results; ", opName, " takes ", operandCount(*rule), " operands and ",
                      resultCount(*rule));
    auto checkId = [&](uint32_t id, const char *role, int position) {
      if (id >= static_cast<uint32_t>(s_.buffers_size()))
        throw makeError(what, ": ", role, " ", position, " refers to buffer ", id,
                        ", but the schedule has ", s_.buffers_size(), " buffers");
    };
    for (int i = 0; i < k.operands_size(); ++i)
      checkId(k.operands(i), "operand", i);
    for (int i = 0; i < k.results_size(); ++i)
      checkId(k.results(i), "result", i);

    if (k.stream() >= static_cast<uint32_t>(s_.streams_size()))
      throw makeError(what, ": uses stream ", k.stream(), ", but the schedule has ",
                      s_.streams_size(), " streams");
    StreamKind streamKind = s_.streams(static_cast<int>(k.stream())).kind();
    bool streamOk = rule->compute ? streamKind == COMPUTE
                                  : streamKind == HOST_TO_DEVICE || streamKind == DEVICE_TO_HOST;
    if (!streamOk)
      throw makeError(what, ": runs on stream ", k.stream(), " of kind ",
                      StreamKind_Name(streamKind), "; ",
                      rule->compute ? "compute kernels run on a COMPUTE stream"
                                    : "copies run on a HOST_TO_DEVICE or DEVICE_TO_HOST stream");

    verifyKernelAttributes(what, k);

    for (uint32_t event : k.wait_events()) {
      if (event >= s_.num_events())
        throw makeError(what, ": waits for event ", event, ", but the schedule has ",
                        s_.num_events(), " events");
      if (!recorded.count(event))
        throw makeError(what, ": waits for event ", event, ", which no earlier kernel records");
    }
    for (uint32_t event : k.record_events()) {
      if (event >= s_.num_events())
        throw makeError(what, ": records event ", event, ", but the schedule has ", s_.num_events(),
                        " events");
      recorded.insert(event);
    }

    if (!rule->compute) {
      const Buffer &result = s_.buffers(static_cast<int>(k.results(0)));
      const Buffer &src = s_.buffers(static_cast<int>(k.operands(0)));
      if (src.bytes() != result.bytes() || src.dtype() != result.dtype())
        throw makeError(what, ": copies ", bufferText(src.id()), " (", dtypeName(src.dtype()), ", ",
                        src.bytes(), " bytes) into ", bufferText(result.id()), " (",
                        dtypeName(result.dtype()), ", ", result.bytes(),
                        " bytes); a copy needs equal dtype and size");
      verifyNoOverlap(what, k, /*allowInPlace=*/true);
      return;
    }

    std::vector<const Buffer *> operands;
    for (uint32_t id : k.operands()) {
      operands.push_back(&s_.buffers(static_cast<int>(id)));
      verifyComputeBuffer(what, *operands.back());
    }
    std::vector<const Buffer *> results;
    for (uint32_t id : k.results()) {
      results.push_back(&s_.buffers(static_cast<int>(id)));
      verifyComputeBuffer(what, *results.back());
    }
    verifyKernelOperation(what, k, operands, results);
    verifyNoOverlap(what, k, rule->inPlace);
  }

  void verifyComputeBuffer(const std::string &what, const Buffer &b) const {
    if (b.space() != DEVICE)
      throw makeError(what, ": ", bufferText(b.id()),
                      " is in the host pool; compute kernels use only DEVICE buffers");
  }

  static bool overlap(const Buffer &a, const Buffer &b) {
    // Bounds were checked, so these sums cannot overflow.
    return a.space() == b.space() && a.bytes() > 0 && b.bytes() > 0 &&
           a.offset() < b.offset() + b.bytes() && b.offset() < a.offset() + a.bytes();
  }

  // A result that partially overlaps an operand would be read after it is overwritten. Ops whose
  // rule allows it (and copies) may run exactly in place: same offset, bytes and element count, so
  // every element sits where the op reads it. Only result 0 may; the further results of a backward
  // kernel overlap nothing, and no two results overlap each other.
  void verifyNoOverlap(const std::string &what, const Kernel &k, bool allowInPlace) const {
    for (int i = 0; i < k.results_size(); ++i) {
      const Buffer &r = s_.buffers(static_cast<int>(k.results(i)));
      for (uint32_t id : k.operands()) {
        const Buffer &o = s_.buffers(static_cast<int>(id));
        bool inPlace = o.offset() == r.offset() && o.bytes() == r.bytes() &&
                       dtypeSize(o.dtype()) == dtypeSize(r.dtype());
        if (overlap(o, r) && !(allowInPlace && i == 0 && inPlace))
          throw makeError(what, ": result ", bufferText(r.id()), " overlaps operand ",
                          bufferText(o.id()));
      }
      for (int j = 0; j < i; ++j) {
        const Buffer &other = s_.buffers(static_cast<int>(k.results(j)));
        if (overlap(other, r))
          throw makeError(what, ": result ", i, " (", bufferText(r.id()), ") overlaps result ", j,
                          " (", bufferText(other.id()), ")");
      }
    }
  }

  const Schedule &s_;
};

} // namespace

void verifySchedule(const sl::schedule::Schedule &schedule) { Verifier(schedule).run(); }

} // namespace slrt
