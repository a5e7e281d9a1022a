//===- OnnxOps.cpp - ONNX operators to sl operations --------------------------------------------===//
//
// One converter per ONNX operator. Converters keep ONNX's semantics exactly (broadcasting,
// negative axes, optional inputs, opset differences) and leave shape arithmetic as ops: it folds
// away in sl-bind-shapes once the batch and sequence sizes are bound.
//
//===--------------------------------------------------------------------------------------------===//

#include "Importer.h"

#include "sl/Dialect/ConstantValues.h"

#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;

namespace sl::import {
namespace {

using Results = SmallVector<Value>;

const onnx::AttributeProto *findAttr(const onnx::NodeProto &node, llvm::StringRef name) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t intAttr(const onnx::NodeProto &node, llvm::StringRef name, int64_t fallback) {
  const onnx::AttributeProto *attr = findAttr(node, name);
  return attr ? attr->i() : fallback;
}

float floatAttr(const onnx::NodeProto &node, llvm::StringRef name, float fallback) {
  const onnx::AttributeProto *attr = findAttr(node, name);
  return attr ? attr->f() : fallback;
}

std::optional<SmallVector<int64_t>> intsAttr(const onnx::NodeProto &node, llvm::StringRef name) {
  const onnx::AttributeProto *attr = findAttr(node, name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

class Converter {
public:
  Converter(Importer &im, const onnx::NodeProto &node)
      : im(im), node(node), b(im.builder), loc(im.nodeLoc(node)) {}

  FailureOr<Results> run();

private:
  FailureOr<Value> in(int i) { return im.input(node, i); }
  FailureOr<Value> optIn(int i) { return im.optionalInput(node, i); }
  InFlightDiagnostic error() { return im.nodeError(node); }
  /// The node's `axis` attribute (`byDefault` when absent) counted from the front of `type`:
  /// within [0, rank), or [0, rank] where the op allows the end (Flatten); otherwise an error
  /// naming the attribute's value.
  FailureOr<int64_t> axisOf(RankedTensorType type, int64_t byDefault, bool endAllowed = false) {
    int64_t given = intAttr(node, "axis", byDefault), rank = type.getRank();
    int64_t axis = given < 0 ? given + rank : given;
    if (axis < 0 || axis > rank || (axis == rank && !endAllowed)) {
      error() << "axis " << given << " is out of range for " << type;
      return failure();
    }
    return axis;
  }
  FailureOr<Results> one(FailureOr<Value> v) {
    if (failed(v))
      return failure();
    return Results{*v};
  }
  LogicalResult expectInputs(int min, int max) {
    if (node.input_size() < min || node.input_size() > max)
      return error() << "expected " << (min == max ? std::to_string(min)
                                                    : std::to_string(min) + " to " +
                                                          std::to_string(max))
                     << " inputs, got " << node.input_size();
    return success();
  }
  /// The axes of an op that takes them as an attribute before `inputSince` and as input
  /// `inputIndex` from that opset on.
  FailureOr<Value> axesOperand(int64_t inputSince, int inputIndex) {
    if (im.opset >= inputSince) {
      if (findAttr(node, "axes"))
        return error() << "from opset " << inputSince
                       << " the axes are an input, not an attribute";
      return optIn(inputIndex);
    }
    if (auto axes = intsAttr(node, "axes"))
      return im.constantInts(loc, *axes);
    return Value();
  }
  /// The values of an operand that must be known when the graph is imported.
  FailureOr<SmallVector<int64_t>> knownInts(Value v, llvm::StringRef what) {
    if (auto values = sl::constantInts(v))
      return *values;
    return error() << what << " must be a constant";
  }

  template <typename OpT> FailureOr<Results> binary();
  template <typename OpT> FailureOr<Results> unary();
  FailureOr<Results> reshapeTo(Value x, ArrayRef<Value> dims);
  FailureOr<Value> reshapeDims(Value x, ArrayRef<Value> dims);
  FailureOr<Value> unsqueezeAt(Value x, int64_t axis);
  Value dimOf(Value x, int64_t d);

  FailureOr<Results> gemm();
  FailureOr<Results> neg();
  FailureOr<Results> softmax();
  FailureOr<Results> gather();
  FailureOr<Results> reshape();
  FailureOr<Results> transpose();
  FailureOr<Results> concat();
  FailureOr<Results> expand();
  FailureOr<Results> where();
  FailureOr<Results> trilu();
  FailureOr<Results> tile();
  FailureOr<Results> gatherElements();
  FailureOr<Results> scatterND();
  FailureOr<Results> cumSum();
  FailureOr<Results> shape();
  FailureOr<Results> constantOfShape();
  FailureOr<Results> range();
  FailureOr<Results> identity();
  FailureOr<Results> constantNode();
  FailureOr<Results> cast();
  FailureOr<Results> pow();
  FailureOr<Results> reduce();
  FailureOr<Results> unsqueeze();
  FailureOr<Results> squeeze();
  FailureOr<Results> flatten();
  FailureOr<Results> slice();
  FailureOr<Results> split();
  FailureOr<SmallVector<Value>> splitPieces(Value x, int64_t axis, ArrayRef<int64_t> sizes);
  FailureOr<Results> layerNorm();
  FailureOr<Results> minMax();
  FailureOr<Results> compare();
  FailureOr<Results> dropout();
  FailureOr<Results> logical();
  FailureOr<Results> ifNode();
  FailureOr<Results> loop();
  FailureOr<Results> sequenceOp();
  FailureOr<Results> splitToSequence();
  FailureOr<Results> concatFromSequence();
  /// Defines the node's output `index` as the item (a sequence, or a tensor appended to
  /// `results`).
  void defineOutput(Results &results, int index, Item item);

  Importer &im;
  const onnx::NodeProto &node;
  OpBuilder &b;
  Location loc;
};

template <typename OpT> FailureOr<Results> Converter::binary() {
  if (failed(expectInputs(2, 2)))
    return failure();
  FailureOr<Value> lhs = in(0), rhs = in(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  return one(im.build<OpT>(node, *lhs, *rhs));
}

template <typename OpT> FailureOr<Results> Converter::unary() {
  if (failed(expectInputs(1, 1)))
    return failure();
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  if (!llvm::isa<FloatType>(typeOf(*x).getElementType()))
    return error() << "expected a floating-point input, got " << x->getType();
  return one(im.build<OpT>(node, *x));
}

/// A 1-element i64 vector holding dimension `d` of `x`: a constant when the dimension is static,
/// else a slice of its shape (which folds once the shape is bound).
Value Converter::dimOf(Value x, int64_t d) {
  RankedTensorType type = typeOf(x);
  if (!type.isDynamicDim(d))
    return im.constantInts(loc, {type.getDimSize(d)});
  auto vec = RankedTensorType::get({1}, b.getI64Type());
  return b.create<ShapeOp>(loc, vec, x, b.getI64IntegerAttr(d), b.getI64IntegerAttr(d + 1));
}

/// Reshapes `x` to the concatenation of 1-element vectors `dims`.
FailureOr<Value> Converter::reshapeDims(Value x, ArrayRef<Value> dims) {
  Value shape;
  if (dims.empty()) {
    auto type = RankedTensorType::get({0}, b.getI64Type());
    shape = b.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, ArrayRef<int64_t>{}));
  } else {
    auto type = RankedTensorType::get({int64_t(dims.size())}, b.getI64Type());
    shape = im.foldOrKeep(b.create<ConcatOp>(loc, type, dims, b.getI64IntegerAttr(0)));
  }
  return im.build<ReshapeOp>(node, x, shape, /*allowzero=*/true);
}

FailureOr<Results> Converter::reshapeTo(Value x, ArrayRef<Value> dims) {
  return one(reshapeDims(x, dims));
}

/// `x` with a new dimension of size 1 at `axis` (0 to rank).
FailureOr<Value> Converter::unsqueezeAt(Value x, int64_t axis) {
  SmallVector<Value> dims;
  for (int64_t d = 0; d < typeOf(x).getRank(); ++d) {
    if (d == axis)
      dims.push_back(im.constantInts(loc, {1}));
    dims.push_back(dimOf(x, d));
  }
  if (axis == typeOf(x).getRank())
    dims.push_back(im.constantInts(loc, {1}));
  return reshapeDims(x, dims);
}

FailureOr<Results> Converter::gemm() {
  if (failed(expectInputs(2, 3)))
    return failure();
  FailureOr<Value> a = in(0), bv = in(1), c = optIn(2);
  if (failed(a) || failed(bv) || failed(c))
    return failure();
  return one(im.build<GemmOp>(node, *a, *bv, *c, intAttr(node, "transA", 0) != 0,
                              intAttr(node, "transB", 0) != 0,
                              APFloat(floatAttr(node, "alpha", 1.0f)),
                              APFloat(floatAttr(node, "beta", 1.0f))));
}

FailureOr<Results> Converter::constantNode() {
  if (const onnx::AttributeProto *value = findAttr(node, "value"))
    return one(im.constant(node, value->t()));
  if (const onnx::AttributeProto *attr = findAttr(node, "value_float")) {
    auto type = RankedTensorType::get({}, b.getF32Type());
    return Results{b.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, attr->f()))};
  }
  if (const onnx::AttributeProto *attr = findAttr(node, "value_floats")) {
    SmallVector<float> values(attr->floats().begin(), attr->floats().end());
    auto type = RankedTensorType::get({int64_t(values.size())}, b.getF32Type());
    return Results{b.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, ArrayRef(values)))};
  }
  if (const onnx::AttributeProto *attr = findAttr(node, "value_int"))
    return Results{im.constantInts(loc, {attr->i()}, /*scalar=*/true)};
  if (auto ints = intsAttr(node, "value_ints"))
    return Results{im.constantInts(loc, *ints)};
  return error() << "only tensor, float and integer constants are supported";
}

FailureOr<Results> Converter::cast() {
  if (failed(expectInputs(1, 1)))
    return failure();
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  int32_t target = int32_t(intAttr(node, "to", 0));
  FailureOr<Type> to = elementType(im.context, target);
  if (failed(to) || isNarrowInteger(target))
    return error() << "casting to " << onnxTypeName(target) << " is not supported";
  return one(im.build<CastOp>(node, *x, TypeAttr::get(*to)));
}

FailureOr<Results> Converter::pow() {
  if (failed(expectInputs(2, 2)))
    return failure();
  FailureOr<Value> x = in(0), y = in(1);
  if (failed(x) || failed(y))
    return failure();
  // ONNX lets the exponent have its own type; compute in the base's.
  Type element = typeOf(*x).getElementType();
  Value exponent = *y;
  if (typeOf(exponent).getElementType() != element) {
    auto cast = b.create<CastOp>(loc, typeOf(exponent).clone(element), exponent,
                                 TypeAttr::get(element));
    exponent = cast.getResult();
  }
  return one(im.build<PowOp>(node, *x, exponent));
}

FailureOr<Results> Converter::reduce() {
  bool mean = node.op_type() == "ReduceMean";
  if (failed(expectInputs(1, 2)))
    return failure();
  FailureOr<Value> x = in(0);
  // ReduceSum takes axes as an input from opset 13, ReduceMean from opset 18.
  FailureOr<Value> axes = axesOperand(mean ? 18 : 13, 1);
  if (failed(x) || failed(axes))
    return failure();
  bool keepdims = intAttr(node, "keepdims", 1) != 0;
  bool noop = intAttr(node, "noop_with_empty_axes", 0) != 0;
  if (mean)
    return one(im.build<ReduceMeanOp>(node, *x, *axes, keepdims, noop));
  return one(im.build<ReduceSumOp>(node, *x, *axes, keepdims, noop));
}

FailureOr<Results> Converter::unsqueeze() {
  FailureOr<Value> x = in(0);
  FailureOr<Value> axesValue = axesOperand(13, 1);
  if (failed(x) || failed(axesValue))
    return failure();
  if (!*axesValue)
    return error() << "axes are required";
  FailureOr<SmallVector<int64_t>> axes = knownInts(*axesValue, "axes");
  if (failed(axes))
    return failure();
  int64_t rank = typeOf(*x).getRank() + int64_t(axes->size());
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank || inserted[a])
      return error() << "axis " << axis << " is out of range or repeated for rank " << rank;
    inserted[a] = true;
  }
  SmallVector<Value> dims;
  for (int64_t d = 0, source = 0; d < rank; ++d)
    dims.push_back(inserted[d] ? im.constantInts(loc, {1}) : dimOf(*x, source++));
  return reshapeTo(*x, dims);
}

FailureOr<Results> Converter::squeeze() {
  FailureOr<Value> x = in(0);
  FailureOr<Value> axesValue = axesOperand(13, 1);
  if (failed(x) || failed(axesValue))
    return failure();
  RankedTensorType type = typeOf(*x);
  SmallVector<bool> removed(type.getRank(), false);
  if (*axesValue) {
    FailureOr<SmallVector<int64_t>> axes = knownInts(*axesValue, "axes");
    if (failed(axes))
      return failure();
    for (int64_t axis : *axes) {
      int64_t a = axis < 0 ? axis + type.getRank() : axis;
      if (a < 0 || a >= type.getRank())
        return error() << "axis " << axis << " is out of range for " << type;
      if (!type.isDynamicDim(a) && type.getDimSize(a) != 1)
        return error() << "cannot squeeze dimension " << a << " of size " << type.getDimSize(a);
      removed[a] = true;
    }
  } else {
    for (int64_t d = 0; d < type.getRank(); ++d) {
      if (type.isDynamicDim(d))
        return error() << "squeezing without axes needs static dimensions, got " << type;
      removed[d] = type.getDimSize(d) == 1;
    }
  }
  SmallVector<Value> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (!removed[d])
      dims.push_back(dimOf(*x, d));
  return reshapeTo(*x, dims);
}

FailureOr<Results> Converter::flatten() {
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axisOrError = axisOf(type, 1, /*endAllowed=*/true);
  if (failed(axisOrError))
    return failure();
  int64_t axis = *axisOrError;
  // [prod(dims before axis), -1]: the product as i64 arithmetic on the shape, which folds once
  // the dimensions are bound (and at once when they are static).
  Value outer = im.constantInts(loc, {1});
  for (int64_t d = 0; d < axis; ++d) {
    FailureOr<Value> product = im.build<MulOp>(node, outer, dimOf(*x, d));
    if (failed(product))
      return failure();
    outer = *product;
  }
  return reshapeTo(*x, {outer, im.constantInts(loc, {-1})});
}

FailureOr<Results> Converter::slice() {
  if (failed(expectInputs(3, 5)))
    return failure();
  FailureOr<Value> data = in(0), starts = in(1), ends = in(2), axes = optIn(3), steps = optIn(4);
  if (failed(data) || failed(starts) || failed(ends) || failed(axes) || failed(steps))
    return failure();
  return one(im.build<SliceOp>(node, *data, *starts, *ends, *axes, *steps));
}

FailureOr<Results> Converter::split() {
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axisOrError = axisOf(type, 0);
  if (failed(axisOrError))
    return failure();
  int64_t axis = *axisOrError;
  int64_t outputs = node.output_size();
  SmallVector<int64_t> sizes;
  FailureOr<Value> splitInput = im.opset >= 13 ? optIn(1) : FailureOr<Value>(Value());
  if (failed(splitInput))
    return failure();
  if (*splitInput) {
    FailureOr<SmallVector<int64_t>> known = knownInts(*splitInput, "split");
    if (failed(known))
      return failure();
    sizes = *known;
  } else if (auto attr = intsAttr(node, "split")) {
    sizes = *attr;
  } else {
    int64_t dim = type.getDimSize(axis);
    if (type.isDynamicDim(axis))
      return error() << "an even split needs a static dimension " << axis << ", got " << type;
    int64_t pieces = intAttr(node, "num_outputs", outputs);
    int64_t chunk = (dim + pieces - 1) / std::max<int64_t>(pieces, 1);
    for (int64_t i = 0; i < pieces; ++i)
      sizes.push_back(std::min(chunk, dim - i * chunk));
  }
  if (int64_t(sizes.size()) != outputs)
    return error() << "split into " << sizes.size() << " pieces but the node has " << outputs
                   << " outputs";
  return splitPieces(*x, axis, sizes);
}

// The pieces of x along `axis` of the given sizes (Split's outputs, SplitToSequence's items): each
// size non-negative, and their sum the dimension where it is static.
FailureOr<SmallVector<Value>> Converter::splitPieces(Value x, int64_t axis,
                                                     ArrayRef<int64_t> sizes) {
  RankedTensorType type = typeOf(x);
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return error() << "split size " << size << " is negative";
    total += size;
  }
  if (!type.isDynamicDim(axis) && total != type.getDimSize(axis))
    return error() << "split sizes add up to " << total << ", but dimension " << axis << " of "
                   << type << " is " << type.getDimSize(axis);
  SmallVector<Value> pieces;
  int64_t start = 0;
  for (int64_t size : sizes) {
    FailureOr<Value> piece =
        im.build<SliceOp>(node, x, im.constantInts(loc, {start}),
                          im.constantInts(loc, {start + size}), im.constantInts(loc, {axis}),
                          Value());
    if (failed(piece))
      return failure();
    pieces.push_back(*piece);
    start += size;
  }
  return pieces;
}

FailureOr<Results> Converter::layerNorm() {
  if (failed(expectInputs(2, 3)))
    return failure();
  FailureOr<Value> x = in(0), scale = in(1), bias = optIn(2);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  // Only the normalised output: the optional mean and inverse deviation outputs are for training
  // frameworks, and exporters leave them unused.
  if (node.output_size() > 1 && !node.output(1).empty())
    return error() << "the Mean and InvStdDev outputs are not supported";
  auto op = b.create<LayerNormOp>(loc, x->getType(), *x, *scale, *bias,
                                  b.getI64IntegerAttr(intAttr(node, "axis", -1)),
                                  b.getF32FloatAttr(floatAttr(node, "epsilon", 1e-5f)));
  if (failed(im.verifyBuilt(node, op)))
    return failure();
  return Results{op.getResult()};
}

// Max(a, b) = a < b ? b : a, folded over any number of inputs (Min likewise): no kernel of its
// own, and exporters use it only to clamp scores. For floats, b == b ? that : b makes a NaN in
// either operand the result, as ONNX (and NumPy) have it; with a constant b it folds away.
FailureOr<Results> Converter::minMax() {
  bool max = node.op_type() == "Max";
  if (node.input_size() < 1)
    return error() << "expected at least one input";
  FailureOr<Value> acc = in(0);
  for (int i = 1; i < node.input_size() && succeeded(acc); ++i) {
    FailureOr<Value> next = in(i);
    if (failed(next))
      return failure();
    FailureOr<Value> less =
        max ? im.build<LessOp>(node, *acc, *next) : im.build<LessOp>(node, *next, *acc);
    if (failed(less))
      return failure();
    acc = im.build<WhereOp>(node, *less, *next, *acc);
    if (failed(acc) || !llvm::isa<FloatType>(typeOf(*next).getElementType()))
      continue;
    FailureOr<Value> notNan = im.build<EqualOp>(node, *next, *next);
    if (failed(notNan))
      return failure();
    acc = im.build<WhereOp>(node, *notNan, *acc, *next);
  }
  return one(acc);
}

// Dropout is the identity in an inference export, and in a training export (torch.onnx's
// TrainingMode.PRESERVE, the form that keeps every parameter its own initializer) when its ratio
// is 0; that export also names the mask output, which is then all true. Any other training-mode
// dropout is refused: it would need random numbers the schedule does not have.
FailureOr<Results> Converter::dropout() {
  if (failed(expectInputs(1, 3)))
    return failure();
  FailureOr<Value> x = in(0), ratio = optIn(1), training = optIn(2);
  if (failed(x) || failed(ratio) || failed(training))
    return failure();
  bool train = false;
  if (*training) {
    auto mode = sl::constantInts(*training);
    if (!mode || mode->size() != 1)
      return error() << "training_mode must be a constant";
    train = (*mode)[0] != 0;
  }
  if (train) {
    std::optional<SmallVector<double>> p;
    if (auto c = *ratio ? ratio->getDefiningOp<ConstantOp>() : ConstantOp())
      p = sl::constantFloats(c.getValue());
    if (!p || p->size() != 1 || (*p)[0] != 0.0)
      return error() << "training-mode Dropout is supported only with a constant ratio of 0 "
                        "(export with dropout probabilities 0, or in eval mode)";
  }
  Results results{*x};
  if (node.output_size() > 1 && !node.output(1).empty()) {
    if (!train)
      return error() << "Dropout's mask output is not supported outside training mode";
    FailureOr<Value> shape = im.build<ShapeOp>(node, *x, b.getI64IntegerAttr(0), IntegerAttr());
    if (failed(shape))
      return failure();
    auto boolType = RankedTensorType::get({1}, b.getI1Type());
    FailureOr<Value> mask = im.build<ConstantOfShapeOp>(
        node, *shape, llvm::cast<ElementsAttr>(DenseElementsAttr::get(boolType, true)));
    if (failed(mask))
      return failure();
    results.push_back(*mask);
  }
  return results;
}

// Greater(a, b) is Less(b, a); GreaterOrEqual and LessOrEqual add Equal with Or, so that a NaN
// operand gives false as ONNX has it (a negated Less would give true). No kernels of their own:
// masks use them (transformers >= 4.38 builds the causal mask with arange > cache_position), and
// with shapes bound they fold.
FailureOr<Results> Converter::compare() {
  llvm::StringRef type = node.op_type();
  if (failed(expectInputs(2, 2)))
    return failure();
  FailureOr<Value> lhs = in(0), rhs = in(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  bool greater = type.starts_with("Greater");
  FailureOr<Value> strict =
      greater ? im.build<LessOp>(node, *rhs, *lhs) : im.build<LessOp>(node, *lhs, *rhs);
  if (failed(strict) || type == "Greater")
    return one(strict);
  FailureOr<Value> equal = im.build<EqualOp>(node, *lhs, *rhs);
  if (failed(equal))
    return failure();
  // a or b = a ? true : b, with the result's shape broadcast from both.
  auto boolType = RankedTensorType::get({}, b.getI1Type());
  Value yes = b.create<ConstantOp>(loc, boolType, DenseElementsAttr::get(boolType, true));
  return one(im.build<WhereOp>(node, *strict, yes, *equal));
}

// Not, And and Or of i1 tensors as selections (sl.where, which moves elements of any type):
// not a = a ? false : true, a and b = a ? b : false, a or b = a ? true : b.
FailureOr<Results> Converter::logical() {
  llvm::StringRef type = node.op_type();
  bool unaryNot = type == "Not";
  if (failed(expectInputs(unaryNot ? 1 : 2, unaryNot ? 1 : 2)))
    return failure();
  FailureOr<Value> lhs = in(0);
  FailureOr<Value> rhs = unaryNot ? lhs : in(1);
  if (failed(lhs) || failed(rhs))
    return failure();
  for (Value v : {*lhs, *rhs})
    if (!typeOf(v).getElementType().isInteger(1))
      return error() << "expected bool inputs, got " << v.getType();
  auto boolType = RankedTensorType::get({}, b.getI1Type());
  Value yes = b.create<ConstantOp>(loc, boolType, DenseElementsAttr::get(boolType, true));
  Value no = b.create<ConstantOp>(loc, boolType, DenseElementsAttr::get(boolType, false));
  if (unaryNot)
    return one(im.build<WhereOp>(node, *lhs, no, yes));
  if (type == "And")
    return one(im.build<WhereOp>(node, *lhs, *rhs, no));
  return one(im.build<WhereOp>(node, *lhs, yes, *rhs));
}

// Exporters write If for a squeeze of a dimension whose size they did not know, and for other
// tests of shapes. Once the condition is a constant (shapes fold while importing) the taken
// branch is imported in place; a condition known only at run time is not supported.
FailureOr<Results> Converter::ifNode() {
  FailureOr<Value> cond = in(0);
  if (failed(cond))
    return failure();
  auto value = sl::constantInts(*cond);
  if (!value || value->size() != 1)
    return error() << "the condition must be known when the model is compiled (it depends on "
                      "values computed at run time)";
  const onnx::AttributeProto *branch = findAttr(node, (*value)[0] ? "then_branch" : "else_branch");
  if (!branch || !branch->has_g())
    return error() << "the branch is missing";
  FailureOr<SmallVector<Item>> outputs = im.importSubgraph(node, branch->g());
  if (failed(outputs))
    return failure();
  Results results;
  for (auto [index, item] : llvm::enumerate(*outputs))
    defineOutput(results, int(index), std::move(item));
  return results;
}

void Converter::defineOutput(Results &results, int index, Item item) {
  if (auto *sequence = std::get_if<Sequence>(&item)) {
    if (index < node.output_size() && !node.output(index).empty())
      im.defineSequence(node.output(index), std::move(*sequence));
    results.push_back(Value());
    return;
  }
  results.push_back(std::get<Value>(item));
}

// torch.onnx writes Python loops over a tensor's elements (repeat_interleave, in GPT-J's rotary
// tables) as Loop over sequences. When the trip count and the condition are constants while
// importing (they come from static dimensions), the body is imported once per iteration, in
// place, with the iteration number a constant: sequence positions resolve, sequences become
// lists of tensors, and what the loop computes folds like the rest of the graph. A loop whose
// count or condition depends on values computed at run time is not supported.
FailureOr<Results> Converter::loop() {
  const onnx::AttributeProto *bodyAttr = findAttr(node, "body");
  if (!bodyAttr || !bodyAttr->has_g())
    return error() << "the body is missing";
  const onnx::GraphProto &body = bodyAttr->g();
  int carried = node.input_size() - 2;
  if (carried < 0)
    return error() << "expected at least 2 inputs (the trip count and the condition, each "
                      "possibly empty), got "
                   << node.input_size();
  int scans = body.output_size() - 1 - carried;
  if (body.input_size() != carried + 2 || scans < 0)
    return error() << "the body takes " << body.input_size() << " inputs and gives "
                   << body.output_size() << " outputs; with " << carried
                   << " loop-carried values it must take " << carried + 2
                   << " and give at least " << carried + 1;
  if (node.output_size() > carried + scans)
    return error() << "the node has " << node.output_size() << " outputs, but its body gives only "
                   << carried << " loop-carried values and " << scans << " scan outputs";

  FailureOr<Value> count = optIn(0), condition = optIn(1);
  if (failed(count) || failed(condition))
    return failure();
  std::optional<int64_t> trips;
  if (*count) {
    auto value = sl::constantInts(*count);
    if (!value || value->size() != 1)
      return error() << "the trip count must be known when the model is compiled (it depends on "
                        "values computed at run time); only loops whose trip count and "
                        "condition fold to constants are supported, and they are unrolled";
    trips = std::max<int64_t>((*value)[0], 0);
  }
  auto knownCondition = [&](Value v) -> std::optional<bool> {
    auto value = sl::constantInts(v);
    if (!value || value->size() != 1)
      return std::nullopt;
    return (*value)[0] != 0;
  };
  bool running = true;
  if (*condition) {
    std::optional<bool> known = knownCondition(*condition);
    if (!known)
      return error() << "the loop condition must be known when the model is compiled (it "
                        "depends on values computed at run time)";
    running = *known;
  }
  if (!trips && !*condition)
    return error() << "the loop has neither a trip count nor a condition, so it never ends";

  SmallVector<Item> state;
  for (int i = 0; i < carried; ++i) {
    FailureOr<Item> item = im.itemInput(node, 2 + i);
    if (failed(item))
      return failure();
    state.push_back(std::move(*item));
  }
  SmallVector<SmallVector<Value>> scanned(scans);
  auto boolType = RankedTensorType::get({}, b.getI1Type());
  for (int64_t i = 0; running && (!trips || i < *trips); ++i) {
    im.unrolledNodes += body.node_size();
    if (im.unrolledNodes > kMaxUnrolledNodes)
      return error() << "unrolling this loop (iteration " << i << ") takes the model past "
                     << kMaxUnrolledNodes << " unrolled nodes, the limit";
    SmallVector<Item> inputs{im.constantInts(loc, {i}, /*scalar=*/true),
                             Value(b.create<ConstantOp>(loc, boolType,
                                                        DenseElementsAttr::get(boolType, true)))};
    inputs.append(state.begin(), state.end());
    FailureOr<SmallVector<Item>> outputs = im.importSubgraph(node, body, inputs);
    if (failed(outputs))
      return failure();
    auto *next = std::get_if<Value>(&(*outputs)[0]);
    std::optional<bool> known = next ? knownCondition(*next) : std::nullopt;
    if (!known)
      return error() << "the condition the body computes must be known when the model is "
                        "compiled (it depends on values computed at run time)";
    running = *known;
    for (int k = 0; k < carried; ++k)
      state[k] = std::move((*outputs)[1 + k]);
    for (int k = 0; k < scans; ++k) {
      auto *value = std::get_if<Value>(&(*outputs)[1 + carried + k]);
      if (!value)
        return error() << "scan output " << k << " is a sequence; scan outputs must be tensors";
      scanned[k].push_back(*value);
    }
  }

  Results results;
  for (int k = 0; k < carried && k < node.output_size(); ++k)
    defineOutput(results, k, std::move(state[k]));
  // Scan outputs stack the iterations' values along a new first dimension.
  for (int k = 0; carried + k < node.output_size(); ++k) {
    if (scanned[k].empty())
      return error() << "scan output " << k << " of a loop that runs no iteration has no shape";
    SmallVector<Value> rows;
    for (Value v : scanned[k]) {
      FailureOr<Value> row = unsqueezeAt(v, 0);
      if (failed(row))
        return failure();
      rows.push_back(*row);
    }
    FailureOr<Value> stacked = im.build<ConcatOp>(node, rows, 0);
    if (failed(stacked))
      return failure();
    results.push_back(*stacked);
  }
  return results;
}

// SplitToSequence: pieces of size 1 along the axis (without it when keepdims is 0), of the
// scalar `split`'s size (the last one shorter), or of the sizes `split` lists.
FailureOr<Results> Converter::splitToSequence() {
  if (failed(expectInputs(1, 2)))
    return failure();
  FailureOr<Value> x = in(0), splitValue = optIn(1);
  if (failed(x) || failed(splitValue))
    return failure();
  RankedTensorType type = typeOf(*x);
  FailureOr<int64_t> axisOrError = axisOf(type, 0);
  if (failed(axisOrError))
    return failure();
  int64_t axis = *axisOrError;
  if (type.isDynamicDim(axis))
    return error() << "dimension " << axis << " of " << type
                   << " must be static: a sequence's length must be known while importing";
  int64_t dim = type.getDimSize(axis);
  SmallVector<int64_t> sizes;
  bool squeezeAxis = false;
  if (!*splitValue) {
    sizes.assign(dim, 1);
    squeezeAxis = intAttr(node, "keepdims", 1) == 0;
  } else {
    FailureOr<SmallVector<int64_t>> known = knownInts(*splitValue, "split");
    if (failed(known))
      return failure();
    if (typeOf(*splitValue).getRank() == 0) {
      int64_t chunk = (*known)[0];
      if (chunk <= 0)
        return error() << "split size " << chunk << " is not positive";
      for (int64_t start = 0; start < dim; start += chunk)
        sizes.push_back(std::min(chunk, dim - start));
    } else {
      sizes = *known;
    }
  }
  FailureOr<SmallVector<Value>> pieces = splitPieces(*x, axis, sizes);
  if (failed(pieces))
    return failure();
  Sequence sequence{type.getElementType(), {}};
  for (FailureOr<Value> piece : *pieces) {
    if (squeezeAxis) {
      SmallVector<Value> dims;
      for (int64_t d = 0; d < type.getRank(); ++d)
        if (d != axis)
          dims.push_back(dimOf(*piece, d));
      piece = reshapeDims(*piece, dims);
      if (failed(piece))
        return failure();
    }
    sequence.items.push_back(*piece);
  }
  Results results;
  defineOutput(results, 0, std::move(sequence));
  return results;
}

// ConcatFromSequence: the tensors joined along `axis`, or stacked along a new one (new_axis).
FailureOr<Results> Converter::concatFromSequence() {
  if (failed(expectInputs(1, 1)))
    return failure();
  FailureOr<const Sequence *> sequence = im.sequenceInput(node, 0);
  if (failed(sequence))
    return failure();
  if (!findAttr(node, "axis"))
    return error() << "attribute 'axis' is required";
  if ((*sequence)->items.empty())
    return error() << "the sequence is empty, so the result has no shape";
  int64_t axis = intAttr(node, "axis", 0);
  bool stack = intAttr(node, "new_axis", 0) != 0;
  SmallVector<Value> inputs((*sequence)->items);
  if (stack) {
    int64_t rank = typeOf(inputs[0]).getRank() + 1;
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank)
      return error() << "axis " << axis << " is out of range for a new axis of rank " << rank;
    for (Value &v : inputs) {
      FailureOr<Value> row = unsqueezeAt(v, a);
      if (failed(row))
        return failure();
      v = *row;
    }
    axis = a;
  }
  return one(im.build<ConcatOp>(node, inputs, axis));
}

// The other sequence operators move tensors in and out of a list known while importing.
FailureOr<Results> Converter::sequenceOp() {
  llvm::StringRef type = node.op_type();
  Results results;
  // A position: a constant scalar, negative counting from the end, in [0, size) (or up to size
  // inclusive for an insertion).
  auto position = [&](int index, int64_t size, bool insert) -> FailureOr<int64_t> {
    FailureOr<Value> value = optIn(index);
    if (failed(value))
      return failure();
    if (!*value)
      return insert ? size : size - 1;
    FailureOr<SmallVector<int64_t>> known = knownInts(*value, "the position");
    if (failed(known))
      return failure();
    if (known->size() != 1)
      return error() << "the position must be a scalar, got " << value->getType();
    int64_t p = (*known)[0] < 0 ? (*known)[0] + size : (*known)[0];
    if (p < 0 || p > size || (p == size && !insert))
      return error() << "position " << (*known)[0] << " is out of range for a sequence of "
                     << size << " tensors";
    return p;
  };
  if (type == "SequenceEmpty") {
    int32_t dtype = int32_t(intAttr(node, "dtype", onnx::TensorProto::FLOAT));
    FailureOr<Type> element = elementType(im.context, dtype);
    if (failed(element))
      return error() << "sequences of " << onnxTypeName(dtype) << " are not supported";
    defineOutput(results, 0, Sequence{*element, {}});
    return results;
  }
  if (type == "SequenceConstruct") {
    Sequence sequence;
    for (int i = 0; i < node.input_size(); ++i) {
      FailureOr<Value> v = in(i);
      if (failed(v))
        return failure();
      if (i > 0 && typeOf(*v).getElementType() != sequence.element)
        return error() << "input " << i << " has element type " << typeOf(*v).getElementType()
                       << ", input 0 " << sequence.element;
      sequence.element = typeOf(*v).getElementType();
      sequence.items.push_back(*v);
    }
    if (sequence.items.empty())
      return error() << "expected at least one input";
    defineOutput(results, 0, std::move(sequence));
    return results;
  }
  FailureOr<const Sequence *> sequence = im.sequenceInput(node, 0);
  if (failed(sequence))
    return failure();
  int64_t size = int64_t((*sequence)->items.size());
  if (type == "SequenceLength")
    return Results{im.constantInts(loc, {size}, /*scalar=*/true)};
  if (type == "SequenceAt") {
    if (failed(expectInputs(2, 2)))
      return failure();
    FailureOr<int64_t> p = position(1, size, /*insert=*/false);
    if (failed(p))
      return failure();
    return Results{(*sequence)->items[*p]};
  }
  // SequenceInsert
  if (failed(expectInputs(2, 3)))
    return failure();
  FailureOr<Value> tensor = in(1);
  FailureOr<int64_t> p = position(2, size, /*insert=*/true);
  if (failed(tensor) || failed(p))
    return failure();
  if (typeOf(*tensor).getElementType() != (*sequence)->element)
    return error() << "inserting a tensor of element type " << typeOf(*tensor).getElementType()
                   << " into a sequence of " << (*sequence)->element;
  Sequence inserted = **sequence;
  inserted.items.insert(inserted.items.begin() + *p, *tensor);
  defineOutput(results, 0, std::move(inserted));
  return results;
}

FailureOr<Results> Converter::neg() {
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  auto op = b.create<NegOp>(loc, *x);
  if (failed(im.verifyBuilt(node, op)))
    return failure();
  return Results{op.getResult()};
}

FailureOr<Results> Converter::softmax() {
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  auto op = b.create<SoftmaxOp>(loc, *x, b.getI64IntegerAttr(intAttr(node, "axis", -1)));
  if (failed(im.verifyBuilt(node, op)))
    return failure();
  return Results{op.getResult()};
}

FailureOr<Results> Converter::gather() {
  FailureOr<Value> data = in(0), indices = in(1);
  if (failed(data) || failed(indices))
    return failure();
  return one(im.build<GatherOp>(node, *data, *indices, intAttr(node, "axis", 0)));
}

FailureOr<Results> Converter::reshape() {
  FailureOr<Value> x = in(0), shape = in(1);
  if (failed(x) || failed(shape))
    return failure();
  return one(im.build<ReshapeOp>(node, *x, *shape, intAttr(node, "allowzero", 0) != 0));
}

FailureOr<Results> Converter::transpose() {
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  SmallVector<int64_t> perm = intsAttr(node, "perm").value_or(SmallVector<int64_t>{});
  // Without perm, ONNX reverses the dimensions.
  if (perm.empty())
    for (int64_t axis = typeOf(*x).getRank() - 1; axis >= 0; --axis)
      perm.push_back(axis);
  return one(im.build<TransposeOp>(node, *x, perm));
}

FailureOr<Results> Converter::concat() {
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    FailureOr<Value> v = in(i);
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  if (!findAttr(node, "axis"))
    return error() << "attribute 'axis' is required";
  return one(im.build<ConcatOp>(node, inputs, intAttr(node, "axis", 0)));
}

FailureOr<Results> Converter::expand() {
  FailureOr<Value> x = in(0), shape = in(1);
  if (failed(x) || failed(shape))
    return failure();
  return one(im.build<ExpandOp>(node, *x, *shape));
}

FailureOr<Results> Converter::where() {
  FailureOr<Value> c = in(0), x = in(1), y = in(2);
  if (failed(c) || failed(x) || failed(y))
    return failure();
  if (!typeOf(*c).getElementType().isInteger(1))
    return error() << "the condition must be bool, got " << c->getType();
  return one(im.build<WhereOp>(node, *c, *x, *y));
}

FailureOr<Results> Converter::trilu() {
  FailureOr<Value> x = in(0), k = optIn(1);
  if (failed(x) || failed(k))
    return failure();
  return one(im.build<TriluOp>(node, *x, *k, intAttr(node, "upper", 1) != 0));
}

FailureOr<Results> Converter::tile() {
  FailureOr<Value> x = in(0), repeats = in(1);
  if (failed(x) || failed(repeats))
    return failure();
  return one(im.build<TileOp>(node, *x, *repeats));
}

FailureOr<Results> Converter::gatherElements() {
  FailureOr<Value> data = in(0), indices = in(1);
  if (failed(data) || failed(indices))
    return failure();
  return one(im.build<GatherElementsOp>(node, *data, *indices, intAttr(node, "axis", 0)));
}

FailureOr<Results> Converter::scatterND() {
  FailureOr<Value> data = in(0), indices = in(1), updates = in(2);
  if (failed(data) || failed(indices) || failed(updates))
    return failure();
  const onnx::AttributeProto *reduction = findAttr(node, "reduction");
  return one(im.build<ScatterNDOp>(node, *data, *indices, *updates,
                                   reduction ? reduction->s() : std::string("none")));
}

FailureOr<Results> Converter::cumSum() {
  if (failed(expectInputs(2, 2)))
    return failure();
  FailureOr<Value> x = in(0), axis = in(1);
  if (failed(x) || failed(axis))
    return failure();
  // The kernel sums along one axis fixed in the schedule.
  if (failed(knownInts(*axis, "CumSum's axis")))
    return failure();
  return one(im.build<CumSumOp>(node, *x, *axis, intAttr(node, "exclusive", 0) != 0,
                                intAttr(node, "reverse", 0) != 0));
}

FailureOr<Results> Converter::shape() {
  FailureOr<Value> x = in(0);
  if (failed(x))
    return failure();
  const onnx::AttributeProto *end = findAttr(node, "end");
  return one(im.build<ShapeOp>(node, *x, b.getI64IntegerAttr(intAttr(node, "start", 0)),
                               end ? b.getI64IntegerAttr(end->i()) : IntegerAttr()));
}

FailureOr<Results> Converter::constantOfShape() {
  FailureOr<Value> shape = in(0);
  if (failed(shape))
    return failure();
  Attribute value;
  if (const onnx::AttributeProto *attr = findAttr(node, "value")) {
    FailureOr<Value> c = im.constant(node, attr->t());
    if (failed(c))
      return failure();
    value = c->getDefiningOp<ConstantOp>().getValue();
    c->getDefiningOp()->erase();
  } else {
    auto f = RankedTensorType::get({1}, b.getF32Type());
    value = DenseElementsAttr::get(f, 0.0f);
  }
  if (llvm::cast<ElementsAttr>(value).getNumElements() != 1)
    return error() << "value must have exactly one element";
  return one(im.build<ConstantOfShapeOp>(node, *shape, llvm::cast<ElementsAttr>(value)));
}

FailureOr<Results> Converter::range() {
  FailureOr<Value> start = in(0), limit = in(1), delta = in(2);
  if (failed(start) || failed(limit) || failed(delta))
    return failure();
  return one(im.build<RangeOp>(node, *start, *limit, *delta));
}

FailureOr<Results> Converter::identity() { return one(in(0)); }

FailureOr<Results> Converter::run() {
  // Rows (op_type, first opset, last opset, converter); an op_type may have several rows, each
  // for the opsets in which its converter is right. ONNX's operator changelog gives the versions:
  // an op added after opset 13 starts at the opset that added it.
  struct Row {
    llvm::StringLiteral type;
    int64_t firstOpset, lastOpset;
    FailureOr<Results> (Converter::*convert)();
  };
  static const Row rows[] = {
      {"Gemm", 13, 21, &Converter::gemm},
      {"MatMul", 13, 21, &Converter::binary<MatmulOp>},
      {"Add", 13, 21, &Converter::binary<AddOp>},
      {"Sub", 13, 21, &Converter::binary<SubOp>},
      {"Mul", 13, 21, &Converter::binary<MulOp>},
      {"Div", 13, 21, &Converter::binary<DivOp>},
      {"Equal", 13, 21, &Converter::binary<EqualOp>},
      {"Less", 13, 21, &Converter::binary<LessOp>},
      {"Greater", 13, 21, &Converter::compare},
      {"GreaterOrEqual", 13, 21, &Converter::compare},
      {"LessOrEqual", 13, 21, &Converter::compare},
      {"Not", 13, 21, &Converter::logical},
      {"And", 13, 21, &Converter::logical},
      {"Or", 13, 21, &Converter::logical},
      {"Cos", 13, 21, &Converter::unary<CosOp>},
      {"Sin", 13, 21, &Converter::unary<SinOp>},
      {"Pow", 13, 21, &Converter::pow},
      {"Relu", 13, 21, &Converter::unary<ReluOp>},
      {"Sigmoid", 13, 21, &Converter::unary<SigmoidOp>},
      {"Sqrt", 13, 21, &Converter::unary<SqrtOp>},
      {"Reciprocal", 13, 21, &Converter::unary<ReciprocalOp>},
      {"Exp", 13, 21, &Converter::unary<ExpOp>},
      {"Erf", 13, 21, &Converter::unary<ErfOp>},
      {"Tanh", 13, 21, &Converter::unary<TanhOp>},
      {"Neg", 13, 21, &Converter::neg},
      {"Identity", 13, 21, &Converter::identity},
      {"Dropout", 13, 21, &Converter::dropout},
      {"Constant", 13, 21, &Converter::constantNode},
      {"Cast", 13, 21, &Converter::cast},
      {"Softmax", 13, 21, &Converter::softmax},
      {"ReduceMean", 13, 21, &Converter::reduce},
      {"ReduceSum", 13, 21, &Converter::reduce},
      {"Gather", 13, 21, &Converter::gather},
      {"Reshape", 13, 21, &Converter::reshape},
      {"Transpose", 13, 21, &Converter::transpose},
      {"Unsqueeze", 13, 21, &Converter::unsqueeze},
      {"Squeeze", 13, 21, &Converter::squeeze},
      {"Flatten", 13, 21, &Converter::flatten},
      {"Concat", 13, 21, &Converter::concat},
      {"Slice", 13, 21, &Converter::slice},
      {"Split", 13, 21, &Converter::split},
      {"Expand", 13, 21, &Converter::expand},
      {"Where", 13, 21, &Converter::where},
      {"Trilu", 14, 21, &Converter::trilu},
      {"Tile", 13, 21, &Converter::tile},
      {"GatherElements", 13, 21, &Converter::gatherElements},
      {"ScatterND", 13, 21, &Converter::scatterND},
      {"CumSum", 13, 21, &Converter::cumSum},
      {"Shape", 13, 21, &Converter::shape},
      {"ConstantOfShape", 13, 21, &Converter::constantOfShape},
      {"Range", 13, 21, &Converter::range},
      {"LayerNormalization", 17, 21, &Converter::layerNorm},
      {"Max", 13, 21, &Converter::minMax},
      {"Min", 13, 21, &Converter::minMax},
      {"If", 13, 21, &Converter::ifNode},
      {"Loop", 13, 21, &Converter::loop},
      {"SplitToSequence", 13, 21, &Converter::splitToSequence},
      {"ConcatFromSequence", 13, 21, &Converter::concatFromSequence},
      {"SequenceEmpty", 13, 21, &Converter::sequenceOp},
      {"SequenceConstruct", 13, 21, &Converter::sequenceOp},
      {"SequenceLength", 13, 21, &Converter::sequenceOp},
      {"SequenceAt", 13, 21, &Converter::sequenceOp},
      {"SequenceInsert", 13, 21, &Converter::sequenceOp},
  };
  llvm::StringRef type = node.op_type();
  SmallVector<const Row *> known;
  for (const Row &row : rows) {
    if (row.type != type)
      continue;
    if (im.opset >= row.firstOpset && im.opset <= row.lastOpset)
      return (this->*row.convert)();
    known.push_back(&row);
  }
  if (known.empty())
    return error() << "unsupported operator";
  InFlightDiagnostic diag = error();
  diag << type << " is not supported at opset " << im.opset << " (supported at opsets ";
  for (auto [i, row] : llvm::enumerate(known))
    diag << (i ? ", " : "") << row->firstOpset << " to " << row->lastOpset;
  return diag << ")";
}

} // namespace

FailureOr<SmallVector<Value>> convertNode(Importer &importer, const onnx::NodeProto &node) {
  return Converter(importer, node).run();
}

} // namespace sl::import
