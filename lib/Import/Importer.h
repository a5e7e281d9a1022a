//===- Importer.h - the ONNX importer's state, shared by its files ------------------------------===//
//
// ONNXImporter.cpp reads the model (file, initializers, graph inputs and outputs); OnnxOps.cpp
// converts each node. Both work on this class.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_LIB_IMPORT_IMPORTER_H
#define SL_LIB_IMPORT_IMPORTER_H

#include "InitializerLocations.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Import/ONNXImporter.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <onnx/onnx_pb.h>

#include <variant>

namespace sl::import {

/// An ONNX sequence (SequenceEmpty, SplitToSequence, a Loop's carried list): its tensors, each
/// known while importing. Sequences live only in the importer; the IR never sees one.
struct Sequence {
  mlir::Type element;
  llvm::SmallVector<mlir::Value> items;
};

/// What an ONNX name can stand for: a tensor or a sequence.
using Item = std::variant<mlir::Value, Sequence>;

class Importer {
public:
  Importer(mlir::MLIRContext *context, llvm::StringRef path);

  mlir::OwningOpRef<mlir::ModuleOp> run(const ImportOptions &options);

  // --- used by the node conversions (OnnxOps.cpp) ---
  mlir::MLIRContext *context;
  mlir::OpBuilder builder;
  int64_t opset = 0;

  mlir::InFlightDiagnostic nodeError(const onnx::NodeProto &node);
  mlir::Location nodeLoc(const onnx::NodeProto &node);

  /// Input `index` of `node`: an earlier result, a graph input, or an initializer (a parameter
  /// for floating point data, a constant otherwise). Errors if absent.
  mlir::FailureOr<mlir::Value> input(const onnx::NodeProto &node, int index);
  /// Like input(), but an absent or empty input is a null Value.
  mlir::FailureOr<mlir::Value> optionalInput(const onnx::NodeProto &node, int index);
  /// Input `index` of `node` as a sequence. Errors if absent or a tensor.
  mlir::FailureOr<const Sequence *> sequenceInput(const onnx::NodeProto &node, int index);
  /// Input `index` of `node`, a tensor or a sequence.
  mlir::FailureOr<Item> itemInput(const onnx::NodeProto &node, int index);
  /// Makes `name` stand for `sequence` (a node's sequence output).
  void defineSequence(llvm::StringRef name, Sequence sequence);

  /// Whether a node (in any subgraph) or a graph output reads the value named `name`.
  bool isRead(llvm::StringRef name);

  /// A constant from an ONNX tensor (a Constant node's value, an integer initializer).
  mlir::FailureOr<mlir::Value> constant(const onnx::NodeProto &node,
                                        const onnx::TensorProto &tensor);
  mlir::Value constantInts(mlir::Location loc, llvm::ArrayRef<int64_t> values,
                           bool scalar = false);

  /// Builds `OpT` and gives it the type its shape rule infers; a rule that fails becomes an error
  /// of `node` with the rule's message.
  template <typename OpT, typename... Args>
  mlir::FailureOr<mlir::Value> build(const onnx::NodeProto &node, Args &&...args) {
    auto op = builder.create<OpT>(nodeLoc(node), builder.getNoneType(),
                                  std::forward<Args>(args)...);
    if (mlir::failed(inferResultType(node, op)))
      return mlir::failure();
    return foldOrKeep(op);
  }
  mlir::LogicalResult inferResultType(const onnx::NodeProto &node, mlir::Operation *op);
  /// Runs `op`'s verifier; a failure becomes an error of `node` (and `op` is erased).
  mlir::LogicalResult verifyBuilt(const onnx::NodeProto &node, mlir::Operation *op);

  /// Imports the nodes of a subgraph (an If branch, one iteration of a Loop body) in place, in
  /// the current scope, with its inputs standing for `inputs`, and returns its outputs.
  mlir::FailureOr<llvm::SmallVector<Item>> importSubgraph(const onnx::NodeProto &node,
                                                          const onnx::GraphProto &graph,
                                                          llvm::ArrayRef<Item> inputs = {});

  /// Nodes imported so far by unrolled Loop iterations, against kMaxUnrolledNodes.
  int64_t unrolledNodes = 0;

  /// Folds a just-built single-result op if its operands allow (a constant, or one of its
  /// operands) and returns what replaces it; otherwise its result. Folding while importing keeps
  /// every shape that is already known static from the start.
  mlir::Value foldOrKeep(mlir::Operation *op);

private:
  mlir::LogicalResult load();
  mlir::LogicalResult checkOpset();
  mlir::LogicalResult importInputs(llvm::SmallVectorImpl<mlir::Type> &types,
                                   llvm::SmallVectorImpl<mlir::Attribute> &argAttrs);
  mlir::LogicalResult importNode(const onnx::NodeProto &node);
  mlir::FailureOr<mlir::Value> param(const onnx::NodeProto &node, const onnx::TensorProto &tensor);
  mlir::LogicalResult constantsForParamsWithoutGradient(mlir::Block &entry);
  mlir::FailureOr<mlir::RankedTensorType>
  tensorType(const onnx::TypeProto &type, llvm::StringRef what,
             llvm::SmallVectorImpl<mlir::Attribute> *dimNames = nullptr);

  mlir::InFlightDiagnostic fileError();
  mlir::Location fileLoc();
  std::string nodeName(const onnx::NodeProto &node);

  std::string path;
  onnx::ModelProto model;
  llvm::StringMap<ByteRange> dataLocations;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<mlir::Value> values;
  llvm::StringMap<Sequence> sequences;
  /// The node that first read each parameter (for the location of a parameter made a constant).
  llvm::DenseMap<mlir::Value, const onnx::NodeProto *> firstReader;
  int nodeIndex = 0;
  /// Every value name a node or graph output reads (filled by the first isRead).
  std::optional<llvm::StringSet<>> readNames;
  // How many If-branches and Loop bodies importSubgraph is inside now.
  unsigned subgraphDepth = 0;
};

/// The deepest nesting of If-branches and Loop bodies the importer takes. Exporters write a few levels; the limit
/// keeps a crafted model from exhausting the stack, and is far above protobuf's default (100
/// messages, 33 levels), which the importer raises to match.
constexpr unsigned kMaxSubgraphDepth = 100;

/// The most nodes unrolled Loop iterations may import in all: exporters' loops run over a few
/// dozen elements of a small dimension (GPT-J's rotary pairs); the limit keeps a crafted trip
/// count, or nested loops, from growing the IR without bound.
constexpr int64_t kMaxUnrolledNodes = 1 << 20;

/// The MLIR element type of an ONNX TensorProto data type, if the importer handles it.
mlir::FailureOr<mlir::Type> elementType(mlir::MLIRContext *context, int32_t onnxType);

/// 8- and 16-bit integers: widened to i32 inside the graph, refused at its interface.
bool isNarrowInteger(int32_t onnxType);
/// The ONNX name of a TensorProto data type ("UINT8"), or its number if it has none.
std::string onnxTypeName(int32_t onnxType);

/// Converts one node's inputs to `sl` ops, returning one value per node output (null for outputs
/// nobody may use). Defined in OnnxOps.cpp.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> convertNode(Importer &importer,
                                                           const onnx::NodeProto &node);

} // namespace sl::import

#endif // SL_LIB_IMPORT_IMPORTER_H
