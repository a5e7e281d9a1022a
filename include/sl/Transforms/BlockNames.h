//===- BlockNames.h - which transformer block a name or an operation belongs to ----------------===//
//
// Exporters name a block's nodes by scope (`/model/layers.3/mlp/MatMul`) and its parameters by
// module path (`model.layers.3.mlp.weight`). sl-partition-layers outlines blocks from these names;
// sl-check-shared-params reads them to tell a tied weight from merged equal initializers.
//
//===--------------------------------------------------------------------------------------------===//

#ifndef SL_TRANSFORMS_BLOCKNAMES_H
#define SL_TRANSFORMS_BLOCKNAMES_H

#include "mlir/IR/Location.h"

#include <optional>

namespace sl {

/// The block index in a name: 3 for "/model/layers.3/mlp/MatMul" or "model.layers.3.mlp.weight"
/// (also `h.N`, `blocks.N`, `layer.N`, `block.N`).
std::optional<int> blockIndexIn(llvm::StringRef name);

/// The block index in the node name(s) of a location.
std::optional<int> blockOfLocation(mlir::Location loc);

/// Whether `loc` carries an exporter's scope path ("/model/norm/Mul_1"), not a bare node name
/// ("Mul#12", what the importer calls an unnamed node).
bool hasScopePath(mlir::Location loc);

/// The first node name with a scope path in `loc`, or "".
llvm::StringRef scopedNodeName(mlir::Location loc);

} // namespace sl

#endif // SL_TRANSFORMS_BLOCKNAMES_H
