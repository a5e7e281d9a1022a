//===- SLDialect.td - the SpeedLoader dialect --------------------------------------------------===//
//
// The `sl` dialect describes a language model as SpeedLoader compiles it: tensor operations on
// parameters that stay in the model file, later partitioned into layers, differentiated and
// scheduled into sub-batch loops with explicit transfers.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_DIALECT_TD
#define SL_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "sl/SLInterfaces.td"

def SL_Dialect : Dialect {
  let name = "sl";
  let cppNamespace = "::sl";
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 1;
  // The scheduling passes' attributes (sl.plan, sl.generation, sl.stream, sl.offsets, sl.wait,
  // sl.record) are checked where they appear (StepAttributes.cpp).
  let hasOperationAttrVerify = 1;
  let summary = "SpeedLoader: layer-major, sub-batched training and inference of large models";
  let description = [{
    The `sl` dialect is what `sl-opt` imports ONNX models into and what its passes rewrite into a
    SpeedLoader schedule. Values are ranked tensors; a dimension may stay dynamic (`?`) until
    `sl-bind-shapes` binds the batch and sequence sizes. Parameters are never copied into the IR:
    `sl.param` records where their bytes are in the model file, so the IR of a 70B-parameter model is
    as small as that of a toy.

    Every operation follows ONNX semantics for the operator it comes from (broadcasting included),
    so an imported graph means exactly what the exported model meant.
  }];
}

// Every op has the kernel interface (SLInterfaces.td) with its defaults: a compute kernel that
// reads every operand as data and performs one FLOP per result element. `kernelRole` names the
// interface methods an op overrides (lib/Dialect/KernelOps.cpp).
class SL_Op<string mnemonic, list<Trait> traits = [], list<string> kernelRole = []>
    : Op<SL_Dialect, mnemonic,
         !listconcat(traits, [DeclareOpInterfaceMethods<SL_KernelOpInterface, kernelRole>])>;

// An op whose result type follows from its operands by a shape rule, written as
// `Op::inferReturnTypes(context, location, adaptor, types)` (MLIR's InferTypeOpAdaptor idiom). The
// interface's inferReturnTypes around it checks that what the rule inferred fits in memory
// (checkInferredSizes). A result written with `?` where the rule knows the size (or the other way
// round) is accepted: both describe the same run-time tensor.
def SL_InferTypeOpAdaptor : TraitList<[
    DeclareOpInterfaceMethods<InferTypeOpInterface>,
    NativeOpTrait<"InferTypeOpAdaptor", [], [{
        static ::llvm::LogicalResult
        inferReturnTypes(::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
                         Adaptor adaptor, ::llvm::SmallVectorImpl<::mlir::Type> &types);
        static bool isCompatibleReturnTypes(::mlir::TypeRange inferred, ::mlir::TypeRange actual);
      }], [{
        ::llvm::LogicalResult $cppClass::inferReturnTypes(
            ::mlir::MLIRContext *context, std::optional<::mlir::Location> location,
            ::mlir::ValueRange operands, ::mlir::DictionaryAttr attributes,
            ::mlir::OpaqueProperties properties, ::mlir::RegionRange regions,
            ::llvm::SmallVectorImpl<::mlir::Type> &types) {
          size_t first = types.size();
          $cppClass::Adaptor adaptor(operands, attributes, properties, regions);
          if (::mlir::failed($cppClass::inferReturnTypes(context, location, adaptor, types)))
            return ::mlir::failure();
          return ::sl::checkInferredSizes(location, getOperationName(),
                                          ::llvm::ArrayRef<::mlir::Type>(types).drop_front(first));
        }
        bool $cppClass::isCompatibleReturnTypes(::mlir::TypeRange inferred,
                                                ::mlir::TypeRange actual) {
          return ::sl::compatibleReturnTypes(inferred, actual);
        }
      }]>
  ]>;

class SL_InferredOp<string mnemonic, list<Trait> traits = [], list<string> kernelRole = []>
    : SL_Op<mnemonic, !listconcat(traits, [SL_InferTypeOpAdaptor]), kernelRole>;

#endif // SL_DIALECT_TD
