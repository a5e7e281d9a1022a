//===- ShapeInference.cpp - result shapes of sl operations -------------------------------------===//

#include "sl/Dialect/ShapeInference.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace sl {

std::string quoted(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << type << "'";
  return s;
}

namespace {

std::string shapeString(RankedTensorType type) { return quoted(type); }

FailureOr<RankedTensorType> asRanked(std::optional<Location> loc, llvm::StringRef opName,
                                     llvm::StringRef what, Type type) {
  auto ranked = llvm::dyn_cast_or_null<RankedTensorType>(type);
  if (!ranked)
    return emitOptionalError(loc, opName, ": ", what, " must be a ranked tensor, got ", type);
  return ranked;
}

// Broadcasts one pair of dimensions; a dynamic dimension against 1 stays dynamic, against a static
// size n > 1 becomes n (a dynamic value is only valid at run time if it is 1 or n).
std::optional<int64_t> broadcastDim(int64_t a, int64_t b) {
  if (a == 1)
    return b;
  if (b == 1)
    return a;
  if (ShapedType::isDynamic(a))
    return b;
  if (ShapedType::isDynamic(b))
    return a;
  if (a == b)
    return a;
  return std::nullopt;
}

bool dimsConflict(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b;
}

} // namespace

std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    std::optional<int64_t> d = broadcastDim(da, db);
    if (!d)
      return std::nullopt;
    out[i] = *d;
  }
  return out;
}

FailureOr<RankedTensorType> inferBroadcastType(std::optional<Location> loc,
                                               llvm::StringRef opName, Type lhsType,
                                               Type rhsType) {
  auto lhs = asRanked(loc, opName, "lhs", lhsType);
  auto rhs = asRanked(loc, opName, "rhs", rhsType);
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getElementType() != rhs->getElementType())
    return emitOptionalError(loc, opName, ": operand element types differ: ",
                             lhs->getElementType(), " and ", rhs->getElementType());
  auto shape = broadcastShapes(lhs->getShape(), rhs->getShape());
  if (!shape)
    return emitOptionalError(loc, opName, ": shapes ", shapeString(*lhs), " and ",
                             shapeString(*rhs), " cannot be broadcast together");
  return RankedTensorType::get(*shape, lhs->getElementType());
}

FailureOr<RankedTensorType> inferMatmulType(std::optional<Location> loc, Type lhsType,
                                            Type rhsType, bool transA, bool transB) {
  auto lhs = asRanked(loc, "sl.matmul", "lhs", lhsType);
  auto rhs = asRanked(loc, "sl.matmul", "rhs", rhsType);
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getElementType() != rhs->getElementType())
    return emitOptionalError(loc, "sl.matmul: operand element types differ: ",
                             lhs->getElementType(), " and ", rhs->getElementType());
  if (lhs->getRank() == 0 || rhs->getRank() == 0)
    return emitOptionalError(loc, "sl.matmul: operands must have rank >= 1, got ",
                             shapeString(*lhs), " and ", shapeString(*rhs));
  if ((transA || transB) && (lhs->getRank() < 2 || rhs->getRank() < 2))
    return emitOptionalError(loc,
                             "sl.matmul: with a transposed operand both operands must have rank "
                             ">= 2, got ",
                             shapeString(*lhs), " and ", shapeString(*rhs));
  // Promote rank-1 operands to matrices as NumPy does, remembering to drop the added dimension.
  SmallVector<int64_t> a(lhs->getShape()), b(rhs->getShape());
  if (transA)
    std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (transB)
    std::swap(b[b.size() - 1], b[b.size() - 2]);
  bool lhsVector = a.size() == 1, rhsVector = b.size() == 1;
  if (lhsVector)
    a.insert(a.begin(), 1);
  if (rhsVector)
    b.push_back(1);
  int64_t k1 = a[a.size() - 1], k2 = b[b.size() - 2];
  if (dimsConflict(k1, k2))
    return emitOptionalError(loc, "sl.matmul: contracting dimensions differ: lhs ",
                             shapeString(*lhs), transA ? " (transposed)" : "", " has ", k1,
                             ", rhs ", shapeString(*rhs), transB ? " (transposed)" : "", " has ",
                             k2);
  auto batch = broadcastShapes(ArrayRef<int64_t>(a).drop_back(2),
                               ArrayRef<int64_t>(b).drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "sl.matmul: batch dimensions of ", shapeString(*lhs), " and ",
                             shapeString(*rhs), " cannot be broadcast together");
  SmallVector<int64_t> out = *batch;
  if (!lhsVector)
    out.push_back(a[a.size() - 2]);
  if (!rhsVector)
    out.push_back(b[b.size() - 1]);
  return RankedTensorType::get(out, lhs->getElementType());
}

FailureOr<RankedTensorType> inferGemmType(std::optional<Location> loc, Type aType, Type bType,
                                          Type cType, bool transA, bool transB) {
  auto a = asRanked(loc, "sl.gemm", "a", aType);
  auto b = asRanked(loc, "sl.gemm", "b", bType);
  if (failed(a) || failed(b))
    return failure();
  if (a->getRank() != 2 || b->getRank() != 2)
    return emitOptionalError(loc, "sl.gemm: a and b must have rank 2, got ", shapeString(*a),
                             " and ", shapeString(*b));
  if (a->getElementType() != b->getElementType())
    return emitOptionalError(loc, "sl.gemm: operand element types differ: ", a->getElementType(),
                             " and ", b->getElementType());
  int64_t m = a->getDimSize(transA ? 1 : 0), k1 = a->getDimSize(transA ? 0 : 1);
  int64_t k2 = b->getDimSize(transB ? 1 : 0), n = b->getDimSize(transB ? 0 : 1);
  if (dimsConflict(k1, k2))
    return emitOptionalError(loc, "sl.gemm: contracting dimensions differ: op(a) has ", k1,
                             ", op(b) has ", k2, " (trans_a = ", transA, ", trans_b = ", transB,
                             ")");
  auto result = RankedTensorType::get({m, n}, a->getElementType());
  if (!cType)
    return result;
  auto c = asRanked(loc, "sl.gemm", "c", cType);
  if (failed(c))
    return failure();
  if (c->getElementType() != a->getElementType())
    return emitOptionalError(loc, "sl.gemm: c has element type ", c->getElementType(),
                             ", a and b have ", a->getElementType());
  // Unidirectional: c must broadcast to [M, N] without changing it.
  auto shape = broadcastShapes(result.getShape(), c->getShape());
  if (c->getRank() > 2 || !shape || dimsConflict((*shape)[0], m) || dimsConflict((*shape)[1], n))
    return emitOptionalError(loc, "sl.gemm: c ", shapeString(*c),
                             " cannot be broadcast to the result ", shapeString(result));
  return result;
}

FailureOr<RankedTensorType> inferTransposeType(std::optional<Location> loc, Type inputType,
                                               ArrayRef<int64_t> perm) {
  auto input = asRanked(loc, "sl.transpose", "input", inputType);
  if (failed(input))
    return failure();
  SmallVector<bool> seen(input->getRank(), false);
  bool valid = int64_t(perm.size()) == input->getRank();
  for (int64_t axis : perm) {
    valid = valid && axis >= 0 && axis < input->getRank() && !seen[axis];
    if (valid)
      seen[axis] = true;
  }
  if (!valid) {
    std::string permText;
    llvm::raw_string_ostream os(permText);
    llvm::interleaveComma(perm, os);
    return emitOptionalError(loc, "sl.transpose: perm [", permText,
                             "] is not a permutation of the dimensions of ", shapeString(*input));
  }
  SmallVector<int64_t> shape;
  for (int64_t axis : perm)
    shape.push_back(input->getDimSize(axis));
  return RankedTensorType::get(shape, input->getElementType());
}

} // namespace sl
