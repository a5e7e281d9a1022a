//===- GenerationRewrites.h - prefill and decode stages from copies of a model ----------------===//
//
// What sl-split-generation (SplitGeneration.cpp) does to the copies its stage-pipeline compiled;
// the pass itself compiles the copies, plans and assembles. Private to lib/Transforms.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_TRANSFORMS_GENERATIONREWRITES_H
#define SL_TRANSFORMS_GENERATIONREWRITES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace sl::generation {

mlir::RankedTensorType tensorType(mlir::Value v);

/// A compiled copy's @forward.
mlir::func::FuncOp forwardOf(mlir::ModuleOp module);

/// Bound at the prompt length and at one token, a mask that is causal only over a window (GPT-Neo's
/// local attention, a sliding window) is causal and fuses, but a decode step would attend to keys
/// the model masks past the window. Checks on `tables`, the copy bound at [1, C] (C =
/// `cachePositions`), that every attention is causal there too.
mlir::LogicalResult checkCausalOverCache(mlir::ModuleOp tables, mlir::ModuleOp prefill,
                                         int64_t cachePositions);

/// The copy bound at [b, 1] becomes the decode step: a `position` argument, attentions over the
/// blocks' KV caches of `cachePositions` positions, rotary tables and learned position embeddings
/// read at each sequence's position (the tables from `tables`, bound at [1, C]).
mlir::LogicalResult rewriteDecode(mlir::ModuleOp decode, mlir::ModuleOp tables,
                                  int64_t cachePositions);

/// The copy bound at [b, P] becomes the prefill: its blocks also return the keys and values for
/// the caches, and the epilogue becomes `decode`'s, applied to each prompt's last position.
mlir::LogicalResult rewritePrefill(mlir::ModuleOp prefill, mlir::ModuleOp decode);

/// Moves every function of `from` into `into`, @forward renamed `name` and the others prefixed
/// with `name.`, rewriting the calls.
void moveFunctions(mlir::ModuleOp from, mlir::ModuleOp into, llvm::StringRef name);

} // namespace sl::generation

#endif // SL_TRANSFORMS_GENERATIONREWRITES_H
