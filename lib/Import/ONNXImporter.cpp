//===- ONNXImporter.cpp - ONNX models into the sl dialect --------------------------------------===//
//
// Reads a binary (.onnx) or text (.onnxtxt) ONNX model and builds one `func.func` of `sl` ops.
// Initializers become `sl.param` references to where their bytes are (the model file, or its
// external-data file); the weights are never copied into the IR. Integer initializers, scalars
// and floating-point ones that no gradient can reach (a mask read through Equal) are constants.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Import/ONNXImporter.h"

#include "Importer.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"
#include "sl/Support/CheckedArith.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <limits>

using namespace mlir;

namespace sl {

bool isOnnxFileName(llvm::StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtxt");
}

namespace {

// Whether `path` names something strictly inside directory `dir` (both real paths).
bool isInside(llvm::StringRef path, llvm::StringRef dir) {
  if (dir == "/")
    return path.size() > 1 && path.starts_with("/");
  return path.size() > dir.size() + 1 && path.starts_with(dir) && path[dir.size()] == '/';
}

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


} // namespace

namespace import {

Importer::Importer(MLIRContext *context, llvm::StringRef path)
    : context(context), builder(context), path(absolute(path)) {}

InFlightDiagnostic Importer::fileError() { return emitError(fileLoc()) << path << ": "; }
Location Importer::fileLoc() { return FileLineColLoc::get(context, path, 0, 0); }

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

LogicalResult Importer::inferResultType(const onnx::NodeProto &node, Operation *op) {
  std::string message;
  SmallVector<Type> types;
  LogicalResult inferred = failure();
  {
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
      message = diag.str();
      return success();
    });
    auto inferable = llvm::cast<InferTypeOpInterface>(op);
    inferred = inferable.inferReturnTypes(context, op->getLoc(), op->getOperands(),
                                          op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
                                          op->getRegions(), types);
  }
  if (failed(inferred)) {
    op->erase();
    return nodeError(node) << message;
  }
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  return verifyBuilt(node, op);
}

LogicalResult Importer::verifyBuilt(const onnx::NodeProto &node, Operation *op) {
  // The op's own verifier (operand types, attribute ranges), reported as an error of the node.
  std::string message;
  LogicalResult verified = failure();
  {
    ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    verified = mlir::verify(op, /*verifyRecursively=*/false);
  }
  if (failed(verified)) {
    op->erase();
    return nodeError(node) << message;
  }
  return success();
}

Value Importer::foldOrKeep(Operation *op) {
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(folded)) || folded.size() != 1)
    return op->getResult(0);
  Value replacement;
  if (auto value = llvm::dyn_cast<Value>(folded[0])) {
    replacement = value;
  } else {
    auto attr = llvm::dyn_cast<ElementsAttr>(llvm::cast<Attribute>(folded[0]));
    if (!attr || attr.getType() != op->getResult(0).getType())
      return op->getResult(0);
    replacement = builder.create<ConstantOp>(op->getLoc(), attr.getType(), attr);
  }
  op->getResult(0).replaceAllUsesWith(replacement);
  op->erase();
  return replacement;
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
  // Narrow integer constants (masks stored as uint8 buffers, for one) are widened to i32, which
  // holds every value they can have. Graph inputs, outputs and casts refuse them instead (see
  // isNarrowInteger): there the type is the model's interface, and widening would change it.
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::UINT8:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16:
    return Type(IntegerType::get(context, 32));
  case onnx::TensorProto::BOOL:
    return Type(IntegerType::get(context, 1));
  default:
    return failure();
  }
}

bool isNarrowInteger(int32_t onnxType) {
  return onnxType == onnx::TensorProto::INT8 || onnxType == onnx::TensorProto::UINT8 ||
         onnxType == onnx::TensorProto::INT16 || onnxType == onnx::TensorProto::UINT16;
}

std::string onnxTypeName(int32_t onnxType) {
  if (!onnx::TensorProto::DataType_IsValid(onnxType))
    return "#" + std::to_string(onnxType);
  return onnx::TensorProto::DataType_Name(onnx::TensorProto::DataType(onnxType));
}

LogicalResult Importer::load() {
  // A FIFO or a device (/dev/zero) has no size: reading it could wait or never end.
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && status.type() != llvm::sys::fs::file_type::regular_file &&
      status.type() != llvm::sys::fs::file_type::directory_file)
    return fileError() << "cannot read model: it is not a regular file (a FIFO, a device or a "
                          "socket)";
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/true);
  if (!buffer)
    return fileError() << "cannot read model: " << buffer.getError().message();
  llvm::StringRef bytes = (*buffer)->getBuffer();

  if (path.size() >= 8 && llvm::StringRef(path).ends_with(".onnxtxt")) {
    // The text parser reports most errors as a Status but lets a few (unreadable numbers) escape
    // as exceptions.
    try {
      onnx::Status status = onnx::OnnxParser::Parse(model, bytes.data());
      if (!status.IsOK())
        return fileError() << "not valid ONNX text: " << status.ErrorMessage();
    } catch (const std::exception &e) {
      return fileError() << "not valid ONNX text: " << e.what();
    }
  } else {
    if (bytes.size() > size_t(INT_MAX))
      return fileError() << "the model is " << bytes.size()
                         << " bytes; protobuf files over 2 GiB must keep their weights in "
                            "external data files";
    if (bytes.empty())
      return fileError() << "the file is empty, not an ONNX model";
    // Each If nesting level is three messages deeper (node, attribute, graph); protobuf's
    // default limit of 100 would refuse 33 levels as "corrupt". Allow a little more than the
    // importer takes, so that it, not the parser, names the limit.
    google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t *>(bytes.data()),
                                                  int(bytes.size()));
    stream.SetRecursionLimit(3 * int(kMaxSubgraphDepth) + 16);
    if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
      return fileError() << "not a valid ONNX model (truncated or corrupt protobuf, or subgraphs "
                            "nested more than "
                         << kMaxSubgraphDepth << " deep)";
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
  if (failed(element) || isNarrowInteger(tensor.elem_type()))
    return fileError() << what << " has unsupported element type "
                       << onnxTypeName(tensor.elem_type());
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
  if (!checkedByteSize(shape, (*element).getIntOrFloatBitWidth()))
    return fileError() << what << " of shape " << shapeText(shape) << " and element type "
                       << onnxTypeName(tensor.elem_type()) << " is too large (2^63 bytes or more)";
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
  for (int64_t dim : tensor.dims()) {
    if (dim < 0)
      return nodeError(node) << "initializer '" << tensor.name() << "' has negative dimension "
                             << dim;
    shape.push_back(dim);
  }
  uint64_t elementBytes = (*element).getIntOrFloatBitWidth() / 8;
  if (!checkedByteSize(shape, (*element).getIntOrFloatBitWidth()))
    return nodeError(node) << "initializer '" << tensor.name() << "' of shape " << shapeText(shape)
                           << " and element type " << onnxTypeName(tensor.data_type())
                           << " is too large (2^63 bytes or more)";
  auto type = RankedTensorType::get(shape, *element);
  uint64_t bytes = uint64_t(type.getNumElements()) * elementBytes;

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
          return nodeError(node) << "initializer '" << tensor.name() << "' has external data "
                                 << entry.key() << " '" << entry.value()
                                 << "', which is not a byte count (a non-negative integer below "
                                    "2^64)";
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
    // A symbolic link in the model's directory (the file, or a directory on the way) may lead
    // anywhere; what counts is where the bytes really are. (ONNX refuses this too: CVE-2022-25882.)
    llvm::SmallString<256> real, realDir;
    if (llvm::sys::fs::real_path(full, real) ||
        llvm::sys::fs::real_path(llvm::sys::path::parent_path(path), realDir))
      return nodeError(node) << "external data file '" << full << "' of initializer '"
                             << tensor.name() << "' cannot be read";
    if (!isInside(real, realDir))
      return nodeError(node) << "initializer '" << tensor.name() << "' has external data location '"
                             << location << "', which resolves to '" << real
                             << "' (through a symbolic link), outside the model's directory '"
                             << realDir << "'";
    uint64_t fileSize;
    if (!llvm::sys::fs::is_regular_file(real) || llvm::sys::fs::file_size(real, fileSize))
      return nodeError(node) << "external data file '" << full << "' of initializer '"
                             << tensor.name() << "' cannot be read (not a regular file)";
    length = externalLength.value_or(bytes);
    if (externalOffset > fileSize || length > fileSize - externalOffset)
      return nodeError(node) << "initializer '" << tensor.name() << "' reads " << length
                             << " bytes at offset " << externalOffset << " of '" << full
                             << "', which has only " << fileSize
                             << " bytes (the file is truncated, or the offset is wrong)";
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
  // Located at the file, not at a node: a parameter's diagnostics name it themselves.
  auto op = builder.create<ParamOp>(fileLoc(), type, tensor.name(), file, offset,
                                    /*stored_as=*/TypeAttr());
  return Value(op.getResult());
}

FailureOr<Value> Importer::constant(const onnx::NodeProto &node,
                                   const onnx::TensorProto &tensor) {
  FailureOr<Type> element = elementType(context, tensor.data_type());
  if (failed(element))
    return nodeError(node) << "constant '" << tensor.name() << "' has unsupported element type "
                           << onnx::TensorProto::DataType_Name(
                                  onnx::TensorProto::DataType(tensor.data_type()));
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return nodeError(node) << "constant '" << tensor.name()
                           << "' keeps its data in an external file, which only floating-point "
                              "parameters may do";
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > (int64_t(1) << 40))
      return nodeError(node) << "constant '" << tensor.name() << "' has invalid dimension " << d;
    // Saturates: any overflowing count is far past the limit below.
    if (__builtin_mul_overflow(numel, d, &numel))
      numel = std::numeric_limits<int64_t>::max();
  }
  if (numel > (int64_t(1) << 28))
    return nodeError(node) << "constant '" << tensor.name() << "' is too large (" << numel
                           << " elements)";
  unsigned width = element->getIntOrFloatBitWidth();
  // Bytes per element as stored, which differs from the MLIR type for widened narrow integers.
  unsigned bytesPerElement;
  bool isSigned = true;
  switch (tensor.data_type()) {
  case onnx::TensorProto::BOOL:
  case onnx::TensorProto::INT8:
    bytesPerElement = 1;
    break;
  case onnx::TensorProto::UINT8:
    bytesPerElement = 1;
    isSigned = false;
    break;
  case onnx::TensorProto::UINT16:
    isSigned = false;
    bytesPerElement = 2;
    break;
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
    bytesPerElement = 2;
    break;
  default:
    bytesPerElement = width / 8;
  }

  // Each element as its raw bits, from raw_data (little-endian) or the typed field.
  SmallVector<uint64_t> bits;
  const std::string &raw = tensor.raw_data();
  if (!raw.empty()) {
    if (raw.size() != uint64_t(numel) * bytesPerElement)
      return nodeError(node) << "constant '" << tensor.name() << "' holds " << raw.size()
                             << " bytes, its shape and type need " << numel * bytesPerElement;
    for (int64_t i = 0; i < numel; ++i) {
      uint64_t v = 0;
      std::memcpy(&v, raw.data() + i * bytesPerElement, bytesPerElement);
      if (isSigned && bytesPerElement < 8 && llvm::isa<IntegerType>(*element))
        v = uint64_t(llvm::SignExtend64(v, bytesPerElement * 8));
      bits.push_back(v);
    }
  } else {
    switch (tensor.data_type()) {
    case onnx::TensorProto::FLOAT:
      for (float f : tensor.float_data()) {
        uint32_t b;
        std::memcpy(&b, &f, 4);
        bits.push_back(b);
      }
      break;
    case onnx::TensorProto::DOUBLE:
      for (double d : tensor.double_data()) {
        uint64_t b;
        std::memcpy(&b, &d, 8);
        bits.push_back(b);
      }
      break;
    case onnx::TensorProto::INT64:
      for (int64_t v : tensor.int64_data())
        bits.push_back(uint64_t(v));
      break;
    default: // INT32, BOOL, FLOAT16 and BFLOAT16 live in int32_data.
      for (int32_t v : tensor.int32_data())
        bits.push_back(uint64_t(int64_t(v)));
      break;
    }
    if (int64_t(bits.size()) != numel)
      return nodeError(node) << "constant '" << tensor.name() << "' holds " << bits.size()
                             << " values, its shape needs " << numel;
  }

  auto type = RankedTensorType::get(shape, *element);
  DenseElementsAttr attr;
  if (auto floatType = llvm::dyn_cast<FloatType>(*element)) {
    SmallVector<APFloat> floats;
    for (uint64_t b : bits)
      floats.emplace_back(floatType.getFloatSemantics(), APInt(width, b));
    attr = DenseElementsAttr::get(type, floats);
  } else {
    SmallVector<APInt> ints;
    for (uint64_t b : bits)
      ints.push_back(element->isInteger(1) ? APInt(1, b != 0) : APInt(width, b, /*isSigned=*/true));
    attr = DenseElementsAttr::get(type, ints);
  }
  return Value(builder.create<ConstantOp>(nodeLoc(node), type, attr).getResult());
}

Value Importer::constantInts(Location loc, ArrayRef<int64_t> values, bool scalar) {
  auto type = RankedTensorType::get(scalar ? ArrayRef<int64_t>{} : ArrayRef<int64_t>{int64_t(values.size())},
                                    builder.getI64Type());
  return builder.create<ConstantOp>(loc, type, DenseElementsAttr::get(type, values)).getResult();
}

FailureOr<Value> Importer::optionalInput(const onnx::NodeProto &node, int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return Value();
  const std::string &name = node.input(index);
  if (sequences.count(name))
    return nodeError(node) << "input '" << name << "' is a sequence; only the sequence operators "
                           << "(SequenceAt, ConcatFromSequence, ...) and Loop read sequences";
  if (auto it = values.find(name); it != values.end())
    return it->second;
  if (auto it = initializers.find(name); it != initializers.end()) {
    const onnx::TensorProto &tensor = *it->second;
    FailureOr<Type> element = elementType(context, tensor.data_type());
    // Floating-point initializers are the model's parameters and stay in the file, except
    // scalars, which exporters use as constants (epsilons, exponents, scales) that passes read.
    bool parameter = succeeded(element) && llvm::isa<FloatType>(*element) && tensor.dims_size() > 0;
    FailureOr<Value> value = parameter ? param(node, tensor) : constant(node, tensor);
    if (succeeded(value))
      values[name] = *value;
    if (succeeded(value) && parameter)
      firstReader[*value] = &node;
    return value;
  }
  return nodeError(node) << "input '" << name << "' is not produced by any earlier node, graph "
                         << "input or initializer";
}

FailureOr<Value> Importer::input(const onnx::NodeProto &node, int index) {
  FailureOr<Value> value = optionalInput(node, index);
  if (succeeded(value) && !*value)
    return nodeError(node) << "input " << index << " is missing";
  return value;
}

FailureOr<const Sequence *> Importer::sequenceInput(const onnx::NodeProto &node, int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return nodeError(node) << "input " << index << " is missing";
  auto it = sequences.find(node.input(index));
  if (it != sequences.end())
    return &it->second;
  if (values.count(node.input(index)) || initializers.count(node.input(index)))
    return nodeError(node) << "input '" << node.input(index) << "' is a tensor, not a sequence";
  return nodeError(node) << "input '" << node.input(index) << "' is not produced by any earlier "
                         << "node, graph input or initializer";
}

FailureOr<Item> Importer::itemInput(const onnx::NodeProto &node, int index) {
  if (index < node.input_size())
    if (auto it = sequences.find(node.input(index)); it != sequences.end())
      return Item(it->second);
  FailureOr<Value> value = input(node, index);
  if (failed(value))
    return failure();
  return Item(*value);
}

void Importer::defineSequence(llvm::StringRef name, Sequence sequence) {
  values.erase(name);
  sequences[name] = std::move(sequence);
}

FailureOr<SmallVector<Item>> Importer::importSubgraph(const onnx::NodeProto &node,
                                                     const onnx::GraphProto &graph,
                                                     ArrayRef<Item> inputs) {
  if (subgraphDepth >= kMaxSubgraphDepth)
    return nodeError(node) << "subgraphs (If branches, Loop bodies) are nested too deep: more "
                              "than "
                           << kMaxSubgraphDepth << " levels, the limit";
  if (graph.input_size() != int(inputs.size()))
    return nodeError(node) << "the subgraph takes " << graph.input_size() << " inputs, but is given "
                           << inputs.size();
  ++subgraphDepth;
  auto leave = llvm::make_scope_exit([&] { --subgraphDepth; });
  for (auto [info, item] : llvm::zip(graph.input(), inputs)) {
    if (auto *sequence = std::get_if<Sequence>(&item)) {
      defineSequence(info.name(), *sequence);
    } else {
      sequences.erase(info.name());
      values[info.name()] = std::get<Value>(item);
    }
  }
  for (const onnx::TensorProto &tensor : graph.initializer())
    initializers[tensor.name()] = &tensor;
  for (const onnx::NodeProto &inner : graph.node())
    if (failed(importNode(inner)))
      return failure();
  SmallVector<Item> results;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    if (auto it = sequences.find(output.name()); it != sequences.end()) {
      results.push_back(it->second);
      continue;
    }
    auto it = values.find(output.name());
    if (it == values.end())
      return nodeError(node) << (node.op_type() == "Loop" ? "body" : "branch") << " output '"
                             << output.name() << "' is not computed";
    results.push_back(it->second);
  }
  return results;
}

LogicalResult Importer::importNode(const onnx::NodeProto &node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nodeError(node) << "operators of domain '" << node.domain() << "' are not supported";
  // Converters define sequence outputs themselves (defineSequence); what a name stood for in an
  // earlier Loop iteration is gone.
  for (const std::string &name : node.output())
    sequences.erase(name);
  FailureOr<SmallVector<Value>> results = convertNode(*this, node);
  if (failed(results))
    return failure();
  for (auto [index, name] : llvm::enumerate(node.output())) {
    if (name.empty() || sequences.count(name))
      continue;
    // An output the conversion does not compute is an error only if something reads it.
    if ((index >= results->size() || !(*results)[index]) && !isRead(name))
      continue;
    if (index >= results->size() || !(*results)[index])
      return nodeError(node) << "output " << index << " ('" << name << "') is not supported";
    values[name] = (*results)[index];
  }
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
  if (failed(constantsForParamsWithoutGradient(*entry)))
    return nullptr;
  func.setFunctionType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  return module;
}

bool Importer::isRead(llvm::StringRef name) {
  if (!readNames) {
    readNames.emplace();
    std::function<void(const onnx::GraphProto &)> collect = [&](const onnx::GraphProto &graph) {
      for (const onnx::NodeProto &node : graph.node()) {
        for (const std::string &input : node.input())
          readNames->insert(input);
        for (const onnx::AttributeProto &attr : node.attribute()) {
          if (attr.has_g())
            collect(attr.g());
          for (const onnx::GraphProto &g : attr.graphs())
            collect(g);
        }
      }
      for (const onnx::ValueInfoProto &output : graph.output())
        readNames->insert(output.name());
    };
    collect(model.graph());
  }
  return !name.empty() && readNames->contains(name);
}

// A floating-point initializer from which no chain of floating-point values reaches an output (a
// causal-mask buffer read only through Equal, a table read only through Shape) can have no
// gradient: it is a constant of the model, like an integer initializer, not a parameter that
// training would step, decay and save. One whose bytes are in an external data file (only models
// past 2 GB) stays a parameter: the IR never holds that much.
LogicalResult Importer::constantsForParamsWithoutGradient(Block &entry) {
  auto isFloat = [](Value v) { return llvm::isa<FloatType>(getElementTypeOrSelf(v.getType())); };
  llvm::DenseSet<Value> reaches;
  for (Value v : entry.getTerminator()->getOperands())
    reaches.insert(v);
  // Users come after what they read, so in reverse order every user is decided first.
  for (Operation &op : llvm::reverse(entry.without_terminator()))
    for (Value result : op.getResults()) {
      if (!isFloat(result) || reaches.contains(result))
        continue;
      for (Operation *user : result.getUsers()) {
        Operation *top = entry.findAncestorOpInBlock(*user);
        if (top && llvm::any_of(top->getResults(),
                                [&](Value r) { return isFloat(r) && reaches.contains(r); })) {
          reaches.insert(result);
          break;
        }
      }
    }
  for (ParamOp param : llvm::make_early_inc_range(entry.getOps<ParamOp>())) {
    if (reaches.contains(param.getResult()))
      continue;
    const onnx::TensorProto &tensor = *initializers.lookup(param.getName());
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(param);
    FailureOr<Value> constant = this->constant(*firstReader.lookup(param.getResult()), tensor);
    if (failed(constant))
      return failure();
    param.getResult().replaceAllUsesWith(*constant);
    param.erase();
  }
  return success();
}

} // namespace import

OwningOpRef<ModuleOp> importOnnxFile(llvm::StringRef path, MLIRContext *context,
                                     const ImportOptions &options) {
  return import::Importer(context, path).run(options);
}

} // namespace sl
