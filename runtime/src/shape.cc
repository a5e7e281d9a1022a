#include "slrt/shape.h"

#include <algorithm>
#include <sstream>

#include "slrt/checked.h"

namespace slrt {

std::optional<uint64_t> numel(const Shape &shape) {
  std::optional<uint64_t> count = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || !(count = checkedMul(*count, static_cast<uint64_t>(dim))))
      return std::nullopt;
  }
  return count;
}

std::string formatShape(const Shape &shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

std::optional<Shape> broadcastShapes(const Shape &a, const Shape &b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right; a missing leading dimension acts as 1.
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    result[i] = da == 1 ? db : da;
  }
  return result;
}

bool broadcastsTo(const Shape &from, const Shape &to) {
  if (from.size() > to.size())
    return false;
  size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != to[lead + i] && from[i] != 1)
      return false;
  }
  return true;
}

std::optional<Shape> matmulShape(const Shape &a, const Shape &b, bool transA, bool transB) {
  if (a.empty() || b.empty() || (transA && a.size() < 2) || (transB && b.size() < 2))
    return std::nullopt;
  Shape pa = a.size() == 1 ? Shape{1, a[0]} : a;
  Shape pb = b.size() == 1 ? Shape{b[0], 1} : b;
  if (transA)
    std::swap(pa[pa.size() - 1], pa[pa.size() - 2]);
  if (transB)
    std::swap(pb[pb.size() - 1], pb[pb.size() - 2]);
  if (pa.back() != pb[pb.size() - 2])
    return std::nullopt;
  std::optional<Shape> batch =
      broadcastShapes(Shape(pa.begin(), pa.end() - 2), Shape(pb.begin(), pb.end() - 2));
  if (!batch)
    return std::nullopt;
  Shape result = *batch;
  if (a.size() > 1)
    result.push_back(pa[pa.size() - 2]);
  if (b.size() > 1)
    result.push_back(pb.back());
  return result;
}

std::vector<int64_t> broadcastStrides(const Shape &from, const Shape &to) {
  std::vector<int64_t> strides(to.size(), 0);
  size_t lead = to.size() - from.size();
  int64_t stride = 1;
  for (size_t i = from.size(); i-- > 0;) {
    strides[lead + i] = from[i] == 1 ? 0 : stride;
    stride *= from[i];
  }
  return strides;
}

} // namespace slrt
