//===- ConvertPrecision.cpp - sl-convert-precision: compute and store in bf16 -------------------===//
//
// Rewrites every f32 tensor of the module to bf16: function signatures, block arguments, op
// results, constants (rounded to nearest even, a finite value never becoming infinite) and cast
// targets. Parameters keep their f32 bytes in the model file (`stored_as f32`); the runtime
// rounds them while loading. What the kernels do with bf16 buffers (compute in f32, store bf16)
// is the runtime's contract; this pass only changes what is stored.
//
//===----------------------------------------------------------------------------------------===//

#include "sl/Dialect/SLDialect.h"
#include "sl/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/bit.h"

#include <cmath>

namespace sl {
#define GEN_PASS_DEF_CONVERTPRECISIONPASS
#include "sl/SLPasses.h.inc"
} // namespace sl

using namespace mlir;

namespace {

// f32 -> bf16 of one value, ties to even; a finite value too large for bf16 becomes the largest
// finite bf16 of its sign (a mask's "most negative float" stays finite, as it is in a model
// exported in bf16), infinities and NaN stay what they are.
llvm::APInt toBF16Bits(const llvm::APFloat &value) {
  llvm::APFloat converted = value;
  bool losesInfo = false;
  converted.convert(llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven, &losesInfo);
  if (converted.isInfinity() && value.isFinite())
    converted = llvm::APFloat::getLargest(llvm::APFloat::BFloat(), value.isNegative());
  return converted.bitcastToAPInt();
}

/// toBF16Bits on the bits of a float, without APFloat: f32 and bf16 have the same exponent, so
/// rounding the low 16 bits of the f32 encoding away (to nearest, ties to even) is the
/// conversion, subnormals included, and a carry into the exponent is the overflow to infinity.
/// NaN, whose payload rounding could turn into an infinity, goes through APFloat.
uint16_t toBF16Bits(float value) {
  uint32_t bits = llvm::bit_cast<uint32_t>(value);
  if (std::isnan(value))
    return uint16_t(toBF16Bits(llvm::APFloat(value)).getZExtValue());
  uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  auto out = uint16_t(rounded >> 16);
  bool finite = (bits & 0x7F800000u) != 0x7F800000u;
  if (finite && (out & 0x7F80u) == 0x7F80u)
    out = uint16_t((out & 0x8000u) | 0x7F7Fu); // the largest finite bf16 of the sign
  return out;
}

struct ConvertPrecisionPass : public sl::impl::ConvertPrecisionPassBase<ConvertPrecisionPass> {
  using ConvertPrecisionPassBase::ConvertPrecisionPassBase;

  Type from, to;

  Type convert(Type type) const {
    if (type == from)
      return to;
    if (auto tensor = llvm::dyn_cast<RankedTensorType>(type))
      if (tensor.getElementType() == from)
        return tensor.clone(to);
    return type;
  }

  // A constant's f32 elements as bf16, or failure for elements the pass cannot read.
  FailureOr<Attribute> convert(Operation *op, ElementsAttr value) const {
    if (value.getElementType() != from)
      return Attribute(value);
    auto dense = llvm::dyn_cast<DenseFPElementsAttr>(value);
    if (!dense)
      return op->emitError("sl-convert-precision: cannot convert the f32 elements of ")
             << value.getType() << " stored as " << value.getAbstractAttribute().getName();
    // Millions of elements at a realistic length (rotary tables): a typed loop over the floats.
    // A splat stays one element, which the raw buffer's size says.
    SmallVector<uint16_t> bits;
    if (dense.isSplat()) {
      bits.push_back(toBF16Bits(dense.getSplatValue<float>()));
    } else {
      bits.reserve(dense.getNumElements());
      for (float v : dense.getValues<float>())
        bits.push_back(toBF16Bits(v));
    }
    // Little-endian storage, as DenseElementsAttr keeps on the hosts the compiler runs on.
    static_assert(llvm::endianness::native == llvm::endianness::little,
                  "sl-convert-precision writes bf16 bits in host order");
    ArrayRef<char> raw(reinterpret_cast<const char *>(bits.data()), bits.size() * sizeof(uint16_t));
    return Attribute(
        DenseElementsAttr::getFromRawBuffer(llvm::cast<ShapedType>(dense.getType()).clone(to), raw));
  }

  LogicalResult convertOp(Operation *op) const {
    if (auto function = llvm::dyn_cast<FunctionOpInterface>(op)) {
      auto type = llvm::cast<FunctionType>(function.getFunctionType());
      llvm::SmallVector<Type> inputs, results;
      for (Type t : type.getInputs())
        inputs.push_back(convert(t));
      for (Type t : type.getResults())
        results.push_back(convert(t));
      function.setType(FunctionType::get(op->getContext(), inputs, results));
    }
    if (auto param = llvm::dyn_cast<sl::ParamOp>(op)) {
      Type element = param.getType().getElementType();
      if (element == from && param.getFile() && !param.getStoredAs())
        param.setStoredAsAttr(TypeAttr::get(element));
    }
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument argument : block.getArguments())
          argument.setType(convert(argument.getType()));
    for (OpResult result : op->getResults())
      result.setType(convert(result.getType()));
    for (NamedAttribute attribute : op->getAttrs()) {
      if (auto type = llvm::dyn_cast<TypeAttr>(attribute.getValue())) {
        if (attribute.getName() != "stored_as" && type.getValue() == from)
          op->setAttr(attribute.getName(), TypeAttr::get(to));
      } else if (auto elements = llvm::dyn_cast<ElementsAttr>(attribute.getValue())) {
        FailureOr<Attribute> converted = convert(op, elements);
        if (failed(converted))
          return failure();
        op->setAttr(attribute.getName(), *converted);
      }
    }
    return success();
  }

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    if (precision == "f32")
      return;
    if (precision != "bf16") {
      getOperation().emitError("sl-convert-precision: precision must be f32 or bf16, got '")
          << precision << "'";
      return signalPassFailure();
    }
    from = Float32Type::get(context);
    to = BFloat16Type::get(context);
    WalkResult walk = getOperation().walk([&](Operation *op) {
      return failed(convertOp(op)) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
  }
};

} // namespace
