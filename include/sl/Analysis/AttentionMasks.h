//===- AttentionMasks.h - what a mask added to attention scores means -------------------------===//
//
// sl-fuse-transformer fuses softmax(q k^T * scale + mask) v into sl.attention only when the mask
// is one the fused kernel applies itself: causal masking, or nothing. Exporters build the mask
// from constants (an arange compared with positions, a triangle of a filled matrix, a slice of a
// registered tril buffer), so its values are known at compile time, but at a long context they
// are S x T elements: 16M at 4096 and 1G at 32768, too many to evaluate.
//
// Two ways to judge a mask, with one verdict:
//   - classifyMaskValues reads explicit values (a constant, or a mask evaluated by folding);
//   - classifyMaskRows reads the expression that computes the mask, one row of the [S, T]
//     pattern at a time, each row as a few runs of columns whose values are constant or an
//     integer line in the column index. A causal row is two runs, so a mask of any length is
//     judged in time linear in S and memory linear in the expression, and exactly: every value a
//     row's runs stand for is the value folding would compute.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_ANALYSIS_ATTENTIONMASKS_H
#define SL_ANALYSIS_ATTENTIONMASKS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

#include <optional>
#include <string>

namespace sl {

/// What a mask over [.., S, T] scores means, judged by its values.
enum class MaskKind {
  Unknown,    // not a constant, or a pattern that is none of the below
  Zero,       // adds nothing (an all-zero padding mask once folded, beta * zeros)
  Causal,     // keeps (true / 0) what causal masking keeps, drops (false / very negative) the rest
  AntiCausal, // a boolean mask that is true exactly where causal masking drops (masked_fill's)
  CausalOnes, // a float multiplier: 1 where causal masking keeps, 0 where it drops
};

/// The kind's name, for messages: "unknown", "zero", "causal", "anti-causal", "causal ones".
llvm::StringRef maskKindName(MaskKind kind);

/// The verdict on the values `dense` of a mask of `type` (static, its last two dimensions S or
/// 1 and T or 1). Float masks are additive (kept entries 0, dropped ones at most -1e4) or
/// multipliers (kept 1, dropped 0); boolean masks say keep (Causal) or drop (AntiCausal).
/// Causal masking keeps key j for query i where j <= i + T - S.
MaskKind classifyMaskValues(mlir::DenseElementsAttr dense, mlir::RankedTensorType type, int64_t s,
                            int64_t t);

/// The same verdict from the ops that compute `mask` (static, its last two dimensions S or 1
/// and T or 1) out of constants, without its S x T values: std::nullopt where the expression has
/// an op or a form this does not model (a value that is neither constant nor an integer line
/// along a row, more than a few dozen runs in a row, a view that mixes rows with columns), for
/// the caller to evaluate the mask instead. Modelled: sl.constant (splats, vectors along rows or
/// columns, matrices up to 4M elements), sl.constant_of_shape, sl.range (integer), sl.expand,
/// sl.reshape, sl.slice, sl.trilu, sl.where, sl.cast, sl.neg, sl.add, sl.sub, sl.mul, sl.div,
/// sl.equal and sl.less, with folding's arithmetic (f32 results rounded after every op).
std::optional<MaskKind> classifyMaskRows(mlir::Value mask, int64_t s, int64_t t);

/// For tests of the row model (sl-fuse-transformer's check-masks): where the rows of `mask`
/// read from its ops differ from `values`, its evaluated values (every element, leading
/// dimensions included; NaN equals NaN, and 0.0 differs from -0.0), the first difference in
/// words; empty where they are the same or the model does not cover the mask.
std::string maskRowsDiffer(mlir::Value mask, mlir::DenseElementsAttr values);

} // namespace sl

#endif // SL_ANALYSIS_ATTENTIONMASKS_H
