//===- ScheduleEmitter.cpp - write an sl module as a SpeedLoader schedule ----------------------===//
//
// Translates an explicit step (sl-schedule-subbatches, sl-explicit-forward or
// sl-schedule-generation, lowered by sl-assign-streams, sl-allocate and sl-insert-events) into the
// schedule sl-run reads: every buffer's space and offset, every kernel's stream and events are in
// the IR already. Ops become kernels through the kernel table (ir/schedule/kernel_table.def) and
// lowerKernel, which fills the attributes of the ops that take some.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Target/ScheduleEmitter.h"

#include "sl/Analysis/StepMemory.h"
#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/KernelOps.h"
#include "sl/Dialect/MemorySpaces.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

#include "schedule/schedule.pb.h"
#include "slrt/atomic_file.h"

using namespace mlir;
namespace pb = sl::schedule;

namespace sl {
namespace {

constexpr uint32_t kMagic = 0x43534c53; // 'SLSC'
constexpr uint32_t kVersion = 7;


FailureOr<pb::DType> dtypeOf(Location loc, Type type) {
  if (type.isF32())
    return pb::F32;
  if (type.isF16())
    return pb::F16;
  if (type.isBF16())
    return pb::BF16;
  if (type.isF64())
    return pb::F64;
  if (type.isInteger(64))
    return pb::I64;
  if (type.isInteger(32))
    return pb::I32;
  if (type.isInteger(1))
    return pb::BOOL;
  return emitError(loc) << "element type " << type << " cannot be scheduled";
}

// Refuses a buffer whose byte size does not fit in int64 (shapes bound past any memory, by a huge
// batch= say): every size and offset the schedule holds is then free of wrap-around, and sl-run
// never sees a schedule that its verifier would refuse as too large.
LogicalResult checkSize(Location loc, RankedTensorType type, llvm::StringRef name) {
  int64_t bytes = std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  for (int64_t dim : type.getShape())
    if (__builtin_mul_overflow(bytes, dim, &bytes))
      return emitError(loc) << "'" << name << "' of type " << type
                            << " is too large to schedule (2^63 bytes or more)";
  return success();
}

std::string locationName(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().str();
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

/// A constant's elements as the runtime stores them: little-endian, one byte per bool; a splat as
/// one element.
FailureOr<std::string> constantBytes(ConstantOp op) {
  auto dense = llvm::dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return op.emitError("only dense constants can be scheduled");
  std::string data;
  auto append = [&](uint64_t bits, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i)
      data.push_back(char((bits >> (8 * i)) & 0xff));
  };
  Type element = dense.getElementType();
  unsigned bytes = std::max(1u, element.getIntOrFloatBitWidth() / 8);
  int64_t count = dense.isSplat() ? 1 : dense.getNumElements();
  if (llvm::isa<FloatType>(element)) {
    auto values = dense.getValues<APFloat>();
    for (int64_t i = 0; i < count; ++i)
      append(values[i].bitcastToAPInt().getZExtValue(), bytes);
  } else {
    auto values = dense.getValues<APInt>();
    for (int64_t i = 0; i < count; ++i)
      append(values[i].getZExtValue(), bytes);
  }
  return data;
}

/// How a schedule at `schedulePath` names a model file: relative to the schedule's directory when
/// the file is in it or below it (so the pair can be moved together, and sl-run, which reads
/// parameter files only inside the schedule's directory, takes it), else by its absolute path
/// (which sl-run reads only with --allow-external-paths).
std::string parameterFile(llvm::StringRef schedulePath, llvm::StringRef file) {
  llvm::SmallString<256> scheduleDir(llvm::sys::path::parent_path(schedulePath));
  llvm::sys::fs::make_absolute(scheduleDir);
  llvm::sys::path::remove_dots(scheduleDir, /*remove_dot_dot=*/true);
  llvm::SmallString<256> absolute(file);
  llvm::sys::fs::make_absolute(absolute);
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/true);
  llvm::StringRef rest = absolute.str();
  if (rest.consume_front(scheduleDir) && rest.consume_front("/") && !rest.empty())
    return rest.str();
  return absolute.str().str();
}

// Where a parameter's bytes are and what they are: name, file, offset, dtype, shape, and the byte
// count in the file, which for a parameter stored_as f32 (a bf16 parameter of an f32 model) is the
// f32 size, with file_dtype telling the runtime to convert.
LogicalResult describeParameter(pb::Parameter *p, ParamOp param, llvm::StringRef schedulePath) {
  if (!param.getFile())
    return param.emitError("parameter '")
           << param.getName()
           << "' has no byte location in a model file (inline data from ONNX text or "
              "MLIR); compile from a binary .onnx model";
  auto type = llvm::cast<RankedTensorType>(param.getType());
  FailureOr<pb::DType> dtype = dtypeOf(param.getLoc(), type.getElementType());
  if (failed(dtype))
    return failure();
  p->set_name(param.getName().str());
  p->set_file(parameterFile(schedulePath, *param.getFile()));
  p->set_file_offset(uint64_t(*param.getOffset()));
  p->set_dtype(*dtype);
  p->set_bytes(storageBytes(type));
  for (int64_t dim : type.getShape())
    p->add_shape(dim);
  if (std::optional<Type> stored = param.getStoredAs();
      stored && *stored != type.getElementType()) {
    FailureOr<pb::DType> fileDtype = dtypeOf(param.getLoc(), *stored);
    if (failed(fileDtype))
      return failure();
    p->set_file_dtype(*fileDtype);
    p->set_bytes(storageBytes(type.clone(*stored)));
  }
  return success();
}

namespace {

int64_t normalized(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// The op kind of a compute op, the operands the kernel reads (shape and bound operands are
/// attributes by now), and how to fill in its attributes.
struct KernelLowering {
  pb::OpKind kind = pb::OP_KIND_UNSPECIFIED;
  SmallVector<Value> operands;
  std::function<void(pb::Kernel &)> attributes;
};

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// SLICE / SLICE_GRAD attributes: the first index and step of every dimension of `data`.
FailureOr<KernelLowering> sliceAttributes(KernelLowering &lowering, Operation *op,
                                          RankedTensorType data, Value startsValue, Value endsValue,
                                          Value axesValue, Value stepsValue) {
  auto known = [&](Value v, llvm::StringRef what) -> FailureOr<SmallVector<int64_t>> {
    if (auto values = sl::constantInts(v))
      return *values;
    return op->emitError() << what << " must be a constant by now (sl-bind-shapes folds it)";
  };
  auto starts = known(startsValue, "slice starts");
  auto ends = known(endsValue, "slice ends");
  if (failed(starts) || failed(ends))
    return failure();
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, starts->size()));
  SmallVector<int64_t> steps(starts->size(), 1);
  if (axesValue) {
    auto v = known(axesValue, "slice axes");
    if (failed(v))
      return failure();
    axes = *v;
  }
  if (stepsValue) {
    auto v = known(stepsValue, "slice steps");
    if (failed(v))
      return failure();
    steps = *v;
  }
  SmallVector<int64_t> first(data.getRank(), 0), step(data.getRank(), 1);
  for (auto [i, axis] : llvm::enumerate(axes)) {
    int64_t d = axis < 0 ? axis + data.getRank() : axis;
    first[d] = sliceBounds(data.getDimSize(d), (*starts)[i], (*ends)[i], steps[i]).first;
    step[d] = steps[i];
  }
  lowering.attributes = [first, step](pb::Kernel &k) {
    for (auto [f, s] : llvm::zip(first, step)) {
      k.mutable_slice()->add_starts(f);
      k.mutable_slice()->add_steps(s);
    }
  };
  return lowering;
}

/// The class a kernel table row names for a kernel the emitter writes another way.
struct NoSlOp;

template <typename OpT>
void addTableKind(llvm::DenseMap<TypeID, pb::OpKind> &kinds, pb::OpKind kind) {
  kinds.try_emplace(TypeID::get<OpT>(), kind);
}
template <> void addTableKind<NoSlOp>(llvm::DenseMap<TypeID, pb::OpKind> &, pb::OpKind) {}

/// The OpKind the kernel table (schedule/kernel_table.def) gives the op's class, or
/// OP_KIND_UNSPECIFIED where it names none.
pb::OpKind tableKind(Operation *op) {
  static const llvm::DenseMap<TypeID, pb::OpKind> kinds = [] {
    llvm::DenseMap<TypeID, pb::OpKind> table;
#define SL_KERNEL(NAME, SL_OP, ...) addTableKind<SL_OP>(table, pb::NAME);
#include "schedule/kernel_table.def"
    return table;
  }();
  auto it = kinds.find(op->getName().getTypeID());
  return it == kinds.end() ? pb::OP_KIND_UNSPECIFIED : it->second;
}

/// Sets the kernel's attribute message `field` (a Kernel::mutable_* accessor) to `attrs`.
template <typename Attrs>
KernelLowering &withAttributes(KernelLowering &lowering, Attrs *(pb::Kernel::*field)(),
                               const Attrs &attrs) {
  lowering.attributes = [field, attrs](pb::Kernel &k) { *(k.*field)() = attrs; };
  return lowering;
}

/// The kernel of a compute op: its OpKind and operands from the kernel table, and the attributes
/// of the ops that take some.
FailureOr<KernelLowering> lowerKernel(Operation *op) {
  KernelLowering lowering;
  lowering.kind = tableKind(op);
  lowering.operands = dataOperands(op);
  auto constantOf = [&](Value v, llvm::StringRef what) -> FailureOr<SmallVector<int64_t>> {
    if (auto values = sl::constantInts(v))
      return *values;
    return op->emitError() << what << " must be a constant by now (sl-bind-shapes folds it)";
  };
  using Result = FailureOr<KernelLowering>;
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case<MatmulOp>([&](MatmulOp matmul) -> Result {
        // Version 5; a product without transposes carries no attributes, as in version 4.
        if (matmul.getTransA() || matmul.getTransB()) {
          pb::MatmulAttributes attrs;
          attrs.set_trans_a(matmul.getTransA());
          attrs.set_trans_b(matmul.getTransB());
          withAttributes(lowering, &pb::Kernel::mutable_matmul, attrs);
        }
        return lowering;
      })
      .Case<GemmOp>([&](GemmOp gemm) -> Result {
        pb::GemmAttributes attrs;
        attrs.set_trans_a(gemm.getTransA());
        attrs.set_trans_b(gemm.getTransB());
        attrs.set_alpha(gemm.getAlpha().convertToFloat());
        attrs.set_beta(gemm.getBeta().convertToFloat());
        return withAttributes(lowering, &pb::Kernel::mutable_gemm, attrs);
      })
      .Case<TransposeOp>([&](TransposeOp transpose) -> Result {
        SmallVector<int64_t> perm(transpose.getPerm());
        lowering.attributes = [perm](pb::Kernel &k) {
          for (int64_t axis : perm)
            k.mutable_transpose()->add_perm(axis);
        };
        return lowering;
      })
      // The ops whose attribute is one axis, counted from the front of the named operand.
      .Case<SoftmaxOp, GatherOp, ConcatOp, GatherGradOp>([&](Operation *) -> Result {
        int64_t axis, rank;
        if (auto softmax = llvm::dyn_cast<SoftmaxOp>(op)) {
          axis = softmax.getAxis();
          rank = softmax.getType().getRank();
        } else if (auto gather = llvm::dyn_cast<GatherOp>(op)) {
          axis = gather.getAxis();
          rank = typeOf(gather.getData()).getRank();
        } else if (auto concat = llvm::dyn_cast<ConcatOp>(op)) {
          axis = concat.getAxis();
          rank = concat.getType().getRank();
        } else {
          auto grad = llvm::cast<GatherGradOp>(op);
          axis = int64_t(grad.getAxis());
          rank = typeOf(grad.getDdata()).getRank();
        }
        pb::AxisAttributes attrs;
        attrs.set_axis(normalized(axis, rank));
        return withAttributes(lowering, &pb::Kernel::mutable_axis, attrs);
      })
      .Case<SliceOp>([&](SliceOp slice) -> Result {
        return sliceAttributes(lowering, op, typeOf(slice.getData()), slice.getStarts(),
                               slice.getEnds(), slice.getAxes(), slice.getSteps());
      })
      .Case<SliceGradOp>([&](SliceGradOp grad) -> Result {
        // The result has the sliced data's shape.
        return sliceAttributes(lowering, op, typeOf(grad.getDdata()), grad.getStarts(),
                               grad.getEnds(), grad.getAxes(), grad.getSteps());
      })
      .Case<TriluOp>([&](TriluOp trilu) -> Result {
        int64_t k = 0;
        if (trilu.getK()) {
          auto v = constantOf(trilu.getK(), "trilu k");
          if (failed(v))
            return failure();
          k = (*v)[0];
        }
        lowering.attributes = [k, upper = trilu.getUpper()](pb::Kernel &kernel) {
          kernel.mutable_trilu()->set_upper(upper);
          kernel.mutable_trilu()->set_k(k);
        };
        return lowering;
      })
      .Case<CumSumOp>([&](CumSumOp cumsum) -> Result {
        auto axis = constantOf(cumsum.getAxis(), "cumsum axis");
        if (failed(axis))
          return failure();
        pb::CumSumAttributes attrs;
        attrs.set_axis(normalized((*axis)[0], cumsum.getType().getRank()));
        attrs.set_exclusive(cumsum.getExclusive());
        attrs.set_reverse(cumsum.getReverse());
        return withAttributes(lowering, &pb::Kernel::mutable_cumsum, attrs);
      })
      .Case<ReduceMeanOp, ReduceSumOp>([&](auto reduce) -> Result {
        int64_t rank = llvm::cast<RankedTensorType>(reduce.getInput().getType()).getRank();
        SmallVector<int64_t> axes;
        if (reduce.getAxes()) {
          auto v = constantOf(reduce.getAxes(), "reduction axes");
          if (failed(v))
            return failure();
          for (int64_t a : *v)
            axes.push_back(normalized(a, rank));
        }
        if (axes.empty())
          axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
        llvm::sort(axes);
        axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
        lowering.attributes = [axes, keep = reduce.getKeepdims()](pb::Kernel &k) {
          for (int64_t a : axes)
            k.mutable_reduce()->add_axes(a);
          k.mutable_reduce()->set_keepdims(keep);
        };
        return lowering;
      })
      // Forward ops and their gradients take the same attribute message.
      .Case<GeluOp, GeluGradOp>([&](auto o) -> Result {
        pb::GeluAttributes attrs;
        attrs.set_tanh(o.getTanh());
        return withAttributes(lowering, &pb::Kernel::mutable_gelu, attrs);
      })
      .Case<RotaryOp, RotaryGradOp>([&](auto o) -> Result {
        pb::RotaryAttributes attrs;
        attrs.set_interleaved(o.getInterleaved());
        return withAttributes(lowering, &pb::Kernel::mutable_rotary, attrs);
      })
      .Case<AttentionOp, AttentionGradOp>([&](auto o) -> Result {
        pb::AttentionAttributes attrs;
        attrs.set_causal(o.getCausal());
        attrs.set_scale(o.getScale().convertToFloat());
        attrs.set_layout(o.getLayout() == HeadLayout::bshd ? pb::AttentionAttributes::BSHD
                                                           : pb::AttentionAttributes::BHSD);
        if constexpr (std::is_same_v<decltype(o), AttentionOp>)
          attrs.set_alibi(bool(o.getAlibiSlopes()));
        else
          attrs.set_alibi(o.getAlibi());
        return withAttributes(lowering, &pb::Kernel::mutable_attention, attrs);
      })
      .Case<DecodeAttentionOp>([&](DecodeAttentionOp o) -> Result {
        pb::AttentionAttributes attrs;
        attrs.set_scale(o.getScale().convertToFloat());
        attrs.set_alibi(bool(o.getAlibiSlopes()));
        return withAttributes(lowering, &pb::Kernel::mutable_attention, attrs);
      })
      .Case<KvWriteOp>([&](KvWriteOp write) -> Result {
        // BHSD, the default, is written as no attributes (as version 6 wrote every KV_WRITE).
        if (write.getLayout() == HeadLayout::bshd)
          lowering.attributes = [](pb::Kernel &k) {
            k.mutable_kv_write()->set_layout(pb::AttentionAttributes::BSHD);
          };
        return lowering;
      })
      .Case<CrossEntropyOp, CrossEntropyGradOp>([&](auto o) -> Result {
        pb::CrossEntropyAttributes attrs;
        attrs.set_ignore_index(int64_t(o.getIgnoreIndex()));
        return withAttributes(lowering, &pb::Kernel::mutable_cross_entropy, attrs);
      })
      // The norms: the first normalised dimension (RMS norms normalise the last one).
      .Case<LayerNormOp, LayerNormGradOp, RmsNormOp, RmsNormGradOp>([&](Operation *) -> Result {
        int64_t rank = typeOf(op->getOperand(0)).getRank();
        pb::NormAttributes attrs;
        if (auto norm = llvm::dyn_cast<LayerNormOp>(op)) {
          attrs.set_axis(normalized(int64_t(norm.getAxis()), rank));
          attrs.set_epsilon(norm.getEpsilon().convertToFloat());
        } else if (auto grad = llvm::dyn_cast<LayerNormGradOp>(op)) {
          attrs.set_axis(normalized(int64_t(grad.getAxis()), rank));
          attrs.set_epsilon(grad.getEpsilon().convertToFloat());
        } else if (auto norm = llvm::dyn_cast<RmsNormOp>(op)) {
          attrs.set_axis(rank - 1);
          attrs.set_epsilon(norm.getEpsilon().convertToFloat());
        } else {
          attrs.set_axis(rank - 1);
          attrs.set_epsilon(llvm::cast<RmsNormGradOp>(op).getEpsilon().convertToFloat());
        }
        return withAttributes(lowering, &pb::Kernel::mutable_norm, attrs);
      })
      .Default([&](Operation *) -> Result {
        // The table's ops without attributes.
        if (lowering.kind != pb::OP_KIND_UNSPECIFIED)
          return lowering;
        return op->emitError("operation '")
               << op->getName()
               << "' cannot be scheduled: its result depends on values known only at run time";
      });
}

} // namespace

/// Writes a step that sl-schedule-subbatches, sl-assign-streams, sl-allocate and sl-insert-events
/// made explicit: every buffer's space and offset, every kernel's stream and events are in the IR
/// already; this only translates them.
class ExplicitStepEmitter {
public:
  ExplicitStepEmitter(func::FuncOp func, llvm::StringRef schedulePath)
      : func(func), schedulePath(schedulePath) {}

  LogicalResult run(pb::Schedule &schedule);

private:
  FailureOr<uint32_t> bufferOf(Value value, Location loc);
  LogicalResult addKernels(Operation &op);
  pb::Kernel *addKernel(pb::OpKind kind, Operation &op);
  void addPlan();
  void addGeneration();
  LogicalResult placeShards();

  func::FuncOp func;
  llvm::StringRef schedulePath;
  pb::Schedule *out = nullptr;
  llvm::DenseMap<Value, uint32_t> buffers;
  llvm::StringMap<uint32_t> parameterIndex;
  // With world > 1: the ranks, each sl.param_shard's index in Schedule.shards, and the shard and
  // element offset of each parameter.
  int64_t world = 1;
  llvm::DenseMap<Value, uint32_t> shardIndex;
  llvm::StringMap<std::pair<uint32_t, int64_t>> shardPlace;
};

LogicalResult ExplicitStepEmitter::placeShards() {
  for (auto shard : func.getBody().front().getOps<ParamShardOp>()) {
    if (int64_t(shard.getWorld()) != world)
      return shard.emitError("shard of world ")
             << shard.getWorld() << " in a step of world " << world;
    uint32_t index = shardIndex.size();
    shardIndex[shard.getResult()] = index;
    for (auto [param, offset] : llvm::zip(shard.getParams(), shard.getElementOffsets())) {
      llvm::StringRef name = param.getDefiningOp<ParamOp>().getName();
      if (!shardPlace.try_emplace(name, index, offset).second)
        return shard.emitError("parameter '") << name << "' is in two shards";
    }
  }
  return success();
}

FailureOr<uint32_t> ExplicitStepEmitter::bufferOf(Value value, Location loc) {
  if (auto it = buffers.find(value); it != buffers.end())
    return it->second;
  std::optional<uint64_t> offset = allocatedOffset(value);
  if (!offset)
    return emitError(loc) << "value has no offset; run sl-allocate before emitting";
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return emitError(loc) << "value of type " << value.getType() << " cannot be scheduled";
  FailureOr<pb::DType> dtype = dtypeOf(loc, type.getElementType());
  if (failed(dtype))
    return failure();
  pb::Buffer *buffer = out->add_buffers();
  buffer->set_id(out->buffers_size() - 1);
  std::string name;
  if (auto arg = llvm::dyn_cast<BlockArgument>(value)) {
    if (auto attr = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "sl.name"))
      name = attr.str();
  } else if (auto param = value.getDefiningOp<ParamOp>()) {
    name = param.getName().str();
  } else {
    name = locationName(value.getDefiningOp()->getLoc());
  }
  if (failed(checkSize(loc, type, name)))
    return failure();
  buffer->set_name(name);
  buffer->set_space(memorySpaceOf(value) == MemorySpace::Host ? pb::HOST : pb::DEVICE);
  buffer->set_offset(*offset);
  buffer->set_bytes(storageBytes(type));
  buffer->set_dtype(*dtype);
  for (int64_t dim : type.getShape())
    buffer->add_shape(dim);
  buffers[value] = buffer->id();
  return buffer->id();
}

pb::Kernel *ExplicitStepEmitter::addKernel(pb::OpKind kind, Operation &op) {
  // The schedule's stream ids are the StreamKind values (run() creates the streams in that order).
  pb::Kernel *kernel = out->add_kernels();
  kernel->set_op(kind);
  kernel->set_stream(
      static_cast<uint32_t>(op.getAttrOfType<StreamKindAttr>(kStreamAttr).getValue()));
  kernel->set_name(locationName(op.getLoc()));
  return kernel;
}

LogicalResult ExplicitStepEmitter::addKernels(Operation &op) {
  auto stream = op.getAttrOfType<StreamKindAttr>(kStreamAttr);
  if (!stream)
    return op.emitError("operation has no stream; run sl-assign-streams before emitting");
  if (stream.getValue() == StreamKind::collective && world == 1)
    return op.emitError("a collective in a step of one rank (sl.plan has no world > 1)");
  llvm::SmallVector<int64_t> waits;
  if (auto attr = op.getAttrOfType<DenseI64ArrayAttr>(kWaitAttr))
    waits.assign(attr.asArrayRef().begin(), attr.asArrayRef().end());
  std::optional<int64_t> record;
  if (auto attr = op.getAttrOfType<IntegerAttr>(kRecordAttr))
    record = attr.getInt();
  int first = out->kernels_size();

  if (auto fetch = llvm::dyn_cast<FetchParamsOp>(op)) {
    // One copy per parameter; the op's waits go on the first, its event on the last.
    for (auto [param, result] : llvm::zip(fetch.getParams(), fetch.getResults())) {
      FailureOr<uint32_t> src = bufferOf(param, op.getLoc()), dst = bufferOf(result, op.getLoc());
      if (failed(src) || failed(dst))
        return failure();
      pb::Kernel *copy = addKernel(pb::COPY, op);
      copy->set_name(param.getDefiningOp<ParamOp>().getName().str());
      copy->add_operands(*src);
      copy->add_results(*dst);
    }
  } else if (llvm::isa<PrefetchOp, OffloadOp>(op)) {
    FailureOr<uint32_t> src = bufferOf(op.getOperand(0), op.getLoc());
    FailureOr<uint32_t> dst = bufferOf(op.getResult(0), op.getLoc());
    if (failed(src) || failed(dst))
      return failure();
    pb::Kernel *copy = addKernel(pb::COPY, op);
    copy->add_operands(*src);
    copy->add_results(*dst);
  } else if (llvm::isa<AllGatherOp, ReduceScatterOp>(op)) {
    // One kernel per operand; the op's waits go on the first, its event on the last.
    bool gather = llvm::isa<AllGatherOp>(op);
    int64_t opWorld = gather ? int64_t(llvm::cast<AllGatherOp>(op).getWorld())
                             : int64_t(llvm::cast<ReduceScatterOp>(op).getWorld());
    if (opWorld != world)
      return op.emitError("collective of world ") << opWorld << " in a step of world " << world;
    for (auto [operand, result] : llvm::zip(op.getOperands(), op.getResults())) {
      FailureOr<uint32_t> src = bufferOf(operand, op.getLoc()), dst = bufferOf(result, op.getLoc());
      if (failed(src) || failed(dst))
        return failure();
      if (memorySpaceOf(operand) != MemorySpace::Device ||
          memorySpaceOf(result) != MemorySpace::Device)
        return op.emitError("collectives work on device values; prefetch the shard first");
      pb::Kernel *kernel = addKernel(gather ? pb::ALL_GATHER : pb::REDUCE_SCATTER, op);
      kernel->add_operands(*src);
      kernel->add_results(*dst);
    }
  } else if (auto step = llvm::dyn_cast<OptimizerStepOp>(op)) {
    pb::Kernel *kernel = addKernel(pb::OPTIMIZER_STEP, op);
    int index = out->kernels_size() - 1;
    for (Value v : dataOperands(&op)) {
      FailureOr<uint32_t> buffer = bufferOf(v, op.getLoc());
      if (failed(buffer))
        return failure();
      out->mutable_kernels(index)->add_operands(*buffer);
    }
    kernel = out->mutable_kernels(index);
    for (Value param : step.getParams()) {
      if (auto shard = param.getDefiningOp<ParamShardOp>())
        kernel->mutable_optimizer_step()->add_shards(shardIndex.lookup(shard.getResult()));
      else
        kernel->mutable_optimizer_step()->add_parameters(
            parameterIndex.lookup(param.getDefiningOp<ParamOp>().getName()));
    }
  } else {
    pb::OpKind kind = pb::ACCUMULATE;
    SmallVector<Value> operands = dataOperands(&op);
    std::function<void(pb::Kernel &)> attributes;
    if (!llvm::isa<AccumulateOp>(op)) {
      FailureOr<KernelLowering> lowering = lowerKernel(&op);
      if (failed(lowering))
        return failure();
      kind = lowering->kind;
      operands = lowering->operands;
      attributes = lowering->attributes;
    }
    SmallVector<uint32_t> operandBuffers, resultBuffers;
    for (Value v : operands) {
      FailureOr<uint32_t> buffer = bufferOf(v, op.getLoc());
      if (failed(buffer))
        return failure();
      if (stream.getValue() == StreamKind::compute && memorySpaceOf(v) != MemorySpace::Device)
        return op.emitError("a compute kernel reads a host value; prefetch it to the device");
      operandBuffers.push_back(*buffer);
    }
    for (Value v : op.getResults()) {
      // A KV cache written in place is the very buffer the kernel reads as operand 0.
      if (llvm::isa<KvWriteOp>(op))
        buffers[v] = operandBuffers.front();
      FailureOr<uint32_t> buffer = bufferOf(v, op.getLoc());
      if (failed(buffer))
        return failure();
      resultBuffers.push_back(*buffer);
    }
    pb::Kernel *kernel = addKernel(kind, op);
    for (uint32_t b : operandBuffers)
      kernel->add_operands(b);
    for (uint32_t b : resultBuffers)
      kernel->add_results(b);
    if (attributes)
      attributes(*kernel);
  }
  for (int64_t event : waits)
    out->mutable_kernels(first)->add_wait_events(uint32_t(event));
  if (record)
    out->mutable_kernels(out->kernels_size() - 1)->add_record_events(uint32_t(*record));
  return success();
}

void ExplicitStepEmitter::addGeneration() {
  // An explicit step has an sl.plan (isExplicitStep), which the verifier holds to a
  // #sl.generation_plan on @generate and to a #sl.plan elsewhere.
  auto planned = func->getAttrOfType<GenerationPlanAttr>(kPlanAttr);
  pb::Generation *g = out->mutable_generation();
  g->set_batch(planned.getBatch().value_or(0));
  g->set_max_prompt_len(planned.getMaxPromptLen());
  g->set_max_new_tokens(planned.getMaxNewTokens());
  g->set_vocab(planned.getVocab());
  g->set_cache_len(planned.getCacheLen());
  g->set_num_sub_batches(uint32_t(planned.getNumSubBatches().value_or(0)));
  g->set_sub_batch_size(planned.getSubBatchSize());
  g->set_kv_cache_bytes(uint64_t(planned.getKvCacheBytes().value_or(0)));
  g->set_parameter_bytes(uint64_t(planned.getParameterBytes().value_or(0)));
  g->set_weights_on_device(planned.getWeightsOnDevice().value_or(false));
  g->set_kv_cache_on_device(planned.getKvCacheOnDevice().value_or(false));
}

void ExplicitStepEmitter::addPlan() {
  auto planned = func->getAttrOfType<PlanAttr>(kPlanAttr);
  pb::Plan *p = out->mutable_plan();
  if (auto mode = planned.getMode())
    p->set_mode(stringifyPlanMode(*mode).str());
  p->set_num_sub_batches(uint32_t(planned.getNumSubBatches().value_or(0)));
  p->set_sub_batch_size(planned.getSubBatchSize().value_or(0));
  p->set_live_blocks(uint32_t(planned.getLiveBlocks().value_or(0)));
  p->set_predicted_device_bytes(uint64_t(planned.getPredictedDeviceBytes().value_or(0)));
  p->set_predicted_host_bytes(uint64_t(planned.getPredictedHostBytes().value_or(0)));
  p->set_predicted_host_pool_bytes(uint64_t(planned.getPredictedHostPoolBytes().value_or(0)));
  if (auto seconds = planned.getPredictedStepSeconds())
    p->set_predicted_step_seconds(seconds->convertToDouble());
  p->set_parameter_bytes(uint64_t(planned.getParameterBytes().value_or(0)));
  p->set_boundary_activation_bytes(uint64_t(planned.getBoundaryActivationBytes().value_or(0)));
}

LogicalResult ExplicitStepEmitter::run(pb::Schedule &schedule) {
  out = &schedule;
  schedule.set_magic(kMagic);
  schedule.set_version(kVersion);
  bool generate = func.getSymName() == kGenerateStepName;
  schedule.set_kind(func.getSymName() == kTrainStepName ? "train" : generate ? "generate" : "infer");
  auto planned = func->getAttrOfType<PlanAttr>(kPlanAttr); // absent on @generate
  world = planned ? planned.getWorld().value_or(1) : 1;    // verified to be at least 1
  if (failed(placeShards()))
    return failure();
  for (auto [streamKind, kind] :
       {std::pair(StreamKind::compute, pb::COMPUTE), std::pair(StreamKind::h2d, pb::HOST_TO_DEVICE),
        std::pair(StreamKind::d2h, pb::DEVICE_TO_HOST), std::pair(StreamKind::host, pb::HOST_COMPUTE),
        std::pair(StreamKind::collective, pb::COLLECTIVE)}) {
    unsigned id = static_cast<unsigned>(streamKind);
    if (kind == pb::COLLECTIVE && world == 1)
      continue; // a step of one rank has no collectives
    pb::Stream *stream = schedule.add_streams();
    stream->set_id(id);
    stream->set_kind(kind);
  }
  if (world > 1)
    schedule.set_world(uint32_t(world));
  auto arena = func->getAttrOfType<IntegerAttr>(kDeviceArenaBytesAttr);
  auto pool = func->getAttrOfType<IntegerAttr>(kHostPoolBytesAttr);
  auto events = func->getAttrOfType<IntegerAttr>(kNumEventsAttr);
  if (!arena || !pool || !events)
    return func.emitError("the step has no memory plan or events; run sl-assign-streams, "
                          "sl-allocate and sl-insert-events before emitting");
  schedule.set_device_arena_bytes(uint64_t(arena.getInt()));
  schedule.set_host_pool_bytes(uint64_t(pool.getInt()));
  schedule.set_num_events(uint32_t(events.getInt()));

  Block &body = func.getBody().front();
  auto programOf = [&](std::optional<unsigned> arg, std::optional<unsigned> result) -> uint32_t {
    IntegerAttr attr = arg ? func.getArgAttrOfType<IntegerAttr>(*arg, kProgramAttr)
                           : func.getResultAttrOfType<IntegerAttr>(*result, kProgramAttr);
    return attr ? uint32_t(attr.getInt()) : 0;
  };
  for (BlockArgument arg : body.getArguments()) {
    FailureOr<uint32_t> buffer = bufferOf(arg, func.getLoc());
    if (failed(buffer))
      return failure();
    // State the step keeps in the host pool (a KV cache) is nobody's input.
    if (func.getArgAttr(arg.getArgNumber(), kKvCacheAttr))
      continue;
    pb::Binding *binding = schedule.add_inputs();
    binding->set_name(out->buffers(*buffer).name());
    binding->set_buffer(*buffer);
    binding->set_program(programOf(arg.getArgNumber(), std::nullopt));
  }
  for (Operation &op : body) {
    if (auto program = llvm::dyn_cast<ProgramOp>(op)) {
      if (schedule.programs_size() > 0) {
        pb::Program &last = *schedule.mutable_programs(schedule.programs_size() - 1);
        last.set_num_kernels(uint32_t(schedule.kernels_size()) - last.first_kernel());
      }
      pb::Program *p = schedule.add_programs();
      p->set_name(program.getName().str());
      p->set_first_kernel(uint32_t(schedule.kernels_size()));
      continue;
    }
    if (auto param = llvm::dyn_cast<ParamOp>(op)) {
      parameterIndex[param.getName()] = schedule.parameters_size();
      pb::Parameter *p = schedule.add_parameters();
      if (failed(describeParameter(p, param, schedulePath)))
        return failure();
      if (world > 1) {
        if (p->file_dtype() != pb::DTYPE_UNSPECIFIED)
          return param.emitError("parameter '")
                 << param.getName() << "' is stored as another type than it computes in; "
                 << "a sharded step (world > 1) keeps f32 master weights";
        // Sharded: its bytes are in its group's shard, it has no buffer of its own.
        auto place = shardPlace.find(param.getName());
        if (place == shardPlace.end() || hasStorage(param.getResult()))
          return param.emitError("parameter '")
                 << param.getName() << "' of a step of world " << world
                 << " must be read only through its group's sl.param_shard";
        p->set_shard(place->second.first);
        p->set_shard_offset(uint64_t(place->second.second));
        continue;
      }
      FailureOr<uint32_t> buffer = bufferOf(param.getResult(), op.getLoc());
      if (failed(buffer))
        return failure();
      p->set_buffer(*buffer);
    } else if (auto shard = llvm::dyn_cast<ParamShardOp>(op)) {
      FailureOr<uint32_t> buffer = bufferOf(shard.getResult(), op.getLoc());
      if (failed(buffer))
        return failure();
      pb::Shard *s = schedule.add_shards();
      s->set_name(shard.getGroup().str());
      s->set_buffer(*buffer);
      s->set_elements(uint64_t(shard.getFlatElements()));
    } else if (auto constant = llvm::dyn_cast<ConstantOp>(op)) {
      // Constants that only give shapes or axes never reach the schedule.
      if (llvm::any_of(constant->getUsers(),
                       [](Operation *user) { return llvm::isa<PrefetchOp>(user); })) {
        FailureOr<std::string> data = constantBytes(constant);
        FailureOr<uint32_t> buffer = bufferOf(constant.getResult(), op.getLoc());
        if (failed(data) || failed(buffer))
          return failure();
        pb::Constant *c = schedule.add_constants();
        c->set_buffer(*buffer);
        c->set_data(std::move(*data));
      }
    } else if (llvm::isa<SubBatchOp, ReshapeOp, EmptyOp, ViewOp>(op)) {
      continue; // views: a buffer when a kernel reads one
    } else if (auto ret = llvm::dyn_cast<func::ReturnOp>(op)) {
      for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
        if (memorySpaceOf(value) != MemorySpace::Host)
          return ret.emitError("output ") << index << " is on the device; offload it first";
        std::string name = "output" + std::to_string(index);
        if (auto attr = func.getResultAttrOfType<StringAttr>(index, "sl.name"))
          name = attr.str();
        FailureOr<uint32_t> buffer = bufferOf(value, ret.getLoc());
        if (failed(buffer))
          return failure();
        pb::Binding *binding = schedule.add_outputs();
        binding->set_name(name);
        binding->set_buffer(*buffer);
        binding->set_program(programOf(std::nullopt, unsigned(index)));
      }
    } else if (failed(addKernels(op))) {
      return failure();
    }
  }
  if (schedule.programs_size() > 0) {
    pb::Program &last = *schedule.mutable_programs(schedule.programs_size() - 1);
    last.set_num_kernels(uint32_t(schedule.kernels_size()) - last.first_kernel());
  }
  if (generate)
    addGeneration();
  else
    addPlan();
  schedule.set_end_magic(kMagic);
  return success();
}

} // namespace

std::string defaultScheduleEntry(ModuleOp module) {
  for (llvm::StringRef step : {kGenerateStepName, kTrainStepName, kInferStepName})
    if (module.lookupSymbol<func::FuncOp>(step))
      return step.str();
  return "forward";
}

LogicalResult emitScheduleFile(ModuleOp module, llvm::StringRef path,
                               const ScheduleEmitOptions &options) {
  std::string entry = options.entryName.empty() ? defaultScheduleEntry(module) : options.entryName;
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func || func.isExternal())
    return module.emitError("no function '") << entry << "' to schedule";
  if (!isExplicitStep(func))
    return func.emitError("@")
           << entry << " is not an explicit step: write one with sl-explicit-forward entry="
           << entry << " and lower it (sl-opt -o does both)";

  pb::Schedule schedule;
  schedule.set_producer(options.producer);
  if (failed(ExplicitStepEmitter(func, path).run(schedule)))
    return failure();
  for (const pb::Parameter &p : schedule.parameters())
    if (llvm::sys::path::is_absolute(p.file())) {
      module.emitWarning("parameter file '")
          << p.file() << "' is outside the schedule's directory: sl-run reads it only with "
          << "--allow-external-paths (write the schedule beside the model, or in a directory "
             "above it, to avoid that)";
      break;
    }

  std::string bytes;
  if (!schedule.SerializeToString(&bytes))
    return module.emitError("cannot serialize the schedule");
  // slrt's writer, as sl-run's outputs: a unique temporary beside the output, never a fixed
  // name, checked to the last close and renamed over it.
  slrt::AtomicWriter writer;
  if (!writer.open(path.str()) || !writer.write(bytes) || !writer.commit())
    return module.emitError() << path << ": " << writer.error();
  return success();
}

} // namespace sl
