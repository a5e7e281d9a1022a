//===- FoldMemo.cpp - folds of constants, remembered for the context's life ---------------------===//

#include "sl/Dialect/FoldMemo.h"

#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/SLDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

using namespace mlir;

MLIR_DEFINE_EXPLICIT_TYPE_ID(sl::FoldMemo)

namespace sl {

namespace {
/// Folds whose operands and result hold fewer elements than this cost less than their key.
constexpr int64_t kMemoizedElements = 1 << 12;

int64_t elementsOf(Type type) {
  auto shaped = llvm::dyn_cast<ShapedType>(type);
  return shaped && shaped.hasStaticShape() ? shaped.getNumElements() : 0;
}
} // namespace

FoldMemo *FoldMemo::get(MLIRContext *context) {
  Dialect *dialect = context->getLoadedDialect<SLDialect>();
  return dialect ? dialect->getRegisteredInterface<FoldMemo>() : nullptr;
}

std::optional<Attribute> FoldMemo::lookup(Attribute key) {
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = entries.find(key); it != entries.end())
    return it->second;
  return std::nullopt;
}

void FoldMemo::remember(Attribute key, Attribute value) {
  std::lock_guard<std::mutex> lock(mutex);
  entries.try_emplace(key, value);
}

OpFoldResult memoizedFold(Operation *op, ArrayRef<Attribute> operands,
                          llvm::function_ref<OpFoldResult()> fold) {
  if (op->getNumResults() != 1 || llvm::any_of(operands, [](Attribute a) { return !a; }))
    return fold();
  int64_t elements = elementsOf(op->getResult(0).getType());
  for (Attribute operand : operands)
    if (auto typed = llvm::dyn_cast<TypedAttr>(operand))
      elements += elementsOf(typed.getType());
  FoldMemo *memo = FoldMemo::get(op->getContext());
  if (elements < kMemoizedElements || !memo)
    return fold();

  MLIRContext *context = op->getContext();
  SmallVector<Attribute> key{op->getName().getIdentifier(), op->getAttrDictionary(),
                             TypeAttr::get(op->getResult(0).getType()),
                             IntegerAttr::get(IntegerType::get(context, 64), maxFoldedElements())};
  key.append(operands.begin(), operands.end());
  Attribute memoKey = ArrayAttr::get(context, key);
  if (std::optional<Attribute> known = memo->lookup(memoKey))
    return *known;
  // Folded without the memo's lock held: a fold may fold other ops, through the memo too.
  OpFoldResult folded = fold();
  if (folded.isNull() || llvm::isa<Attribute>(folded))
    memo->remember(memoKey, llvm::dyn_cast_if_present<Attribute>(folded));
  return folded;
}

} // namespace sl
