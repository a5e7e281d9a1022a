#include "kernel_verifier.h"

#include <cmath>

#include <algorithm>

#include "slrt/checked.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/shape.h"

namespace slrt {

using namespace sl::schedule;

std::string kernelText(int index, const Kernel &kernel) {
  const std::string &opName = OpKind_Name(kernel.op());
  return "kernel " + std::to_string(index) +
         (kernel.name().empty() ? "" : " '" + kernel.name() + "'") + " (" +
         (opName.empty() ? "op " + std::to_string(kernel.op()) : opName) + ")";
}

std::string bufferText(const Schedule &schedule, uint32_t id) {
  const std::string &name = schedule.buffers(static_cast<int>(id)).name();
  return "buffer " + std::to_string(id) + (name.empty() ? "" : " '" + name + "'");
}

namespace {

// The name of an attribute case as the proto spells it ("gemm", "axis", ...).
std::string attributesName(Kernel::AttributesCase attributes) {
  // Each case's value is its field number in Kernel.
  const google::protobuf::FieldDescriptor *field =
      Kernel::descriptor()->FindFieldByNumber(static_cast<int>(attributes));
  return field ? field->name() : "no";
}

// Allowed dtypes; empty means any dtype a buffer can have (the buffer checks refuse unknown ones).
// Every floating-point op takes bf16 and f64 as well as f32: bf16 for reduced-precision schedules
// (sl-opt precision=bf16), f64 because the CPU backend runs whole f64 schedules so that gradients
// can be checked against finite differences in double precision. They come last in these lists,
// and messages name them apart ("f32 or i64 (or bf16, f64)"): f32 is the working dtype.
const std::vector<DType> kAnyDType = {};
const std::vector<DType> kF32 = {F32};
const std::vector<DType> kFloat = {F32, BF16, F64};
const std::vector<DType> kFloatOrI64 = {F32, I64, BF16, F64};
const std::vector<DType> kCastable = {F32, BF16, F64, I64, I32, BOOL};

std::string dtypeList(const std::vector<DType> &dtypes) {
  auto has = [&](DType d) { return std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end(); };
  // The float lists end in BF16, F64: f32's alternatives, named apart.
  bool apart = dtypes.size() > 2 && dtypes.back() == F64 && dtypes[dtypes.size() - 2] == BF16 &&
               has(F32);
  size_t count = apart ? dtypes.size() - 2 : dtypes.size();
  std::string text;
  for (size_t i = 0; i < count; ++i)
    text += (i == 0 ? "" : i + 1 == count ? " or " : ", ") + dtypeName(dtypes[i]);
  return apart ? text + " (or bf16, f64)" : text;
}

bool isFloat(DType dtype) { return dtype == F32 || dtype == BF16 || dtype == F64; }

Shape dropFront(const Shape &shape, size_t count) {
  return Shape(shape.begin() + static_cast<std::ptrdiff_t>(std::min(count, shape.size())),
               shape.end());
}

class KernelChecker {
public:
  KernelChecker(const std::string &what, const Kernel &kernel,
                const std::vector<const Buffer *> &operands,
                const std::vector<const Buffer *> &results)
      : what_(what), k_(kernel), operands_(operands), results_(results),
        opName_(OpKind_Name(kernel.op())), out_(toShape(results[0]->shape())) {
    for (const Buffer *b : operands)
      in_.push_back(toShape(b->shape()));
    for (const Buffer *b : results)
      outs_.push_back(toShape(b->shape()));
  }

  void run() {
    verifyDTypes();
    verifyShapes();
  }

private:
  template <typename... Parts> Error error(const Parts &...parts) const {
    return makeError(what_, ": ", parts...);
  }

  static std::string bufferText(const Buffer &b) {
    return "buffer " + std::to_string(b.id()) + (b.name().empty() ? "" : " '" + b.name() + "'");
  }
  // "operand 1 (buffer 5 'b')"; -1 - i is result i ("result (buffer 6 'y')" where there is one).
  std::string role(int operand) const {
    if (operand < 0)
      return (results_.size() == 1 ? std::string("result")
                                   : "result " + std::to_string(-1 - operand)) +
             " (" + bufferText(buffer(operand)) + ")";
    return "operand " + std::to_string(operand) + " (" + bufferText(*operands_[operand]) + ")";
  }
  const Buffer &buffer(int operand) const {
    return operand < 0 ? *results_[static_cast<size_t>(-1 - operand)] : *operands_[operand];
  }
  int numOperands() const { return static_cast<int>(operands_.size()); }

  // --- dtypes -------------------------------------------------------------------------------

  // The buffers `roles` (operand indices, -1 for the result) share one dtype, in `allowed` (empty:
  // any); `who` names them in the message ("its operands and result").
  void sameDType(const std::vector<int> &roles, const std::vector<DType> &allowed,
                 const char *who) const {
    DType first = buffer(roles[0]).dtype();
    for (int r : roles) {
      DType dtype = buffer(r).dtype();
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), dtype) == allowed.end())
        throw error(role(r), " is ", dtypeName(dtype), "; ", opName_, " takes ",
                    dtypeList(allowed));
      // Float dtypes mixed in one float kernel: say which precision the kernel runs in.
      if (dtype != first && isFloat(dtype) && isFloat(first))
        throw error(role(r), " is ", dtypeName(dtype), "; ", opName_, " takes ", dtypeName(first),
                    " here, like ", role(roles[0]), " (one dtype for ", who, ")");
      if (dtype != first)
        throw error(role(r), " is ", dtypeName(dtype), " but ", role(roles[0]), " is ",
                    dtypeName(first), "; ", opName_, " needs one dtype for ", who);
    }
  }

  // Buffer `r` has a dtype in `allowed`; `as` qualifies the message (" indices").
  void dtypeIn(int r, const std::vector<DType> &allowed, const char *as = "") const {
    DType dtype = buffer(r).dtype();
    if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end())
      throw error(role(r), " is ", dtypeName(dtype), "; ", opName_, " takes ", dtypeList(allowed),
                  as);
  }

  std::vector<int> allRoles() const {
    std::vector<int> roles;
    for (int i = 0; i < numOperands(); ++i)
      roles.push_back(i);
    for (size_t i = 0; i < results_.size(); ++i)
      roles.push_back(-1 - static_cast<int>(i));
    return roles;
  }

  void verifyDTypes() const {
    const char *all = "its operands and result";
    switch (k_.op()) {
    case ADD:
    case SUB:
    case MUL:
    case DIV:
    case NEG:
    case CUMSUM:
      return sameDType(allRoles(), kFloatOrI64, all);
    case EQUAL:
    case LESS:
      sameDType({0, 1}, kFloatOrI64, "both operands");
      return dtypeIn(-1, {BOOL}, " results");
    case WHERE:
      dtypeIn(0, {BOOL}, " conditions");
      return sameDType({1, 2, -1}, kAnyDType, "x, y and the result");
    case CAST:
      dtypeIn(0, kCastable);
      return dtypeIn(-1, kCastable);
    case GATHER:
      dtypeIn(1, {I64, I32}, " indices");
      return sameDType({0, -1}, kAnyDType, "data and the result");
    case CROSS_ENTROPY:
      dtypeIn(0, kFloat, " logits");
      dtypeIn(1, {I64}, " labels");
      dtypeIn(-1, kFloat, " results");
      return sameDType({0, -1}, kFloat, "the logits and the result");
    case CONCAT:
    case SLICE:
    case EXPAND:
    case TRILU:
      return sameDType(allRoles(), kAnyDType, all);
    case CROSS_ENTROPY_GRAD:
      dtypeIn(0, {I64}, " labels");
      // The logits set the precision; dloss and dlogits follow them.
      return sameDType({2, 1, -1}, kFloat, "dloss, logits and the result");
    case GATHER_GRAD:
      dtypeIn(0, {I64, I32}, " indices");
      return sameDType({1, -1}, kFloat, "dy and the result");
    case OPTIMIZER_STEP:
      // The host AdamW keeps fp32 master weights: its loss and gradients are f32 only.
      return sameDType(allRoles(), kF32, all);
    case KV_WRITE:
      if (numOperands() > 3)
        dtypeIn(3, {I64}, " starts");
      return sameDType({0, 1, 2, -1}, kFloat, "the cache, k, v and the result");
    case DECODE_ATTENTION:
      dtypeIn(4, {I64}, " lengths");
      if (numOperands() > 5)
        return sameDType({0, 1, 2, 3, 5, -1}, kFloat,
                         "q, k, v, the cache, the slopes and the result");
      return sameDType({0, 1, 2, 3, -1}, kFloat, "q, k, v, the cache and the result");
    case TAKE_ROWS:
      dtypeIn(1, {I64}, " indices");
      return sameDType({0, -1}, kAnyDType, "x and the result");
    case ALL_GATHER:
    case REDUCE_SCATTER:
      // They move the f32 weights and gradients of the sharded groups.
      return sameDType(allRoles(), kF32, all);
    default:
      // The float ops (MATMUL, GEMM, TRANSPOSE, the unary ops, POW, SWIGLU, ACCUMULATE, the
      // reductions, norms, softmax, rotary, attention and their gradients) compute f32, bf16 or
      // f64.
      return sameDType(allRoles(), kFloat, all);
    }
  }

  // --- shapes -------------------------------------------------------------------------------

  void expectResult(const Shape &expected) const {
    if (out_ != expected)
      throw error("result shape ", formatShape(out_), " should be ", formatShape(expected));
  }

  // Result i of a backward kernel, called `name` ("dscale"), has shape `expected`.
  void expectResult(size_t i, const char *name, const Shape &expected) const {
    if (outs_[i] != expected)
      throw error("result ", i, " (", name, ") shape ", formatShape(outs_[i]), " should be ",
                  formatShape(expected));
  }

  // Operand `i`, called `name`, has shape `expected` (dy of the forward result's shape).
  void expectOperand(size_t i, const char *name, const Shape &expected, const char *because) const {
    if (in_[i] != expected)
      throw error(name, " ", formatShape(in_[i]), " should be ", formatShape(expected), because);
  }

  void verifyShapes() const {
    switch (k_.op()) {
    case ALL_GATHER:
    case REDUCE_SCATTER:
      return; // against Schedule.world, in the schedule verifier
    case MATMUL:
      return verifyMatmul();
    case GEMM:
      return verifyGemm();
    case TRANSPOSE:
      return verifyTranspose();
    case ADD:
    case MUL:
    case SUB:
    case DIV:
    case POW:
    case EQUAL:
    case LESS:
    case WHERE:
      return verifyBroadcast();
    case SWIGLU:
      if (in_[0] != in_[1])
        throw error("gate ", formatShape(in_[0]), " and up ", formatShape(in_[1]),
                    " must have one shape");
      return expectResult(in_[0]);
    case SOFTMAX:
      axisBelowRank(k_.axis().axis(), in_[0], "axis.axis");
      return expectResult(in_[0]);
    case CUMSUM:
      axisBelowRank(k_.cumsum().axis(), in_[0], "cumsum.axis");
      return expectResult(in_[0]);
    case TRILU:
      if (in_[0].size() < 2)
        throw error("operand shape ", formatShape(in_[0]),
                    " has rank < 2; TRILU works on the last two dimensions");
      return expectResult(in_[0]);
    case REDUCE_MEAN:
    case REDUCE_SUM:
      return verifyReduce();
    case GATHER:
      return verifyGather();
    case CONCAT:
      return verifyConcat();
    case SLICE:
      return verifySlice();
    case EXPAND:
      if (!broadcastsTo(in_[0], out_))
        throw error("operand shape ", formatShape(in_[0]),
                    " does not broadcast to the result shape ", formatShape(out_));
      return;
    case LAYER_NORM:
      return verifyLayerNorm();
    case RMS_NORM:
      return verifyRmsNorm();
    case ROTARY:
      return verifyRotary();
    case ATTENTION:
      return verifyAttention();
    case CROSS_ENTROPY:
      verifyLabels(in_[0], in_[1]);
      return expectResult({});
    case CROSS_ENTROPY_GRAD:
      verifyLabels(in_[2], in_[0]);
      if (!in_[1].empty())
        throw error("dloss ", formatShape(in_[1]), " should be a scalar []");
      return expectResult(in_[2]);
    case SOFTMAX_GRAD:
      axisBelowRank(k_.axis().axis(), in_[0], "axis.axis");
      expectOperand(1, "dy", in_[0], " (the shape of y)");
      return expectResult(in_[0]);
    case RMS_NORM_GRAD:
      return verifyRmsNormGrad();
    case LAYER_NORM_GRAD:
      return verifyLayerNormGrad();
    case ROTARY_GRAD:
      verifyRotaryTables("dy");
      return expectResult(in_[0]);
    case ATTENTION_GRAD:
      return verifyAttentionGrad();
    case GELU_GRAD:
      expectOperand(1, "dy", in_[0], " (the shape of x)");
      return expectResult(in_[0]);
    case SWIGLU_GRAD:
      if (in_[0] != in_[1] || in_[0] != in_[2])
        throw error("gate ", formatShape(in_[0]), ", up ", formatShape(in_[1]), " and dy ",
                    formatShape(in_[2]), " must have one shape");
      expectResult(0, "dgate", in_[0]);
      return expectResult(1, "dup", in_[0]);
    case GATHER_GRAD:
      return verifyGatherGrad();
    case SLICE_GRAD:
      return verifySliceShapes(out_, in_[0], "dx", "dy");
    case KV_WRITE:
      return verifyKvWrite();
    case DECODE_ATTENTION:
      return verifyDecodeAttention();
    case TAKE_ROWS:
      if (in_[0].size() != 3 || in_[1] != Shape{in_[0][0]})
        throw error("x ", formatShape(in_[0]), " and index ", formatShape(in_[1]),
                    " should be [B, S, H] and [B]");
      return expectResult({in_[0][0], 1, in_[0][2]});
    case ACCUMULATE:
      if (in_[0] != in_[1])
        throw error("operand shapes ", formatShape(in_[0]), " and ", formatShape(in_[1]),
                    " differ; ACCUMULATE adds tensors of one shape (no broadcasting)");
      return expectResult(in_[0]);
    default: // elementwise unary, CAST
      return expectResult(in_[0]);
    }
  }

  // CROSS_ENTROPY and its gradient: labels are the logits without the vocabulary dimension.
  void verifyLabels(const Shape &logits, const Shape &labels) const {
    if (logits.empty() || Shape(logits.begin(), logits.end() - 1) != labels)
      throw error("labels ", formatShape(labels), " must be the logits' shape ",
                  formatShape(logits), " without its last (vocabulary) dimension");
  }

  void axisBelowRank(int64_t axis, const Shape &shape, const char *name) const {
    if (axis < 0 || static_cast<uint64_t>(axis) >= shape.size())
      throw error(name, " ", axis, " is out of range for operand shape ", formatShape(shape),
                  " (rank ", shape.size(), ")");
  }

  void verifyMatmul() const {
    bool transA = k_.matmul().trans_a(), transB = k_.matmul().trans_b();
    if ((transA || transB) && (in_[0].size() < 2 || in_[1].size() < 2))
      throw error("operand shapes ", formatShape(in_[0]), " and ", formatShape(in_[1]),
                  " must both have rank >= 2 with a transpose flag");
    std::optional<Shape> expected = matmulShape(in_[0], in_[1], transA, transB);
    if (!expected)
      throw error("operand shapes ", formatShape(in_[0]), transA ? " (transposed)" : "", " and ",
                  formatShape(in_[1]), transB ? " (transposed)" : "",
                  " are incompatible for matmul");
    expectResult(*expected);
  }

  void verifyGemm() const {
    if (in_[0].size() != 2 || in_[1].size() != 2)
      throw error("A ", formatShape(in_[0]), " and B ", formatShape(in_[1]),
                  " must both be rank 2");
    const GemmAttributes &attrs = k_.gemm();
    int64_t m = attrs.trans_a() ? in_[0][1] : in_[0][0];
    int64_t ka = attrs.trans_a() ? in_[0][0] : in_[0][1];
    int64_t kb = attrs.trans_b() ? in_[1][1] : in_[1][0];
    int64_t n = attrs.trans_b() ? in_[1][0] : in_[1][1];
    if (ka != kb)
      throw error("op(A) is [", m, ", ", ka, "] and op(B) is [", kb, ", ", n,
                  "]; their inner dimensions differ");
    Shape expected{m, n};
    expectResult(expected);
    if (in_.size() == 3 && !broadcastsTo(in_[2], expected))
      throw error("C ", formatShape(in_[2]), " does not broadcast to ", formatShape(expected));
  }

  void verifyTranspose() const {
    const auto &perm = k_.transpose().perm();
    if (static_cast<size_t>(perm.size()) != in_[0].size())
      throw error("perm has ", perm.size(), " entries for an operand of rank ", in_[0].size());
    Shape expected;
    std::vector<bool> used(in_[0].size(), false);
    for (int64_t axis : perm) {
      if (axis < 0 || static_cast<size_t>(axis) >= in_[0].size() || used[axis])
        throw error("perm ", formatShape(Shape(perm.begin(), perm.end())),
                    " is not a permutation of the operand's ", in_[0].size(), " dimensions");
      used[axis] = true;
      expected.push_back(in_[0][axis]);
    }
    expectResult(expected);
  }

  void verifyBroadcast() const {
    std::optional<Shape> expected = in_[0];
    for (size_t i = 1; i < in_.size() && expected; ++i)
      expected = broadcastShapes(*expected, in_[i]);
    if (!expected) {
      std::string shapes;
      for (size_t i = 0; i < in_.size(); ++i)
        shapes += (i == 0 ? "" : i + 1 == in_.size() ? " and " : ", ") + formatShape(in_[i]);
      throw error("operand shapes ", shapes, " do not broadcast");
    }
    expectResult(*expected);
  }

  void verifyReduce() const {
    const ReduceAttributes &attrs = k_.reduce();
    const Shape &x = in_[0];
    std::vector<bool> reduced(x.size(), attrs.axes().empty());
    int64_t previous = -1;
    for (int64_t axis : attrs.axes()) {
      if (axis < 0 || static_cast<uint64_t>(axis) >= x.size() || axis <= previous)
        throw error("reduce.axes ", formatShape(Shape(attrs.axes().begin(), attrs.axes().end())),
                    " must be sorted, unique and within the operand's rank ", x.size(),
                    " (operand shape ", formatShape(x), ")");
      reduced[static_cast<size_t>(axis)] = true;
      previous = axis;
    }
    Shape expected;
    for (size_t d = 0; d < x.size(); ++d) {
      if (!reduced[d])
        expected.push_back(x[d]);
      else if (attrs.keepdims())
        expected.push_back(1);
    }
    expectResult(expected);
  }

  void verifyGather() const {
    const Shape &data = in_[0];
    int64_t axis = k_.axis().axis();
    axisBelowRank(axis, data, "axis.axis");
    Shape expected(data.begin(), data.begin() + axis);
    expected.insert(expected.end(), in_[1].begin(), in_[1].end());
    expected.insert(expected.end(), data.begin() + axis + 1, data.end());
    expectResult(expected);
  }

  void verifyConcat() const {
    int64_t axis = k_.axis().axis();
    axisBelowRank(axis, in_[0], "axis.axis");
    Shape expected = in_[0];
    for (size_t i = 1; i < in_.size(); ++i) {
      bool same = in_[i].size() == in_[0].size();
      for (size_t d = 0; same && d < in_[0].size(); ++d)
        same = static_cast<int64_t>(d) == axis || in_[i][d] == in_[0][d];
      if (!same)
        throw error("operand ", i, " shape ", formatShape(in_[i]),
                    " does not match operand 0 shape ", formatShape(in_[0]), " outside axis ",
                    axis);
      std::optional<int64_t> extent = checkedAdd(expected[axis], in_[i][axis]);
      if (!extent)
        throw error("the concatenated extent along axis ", axis, " overflows");
      expected[axis] = *extent;
    }
    expectResult(expected);
  }

  void verifySlice() const { verifySliceShapes(in_[0], out_, "the operand", "result shape"); }

  // The slice's shape y gives the count along each dimension; every index of x it covers,
  // starts[d] + i * steps[d] for i < y[d], must lie in [0, x[d]). `xName` and `yName` say what
  // x and y are to the op: the operand and the result shape of SLICE, dx and dy of SLICE_GRAD.
  void verifySliceShapes(const Shape &x, const Shape &y, const char *xName,
                         const char *yName) const {
    const SliceAttributes &attrs = k_.slice();
    auto list = [](const auto &field) { return formatShape(Shape(field.begin(), field.end())); };
    if (static_cast<size_t>(attrs.starts_size()) != x.size() ||
        static_cast<size_t>(attrs.steps_size()) != x.size())
      throw error("slice.starts ", list(attrs.starts()), " and slice.steps ", list(attrs.steps()),
                  " must each have one entry per dimension of ", xName, " ", formatShape(x));
    if (y.size() != x.size())
      throw error(yName, " ", formatShape(y), " has rank ", y.size(), ", but ", xName, " ",
                  formatShape(x), " has rank ", x.size());
    for (size_t d = 0; d < x.size(); ++d) {
      int64_t start = attrs.starts(static_cast<int>(d)), step = attrs.steps(static_cast<int>(d));
      if (step == 0)
        throw error("slice.steps ", list(attrs.steps()), " has a zero step in dimension ", d);
      // A non-empty slice starts on an element. Where the slice's extent is 0 nothing is read, and
      // the start may be anywhere ONNX clamps one to: -1 (negative steps) to one past the end.
      bool inRange = y[d] > 0 ? start >= 0 && start < x[d] : start >= -1 && start <= x[d];
      if (!inRange)
        throw error("slice.starts[", d, "] = ", start, " is out of range for dimension ", d, " of ",
                    xName, " ", formatShape(x));
      std::optional<int64_t> offset = checkedMul(y[d] - 1, step);
      std::optional<int64_t> last = offset ? checkedAdd(start, *offset) : std::nullopt;
      if (y[d] > 0 && (!last || *last < 0 || *last >= x[d]))
        throw error(yName, " ", formatShape(y), " reads past ", xName, " ", formatShape(x),
                    " in dimension ", d, ": ", y[d], " elements from ", start, " in steps of ",
                    step);
    }
  }

  // The normalised dimensions of x (operand 0), from norm.axis on; scale (operand 1) and, for
  // LAYER_NORM, bias (operand 2) broadcast to them. LAYER_NORM_GRAD's operand 2 is dy, checked by
  // the caller.
  Shape verifyLayerNormOperands(size_t parameters) const {
    const Shape &x = in_[0];
    int64_t axis = k_.norm().axis();
    axisBelowRank(axis, x, "norm.axis");
    Shape normalized = dropFront(x, static_cast<size_t>(axis));
    const char *names[] = {"x", "scale", "bias"};
    for (size_t i = 1; i <= parameters; ++i)
      if (!broadcastsTo(in_[i], normalized))
        throw error(names[i], " ", formatShape(in_[i]),
                    " does not broadcast to the normalised dimensions ", formatShape(normalized),
                    " of x ", formatShape(x));
    return normalized;
  }

  void verifyLayerNorm() const {
    verifyLayerNormOperands(in_.size() - 1);
    expectResult(in_[0]);
  }

  // LAYER_NORM_GRAD (x, scale, dy) -> (dx, dscale, dbias): the parameter gradients have the
  // normalised dimensions' shape whatever shape scale broadcasts from, and dbias is produced
  // whether or not the forward had a bias.
  void verifyLayerNormGrad() const {
    Shape normalized = verifyLayerNormOperands(1);
    expectOperand(2, "dy", in_[0], " (the shape of x)");
    expectResult(0, "dx", in_[0]);
    expectResult(1, "dscale", normalized);
    expectResult(2, "dbias", normalized);
  }

  void verifyRmsNormOperands() const {
    const Shape &x = in_[0];
    if (x.empty())
      throw error("x is a scalar; ", opName_, " normalises the last dimension");
    int64_t axis = k_.norm().axis();
    int64_t last = static_cast<int64_t>(x.size()) - 1;
    if (axis != 0 && axis != last)
      throw error("norm.axis ", axis, " for x ", formatShape(x), ": ", opName_,
                  " normalises only the last dimension (axis ", last, ", or 0 unset)");
    if (in_[1] != Shape{x.back()})
      throw error("scale ", formatShape(in_[1]), " should be ", formatShape({x.back()}), " for x ",
                  formatShape(x));
  }

  void verifyRmsNorm() const {
    verifyRmsNormOperands();
    expectResult(in_[0]);
  }

  // RMS_NORM_GRAD (x, scale, dy) -> (dx, dscale [D]).
  void verifyRmsNormGrad() const {
    verifyRmsNormOperands();
    expectOperand(2, "dy", in_[0], " (the shape of x)");
    expectResult(0, "dx", in_[0]);
    expectResult(1, "dscale", in_[1]);
  }

  // Operand 0 (x of ROTARY, dy of ROTARY_GRAD, called `name`) is [..., S, D] with D even, and
  // cos and sin (operands 1, 2) broadcast to it.
  void verifyRotaryTables(const char *name) const {
    const Shape &x = in_[0];
    if (x.size() < 2)
      throw error(name, " ", formatShape(x), " should be [..., S, D] (rank >= 2)");
    if (x.back() % 2 != 0)
      throw error(name, " ", formatShape(x), " has an odd last dimension ", x.back(),
                  "; rotary pairs need an even one");
    const char *names[] = {"x", "cos", "sin"};
    for (size_t i = 1; i < 3; ++i)
      if (!broadcastsTo(in_[i], x))
        throw error(names[i], " ", formatShape(in_[i]), " does not broadcast to ", name, " ",
                    formatShape(x));
  }

  void verifyRotary() const {
    verifyRotaryTables("x");
    expectResult(in_[0]);
  }

  // The ALiBi slopes: the last of the operands from `at` on with attention.alibi, which must be
  // there then; without it there is at most `optional` operands from `at` on.
  void verifyAlibiSlopes(size_t at, size_t optional, int64_t heads) const {
    size_t extra = in_.size() - std::min(in_.size(), at);
    if (!k_.attention().alibi()) {
      if (extra > optional)
        throw error(in_.size(), " operands; without attention.alibi ", opName_, " takes at most ",
                    at + optional, " (with it, the ALiBi slopes come last)");
      return;
    }
    if (extra == 0)
      throw error("attention.alibi is set but there is no slopes operand (the last, after operand ",
                  at - 1, ")");
    if (in_.back() != Shape{heads})
      throw error("alibi slopes ", formatShape(in_.back()), " should be [", heads,
                  "] (one per query head)");
  }

  // q, k, v (operands 0..2), the scale, the layout, the optional mask (operand maskAt) and the
  // slopes; returns the forward's result shape, [B, Hq, S, Dv] (or [B, S, Hq, Dv] with BSHD).
  Shape verifyAttentionOperands(size_t maskAt) const {
    // A forgotten scale (proto default 0) would silently make attention uniform.
    if (k_.attention().scale() == 0.0f || !std::isfinite(k_.attention().scale()))
      throw error("attention.scale is ", k_.attention().scale(),
                  "; it must be finite and non-zero");
    const bool bshd = k_.attention().layout() == sl::schedule::AttentionAttributes::BSHD;
    if (!bshd && k_.attention().layout() != sl::schedule::AttentionAttributes::BHSD)
      throw error("attention.layout ", int(k_.attention().layout()), " is not BHSD or BSHD");
    // Every check below reads the shapes as [B, H, S, D], whichever layout stores them.
    auto logical = [bshd](Shape shape) {
      if (bshd && shape.size() == 4)
        std::swap(shape[1], shape[2]);
      return shape;
    };
    const Shape q = logical(in_[0]), k = logical(in_[1]), v = logical(in_[2]);
    if (q.size() != 4 || k.size() != 4 || v.size() != 4)
      throw error("q ", formatShape(in_[0]), ", k ", formatShape(in_[1]), " and v ",
                  formatShape(in_[2]),
                  bshd ? " must be rank 4 ([B, S, Hq, D], [B, T, Hkv, D], [B, T, Hkv, Dv])"
                       : " must be rank 4 ([B, Hq, S, D], [B, Hkv, T, D], [B, Hkv, T, Dv])");
    int64_t b = q[0], hq = q[1], s = q[2], d = q[3];
    int64_t hkv = k[1], t = k[2], dv = v[3];
    if (k[0] != b || v[0] != b || v[1] != hkv || v[2] != t || k[3] != d)
      throw error("q ", formatShape(in_[0]), ", k ", formatShape(in_[1]), " and v ",
                  formatShape(in_[2]),
                  bshd ? " do not fit [B, S, Hq, D], [B, T, Hkv, D], [B, T, Hkv, Dv]"
                       : " do not fit [B, Hq, S, D], [B, Hkv, T, D], [B, Hkv, T, Dv]");
    if (hkv <= 0 || hq % hkv != 0)
      throw error("q has ", hq, " heads and k, v have ", hkv,
                  "; the query heads must be a multiple of a positive number of key/value heads");
    Shape scores{b, hq, s, t};
    verifyAlibiSlopes(maskAt, 1, hq);
    bool hasMask = in_.size() > maskAt + (k_.attention().alibi() ? 1 : 0);
    if (hasMask && !broadcastsTo(in_[maskAt], scores))
      throw error("mask ", formatShape(in_[maskAt]), " does not broadcast to the scores ",
                  formatShape(scores));
    return logical({b, hq, s, dv});
  }

  void verifyAttention() const { expectResult(verifyAttentionOperands(3)); }

  // ATTENTION_GRAD (q, k, v, dy [, mask] [, slopes]) -> (dq, dk, dv), each of its input's shape: for
  // grouped-query attention dk and dv are [B, Hkv, T, ...], summed over the sharing query heads.
  void verifyAttentionGrad() const {
    Shape y = verifyAttentionOperands(4);
    expectOperand(3, "dy", y,
                  k_.attention().layout() == sl::schedule::AttentionAttributes::BSHD
                      ? " (the attention result's shape [B, S, Hq, Dv])"
                      : " (the attention result's shape [B, Hq, S, Dv])");
    expectResult(0, "dq", in_[0]);
    expectResult(1, "dk", in_[1]);
    expectResult(2, "dv", in_[2]);
  }

  // The KV cache operand `at`: [B, 2, Hkv, C, D], keys at [:, 0] and values at [:, 1].
  void verifyCache(size_t at) const {
    const Shape &cache = in_[at];
    if (cache.size() != 5 || cache[1] != 2)
      throw error("cache ", formatShape(cache),
                  " should be [B, 2, Hkv, C, D] (keys at [:, 0], values at [:, 1])");
  }

  // KV_WRITE (cache [B, 2, Hkv, C, D], k [B, Hkv, T, D], v [B, Hkv, T, D] [, start [B]]) -> the
  // cache itself, with T <= C (where the T rows go is checked at run time). With kv_write.layout
  // BSHD, k and v are [B, T, Hkv, D].
  void verifyKvWrite() const {
    if (results_[0]->id() != operands_[0]->id())
      throw error(role(-1), " must be the very buffer of ", role(0),
                  ", the cache it writes in place");
    verifyCache(0);
    bool bshd = k_.kv_write().layout() == sl::schedule::AttentionAttributes::BSHD;
    if (k_.kv_write().layout() != sl::schedule::AttentionAttributes::BHSD && !bshd)
      throw error("kv_write.layout ", int(k_.kv_write().layout()), " is neither BHSD nor BSHD");
    const Shape &cache = in_[0], &k = in_[1];
    int heads = bshd ? 2 : 1, positions = bshd ? 1 : 2;
    if (k.size() != 4 || k[0] != cache[0] || k[heads] != cache[2] || k[3] != cache[4])
      throw error("k ", formatShape(k), " does not fit the cache ", formatShape(cache),
                  ": it should be ", bshd ? "[B, T, Hkv, D]" : "[B, Hkv, T, D]", " with B = ",
                  cache[0], ", Hkv = ", cache[2], " and D = ", cache[4]);
    expectOperand(2, "v", k, " (the shape of k)");
    if (k[positions] > cache[3])
      throw error("k ", formatShape(k), " has ", k[positions], " positions, more than the cache ",
                  formatShape(cache), " holds (", cache[3], ")");
    if (in_.size() > 3)
      expectOperand(3, "start", {cache[0]}, " (one position per sequence)");
  }

  // DECODE_ATTENTION (q [B, Hq, 1, D], k [B, Hkv, 1, D], v [B, Hkv, 1, D], cache
  // [B, 2, Hkv, C, D], length [B] [, slopes [Hq] with attention.alibi]) -> [B, Hq, 1, D].
  void verifyDecodeAttention() const {
    if (k_.attention().scale() == 0.0f || !std::isfinite(k_.attention().scale()))
      throw error("attention.scale is ", k_.attention().scale(),
                  "; it must be finite and non-zero");
    if (k_.attention().layout() != sl::schedule::AttentionAttributes::BHSD)
      throw error("attention.layout must be BHSD (DECODE_ATTENTION has no other layout)");
    verifyCache(3);
    const Shape &q = in_[0], &k = in_[1], &cache = in_[3];
    if (q.size() != 4 || q[0] != cache[0] || q[2] != 1 || q[3] != cache[4])
      throw error("q ", formatShape(q), " does not fit the cache ", formatShape(cache),
                  ": it should be [B, Hq, 1, D] with B = ", cache[0], " and D = ", cache[4]);
    Shape kv{cache[0], cache[2], 1, cache[4]};
    expectOperand(1, "k", kv, " ([B, Hkv, 1, D], as the cache)");
    expectOperand(2, "v", kv, " ([B, Hkv, 1, D], as the cache)");
    if (k[1] <= 0 || q[1] % k[1] != 0)
      throw error("q has ", q[1], " heads and the cache ", k[1],
                  "; the query heads must be a multiple of a positive number of key/value heads");
    expectOperand(4, "length", {cache[0]}, " (one length per sequence)");
    verifyAlibiSlopes(5, 0, q[1]);
    expectResult(q);
  }

  // GATHER_GRAD (indices, dy) -> ddata: the result is GATHER's data, so dy must be what GATHER
  // along axis.axis would make of it.
  void verifyGatherGrad() const {
    const Shape &data = out_;
    int64_t axis = k_.axis().axis();
    if (axis < 0 || static_cast<uint64_t>(axis) >= data.size())
      throw error("axis.axis ", axis, " is out of range for the result shape ", formatShape(data),
                  " (rank ", data.size(), ")");
    Shape expected(data.begin(), data.begin() + axis);
    expected.insert(expected.end(), in_[0].begin(), in_[0].end());
    expected.insert(expected.end(), data.begin() + axis + 1, data.end());
    if (in_[1] != expected)
      throw error("dy ", formatShape(in_[1]), " should be ", formatShape(expected),
                  ", the GATHER of the result ", formatShape(data), " along axis ", axis,
                  " by indices ", formatShape(in_[0]));
  }

  const std::string &what_;
  const Kernel &k_;
  const std::vector<const Buffer *> &operands_;
  const std::vector<const Buffer *> &results_;
  std::string opName_;
  std::vector<Shape> in_;
  Shape out_; // result 0
  std::vector<Shape> outs_;
};

} // namespace

void verifyKernelAttributes(const std::string &what, const Kernel &kernel) {
  OpRule rule = *opRule(kernel.op());
  const std::string &opName = OpKind_Name(kernel.op());
  Kernel::AttributesCase actual = kernel.attributes_case();
  if (actual == rule.attributes)
    return;
  if (actual == Kernel::ATTRIBUTES_NOT_SET) {
    if (!rule.attributesRequired)
      return;
    throw makeError(what, ": has no ", attributesName(rule.attributes), " attributes");
  }
  if (rule.attributes == Kernel::ATTRIBUTES_NOT_SET)
    throw makeError(what, ": has ", attributesName(actual), " attributes, which ", opName,
                    " does not take");
  throw makeError(what, ": has ", attributesName(actual), " attributes; ", opName, " takes ",
                  attributesName(rule.attributes), " attributes");
}

void verifyKernelOperation(const std::string &what, const Kernel &kernel,
                           const std::vector<const Buffer *> &operands,
                           const std::vector<const Buffer *> &results) {
  KernelChecker(what, kernel, operands, results).run();
}

} // namespace slrt
