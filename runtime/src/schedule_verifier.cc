#include "slrt/schedule_verifier.h"

#include <map>
#include <set>
#include <string>
#include <unordered_set>

#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/shape.h"

namespace slrt {
namespace {

using namespace sl::schedule;

struct OpSignature {
  int minOperands;
  int maxOperands;
  bool compute; // false only for COPY
};

std::optional<OpSignature> signatureOf(OpKind op) {
  switch (op) {
  case COPY:
    return OpSignature{1, 1, false};
  case MATMUL:
    return OpSignature{2, 2, true};
  case GEMM:
    return OpSignature{2, 3, true}; // C is optional
  case ADD:
  case MUL:
    return OpSignature{2, 2, true};
  case RELU:
  case SIGMOID:
  case SILU:
  case TRANSPOSE:
    return OpSignature{1, 1, true};
  default:
    return std::nullopt;
  }
}

std::string spaceName(MemorySpace space) { return space == DEVICE ? "device arena" : "host pool"; }

class Verifier {
public:
  explicit Verifier(const Schedule &schedule) : s_(schedule) {}

  void run() {
    verifyBuffers();
    verifyParametersAndBindings();
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

  void verifyParametersAndBindings() {
    // Parameters and inputs fill their buffers before the kernels run; two fillers would race.
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
    std::optional<OpSignature> sig = signatureOf(k.op());
    if (!sig)
      throw makeError(what, ": unknown op");

    if (k.operands_size() < sig->minOperands || k.operands_size() > sig->maxOperands ||
        k.results_size() != 1)
      throw makeError(what, ": has ", k.operands_size(), " operands and ", k.results_size(),
                      " results; ", opName, " takes ",
                      sig->minOperands == sig->maxOperands
                          ? std::to_string(sig->minOperands)
                          : std::to_string(sig->minOperands) + " or " +
                                std::to_string(sig->maxOperands),
                      " operands and 1 result");
    auto checkId = [&](uint32_t id, const char *role, int position) {
      if (id >= static_cast<uint32_t>(s_.buffers_size()))
        throw makeError(what, ": ", role, " ", position, " refers to buffer ", id,
                        ", but the schedule has ", s_.buffers_size(), " buffers");
    };
    for (int i = 0; i < k.operands_size(); ++i)
      checkId(k.operands(i), "operand", i);
    checkId(k.results(0), "result", 0);

    if (k.stream() >= static_cast<uint32_t>(s_.streams_size()))
      throw makeError(what, ": uses stream ", k.stream(), ", but the schedule has ",
                      s_.streams_size(), " streams");
    StreamKind streamKind = s_.streams(static_cast<int>(k.stream())).kind();
    bool streamOk = sig->compute ? streamKind == COMPUTE
                                 : streamKind == HOST_TO_DEVICE || streamKind == DEVICE_TO_HOST;
    if (!streamOk)
      throw makeError(what, ": runs on stream ", k.stream(), " of kind ",
                      StreamKind_Name(streamKind), "; ",
                      sig->compute ? "compute kernels run on a COMPUTE stream"
                                   : "copies run on a HOST_TO_DEVICE or DEVICE_TO_HOST stream");

    // GEMM needs its attributes (alpha and beta have no safe default in proto3); TRANSPOSE may omit
    // them, since a rank-0 transpose has an empty perm and proto3 then writes nothing.
    Kernel::AttributesCase attributes = k.attributes_case();
    if (k.op() == GEMM && attributes != Kernel::kGemm)
      throw makeError(what, ": has no gemm attributes");
    bool attributesOk = attributes == Kernel::ATTRIBUTES_NOT_SET ||
                        (k.op() == GEMM && attributes == Kernel::kGemm) ||
                        (k.op() == TRANSPOSE && attributes == Kernel::kTranspose);
    if (!attributesOk)
      throw makeError(what, ": has attributes, which ", opName, " does not take");

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

    const Buffer &result = s_.buffers(static_cast<int>(k.results(0)));
    if (!sig->compute) {
      const Buffer &src = s_.buffers(static_cast<int>(k.operands(0)));
      if (src.bytes() != result.bytes() || src.dtype() != result.dtype())
        throw makeError(what, ": copies ", bufferText(src.id()), " (", dtypeName(src.dtype()), ", ",
                        src.bytes(), " bytes) into ", bufferText(result.id()), " (",
                        dtypeName(result.dtype()), ", ", result.bytes(),
                        " bytes); a copy needs equal dtype and size");
      verifyNoOverlap(what, k, /*allowInPlace=*/true);
      return;
    }

    std::vector<Shape> in;
    for (uint32_t id : k.operands()) {
      verifyComputeBuffer(what, s_.buffers(static_cast<int>(id)));
      in.push_back(toShape(s_.buffers(static_cast<int>(id)).shape()));
    }
    verifyComputeBuffer(what, result);
    verifyShapes(what, k, in, toShape(result.shape()));
    bool elementwise = k.op() != MATMUL && k.op() != GEMM && k.op() != TRANSPOSE;
    verifyNoOverlap(what, k, /*allowInPlace=*/elementwise);
  }

  void verifyComputeBuffer(const std::string &what, const Buffer &b) const {
    if (b.space() != DEVICE)
      throw makeError(what, ": ", bufferText(b.id()),
                      " is in the host pool; compute kernels use only DEVICE buffers");
    if (b.dtype() != F32)
      throw makeError(what, ": ", bufferText(b.id()), " is ", dtypeName(b.dtype()),
                      "; compute kernels of schedule version 1 are f32");
  }

  void verifyShapes(const std::string &what, const Kernel &k, const std::vector<Shape> &in,
                    const Shape &out) const {
    auto mismatch = [&](const Shape &expected) {
      return makeError(what, ": result shape ", formatShape(out), " should be ",
                       formatShape(expected));
    };
    switch (k.op()) {
    case MATMUL: {
      std::optional<Shape> expected = matmulShape(in[0], in[1]);
      if (!expected)
        throw makeError(what, ": operand shapes ", formatShape(in[0]), " and ", formatShape(in[1]),
                        " are incompatible for matmul");
      if (*expected != out)
        throw mismatch(*expected);
      return;
    }
    case GEMM: {
      if (in[0].size() != 2 || in[1].size() != 2)
        throw makeError(what, ": A ", formatShape(in[0]), " and B ", formatShape(in[1]),
                        " must both be rank 2");
      const GemmAttributes &attrs = k.gemm();
      int64_t m = attrs.trans_a() ? in[0][1] : in[0][0];
      int64_t ka = attrs.trans_a() ? in[0][0] : in[0][1];
      int64_t kb = attrs.trans_b() ? in[1][1] : in[1][0];
      int64_t n = attrs.trans_b() ? in[1][0] : in[1][1];
      if (ka != kb)
        throw makeError(what, ": op(A) is [", m, ", ", ka, "] and op(B) is [", kb, ", ", n,
                        "]; their inner dimensions differ");
      Shape expected{m, n};
      if (out != expected)
        throw mismatch(expected);
      if (in.size() == 3 && !broadcastsTo(in[2], expected))
        throw makeError(what, ": C ", formatShape(in[2]), " does not broadcast to ",
                        formatShape(expected));
      return;
    }
    case ADD:
    case MUL: {
      std::optional<Shape> expected = broadcastShapes(in[0], in[1]);
      if (!expected)
        throw makeError(what, ": operand shapes ", formatShape(in[0]), " and ", formatShape(in[1]),
                        " do not broadcast");
      if (*expected != out)
        throw mismatch(*expected);
      return;
    }
    case TRANSPOSE: {
      const auto &perm = k.transpose().perm();
      if (static_cast<size_t>(perm.size()) != in[0].size())
        throw makeError(what, ": perm has ", perm.size(), " entries for an operand of rank ",
                        in[0].size());
      Shape expected;
      std::vector<bool> used(in[0].size(), false);
      for (int64_t axis : perm) {
        if (axis < 0 || static_cast<size_t>(axis) >= in[0].size() || used[axis])
          throw makeError(what, ": perm ", formatShape(Shape(perm.begin(), perm.end())),
                          " is not a permutation of the operand's ", in[0].size(), " dimensions");
        used[axis] = true;
        expected.push_back(in[0][axis]);
      }
      if (expected != out)
        throw mismatch(expected);
      return;
    }
    default: // unary
      if (in[0] != out)
        throw mismatch(in[0]);
      return;
    }
  }

  // A result that partially overlaps an operand would be read after it is overwritten. Elementwise
  // ops and copies may run exactly in place; MATMUL, GEMM and TRANSPOSE never.
  void verifyNoOverlap(const std::string &what, const Kernel &k, bool allowInPlace) const {
    const Buffer &r = s_.buffers(static_cast<int>(k.results(0)));
    for (uint32_t id : k.operands()) {
      const Buffer &o = s_.buffers(static_cast<int>(id));
      // Bounds were checked, so these sums cannot overflow.
      bool overlaps = o.space() == r.space() && o.bytes() > 0 && r.bytes() > 0 &&
                      o.offset() < r.offset() + r.bytes() && r.offset() < o.offset() + o.bytes();
      bool inPlace = o.offset() == r.offset() && o.bytes() == r.bytes();
      if (overlaps && !(allowInPlace && inPlace))
        throw makeError(what, ": result ", bufferText(r.id()), " overlaps operand ",
                        bufferText(o.id()));
    }
  }

  const Schedule &s_;
};

} // namespace

void verifySchedule(const sl::schedule::Schedule &schedule) { Verifier(schedule).run(); }

} // namespace slrt
