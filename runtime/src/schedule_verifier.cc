#include "slrt/schedule_verifier.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "kernel_verifier.h"
#include "slrt/checked.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/shape.h"
#include "stream_hazards.h"

namespace slrt {
namespace {

using namespace sl::schedule;

// "2", "2 or 3", "3 to 5", "1 or more".
std::string operandCount(const OpRule &rule) {
  std::string count = std::to_string(rule.minOperands);
  if (rule.maxOperands == OpRule::kUnbounded)
    return count + " or more";
  if (rule.maxOperands == rule.minOperands + 1)
    return count + " or " + std::to_string(rule.maxOperands);
  if (rule.maxOperands != rule.minOperands)
    return count + " to " + std::to_string(rule.maxOperands);
  return count;
}

// "1 result", "3 results".
std::string resultCount(const OpRule &rule) {
  return std::to_string(rule.numResults) + (rule.numResults == 1 ? " result" : " results");
}

std::string spaceName(MemorySpace space) { return space == DEVICE ? "device arena" : "host pool"; }

// The outputs an OPTIMIZER_STEP reads, by the names the train contract gives them (the trainer
// relies on the same names, slrt/trainer.h).
constexpr const char *kLossOutput = "loss";
constexpr const char *kGradOutputPrefix = "grad:";
constexpr const char *kGradShardOutputPrefix = "grad_shard:";

class Verifier {
public:
  explicit Verifier(const Schedule &schedule) : s_(schedule) {}

  void run() {
    verifyBuffers();
    verifyPrograms();
    verifyFillers();
    verifyStreams();
    for (const Binding &binding : s_.outputs())
      outputBuffers_.emplace(std::make_pair(binding.program(), binding.name()), binding.buffer());
    for (int i = 0; i < s_.kernels_size(); ++i)
      verifyKernel(i, s_.kernels(i));
    verifyGeneration();
    // Last: it relies on every id being valid and every event recorded once, before its waits.
    verifyStreamHazards(s_);
  }

private:
  std::string bufferText(uint32_t id) const { return slrt::bufferText(s_, id); }

  // "program 1 'decode'".
  std::string programText(uint32_t index) const {
    return "program " + std::to_string(index) + " '" + s_.programs(static_cast<int>(index)).name() +
           "'";
  }

  // Programs split the kernel list into consecutive, non-empty, uniquely named parts that cover
  // it; programOf_[k] is kernel k's program (all 0 without programs: one program of everything).
  void verifyPrograms() {
    programOf_.assign(static_cast<size_t>(s_.kernels_size()), 0);
    if (s_.programs_size() == 0)
      return;
    uint64_t next = 0;
    std::map<std::string, uint32_t> names;
    for (int i = 0; i < s_.programs_size(); ++i) {
      const Program &p = s_.programs(i);
      uint32_t index = static_cast<uint32_t>(i);
      if (p.name().empty())
        throw makeError("program ", i, " has an empty name");
      auto [it, inserted] = names.emplace(p.name(), index);
      if (!inserted)
        throw makeError(programText(index), " has the name of ", programText(it->second),
                        " (program names are unique)");
      if (p.num_kernels() == 0)
        throw makeError(programText(index), " has no kernels");
      if (p.first_kernel() != next)
        throw makeError(programText(index), " starts at kernel ", p.first_kernel(), ", but ",
                        i == 0 ? std::string("the first program must start at kernel 0")
                               : programText(index - 1) + " ends before kernel " +
                                     std::to_string(next),
                        " (programs are contiguous and in order)");
      next = uint64_t{p.first_kernel()} + p.num_kernels();
      if (next > static_cast<uint64_t>(s_.kernels_size()))
        throw makeError(programText(index), " (", p.num_kernels(), " kernels from kernel ",
                        p.first_kernel(), ") runs past the last kernel (the schedule has ",
                        s_.kernels_size(), " kernels)");
      for (uint64_t k = p.first_kernel(); k < next; ++k)
        programOf_[k] = index;
    }
    if (next != static_cast<uint64_t>(s_.kernels_size()))
      throw makeError("the programs end before kernel ", next, ", but the schedule has ",
                      s_.kernels_size(), " kernels (programs cover every kernel)");
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
      std::optional<uint64_t> size =
          count ? checkedMul<uint64_t>(*count, elementSize) : std::nullopt;
      if (!size)
        throw makeError(what, " shape ", formatShape(shape), " is too large");
      uint64_t needed = *size;
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

    if (world() > 1)
      verifyShards(fill);
    else if (s_.shards_size() > 0)
      throw makeError("the schedule has ", s_.shards_size(),
                      " shards, but shards are for schedules of world > 1 (its world is ",
                      s_.world(), ")");
    for (const Parameter &p : s_.parameters()) {
      if (world() > 1)
        break;
      std::string who = "parameter '" + p.name() + "'";
      const Buffer &b = hostBuffer(p.buffer(), who);
      verifyFileDType(p, who);
      // With a conversion, `bytes` is the size in the file: the buffer's elements in file_dtype.
      std::optional<uint64_t> fileBytes =
          converts(p) ? checkedMul<uint64_t>(b.bytes() / dtypeSize(b.dtype()),
                                             dtypeSize(p.file_dtype()))
                      : std::optional<uint64_t>(b.bytes());
      if (!fileBytes)
        throw makeError(who, ": its ", bufferText(p.buffer()), " is too large");
      uint64_t bytes = *fileBytes;
      if (p.dtype() != b.dtype() || toShape(p.shape()) != toShape(b.shape()) || p.bytes() != bytes)
        throw makeError(who, " is ", dtypeName(p.dtype()), " ", formatShape(toShape(p.shape())),
                        " (", p.bytes(), " bytes",
                        converts(p) ? " of " + dtypeName(p.file_dtype()) + " in its file" : "",
                        ") but its ", bufferText(p.buffer()), " is ", dtypeName(b.dtype()), " ",
                        formatShape(toShape(b.shape())), " (", b.bytes(), " bytes",
                        converts(p) ? ", " + std::to_string(bytes) + " bytes of " +
                                          dtypeName(p.file_dtype()) + " in the file"
                                    : "",
                        ")");
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

    // Names are unique per program (prefill and decode both have "logits").
    auto verifyBindings = [&](const auto &bindings, const std::string &kind, bool fills) {
      std::set<std::pair<uint32_t, std::string>> names;
      for (const Binding &binding : bindings) {
        std::string who = kind + " '" + binding.name() + "'";
        if (binding.name().empty())
          throw makeError("an ", kind, " has an empty name");
        if (s_.programs_size() == 0 && binding.program() != 0)
          throw makeError(who, " belongs to program ", binding.program(),
                          ", but the schedule has no programs (its bindings belong to program 0)");
        if (s_.programs_size() > 0 &&
            binding.program() >= static_cast<uint32_t>(s_.programs_size()))
          throw makeError(who, " belongs to program ", binding.program(), ", but the schedule has ",
                          s_.programs_size(), " programs");
        if (!names.emplace(binding.program(), binding.name()).second)
          throw makeError(who, " is declared twice",
                          s_.programs_size() == 0 ? "" : " in " + programText(binding.program()));
        hostBuffer(binding.buffer(), who);
        if (fills)
          fill(binding.buffer(), who);
      }
    };
    verifyBindings(s_.inputs(), "input", true);
    verifyBindings(s_.outputs(), "output", false);
  }

  uint32_t world() const { return std::max<uint32_t>(1, s_.world()); }

  // Whether `p` is stored in its file as another dtype than its buffer's (converted at load).
  static bool converts(const Parameter &p) {
    return p.file_dtype() != DTYPE_UNSPECIFIED && p.file_dtype() != p.dtype();
  }

  // file_dtype is unset, the dtype itself, or f32 for a bf16 parameter (the one conversion the
  // runtime does), and a conversion only of a parameter that has a buffer of its own (world 1).
  void verifyFileDType(const Parameter &p, const std::string &who) const {
    if (!converts(p))
      return;
    if (p.file_dtype() != F32 || p.dtype() != BF16)
      throw makeError(who, " is ", dtypeName(p.dtype()), " but its file_dtype is ",
                      dtypeName(p.file_dtype()), "; the only conversion at load is from an f32 "
                      "file to a bf16 parameter (file_dtype unset means the parameter's dtype)");
    if (world() > 1)
      throw makeError(who, " has file_dtype ", dtypeName(p.file_dtype()), " and dtype ",
                      dtypeName(p.dtype()), ", but a schedule of world ", world(),
                      " shards its parameters as f32: only unsharded parameters are converted at "
                      "load");
  }

  // World > 1: every shard is an f32 host buffer of elements / world values, filled at start-up,
  // and every parameter an f32 range of one shard's elements, overlapping no other.
  template <typename Fill> void verifyShards(Fill &fill) {
    std::set<std::string> names;
    for (int i = 0; i < s_.shards_size(); ++i) {
      const Shard &shard = s_.shards(i);
      std::string who = "shard " + std::to_string(i) + " '" + shard.name() + "'";
      if (shard.name().empty())
        throw makeError("shard ", i, " has an empty name");
      if (!names.insert(shard.name()).second)
        throw makeError(who, ": the name is used twice");
      if (shard.elements() == 0 || shard.elements() % world() != 0)
        throw makeError(who, " has ", shard.elements(), " elements, not a positive multiple of the ",
                        world(), " ranks");
      const Buffer &b = hostBuffer(shard.buffer(), who);
      Shape expected{static_cast<int64_t>(shard.elements() / world())};
      if (b.dtype() != F32 || toShape(b.shape()) != expected)
        throw makeError(who, " is bound to ", bufferText(shard.buffer()), " (", dtypeName(b.dtype()),
                        " ", formatShape(toShape(b.shape())), "), but one rank's part is f32 ",
                        formatShape(expected));
      fill(shard.buffer(), who);
    }
    std::map<uint32_t, std::map<uint64_t, std::pair<uint64_t, std::string>>> ranges;
    for (const Parameter &p : s_.parameters()) {
      std::string who = "parameter '" + p.name() + "'";
      verifyFileDType(p, who);
      Shape shape = toShape(p.shape());
      std::optional<uint64_t> count = numel(shape);
      std::optional<uint64_t> bytes =
          count ? checkedMul<uint64_t>(*count, sizeof(float)) : std::nullopt;
      if (p.dtype() != F32 || !bytes || p.bytes() != *bytes)
        throw makeError(who, " is ", dtypeName(p.dtype()), " ", formatShape(shape), " (", p.bytes(),
                        " bytes); a sharded parameter is f32 of its shape's size");
      if (p.file().empty())
        throw makeError(who, " names no file");
      if (p.shard() >= static_cast<uint32_t>(s_.shards_size()))
        throw makeError(who, " is in shard ", p.shard(), ", but the schedule has ",
                        s_.shards_size(), " shards");
      const Shard &shard = s_.shards(static_cast<int>(p.shard()));
      if (p.shard_offset() > shard.elements() || *count > shard.elements() - p.shard_offset())
        throw makeError(who, " (elements ", p.shard_offset(), " to ", p.shard_offset() + *count,
                        ") does not fit in shard '", shard.name(), "' of ", shard.elements(),
                        " elements");
      auto &placed = ranges[p.shard()];
      auto next = placed.lower_bound(p.shard_offset());
      if (*count > 0 && next != placed.end() && next->first < p.shard_offset() + *count)
        throw makeError(who, " overlaps parameter '", next->second.second, "' in shard '",
                        shard.name(), "'");
      if (*count > 0 && next != placed.begin() && std::prev(next)->second.first > p.shard_offset())
        throw makeError(who, " overlaps parameter '", std::prev(next)->second.second,
                        "' in shard '", shard.name(), "'");
      placed.emplace(p.shard_offset(), std::make_pair(p.shard_offset() + *count, p.name()));
    }
  }

  // ALL_GATHER: operand [S], result [world * S]; REDUCE_SCATTER the other way round. Sizes are
  // counted in elements: any shapes of those sizes will do.
  void verifyCollective(const std::string &what, const Kernel &k) const {
    if (world() == 1)
      throw makeError(what, ": a schedule of one rank (world ", s_.world(), ") has no collectives");
    const Buffer &in = s_.buffers(static_cast<int>(k.operands(0)));
    const Buffer &out = s_.buffers(static_cast<int>(k.results(0)));
    bool gather = k.op() == ALL_GATHER;
    const Buffer &shard = gather ? in : out;
    const Buffer &whole = gather ? out : in;
    if (whole.bytes() != shard.bytes() * world())
      throw makeError(what, ": ", gather ? "result " : "operand ", bufferText(whole.id()), " has ",
                      whole.bytes(), " bytes, but ", world(), " ranks' shards of ",
                      bufferText(shard.id()), " take ", shard.bytes() * world());
  }

  void verifyStreams() {
    for (int i = 0; i < s_.streams_size(); ++i) {
      const Stream &stream = s_.streams(i);
      if (stream.id() != static_cast<uint32_t>(i))
        throw makeError("stream at index ", i, " has id ", stream.id(),
                        " (ids must equal their index)");
      if (stream.kind() < COMPUTE || stream.kind() > HOST_COMPUTE)
        throw makeError("stream ", i, " has no valid kind (", stream.kind(), ")");
    }
  }

  void verifyKernel(int index, const Kernel &k) {
    const std::string &opName = OpKind_Name(k.op());
    std::string what = kernelText(index, k);
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
    verifyPlacement(what, k, *rule, streamKind);

    verifyKernelAttributes(what, k);

    for (uint32_t event : k.wait_events()) {
      if (event >= s_.num_events())
        throw makeError(what, ": waits for event ", event, ", but the schedule has ",
                        s_.num_events(), " events");
      auto recorder = recordedBy_.find(event);
      if (recorder == recordedBy_.end())
        throw makeError(what, ": waits for event ", event, ", which no earlier kernel records");
      // Streams are idle between runs of programs, and each run starts with no event recorded.
      uint32_t program = programOf_[static_cast<size_t>(index)];
      uint32_t recorderProgram = programOf_[static_cast<size_t>(recorder->second)];
      if (recorderProgram != program)
        throw makeError(what, " of ", programText(program), ": waits for event ", event, ", which ",
                        kernelText(recorder->second, s_.kernels(recorder->second)), " of ",
                        programText(recorderProgram),
                        " records; an event is recorded and waited within one program");
    }
    for (uint32_t event : k.record_events()) {
      if (event >= s_.num_events())
        throw makeError(what, ": records event ", event, ", but the schedule has ", s_.num_events(),
                        " events");
      // One recorder per event: a wait then means one thing, and a runtime can keep one flag (or
      // one CUDA event) per event and run.
      auto [it, inserted] = recordedBy_.emplace(event, index);
      if (!inserted)
        throw makeError(what, ": records event ", event, ", which ",
                        it->second == index
                            ? std::string("it lists twice")
                            : kernelText(it->second, s_.kernels(it->second)) + " records too",
                        "; each event is recorded by exactly one kernel");
    }

    if (k.op() == OPTIMIZER_STEP)
      return verifyOptimizerStep(index, what, k);

    if (rule->placement == OpRule::Placement::kCopy) {
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

    // Kernels on a HOST_COMPUTE stream work in the host pool, all others in the device arena.
    MemorySpace space = streamKind == HOST_COMPUTE ? HOST : DEVICE;
    std::vector<const Buffer *> operands;
    for (uint32_t id : k.operands()) {
      operands.push_back(&s_.buffers(static_cast<int>(id)));
      verifyKernelBuffer(what, *operands.back(), space);
    }
    std::vector<const Buffer *> results;
    for (uint32_t id : k.results()) {
      results.push_back(&s_.buffers(static_cast<int>(id)));
      verifyKernelBuffer(what, *results.back(), space);
    }
    verifyKernelOperation(what, k, operands, results);
    if (rule->placement == OpRule::Placement::kCollective)
      verifyCollective(what, k);
    verifyNoOverlap(what, k, rule->inPlace);
  }

  void verifyPlacement(const std::string &what, const Kernel &k, const OpRule &rule,
                       StreamKind streamKind) const {
    std::string expected;
    switch (rule.placement) {
    case OpRule::Placement::kCompute:
      if (streamKind != COMPUTE)
        expected = "compute kernels run on a COMPUTE stream";
      break;
    case OpRule::Placement::kCopy:
      if (streamKind != HOST_TO_DEVICE && streamKind != DEVICE_TO_HOST)
        expected = "copies run on a HOST_TO_DEVICE or DEVICE_TO_HOST stream";
      break;
    case OpRule::Placement::kComputeOrHost:
      if (streamKind != COMPUTE && streamKind != HOST_COMPUTE)
        expected = OpKind_Name(k.op()) +
                   " runs on a COMPUTE stream (device buffers) or a HOST_COMPUTE stream (host "
                   "buffers)";
      break;
    case OpRule::Placement::kHostCompute:
      if (streamKind != HOST_COMPUTE)
        expected = OpKind_Name(k.op()) + " runs on a HOST_COMPUTE stream (host buffers)";
      break;
    case OpRule::Placement::kCollective:
      if (streamKind != COLLECTIVE)
        expected = "collectives run on a COLLECTIVE stream";
      break;
    }
    if (!expected.empty())
      throw makeError(what, ": runs on stream ", k.stream(), " of kind ",
                      StreamKind_Name(streamKind), "; ", expected);
  }

  void verifyKernelBuffer(const std::string &what, const Buffer &b, MemorySpace space) const {
    if (b.space() == space)
      return;
    if (space == DEVICE)
      throw makeError(what, ": ", bufferText(b.id()),
                      " is in the host pool; compute kernels use only DEVICE buffers");
    throw makeError(what, ": ", bufferText(b.id()),
                    " is in the device arena; kernels on a HOST_COMPUTE stream use only HOST "
                    "buffers");
  }

  // Operand 0 is the loss output's buffer and operand i + 1 the gradient output of the i-th
  // parameter named, each parameter stepped by at most one OPTIMIZER_STEP of the schedule: a
  // runtime that steps the optimizer here finds every gradient where the train contract puts it.
  void verifyOptimizerStep(int index, const std::string &what, const Kernel &k) {
    if (world() > 1)
      return verifyShardOptimizerStep(index, what, k);
    if (k.optimizer_step().shards_size() > 0)
      throw makeError(what, ": names shards, but the schedule has one rank (world ", s_.world(),
                      ")");
    const auto &parameters = k.optimizer_step().parameters();
    if (parameters.size() != k.operands_size() - 1)
      throw makeError(what, ": has ", k.operands_size() - 1,
                      " gradient operands, but "
                      "optimizer_step.parameters names ",
                      parameters.size(),
                      " parameters (operand i + 1 is the gradient of parameters[i])");
    uint32_t program = programOf_[static_cast<size_t>(index)];
    auto loss = outputBuffers_.find({program, kLossOutput});
    if (loss == outputBuffers_.end())
      throw makeError(what, ": the schedule has no output '", kLossOutput,
                      "' (operand 0 of an OPTIMIZER_STEP is its buffer)");
    if (k.operands(0) != loss->second)
      throw makeError(what, ": operand 0 is ", bufferText(k.operands(0)), ", but it must be ",
                      bufferText(loss->second), ", the buffer of output '", kLossOutput, "'");
    for (int i = 0; i < parameters.size(); ++i) {
      uint32_t parameter = parameters.Get(i);
      if (parameter >= static_cast<uint32_t>(s_.parameters_size()))
        throw makeError(what, ": optimizer_step.parameters[", i, "] is ", parameter,
                        ", but the schedule has ", s_.parameters_size(), " parameters");
      const std::string &name = s_.parameters(static_cast<int>(parameter)).name();
      std::string gradName = kGradOutputPrefix + name;
      auto grad = outputBuffers_.find({program, gradName});
      if (grad == outputBuffers_.end())
        throw makeError(what, ": steps parameter '", name, "', but the schedule has no output '",
                        gradName, "' (its gradient)");
      if (k.operands(i + 1) != grad->second)
        throw makeError(what, ": operand ", i + 1, " is ", bufferText(k.operands(i + 1)),
                        ", but the gradient of parameter '", name, "' is output '", gradName,
                        "' in ", bufferText(grad->second));
      auto [it, inserted] = steppedBy_.emplace(parameter, index);
      if (!inserted)
        throw makeError(what, ": steps parameter '", name, "', which ",
                        it->second == index
                            ? std::string("it names twice")
                            : kernelText(it->second, s_.kernels(it->second)) + " steps too",
                        "; a parameter appears in at most one OPTIMIZER_STEP");
    }
  }

  // World > 1: as verifyOptimizerStep, with shards in place of parameters and their outputs
  // "grad_shard:<name>".
  void verifyShardOptimizerStep(int index, const std::string &what, const Kernel &k) {
    const auto &shards = k.optimizer_step().shards();
    if (k.optimizer_step().parameters_size() > 0)
      throw makeError(what, ": names parameters, but in a schedule of world ", world(),
                      " the optimizer steps shards (optimizer_step.shards)");
    if (shards.size() != k.operands_size() - 1)
      throw makeError(what, ": has ", k.operands_size() - 1, " gradient operands, but "
                      "optimizer_step.shards names ", shards.size(),
                      " shards (operand i + 1 is the gradient of shards[i])");
    uint32_t program = programOf_[static_cast<size_t>(index)];
    auto loss = outputBuffers_.find({program, kLossOutput});
    if (loss == outputBuffers_.end() || k.operands(0) != loss->second)
      throw makeError(what, ": operand 0 must be the buffer of output '", kLossOutput, "'");
    for (int i = 0; i < shards.size(); ++i) {
      uint32_t shard = shards.Get(i);
      if (shard >= static_cast<uint32_t>(s_.shards_size()))
        throw makeError(what, ": optimizer_step.shards[", i, "] is ", shard,
                        ", but the schedule has ", s_.shards_size(), " shards");
      const std::string &name = s_.shards(static_cast<int>(shard)).name();
      std::string gradName = kGradShardOutputPrefix + name;
      auto grad = outputBuffers_.find({program, gradName});
      if (grad == outputBuffers_.end() || k.operands(i + 1) != grad->second)
        throw makeError(what, ": operand ", i + 1, " must be the buffer of output '", gradName,
                        "' (the gradient of shard '", name, "')");
      auto [it, inserted] = shardSteppedBy_.emplace(shard, index);
      if (!inserted)
        throw makeError(what, ": steps shard '", name, "', which ",
                        it->second == index
                            ? std::string("it names twice")
                            : kernelText(it->second, s_.kernels(it->second)) + " steps too",
                        "; a shard appears in at most one OPTIMIZER_STEP");
    }
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
  // KV_WRITE's result is its operand 0 by definition (the cache, written in place); its other
  // operands must not overlap the cache.
  void verifyNoOverlap(const std::string &what, const Kernel &k, bool allowInPlace) const {
    for (int i = 0; i < k.results_size(); ++i) {
      const Buffer &r = s_.buffers(static_cast<int>(k.results(i)));
      for (int j = 0; j < k.operands_size(); ++j) {
        if (k.op() == KV_WRITE && i == 0 && j == 0)
          continue;
        const Buffer &o = s_.buffers(static_cast<int>(k.operands(j)));
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

  // --- kind "generate" ------------------------------------------------------------------------

  // The binding `name` of `program` (an index), or nullptr.
  const Binding *findBinding(const google::protobuf::RepeatedPtrField<Binding> &bindings,
                             uint32_t program, const std::string &name) const {
    for (const Binding &b : bindings)
      if (b.program() == program && b.name() == name)
        return &b;
    return nullptr;
  }

  // Program `program` (called `programName`) has exactly the bindings `expected` (name, dtype,
  // shape) in `bindings` (its inputs: no others; its outputs: others allowed). A dtype of
  // DTYPE_UNSPECIFIED stands for f32, bf16 or f64 (logits).
  struct Expected {
    const char *name;
    DType dtype;
    Shape shape;
    const char *dims; // what the shape is made of, for messages
  };
  void verifyGenerateBindings(const google::protobuf::RepeatedPtrField<Binding> &bindings,
                              const char *kind, uint32_t program, const char *programName,
                              const std::vector<Expected> &expected, bool othersAllowed) const {
    std::string names;
    for (const Expected &e : expected)
      names += (names.empty() ? "" : " and ") + std::string(e.name);
    for (const Expected &e : expected) {
      const Binding *b = findBinding(bindings, program, e.name);
      std::string dtype = e.dtype == DTYPE_UNSPECIFIED ? "f32" : dtypeName(e.dtype);
      if (!b)
        throw makeError("program '", programName, "' has no ", kind, " '", e.name, "' (", dtype,
                        " ", formatShape(e.shape), ": ", e.dims, ")");
      const Buffer &buffer = s_.buffers(static_cast<int>(b->buffer()));
      Shape shape = toShape(buffer.shape());
      bool dtypeOk = e.dtype == DTYPE_UNSPECIFIED ? buffer.dtype() == F32 ||
                                                        buffer.dtype() == BF16 ||
                                                        buffer.dtype() == F64
                                                  : buffer.dtype() == e.dtype;
      if (!dtypeOk || shape != e.shape)
        throw makeError(kind, " '", e.name, "' of program '", programName, "' is ",
                        dtypeName(buffer.dtype()), " ", formatShape(shape),
                        ", but the generation message makes it ",
                        e.dtype == DTYPE_UNSPECIFIED ? "f32, bf16 or f64" : dtype.c_str(), " ",
                        formatShape(e.shape), " (", e.dims, ")");
    }
    if (othersAllowed)
      return;
    for (const Binding &b : bindings)
      if (b.program() == program &&
          std::none_of(expected.begin(), expected.end(),
                       [&](const Expected &e) { return b.name() == e.name; }))
        throw makeError("program '", programName, "' has ", kind, " '", b.name(),
                        "', which a generate schedule does not take (its ", kind, "s are ", names,
                        ")");
  }

  // Kind "generate" has the Generation message, and then programs "prefill" and "decode" with the
  // bindings the message describes; no other kind has it.
  void verifyGeneration() const {
    bool generate = s_.kind() == kGenerateKind;
    if (!generate) {
      if (s_.has_generation())
        throw makeError("the schedule has a generation message, but its kind is '", s_.kind(),
                        "' (only kind '", kGenerateKind, "' has one)");
      return;
    }
    if (!s_.has_generation())
      throw makeError("a schedule of kind '", kGenerateKind, "' needs the generation message");
    const Generation &g = s_.generation();
    const std::pair<const char *, int64_t> counts[] = {{"batch", g.batch()},
                                                       {"max_prompt_len", g.max_prompt_len()},
                                                       {"max_new_tokens", g.max_new_tokens()},
                                                       {"vocab", g.vocab()},
                                                       {"num_sub_batches", g.num_sub_batches()},
                                                       {"sub_batch_size", g.sub_batch_size()}};
    for (const auto &[name, value] : counts)
      if (value <= 0)
        throw makeError("generation.", name, " is ", value, "; it must be positive");
    std::optional<int64_t> sum = checkedAdd<int64_t>(g.max_prompt_len(), g.max_new_tokens());
    std::optional<int64_t> product =
        checkedMul<int64_t>(g.sub_batch_size(), int64_t{g.num_sub_batches()});
    if (!sum || g.cache_len() != *sum)
      throw makeError("generation.cache_len is ", g.cache_len(), ", but max_prompt_len (",
                      g.max_prompt_len(), ") + max_new_tokens (", g.max_new_tokens(), ") is ",
                      sum ? std::to_string(*sum) : std::string("at least 2^63"));
    if (!product || *product != g.batch())
      throw makeError("generation.num_sub_batches (", g.num_sub_batches(), ") sub-batches of ",
                      g.sub_batch_size(), " sequences (sub_batch_size) are not batch (", g.batch(),
                      ")");

    std::string programs;
    for (const Program &p : s_.programs())
      programs += (programs.empty() ? "'" : ", '") + p.name() + "'";
    int prefill = -1, decode = -1;
    for (int i = 0; i < s_.programs_size(); ++i) {
      if (s_.programs(i).name() == kPrefillProgram)
        prefill = i;
      else if (s_.programs(i).name() == kDecodeProgram)
        decode = i;
    }
    if (s_.programs_size() != 2 || prefill < 0 || decode < 0)
      throw makeError("a schedule of kind '", kGenerateKind, "' has two programs, '",
                      kPrefillProgram, "' and '", kDecodeProgram, "'; this one has ",
                      programs.empty() ? "none" : programs);
    Shape logits{g.batch(), 1, g.vocab()};
    const char *logitsDims = "batch, 1, vocab";
    verifyGenerateBindings(
        s_.inputs(), "input", static_cast<uint32_t>(prefill), kPrefillProgram,
        {{kInputIdsInput, I64, {g.batch(), g.max_prompt_len()}, "batch, max_prompt_len"},
         {kLastIndexInput, I64, {g.batch()}, "batch"}},
        false);
    verifyGenerateBindings(s_.outputs(), "output", static_cast<uint32_t>(prefill), kPrefillProgram,
                           {{kLogitsOutput, DTYPE_UNSPECIFIED, logits, logitsDims}}, true);
    verifyGenerateBindings(s_.inputs(), "input", static_cast<uint32_t>(decode), kDecodeProgram,
                           {{kInputIdsInput, I64, {g.batch(), 1}, "batch, 1"},
                            {kPositionInput, I64, {g.batch()}, "batch"}},
                           false);
    verifyGenerateBindings(s_.outputs(), "output", static_cast<uint32_t>(decode), kDecodeProgram,
                           {{kLogitsOutput, DTYPE_UNSPECIFIED, logits, logitsDims}}, true);
  }

  const Schedule &s_;
  // By kernel index: the program it belongs to.
  std::vector<uint32_t> programOf_;
  // Output buffers by (program, name).
  std::map<std::pair<uint32_t, std::string>, uint32_t> outputBuffers_;
  // Which kernel records each event, and which OPTIMIZER_STEP steps each parameter.
  std::unordered_map<uint32_t, int> recordedBy_;
  std::unordered_map<uint32_t, int> steppedBy_;
  std::unordered_map<uint32_t, int> shardSteppedBy_;
};

} // namespace

void verifySchedule(const sl::schedule::Schedule &schedule) { Verifier(schedule).run(); }

} // namespace slrt
