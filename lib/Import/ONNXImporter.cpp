//===- ONNXImporter.cpp - ONNX models into the sl dialect --------------------------------------===//
//
// Reads a binary (.onnx) or text (.onnxtxt) ONNX model and builds one `func.func` of `sl` ops.
// Initializers become `sl.param` references to where their bytes are (the model file, or its
// external-data file); the weights are never copied into the IR.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Import/ONNXImporter.h"

#include "InitializerLocations.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <climits>

using namespace mlir;

namespace sl {

bool isOnnxFileName(llvm::StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtxt");
}

namespace {

// Parameters record absolute paths, so the IR means the same whatever directory tools run in.
std::string absolute(llvm::StringRef path) {
  llvm::SmallString<256> full(path);
  llvm::sys::fs::make_absolute(full);
  llvm::sys::path::remove_dots(full, /*remove_dot_dot=*/true);
  return full.str().str();
}

// Exporters write these opsets; the operators imported so far mean the same in all of them.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 21;

class Importer {
public:
  Importer(MLIRContext *context, llvm::StringRef path)
      : context(context), builder(context), path(absolute(path)) {}

  OwningOpRef<ModuleOp> run(const ImportOptions &options);

private:
  LogicalResult load();
  LogicalResult checkOpset();
  LogicalResult importInputs(SmallVectorImpl<Type> &types, SmallVectorImpl<Attribute> &argAttrs);
  LogicalResult importNode(const onnx::NodeProto &node);
  FailureOr<Value> lookup(const onnx::NodeProto &node, int index);
  FailureOr<Value> param(const onnx::NodeProto &node, const onnx::TensorProto &tensor);
  FailureOr<RankedTensorType> tensorType(const onnx::TypeProto &type, llvm::StringRef what,
                                         SmallVectorImpl<Attribute> *dimNames = nullptr);

  InFlightDiagnostic fileError() { return emitError(fileLoc()) << path << ": "; }
  InFlightDiagnostic nodeError(const onnx::NodeProto &node);
  Location fileLoc() { return FileLineColLoc::get(context, path, 0, 0); }
  Location nodeLoc(const onnx::NodeProto &node);
  std::string nodeName(const onnx::NodeProto &node);

  /// Runs a shape rule and, if it fails, reports its message as an error of `node`.
  template <typename Rule>
  FailureOr<RankedTensorType> inferFor(const onnx::NodeProto &node, Rule rule);

  MLIRContext *context;
  OpBuilder builder;
  std::string path;
  onnx::ModelProto model;
  int64_t opset = 0;
  llvm::StringMap<import::ByteRange> dataLocations;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<Value> values;
  int nodeIndex = 0;
};

Location Importer::nodeLoc(const onnx::NodeProto &node) {
  return NameLoc::get(StringAttr::get(context, nodeName(node)), fileLoc());
}

std::string Importer::nodeName(const onnx::NodeProto &node) {
  if (!node.name().empty())
    return node.name();
  return node.op_type() + "#" + std::to_string(nodeIndex);
}

InFlightDiagnostic Importer::nodeError(const onnx::NodeProto &node) {
  std::string domain = node.domain().empty() ? "ai.onnx" : node.domain();
  return emitError(nodeLoc(node)) << path << ": node '" << nodeName(node) << "' (op_type '"
                                  << node.op_type() << "', domain '" << domain << "', opset "
                                  << opset << "): ";
}

template <typename Rule>
FailureOr<RankedTensorType> Importer::inferFor(const onnx::NodeProto &node, Rule rule) {
  std::string message;
  FailureOr<RankedTensorType> type = failure();
  {
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
      message = diag.str();
      return success();
    });
    type = rule(nodeLoc(node));
  }
  if (failed(type))
    nodeError(node) << message;
  return type;
}

FailureOr<Type> elementType(MLIRContext *context, int32_t onnxType) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    return Type(Float32Type::get(context));
  case onnx::TensorProto::FLOAT16:
    return Type(Float16Type::get(context));
  case onnx::TensorProto::BFLOAT16:
    return Type(BFloat16Type::get(context));
  case onnx::TensorProto::DOUBLE:
    return Type(Float64Type::get(context));
  case onnx::TensorProto::INT64:
    return Type(IntegerType::get(context, 64));
  case onnx::TensorProto::INT32:
    return Type(IntegerType::get(context, 32));
  case onnx::TensorProto::BOOL:
    return Type(IntegerType::get(context, 1));
  default:
    return failure();
  }
}

LogicalResult Importer::load() {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/true);
  if (!buffer)
    return fileError() << "cannot read model: " << buffer.getError().message();
  llvm::StringRef bytes = (*buffer)->getBuffer();

  if (path.size() >= 8 && llvm::StringRef(path).ends_with(".onnxtxt")) {
    onnx::Status status = onnx::OnnxParser::Parse(model, bytes.data());
    if (!status.IsOK())
      return fileError() << "not valid ONNX text: " << status.ErrorMessage();
  } else {
    if (bytes.size() > size_t(INT_MAX))
      return fileError() << "the model is " << bytes.size()
                         << " bytes; protobuf files over 2 GiB must keep their weights in "
                            "external data files";
    if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
      return fileError() << "not a valid ONNX model (truncated or corrupt protobuf)";
    std::string error;
    auto locations = import::locateInitializerData(bytes, error);
    if (!locations)
      return fileError() << "not a valid ONNX model: " << error;
    dataLocations = std::move(*locations);
  }
  if (!model.has_graph())
    return fileError() << "the model has no graph";
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers[tensor.name()] = &tensor;
  return checkOpset();
}

LogicalResult Importer::checkOpset() {
  for (const onnx::OperatorSetIdProto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  if (opset == 0)
    return fileError() << "the model imports no version of the default ONNX operator set";
  if (opset < kMinOpset || opset > kMaxOpset)
    return fileError() << "ONNX opset " << opset << " is not supported (supported: " << kMinOpset
                       << " to " << kMaxOpset << "); re-export the model with opset_version in "
                       << "that range";
  return success();
}

FailureOr<RankedTensorType> Importer::tensorType(const onnx::TypeProto &type,
                                                 llvm::StringRef what,
                                                 SmallVectorImpl<Attribute> *dimNames) {
  if (!type.has_tensor_type())
    return fileError() << what << " is not a tensor";
  const onnx::TypeProto::Tensor &tensor = type.tensor_type();
  FailureOr<Type> element = elementType(context, tensor.elem_type());
  if (failed(element))
    return fileError() << what << " has unsupported element type "
                       << onnx::TensorProto::DataType_Name(
                              onnx::TensorProto::DataType(tensor.elem_type()));
  if (!tensor.has_shape())
    return fileError() << what << " has no shape; export the model with input shapes";
  SmallVector<int64_t> shape;
  for (const onnx::TensorShapeProto::Dimension &dim : tensor.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() < 0)
      return fileError() << what << " has negative dimension " << dim.dim_value();
    shape.push_back(dim.has_dim_value() ? dim.dim_value() : ShapedType::kDynamic);
    if (dimNames)
      dimNames->push_back(builder.getStringAttr(dim.has_dim_param() ? dim.dim_param() : ""));
  }
  return RankedTensorType::get(shape, *element);
}

LogicalResult Importer::importInputs(SmallVectorImpl<Type> &types,
                                     SmallVectorImpl<Attribute> &argAttrs) {
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    // Before IR version 4 initializers were listed as inputs too; they are parameters.
    if (initializers.count(input.name()))
      continue;
    SmallVector<Attribute> dimNames;
    FailureOr<RankedTensorType> type =
        tensorType(input.type(), "input '" + input.name() + "'", &dimNames);
    if (failed(type))
      return failure();
    types.push_back(*type);
    argAttrs.push_back(builder.getDictionaryAttr(
        {builder.getNamedAttr("sl.name", builder.getStringAttr(input.name())),
         builder.getNamedAttr("sl.dims", builder.getArrayAttr(dimNames))}));
  }
  return success();
}

FailureOr<Value> Importer::param(const onnx::NodeProto &node, const onnx::TensorProto &tensor) {
  FailureOr<Type> element = elementType(context, tensor.data_type());
  if (failed(element) || !llvm::isa<FloatType>(*element))
    return nodeError(node) << "initializer '" << tensor.name() << "' has element type "
                           << onnx::TensorProto::DataType_Name(
                                  onnx::TensorProto::DataType(tensor.data_type()))
                           << "; only floating-point initializers (parameters) are supported";
  SmallVector<int64_t> shape;
  uint64_t numel = 1;
  for (int64_t dim : tensor.dims()) {
    if (dim < 0)
      return nodeError(node) << "initializer '" << tensor.name() << "' has negative dimension "
                             << dim;
    shape.push_back(dim);
    numel *= uint64_t(dim);
  }
  auto type = RankedTensorType::get(shape, *element);
  uint64_t bytes = numel * ((*element).getIntOrFloatBitWidth() / 8);

  StringAttr file;
  IntegerAttr offset;
  uint64_t length = 0;
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    uint64_t externalOffset = 0;
    std::optional<uint64_t> externalLength;
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      if (entry.key() == "location")
        location = entry.value();
      else if (entry.key() == "offset" || entry.key() == "length") {
        uint64_t value;
        if (llvm::StringRef(entry.value()).getAsInteger(10, value))
          return nodeError(node) << "initializer '" << tensor.name() << "' has a malformed "
                                 << entry.key() << " '" << entry.value() << "'";
        (entry.key() == "offset" ? externalOffset : externalLength.emplace()) = value;
      }
    }
    if (location.empty() || llvm::sys::path::is_absolute(location) ||
        llvm::StringRef(location).contains(".."))
      return nodeError(node) << "initializer '" << tensor.name()
                             << "' has a missing or unsafe external data location '" << location
                             << "'";
    llvm::SmallString<256> full(llvm::sys::path::parent_path(path));
    llvm::sys::path::append(full, location);
    uint64_t fileSize;
    if (llvm::sys::fs::file_size(full, fileSize))
      return nodeError(node) << "external data file '" << full << "' of initializer '"
                             << tensor.name() << "' cannot be read";
    length = externalLength.value_or(bytes);
    if (externalOffset > fileSize || length > fileSize - externalOffset)
      return nodeError(node) << "initializer '" << tensor.name() << "' reads bytes ["
                             << externalOffset << ", " << externalOffset + length << ") of '"
                             << full << "', which has only " << fileSize << " bytes";
    file = builder.getStringAttr(full);
    offset = builder.getI64IntegerAttr(int64_t(externalOffset));
  } else if (auto it = dataLocations.find(tensor.name()); it != dataLocations.end()) {
    file = builder.getStringAttr(path);
    offset = builder.getI64IntegerAttr(int64_t(it->second.offset));
    length = it->second.length;
  } else {
    // Inline values from ONNX text: a valid parameter, but one a schedule cannot point at.
    length = bytes;
  }
  if (length != bytes)
    return nodeError(node) << "initializer '" << tensor.name() << "' holds " << length
                           << " bytes of data, but its shape and type need " << bytes;

  OpBuilder::InsertionGuard guard(builder);
  auto op = builder.create<ParamOp>(NameLoc::get(builder.getStringAttr(tensor.name()), fileLoc()),
                                    type, tensor.name(), file, offset);
  return Value(op.getResult());
}

FailureOr<Value> Importer::lookup(const onnx::NodeProto &node, int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return nodeError(node) << "input " << index << " is missing";
  const std::string &name = node.input(index);
  if (auto it = values.find(name); it != values.end())
    return it->second;
  if (auto it = initializers.find(name); it != initializers.end()) {
    FailureOr<Value> value = param(node, *it->second);
    if (succeeded(value))
      values[name] = *value;
    return value;
  }
  return nodeError(node) << "input '" << name << "' is not produced by any earlier node, graph "
                         << "input or initializer";
}

static std::optional<int64_t> intAttr(const onnx::NodeProto &node, llvm::StringRef name) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return attr.i();
  return std::nullopt;
}

static std::optional<float> floatAttr(const onnx::NodeProto &node, llvm::StringRef name) {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return attr.f();
  return std::nullopt;
}

LogicalResult Importer::importNode(const onnx::NodeProto &node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nodeError(node) << "operators of domain '" << node.domain() << "' are not supported";
  llvm::StringRef opType = node.op_type();
  if (node.output_size() != 1 || node.output(0).empty())
    return nodeError(node) << "expected exactly one output, got " << node.output_size();
  Location loc = nodeLoc(node);

  auto operands = [&](int count) -> FailureOr<SmallVector<Value>> {
    if (node.input_size() != count)
      return nodeError(node) << "expected " << count << " inputs, got " << node.input_size();
    SmallVector<Value> result;
    for (int i = 0; i < count; ++i) {
      FailureOr<Value> value = lookup(node, i);
      if (failed(value))
        return failure();
      result.push_back(*value);
    }
    return result;
  };

  Value result;
  if (opType == "Gemm") {
    if (node.input_size() < 2 || node.input_size() > 3)
      return nodeError(node) << "expected 2 or 3 inputs, got " << node.input_size();
    FailureOr<Value> a = lookup(node, 0), b = lookup(node, 1);
    if (failed(a) || failed(b))
      return failure();
    Value c;
    if (node.input_size() == 3 && !node.input(2).empty()) {
      FailureOr<Value> value = lookup(node, 2);
      if (failed(value))
        return failure();
      c = *value;
    }
    bool transA = intAttr(node, "transA").value_or(0) != 0;
    bool transB = intAttr(node, "transB").value_or(0) != 0;
    auto type = inferFor(node, [&](Location l) {
      return inferGemmType(l, a->getType(), b->getType(), c ? c.getType() : Type(), transA,
                           transB);
    });
    if (failed(type))
      return failure();
    result = builder.create<GemmOp>(loc, *type, *a, *b, c, transA, transB,
                                    llvm::APFloat(floatAttr(node, "alpha").value_or(1.0f)),
                                    llvm::APFloat(floatAttr(node, "beta").value_or(1.0f)));
  } else if (opType == "MatMul") {
    auto ops = operands(2);
    if (failed(ops))
      return failure();
    auto type = inferFor(node, [&](Location l) {
      return inferMatmulType(l, (*ops)[0].getType(), (*ops)[1].getType());
    });
    if (failed(type))
      return failure();
    result = builder.create<MatmulOp>(loc, *type, (*ops)[0], (*ops)[1]);
  } else if (opType == "Add" || opType == "Mul") {
    auto ops = operands(2);
    if (failed(ops))
      return failure();
    bool add = opType == "Add";
    auto type = inferFor(node, [&](Location l) {
      return inferBroadcastType(l, add ? "sl.add" : "sl.mul", (*ops)[0].getType(),
                                (*ops)[1].getType());
    });
    if (failed(type))
      return failure();
    if (add)
      result = builder.create<AddOp>(loc, *type, (*ops)[0], (*ops)[1]);
    else
      result = builder.create<MulOp>(loc, *type, (*ops)[0], (*ops)[1]);
  } else if (opType == "Transpose") {
    auto ops = operands(1);
    if (failed(ops))
      return failure();
    Value x = (*ops)[0];
    SmallVector<int64_t> perm;
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.name() == "perm")
        perm.assign(attr.ints().begin(), attr.ints().end());
    // Without perm, ONNX reverses the dimensions.
    if (perm.empty())
      if (auto ranked = llvm::dyn_cast<RankedTensorType>(x.getType()))
        for (int64_t axis = ranked.getRank() - 1; axis >= 0; --axis)
          perm.push_back(axis);
    auto type = inferFor(node, [&](Location l) { return inferTransposeType(l, x.getType(), perm); });
    if (failed(type))
      return failure();
    result = builder.create<TransposeOp>(loc, *type, x, perm);
  } else if (opType == "Relu" || opType == "Sigmoid" || opType == "Identity") {
    auto ops = operands(1);
    if (failed(ops))
      return failure();
    Value x = (*ops)[0];
    if (opType != "Identity" && !llvm::isa<FloatType>(getElementTypeOrSelf(x.getType())))
      return nodeError(node) << "expected a floating-point input, got " << x.getType();
    if (opType == "Relu")
      result = builder.create<ReluOp>(loc, x.getType(), x);
    else if (opType == "Sigmoid")
      result = builder.create<SigmoidOp>(loc, x.getType(), x);
    else
      result = x;
  } else {
    return nodeError(node) << "unsupported operator";
  }
  values[node.output(0)] = result;
  return success();
}

OwningOpRef<ModuleOp> Importer::run(const ImportOptions &options) {
  context->loadDialect<func::FuncDialect, SLDialect>();
  if (failed(load()))
    return nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc());
  builder.setInsertionPointToEnd(module->getBody());
  SmallVector<Type> argTypes;
  SmallVector<Attribute> argAttrs;
  if (failed(importInputs(argTypes, argAttrs)))
    return nullptr;
  auto func = builder.create<func::FuncOp>(fileLoc(), options.entryName,
                                           builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  func.setAllArgAttrs(argAttrs);
  {
    int i = 0;
    for (const onnx::ValueInfoProto &input : model.graph().input())
      if (!initializers.count(input.name()))
        values[input.name()] = entry->getArgument(i++);
  }

  builder.setInsertionPointToStart(entry);
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (failed(importNode(node)))
      return nullptr;
    ++nodeIndex;
  }

  SmallVector<Value> results;
  SmallVector<Attribute> resultAttrs;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    auto it = values.find(output.name());
    if (it == values.end()) {
      fileError() << "graph output '" << output.name() << "' is not produced by any node";
      return nullptr;
    }
    if (output.type().has_tensor_type()) {
      FailureOr<Type> declared = elementType(context, output.type().tensor_type().elem_type());
      if (succeeded(declared) && *declared != getElementTypeOrSelf(it->second.getType())) {
        fileError() << "graph output '" << output.name() << "' is declared " << *declared
                    << " but computes " << it->second.getType();
        return nullptr;
      }
    }
    results.push_back(it->second);
    resultAttrs.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("sl.name", builder.getStringAttr(output.name()))));
  }
  if (results.empty()) {
    fileError() << "the graph has no outputs";
    return nullptr;
  }
  builder.create<func::ReturnOp>(fileLoc(), results);
  func.setFunctionType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return module;
}

} // namespace

OwningOpRef<ModuleOp> importOnnxFile(llvm::StringRef path, MLIRContext *context,
                                     const ImportOptions &options) {
  return Importer(context, path).run(options);
}

} // namespace sl
