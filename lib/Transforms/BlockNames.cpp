//===- BlockNames.cpp - which transformer block a name or an operation belongs to --------------===//

#include "sl/Transforms/BlockNames.h"

#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Regex.h"

using namespace mlir;

namespace sl {

std::optional<int> blockIndexIn(llvm::StringRef name) {
  static const llvm::Regex pattern("(^|[/.])(layers|layer|h|blocks|block)[.]([0-9]+)([/.]|$)");
  llvm::SmallVector<llvm::StringRef> groups;
  if (!pattern.match(name, &groups))
    return std::nullopt;
  int index;
  if (groups[3].getAsInteger(10, index))
    return std::nullopt;
  return index;
}

std::optional<int> blockOfLocation(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return blockIndexIn(name.getName().getValue());
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto index = blockOfLocation(inner))
        return index;
  return std::nullopt;
}

llvm::StringRef scopedNodeName(Location loc) {
  if (auto name = llvm::dyn_cast<NameLoc>(loc))
    return name.getName().getValue().contains('/') ? name.getName().getValue() : "";
  if (auto fused = llvm::dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (llvm::StringRef name = scopedNodeName(inner); !name.empty())
        return name;
  return "";
}

bool hasScopePath(Location loc) { return !scopedNodeName(loc).empty(); }

} // namespace sl
