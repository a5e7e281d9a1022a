// Shape arithmetic shared by the verifier (which checks shapes) and the backends (which trust
// them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/repeated_field.h>

namespace slrt {

using Shape = std::vector<int64_t>;

inline Shape toShape(const google::protobuf::RepeatedField<int64_t> &dims) {
  return Shape(dims.begin(), dims.end());
}

// Element count, or nullopt when a dimension is negative or the product overflows uint64.
std::optional<uint64_t> numel(const Shape &shape);

// "[2, 3]"; "[]" for a scalar.
std::string formatShape(const Shape &shape);

// Numpy (multidirectional) broadcast of two shapes, or nullopt when they are incompatible.
std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b);

// True when `from` broadcasts to exactly `to` (ONNX unidirectional broadcasting).
bool broadcastsTo(const Shape &from, const Shape &to);

// Result shape of numpy.matmul(a, b): rank-1 operands are promoted and the promoted dimension
// dropped again, batch dimensions broadcast. With `transA` / `transB` the operand (rank >= 2) is
// read with its last two dimensions swapped (MATMUL's transpose flags). nullopt for rank 0, a
// flagged vector or mismatched shapes.
std::optional<Shape> matmulShape(const Shape &a, const Shape &b, bool transA = false,
                                 bool transB = false);

// Strides (in elements) for reading a row-major tensor of shape `from` as if it had been broadcast
// to `to`: aligned to the right, 0 on broadcast dimensions. Requires broadcastsTo(from, to).
std::vector<int64_t> broadcastStrides(const Shape &from, const Shape &to);

} // namespace slrt
