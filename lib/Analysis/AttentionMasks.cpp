//===- AttentionMasks.cpp - what a mask added to attention scores means -----------------------===//

#include "sl/Analysis/AttentionMasks.h"

#include "sl/Dialect/ConstantValues.h"
#include "sl/Dialect/SLDialect.h"
#include "sl/Dialect/ShapeInference.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <deque>
#include <functional>

using namespace mlir;

namespace sl {

llvm::StringRef maskKindName(MaskKind kind) {
  switch (kind) {
  case MaskKind::Unknown:
    return "unknown";
  case MaskKind::Zero:
    return "zero";
  case MaskKind::Causal:
    return "causal";
  case MaskKind::AntiCausal:
    return "anti-causal";
  case MaskKind::CausalOnes:
    return "causal ones";
  }
  return "unknown";
}

namespace {

/// The verdicts a mask's values still allow, narrowed stretch by stretch (value by value, or a
/// run of a row at a time). Causal masking keeps key j for query i where j <= i + T - S.
class Verdicts {
public:
  /// A boolean mask (keep / drop), or a float one (additive, or a multiplier); `causalShape`:
  /// its last two dimensions are S and T, not broadcast.
  Verdicts(bool boolean, bool causalShape)
      : boolean(boolean), zero(!boolean), causal(causalShape), anti(boolean && causalShape),
        ones(!boolean && causalShape) {}

  bool open() const { return zero || causal || anti || ones; }

  /// A stretch of values that causal masking keeps (or drops), from `first` to `last`: all of
  /// them between the two (one value: first == last; a row's integer line: its ends).
  void see(bool kept, double first, double last) {
    auto allAre = [&](double x) { return first == x && last == x; };
    if (boolean) {
      bool set = first != 0; // a boolean stretch is one value
      causal &= set == kept;
      anti &= set != kept;
      return;
    }
    zero &= allAre(0.0);
    causal &= kept ? allAre(0.0) : std::max(first, last) <= -1e4;
    ones &= allAre(kept ? 1.0 : 0.0);
  }

  MaskKind kind() const {
    if (zero)
      return MaskKind::Zero;
    if (causal)
      return MaskKind::Causal;
    if (ones)
      return MaskKind::CausalOnes;
    return anti ? MaskKind::AntiCausal : MaskKind::Unknown;
  }

private:
  bool boolean, zero, causal, anti, ones;
};

} // namespace

MaskKind classifyMaskValues(DenseElementsAttr dense, RankedTensorType type, int64_t s, int64_t t) {
  int64_t rank = type.getRank();
  int64_t rows = rank >= 2 ? type.getShape()[rank - 2] : 1;
  int64_t cols = rank >= 1 ? type.getShape().back() : 1;
  bool boolean = type.getElementType().isInteger(1);
  std::optional<SmallVector<double>> floats;
  std::optional<SmallVector<int64_t>> ints;
  if (boolean)
    ints = constantInts(dense);
  else
    floats = constantFloats(dense);
  if (!floats && !ints)
    return MaskKind::Unknown;
  Verdicts verdicts(boolean, rows == s && cols == t);
  int64_t n = type.getNumElements();
  for (int64_t i = 0; i < n && verdicts.open(); ++i) {
    int64_t row = (i / cols) % rows, col = i % cols;
    double value = boolean ? double((*ints)[i]) : (*floats)[i];
    verdicts.see(col <= row + t - s, value, value);
  }
  return verdicts.kind();
}

namespace {

//===--------------------------------------------------------------------------------------------===//
// A mask expression, row by row
//===--------------------------------------------------------------------------------------------===//

/// Columns [begin, end) of one row, whose values are a + b * j at column j. A run with b != 0 is
/// an integer line: a and b are integers and every value lies in its element type's exact range,
/// so that the arithmetic below computes exactly what folding computes value by value.
struct Run {
  int64_t begin, end;
  double a, b;
  double at(int64_t j) const { return b == 0 ? a : a + b * double(j); }
};
using Row = SmallVector<Run, 4>;

/// A row with more runs than this is not modelled: causal rows have two, a padding-free mask's
/// rows a handful at most.
constexpr size_t kMaxRuns = 64;
/// Constant matrices read row by row up to this many elements (a registered tril buffer).
constexpr int64_t kMaxMatrixElements = int64_t(1) << 22;

/// The element types a mask expression is modelled in.
struct Element {
  enum Kind { Bool, Int, F32, F64 } kind;
  // Int: the range the type holds exactly without wrapping (also below 2^52, so that sums and
  // differences of two values are exact doubles); F32/F64: the integers a line may reach.
  double lowest = 0, highest = 0;

  static std::optional<Element> of(Type type) {
    if (type.isInteger(1))
      return Element{Bool, 0, 1};
    if (auto integer = llvm::dyn_cast<IntegerType>(type)) {
      unsigned width = integer.getWidth();
      if (width > 64)
        return std::nullopt;
      double exact = std::ldexp(1.0, 52);
      if (integer.isUnsigned())
        return Element{Int, 0, std::min(exact, std::ldexp(1.0, int(width)) - 1)};
      double half = std::ldexp(1.0, int(width) - 1);
      return Element{Int, std::max(-exact, -half), std::min(exact, half - 1)};
    }
    if (type.isF32())
      return Element{F32, -std::ldexp(1.0, 24), std::ldexp(1.0, 24)};
    if (type.isF64())
      return Element{F64, -std::ldexp(1.0, 52), std::ldexp(1.0, 52)};
    return std::nullopt; // bf16 and f16 masks are not modelled
  }

  bool isFloat() const { return kind == F32 || kind == F64; }

  /// A value computed in double as folding computes it, stored in this type (nullopt: an
  /// integer outside the range the model holds exactly).
  std::optional<double> store(double v) const {
    switch (kind) {
    case Bool:
      return double(v != 0);
    case Int:
      if (!(v >= lowest && v <= highest) || v != std::trunc(v))
        return std::nullopt;
      return v + 0.0; // an integer has no -0
    case F32:
      return double(float(v));
    case F64:
      return v;
    }
    return std::nullopt;
  }

  /// `run` with its values stored in this type; false when its values do not stay exact.
  bool store(Run &run) const {
    if (run.end - run.begin == 1 && run.b != 0) {
      run.a = run.at(run.begin);
      run.b = 0;
    }
    if (run.b == 0) {
      std::optional<double> value = store(run.a);
      if (!value)
        return false;
      run.a = *value;
      return true;
    }
    if (kind == Bool || run.a != std::trunc(run.a) || run.b != std::trunc(run.b))
      return false;
    // A line is 0.0, never -0.0, where it crosses zero (storeAndAppend gives that column the
    // sign folding gives it).
    run.a += 0.0;
    double first = run.at(run.begin), last = run.at(run.end - 1);
    return std::min(first, last) >= lowest && std::max(first, last) <= highest;
  }
};

/// Appends `run` to `row`, merged with the last run where they are one line.
bool append(Row &row, const Run &run) {
  if (run.begin >= run.end)
    return true;
  if (!row.empty()) {
    Run &last = row.back();
    // (-0.0 and 0.0 stay apart: a division by them differs.)
    if (last.end == run.begin && last.b == run.b && last.at(run.begin) == run.at(run.begin) &&
        std::signbit(last.at(run.begin)) == std::signbit(run.at(run.begin))) {
      last.end = run.end;
      return true;
    }
  }
  row.push_back(run);
  return row.size() <= kMaxRuns;
}

/// Equal, with 0.0 and -0.0 told apart (a division by them differs).
bool sameValue(double x, double y) { return x == y && std::signbit(x) == std::signbit(y); }

/// Stores `run` and appends it to `row`. A float line is split at the column where it is zero,
/// which gets `atZero(j)`: the line's arithmetic gives that column 0.0, where the op computed
/// value by value, as folding computes it, may give -0.0 (-(0.0), 0.0 * -2, -0.0 - 0.0).
bool storeAndAppend(Row &row, const Element &element, Run run,
                    llvm::function_ref<double(int64_t)> atZero = nullptr) {
  // The zero column is found before storing: a run of one column stores as a constant.
  bool integral = run.a == std::trunc(run.a) && run.b == std::trunc(run.b);
  if (atZero && element.isFloat() && run.b != 0 && integral && std::fmod(run.a, run.b) == 0) {
    int64_t zero = int64_t(-run.a / run.b);
    if (zero >= run.begin && zero < run.end) {
      Run before{run.begin, zero, run.a, run.b}, after{zero + 1, run.end, run.a, run.b};
      Run at{zero, zero + 1, atZero(zero), 0};
      return element.store(before) && append(row, before) && element.store(at) && append(row, at) &&
             element.store(after) && append(row, after);
    }
  }
  return element.store(run) && append(row, run);
}

/// A row of one column (an operand broadcast along the columns) stretched to `cols` columns.
Row stretch(const Row &row, int64_t cols) {
  if (cols == 1 || row.size() != 1 || row[0].end != 1)
    return row;
  return {Run{0, cols, row[0].at(0), 0}};
}

/// `values` (one row, `cols` long) as runs: constant stretches, and integer lines where the type
/// allows them. Nullopt past kMaxRuns.
std::optional<Row> runsOf(ArrayRef<double> values, const Element &element) {
  Row row;
  int64_t n = int64_t(values.size());
  for (int64_t j = 0; j < n;) {
    // The longest line from j (a constant stretch, or an integer line if the type holds it
    // exactly), else column j alone.
    auto lineFrom = [&](double step) {
      int64_t end = j + 1;
      while (end < n && sameValue(values[end], values[j] + step * double(end - j)))
        ++end;
      return Run{j, end, values[j] - step * double(j), step};
    };
    Run run = lineFrom(0);
    if (run.end == j + 1 && j + 1 < n && element.kind != Element::Bool) {
      Run line = lineFrom(values[j + 1] - values[j]);
      if (element.store(line))
        run = line;
    }
    if (!element.store(run) || !append(row, run))
      return std::nullopt;
    j = run.end;
  }
  return row;
}

/// The last two dimensions of `type` (1 where its rank is lower), and the product of the others.
struct Extents {
  int64_t rows = 1, cols = 1, leading = 1;
  explicit Extents(RankedTensorType type) {
    ArrayRef<int64_t> shape = type.getShape();
    size_t rank = shape.size();
    if (rank >= 1)
      cols = shape[rank - 1];
    if (rank >= 2)
      rows = shape[rank - 2];
    for (size_t d = 0; d + 2 < rank; ++d)
      leading *= shape[d];
  }
};

/// A value of the expression: its element type, the extents of its last two dimensions, and
/// how to compute one of its rows. Every value is the same along its leading dimensions (they
/// come from broadcasting), so a row is all there is to it.
struct Node {
  Element element;
  int64_t rows, cols;
  std::function<LogicalResult(int64_t row, Row &out)> compute;
  // The last row computed: evaluation goes row by row, and a value broadcast along the rows
  // is asked for its row 0 every time.
  int64_t cachedRow = -1;
  Row cached;

  LogicalResult row(int64_t i, Row &out) {
    if (i != cachedRow) {
      cached.clear();
      if (failed(compute(i, cached))) {
        cachedRow = -1;
        return failure();
      }
      cachedRow = i;
    }
    out = cached;
    return success();
  }
  /// Row i of this value as an operand broadcast to `outCols` columns.
  LogicalResult operandRow(int64_t i, int64_t outCols, Row &out) {
    if (failed(row(rows == 1 ? 0 : i, out)))
      return failure();
    out = stretch(out, outCols);
    return success();
  }
};

/// Calls fn(begin, end, parts) for each column range on which every row of `rows` is one run,
/// parts holding those runs in the order of `rows`.
template <typename Fn> LogicalResult zipRuns(ArrayRef<Row> rows, int64_t cols, Fn fn) {
  SmallVector<size_t> at(rows.size(), 0);
  SmallVector<Run> parts(rows.size());
  for (int64_t begin = 0; begin < cols;) {
    int64_t end = cols;
    for (auto [k, row] : llvm::enumerate(rows)) {
      while (at[k] < row.size() && row[at[k]].end <= begin)
        ++at[k];
      if (at[k] == row.size() || row[at[k]].begin > begin)
        return failure(); // a row that does not cover its columns: not one of ours
      parts[k] = row[at[k]];
      end = std::min(end, row[at[k]].end);
    }
    if (failed(fn(begin, end, ArrayRef<Run>(parts))))
      return failure();
    begin = end;
  }
  return success();
}

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

/// Where an integer line d(j) = da + db * j (db != 0) over [begin, end) is negative: the columns
/// before the returned one when `negativeFirst`, after it otherwise.
int64_t signChange(int64_t da, int64_t db, int64_t begin, int64_t end, bool &negativeFirst) {
  negativeFirst = db > 0;
  // db > 0: negative while j < -da / db, i.e. up to ceil(-da / db); db < 0: from
  // floor(da / -db) + 1.
  int64_t change = db > 0 ? -floorDiv(da, db) : floorDiv(da, -db) + 1;
  return std::clamp(change, begin, end);
}

/// The columns [begin, end) of the integer line `line` (b != 0) in up to three ranges, in column
/// order, over which its sign does not change (negative, zero, positive, or the reverse).
SmallVector<std::pair<int64_t, int64_t>, 3> signRanges(const Run &line, int64_t begin,
                                                       int64_t end) {
  int64_t a = int64_t(line.a), b = int64_t(line.b);
  // The first column where the line reaches zero or crosses it.
  int64_t cross = std::clamp(b > 0 ? -floorDiv(a, b) : -floorDiv(-a, -b), begin, end);
  SmallVector<std::pair<int64_t, int64_t>, 3> ranges;
  if (begin < cross)
    ranges.push_back({begin, cross});
  if (cross < end && a + b * cross == 0) {
    ranges.push_back({cross, cross + 1});
    ++cross;
  }
  if (cross < end)
    ranges.push_back({cross, end});
  return ranges;
}

class RowModel {
public:
  /// The node computing `v`, or null where the model does not cover it.
  Node *build(Value v, int depth = 0) {
    if (auto it = built.find(v); it != built.end())
      return it->second;
    Node *node = depth > 64 ? nullptr : buildUncached(v, depth);
    built[v] = node;
    return node;
  }

private:
  Node *make(Value v, Element element, std::function<LogicalResult(int64_t, Row &)> compute) {
    Extents extents(llvm::cast<RankedTensorType>(v.getType()));
    nodes.push_back(Node{element, extents.rows, extents.cols, std::move(compute)});
    return &nodes.back();
  }

  Node *buildUncached(Value v, int depth) {
    auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
    Operation *op = v.getDefiningOp();
    if (!type || !type.hasStaticShape() || !op)
      return nullptr;
    std::optional<Element> element = Element::of(type.getElementType());
    if (!element)
      return nullptr;
    Extents out(type);
    auto operand = [&](Value x) -> Node * {
      Node *node = build(x, depth + 1);
      if (!node || (node->rows != 1 && node->rows != out.rows) ||
          (node->cols != 1 && node->cols != out.cols))
        return nullptr;
      return node;
    };

    if (auto constant = llvm::dyn_cast<ConstantOp>(op))
      return fromConstant(v, llvm::dyn_cast<DenseElementsAttr>(constant.getValue()), *element);
    if (auto fill = llvm::dyn_cast<ConstantOfShapeOp>(op)) {
      auto value = llvm::dyn_cast<DenseElementsAttr>(fill.getValue());
      if (!value || value.getNumElements() != 1)
        return nullptr;
      return fromConstant(v, value.resizeSplat(type), *element);
    }
    if (auto range = llvm::dyn_cast<RangeOp>(op)) {
      auto start = constantInts(range.getStart()), delta = constantInts(range.getDelta());
      if (element->kind != Element::Int || !start || !delta || start->size() != 1 ||
          delta->size() != 1 || type.getRank() != 1)
        return nullptr;
      Run run{0, out.cols, double((*start)[0]), double((*delta)[0])};
      if (!element->store(run))
        return nullptr;
      return make(v, *element, [run](int64_t, Row &row) {
        row.push_back(run);
        return success();
      });
    }
    if (auto expand = llvm::dyn_cast<ExpandOp>(op)) {
      Node *input = operand(expand.getInput());
      if (!input)
        return nullptr;
      int64_t cols = out.cols;
      return make(v, *element,
                  [input, cols](int64_t i, Row &row) { return input->operandRow(i, cols, row); });
    }
    if (auto reshape = llvm::dyn_cast<ReshapeOp>(op))
      return fromReshape(v, reshape.getInput(), *element, depth);
    if (auto slice = llvm::dyn_cast<SliceOp>(op))
      return fromSlice(v, slice, *element, depth);
    if (auto trilu = llvm::dyn_cast<TriluOp>(op))
      return fromTrilu(v, trilu, *element, depth);
    if (auto where = llvm::dyn_cast<WhereOp>(op)) {
      Node *cond = operand(where.getCondition()), *x = operand(where.getX()),
           *y = operand(where.getY());
      if (!cond || !x || !y || cond->element.kind != Element::Bool)
        return nullptr;
      Element e = *element;
      int64_t cols = out.cols;
      return make(v, e, [=](int64_t i, Row &row) -> LogicalResult {
        Row rows[3];
        if (failed(cond->operandRow(i, cols, rows[0])) || failed(x->operandRow(i, cols, rows[1])) ||
            failed(y->operandRow(i, cols, rows[2])))
          return failure();
        return zipRuns(rows, cols, [&](int64_t begin, int64_t end, ArrayRef<Run> parts) {
          Run chosen = parts[0].a != 0 ? parts[1] : parts[2];
          Run run{begin, end, chosen.a, chosen.b};
          return success(e.store(run) && append(row, run));
        });
      });
    }
    if (auto cast = llvm::dyn_cast<CastOp>(op))
      return fromCast(v, cast.getInput(), *element, depth);
    if (auto neg = llvm::dyn_cast<NegOp>(op)) {
      Node *input = operand(neg.getInput());
      if (!input || input->element.kind != element->kind)
        return nullptr;
      Element e = *element;
      int64_t cols = out.cols;
      return make(v, e, [=](int64_t i, Row &row) -> LogicalResult {
        Row in;
        if (failed(input->operandRow(i, cols, in)))
          return failure();
        for (const Run &run : in)
          if (!storeAndAppend(row, e, Run{run.begin, run.end, -run.a, -run.b},
                              [&](int64_t j) { return -run.at(j); }))
            return failure();
        return success();
      });
    }
    if (llvm::isa<AddOp, SubOp, MulOp, DivOp, EqualOp, LessOp>(op)) {
      Node *lhs = operand(op->getOperand(0)), *rhs = operand(op->getOperand(1));
      if (!lhs || !rhs || lhs->element.isFloat() != rhs->element.isFloat())
        return nullptr;
      return fromBinary(v, op, lhs, rhs, *element);
    }
    return nullptr;
  }

  /// A constant: a splat, or values read row by row (a vector along the rows or the columns, or
  /// a matrix), all the same along the leading dimensions.
  Node *fromConstant(Value v, DenseElementsAttr dense, const Element &element) {
    if (!dense)
      return nullptr;
    auto type = llvm::cast<RankedTensorType>(v.getType());
    Extents extents(type);
    if (dense.isSplat()) {
      std::optional<double> value;
      auto one = dense.resizeSplat(RankedTensorType::get({1}, type.getElementType()));
      if (auto ints = constantInts(one))
        value = double((*ints)[0]);
      else if (auto floats = constantFloats(one))
        value = (*floats)[0];
      if (!value || !(value = element.store(*value)))
        return nullptr;
      Run run{0, extents.cols, *value, 0};
      return make(v, element, [run](int64_t, Row &row) {
        row.push_back(run);
        return success();
      });
    }
    int64_t cols = extents.cols;
    if (type.getNumElements() > kMaxMatrixElements) {
      // A big matrix (a registered tril buffer of a long context) is read a row at a time.
      std::function<double(int64_t)> at = elementReader(dense);
      if (!at || extents.leading != 1)
        return nullptr;
      return make(v, element, [at, cols, element](int64_t i, Row &row) -> LogicalResult {
        SmallVector<double> values(size_t(cols), 0.0);
        for (int64_t j = 0; j < cols; ++j)
          values[size_t(j)] = at(i * cols + j);
        std::optional<Row> runs = runsOf(values, element);
        if (!runs)
          return failure();
        row = std::move(*runs);
        return success();
      });
    }
    auto values = std::make_shared<SmallVector<double>>();
    if (auto ints = constantInts(dense)) {
      for (int64_t x : *ints)
        values->push_back(double(x));
    } else if (auto floats = constantFloats(dense)) {
      *values = std::move(*floats);
    } else {
      return nullptr;
    }
    // A constant folded after a broadcast (a mask expanded over the batch) repeats one matrix
    // along its leading dimensions; any other is not a mask of ours.
    size_t matrix = size_t(extents.rows * extents.cols);
    for (size_t i = matrix; i < values->size(); ++i)
      if ((*values)[i] != (*values)[i % matrix] &&
          !(std::isnan((*values)[i]) && std::isnan((*values)[i % matrix])))
        return nullptr;
    values->resize(matrix);
    return make(v, element, [values, cols, element](int64_t i, Row &row) -> LogicalResult {
      std::optional<Row> runs =
          runsOf(ArrayRef<double>(*values).slice(size_t(i * cols), size_t(cols)), element);
      if (!runs)
        return failure();
      row = std::move(*runs);
      return success();
    });
  }

  /// Element `index` of `dense` (row-major) as a double, read in place, for the element types of
  /// masks; null for others.
  static std::function<double(int64_t)> elementReader(DenseElementsAttr dense) {
    auto reader = [&](auto tag) -> std::function<double(int64_t)> {
      using T = decltype(tag);
      auto range = dense.tryGetValues<T>();
      if (failed(range))
        return nullptr;
      auto begin = range->begin();
      return [begin](int64_t index) { return double(begin[index]); };
    };
    Type type = dense.getElementType();
    if (type.isInteger(1))
      return reader(bool());
    if (type.isUnsignedInteger(8))
      return reader(uint8_t());
    if (type.isSignlessInteger(8))
      return reader(int8_t());
    if (type.isSignlessInteger(32))
      return reader(int32_t());
    if (type.isSignlessInteger(64))
      return reader(int64_t());
    if (type.isF32())
      return reader(float());
    return nullptr;
  }

  /// A reshape that keeps the last two dimensions (moving leading ones), or one that turns a
  /// vector along the columns into one along the rows ([T] to [T, 1]) or back.
  Node *fromReshape(Value v, Value inputValue, const Element &element, int depth) {
    Node *input = build(inputValue, depth + 1);
    if (!input || input->element.kind != element.kind)
      return nullptr;
    Extents in(llvm::cast<RankedTensorType>(inputValue.getType()));
    Extents out(llvm::cast<RankedTensorType>(v.getType()));
    if (in.rows == out.rows && in.cols == out.cols)
      return make(v, element, [input](int64_t i, Row &row) { return input->row(i, row); });
    bool inVector = in.leading == 1 && (in.rows == 1 || in.cols == 1);
    bool outVector = out.leading == 1 && (out.rows == 1 || out.cols == 1);
    if (!inVector || !outVector || in.rows * in.cols != out.rows * out.cols)
      return nullptr;
    if (in.rows == 1) {
      // Along the columns to along the rows: row i is the input's column i.
      return make(v, element, [input](int64_t i, Row &row) -> LogicalResult {
        Row columns;
        if (failed(input->row(0, columns)))
          return failure();
        for (const Run &run : columns)
          if (run.begin <= i && i < run.end) {
            row.push_back(Run{0, 1, run.at(i), 0});
            return success();
          }
        return failure();
      });
    }
    // Along the rows to along the columns: the input's rows, one value each, as runs.
    int64_t n = in.rows;
    return make(v, element, [input, n, element](int64_t, Row &row) -> LogicalResult {
      SmallVector<double> values;
      for (int64_t i = 0; i < n; ++i) {
        Row one;
        if (failed(input->row(i, one)) || one.empty())
          return failure();
        values.push_back(one[0].at(0));
      }
      std::optional<Row> runs = runsOf(values, element);
      if (!runs)
        return failure();
      row = std::move(*runs);
      return success();
    });
  }

  /// A slice with constant bounds: rows picked from `first` in steps of `step` (any sign),
  /// columns in positive steps; leading dimensions are the same everywhere, so their slicing
  /// changes nothing.
  Node *fromSlice(Value v, SliceOp slice, const Element &element, int depth) {
    Node *input = build(slice.getData(), depth + 1);
    if (!input || input->element.kind != element.kind)
      return nullptr;
    auto dataType = llvm::cast<RankedTensorType>(slice.getData().getType());
    int64_t rank = dataType.getRank();
    auto starts = constantInts(slice.getStarts()), ends = constantInts(slice.getEnds());
    if (!starts || !ends || starts->size() != ends->size())
      return nullptr;
    SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(0, int64_t(starts->size())));
    SmallVector<int64_t> steps(starts->size(), 1);
    if (slice.getAxes()) {
      auto given = constantInts(slice.getAxes());
      if (!given || given->size() != starts->size())
        return nullptr;
      axes = *given;
    }
    if (slice.getSteps()) {
      auto given = constantInts(slice.getSteps());
      if (!given || given->size() != starts->size())
        return nullptr;
      steps = *given;
    }
    int64_t rowFirst = 0, rowStep = 1, colFirst = 0, colStep = 1;
    for (auto [i, axis] : llvm::enumerate(axes)) {
      int64_t d = axis < 0 ? axis + rank : axis;
      if (d < 0 || d >= rank || steps[i] == 0)
        return nullptr;
      int64_t first = sliceBounds(dataType.getDimSize(d), (*starts)[i], (*ends)[i], steps[i]).first;
      if (d == rank - 1) {
        colFirst = first;
        colStep = steps[i];
      } else if (d == rank - 2) {
        rowFirst = first;
        rowStep = steps[i];
      }
    }
    if (colStep < 1)
      return nullptr;
    Extents out(llvm::cast<RankedTensorType>(v.getType()));
    int64_t cols = out.cols;
    return make(v, element, [=](int64_t i, Row &row) -> LogicalResult {
      Row in;
      if (failed(input->row(rowFirst + i * rowStep, in)))
        return failure();
      for (const Run &run : in) {
        // Output column j reads input column colFirst + j * colStep.
        int64_t begin = std::max<int64_t>(0, -floorDiv(-(run.begin - colFirst), colStep));
        int64_t end = std::min<int64_t>(cols, -floorDiv(-(run.end - colFirst), colStep));
        Run picked{begin, end, run.at(colFirst), run.b * double(colStep)};
        if (begin < end && (!element.store(picked) || !append(row, picked)))
          return failure();
      }
      return success();
    });
  }

  /// ONNX Trilu: row i keeps columns j with j - i >= k (upper) or j - i <= k (lower).
  Node *fromTrilu(Value v, TriluOp trilu, const Element &element, int depth) {
    Node *input = build(trilu.getInput(), depth + 1);
    if (!input || input->element.kind != element.kind ||
        llvm::cast<RankedTensorType>(trilu.getInput().getType()).getRank() < 2)
      return nullptr;
    int64_t k = 0;
    if (trilu.getK()) {
      auto values = constantInts(trilu.getK());
      if (!values || values->size() != 1)
        return nullptr;
      k = (*values)[0];
    }
    bool upper = trilu.getUpper();
    return make(v, element, [=](int64_t i, Row &row) -> LogicalResult {
      Row in;
      if (failed(input->row(i, in)))
        return failure();
      // Kept: [i + k, cols) when upper, [0, i + k + 1) when lower.
      int64_t edge = upper ? i + k : i + k + 1;
      for (const Run &run : in) {
        int64_t cut = std::clamp(edge, run.begin, run.end);
        Run before{run.begin, cut, upper ? 0.0 : run.a, upper ? 0.0 : run.b};
        Run after{cut, run.end, upper ? run.a : 0.0, upper ? run.b : 0.0};
        if (!element.store(before) || !append(row, before) || !element.store(after) ||
            !append(row, after))
          return failure();
      }
      return success();
    });
  }

  Node *fromCast(Value v, Value inputValue, const Element &element, int depth) {
    Node *input = build(inputValue, depth + 1);
    if (!input)
      return nullptr;
    bool fromFloat = input->element.isFloat();
    return make(v, element, [=](int64_t i, Row &row) -> LogicalResult {
      Row in;
      if (failed(input->row(i, in)))
        return failure();
      for (Run run : in) {
        if (element.kind == Element::Bool && run.b != 0) {
          // An integer line is zero in at most one column.
          for (auto [from, to] : signRanges(run, run.begin, run.end))
            if (!append(row, Run{from, to, double(run.at(from) != 0), 0}))
              return failure();
          continue;
        }
        // Floats to integers truncate (a line's values are integers already); integers to
        // floats keep their values (a line's stay exact, or store refuses it).
        if (fromFloat && !element.isFloat() && element.kind != Element::Bool && run.b == 0) {
          if (!std::isfinite(run.a))
            return failure();
          run.a = std::trunc(run.a);
        }
        if (!element.store(run) || !append(row, run))
          return failure();
      }
      return success();
    });
  }

  Node *fromBinary(Value v, Operation *op, Node *lhs, Node *rhs, const Element &element) {
    enum Kind { Add, Sub, Mul, Div, Equal, Less };
    Kind kind = llvm::isa<AddOp>(op)     ? Add
                : llvm::isa<SubOp>(op)   ? Sub
                : llvm::isa<MulOp>(op)   ? Mul
                : llvm::isa<DivOp>(op)   ? Div
                : llvm::isa<EqualOp>(op) ? Equal
                                         : Less;
    bool floats = lhs->element.isFloat();
    int64_t cols = Extents(llvm::cast<RankedTensorType>(v.getType())).cols;
    return make(v, element, [=](int64_t i, Row &row) -> LogicalResult {
      Row operands[2];
      if (failed(lhs->operandRow(i, cols, operands[0])) ||
          failed(rhs->operandRow(i, cols, operands[1])))
        return failure();
      return zipRuns(operands, cols, [&](int64_t begin, int64_t end, ArrayRef<Run> parts) {
        const Run &x = parts[0], &y = parts[1];
        auto emit = [&](Run run) { return success(storeAndAppend(row, element, run)); };
        // The op as folding computes it at column j, for the sign of zero where a float line
        // crosses it.
        auto emitSigned = [&](Run run, double (*fn)(double, double)) {
          return success(
              storeAndAppend(row, element, run, [&](int64_t j) { return fn(x.at(j), y.at(j)); }));
        };
        bool constant = x.b == 0 && y.b == 0;
        switch (kind) {
        case Add:
          return emitSigned(Run{begin, end, x.a + y.a, x.b + y.b},
                            [](double l, double r) { return l + r; });
        case Sub:
          return emitSigned(Run{begin, end, x.a - y.a, x.b - y.b},
                            [](double l, double r) { return l - r; });
        case Mul:
          if (x.b != 0 && y.b != 0)
            return failure();
          if (constant) // (the slope stays 0: inf * 0 would make it NaN)
            return emit(Run{begin, end, x.a * y.a, 0});
          // A float line times 0, -0 or an infinity: a constant on each side of its zero,
          // whose sign (or NaN) follows the line's.
          if (floats && !constant)
            for (auto [line, other] : {std::pair(x, y), std::pair(y, x)})
              if (line.b != 0 && (other.a == 0 || !std::isfinite(other.a))) {
                for (auto [from, to] : signRanges(line, begin, end))
                  if (failed(emit(Run{from, to, x.at(from) * y.at(from), 0})))
                    return failure();
                return success();
              }
          // A line times a constant stays a line (store checks that it stays exact).
          return emitSigned(x.b == 0 ? Run{begin, end, x.a * y.a, x.a * y.b}
                                     : Run{begin, end, x.a * y.a, x.b * y.a},
                            [](double l, double r) { return l * r; });
        case Div:
          if (y.b != 0)
            return failure();
          // A float line over 0, -0 or an infinity: constants on each side of its zero.
          if (floats && x.b != 0 && (y.a == 0 || !std::isfinite(y.a))) {
            for (auto [from, to] : signRanges(x, begin, end))
              if (failed(emit(Run{from, to, x.at(from) / y.a, 0})))
                return failure();
            return success();
          }
          if (floats && constant) // (the slope stays 0: 0 / 0 would make it NaN)
            return emit(Run{begin, end, x.a / y.a, 0});
          if (floats)
            return emitSigned(Run{begin, end, x.a / y.a, x.b / y.a},
                              [](double l, double r) { return l / r; });
          if (y.a == 0)
            return failure(); // left to the kernel, as folding leaves it
          if (constant)       // C++ truncates toward zero, as folding does
            return emit(Run{begin, end, double(int64_t(x.a) / int64_t(y.a)), 0});
          // An integer line divides into one only where the divisor divides it.
          if (std::fmod(x.a, y.a) != 0 || std::fmod(x.b, y.a) != 0)
            return failure();
          return emit(Run{begin, end, x.a / y.a, x.b / y.a});
        case Equal:
        case Less: {
          auto compare = [&](double l, double r) { return kind == Equal ? l == r : l < r; };
          if (constant)
            return emit(Run{begin, end, double(compare(x.a, y.a)), 0});
          // A line's values are integers of at most 2^52: against a constant that is not finite
          // or is beyond them, every column compares alike.
          double xa = x.a, ya = y.a;
          for (const Run *side : {&x, &y})
            if (side->b == 0 && !(std::abs(side->a) <= std::ldexp(1.0, 53)))
              return emit(Run{begin, end, double(compare(x.at(begin), y.at(begin))), 0});
          // A constant between integers: never equal to one; c < y iff floor(c) < y, and
          // x < c iff x < ceil(c).
          if (x.b == 0 && xa != std::trunc(xa)) {
            if (kind == Equal)
              return emit(Run{begin, end, 0, 0});
            xa = std::floor(xa);
          }
          if (y.b == 0 && ya != std::trunc(ya)) {
            if (kind == Equal)
              return emit(Run{begin, end, 0, 0});
            ya = std::ceil(ya);
          }
          // Integers now: the difference of the two is an exact integer line.
          int64_t da = int64_t(xa) - int64_t(ya), db = int64_t(x.b) - int64_t(y.b);
          if (db == 0)
            return emit(Run{begin, end, kind == Equal ? double(da == 0) : double(da < 0), 0});
          if (kind == Equal) {
            int64_t root = da % db == 0 ? -da / db : begin - 1;
            if (root < begin || root >= end)
              return emit(Run{begin, end, 0, 0});
            return success(succeeded(emit(Run{begin, root, 0, 0})) &&
                           succeeded(emit(Run{root, root + 1, 1, 0})) &&
                           succeeded(emit(Run{root + 1, end, 0, 0})));
          }
          bool negativeFirst;
          int64_t change = signChange(da, db, begin, end, negativeFirst);
          return success(succeeded(emit(Run{begin, change, double(negativeFirst), 0})) &&
                         succeeded(emit(Run{change, end, double(!negativeFirst), 0})));
        }
        }
        return failure();
      });
    });
  }

  llvm::DenseMap<Value, Node *> built;
  std::deque<Node> nodes;
};

} // namespace

std::optional<MaskKind> classifyMaskRows(Value mask, int64_t s, int64_t t) {
  auto type = llvm::dyn_cast<RankedTensorType>(mask.getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() == 0)
    return std::nullopt;
  RowModel model;
  Node *node = model.build(mask);
  if (!node)
    return std::nullopt;
  bool boolean = node->element.kind == Element::Bool;
  if (node->element.kind == Element::Int)
    return MaskKind::Unknown; // as classifyMaskValues: neither a boolean nor a float mask
  int64_t rows = node->rows, cols = node->cols;
  Verdicts verdicts(boolean, rows == s && cols == t);
  Row row;
  for (int64_t i = 0; i < rows && verdicts.open(); ++i) {
    if (failed(node->row(i, row)))
      return std::nullopt;
    // Causal masking keeps columns [0, i + t - s].
    int64_t keptEnd = i + t - s + 1;
    int64_t covered = 0;
    for (const Run &run : row) {
      if (run.begin != covered)
        return std::nullopt;
      covered = run.end;
      for (bool kept : {true, false}) {
        int64_t begin = kept ? run.begin : std::max(run.begin, keptEnd);
        int64_t end = kept ? std::min(run.end, keptEnd) : run.end;
        if (begin < end)
          verdicts.see(kept, run.at(begin), run.at(end - 1));
      }
    }
    if (covered != cols)
      return std::nullopt;
  }
  return verdicts.kind();
}

std::string maskRowsDiffer(Value mask, DenseElementsAttr values) {
  auto type = llvm::dyn_cast<RankedTensorType>(mask.getType());
  if (!type || !type.hasStaticShape() || !values || values.getType() != type)
    return "";
  RowModel model;
  Node *node = model.build(mask);
  if (!node)
    return "";
  SmallVector<double> expected;
  if (auto ints = constantInts(values)) {
    for (int64_t x : *ints)
      expected.push_back(double(x));
  } else if (auto floats = constantFloats(values)) {
    expected = std::move(*floats);
  } else {
    return "";
  }
  int64_t rows = node->rows, cols = node->cols;
  Row row;
  for (int64_t e = 0; e < int64_t(expected.size()); ++e) {
    int64_t i = (e / cols) % rows, j = e % cols;
    if (failed(node->row(i, row)))
      return "";
    const Run *run = llvm::find_if(row, [&](const Run &r) { return r.begin <= j && j < r.end; });
    double got = run == row.end() ? NAN : run->at(j), want = expected[size_t(e)];
    bool same = (got == want && std::signbit(got) == std::signbit(want)) ||
                (std::isnan(got) && std::isnan(want) && run != row.end());
    if (!same) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "element " << e << " (row " << i << ", column " << j << "): read row by row "
         << (run == row.end() ? std::string("no run covers it") : std::to_string(got))
         << ", evaluated " << want;
      return text;
    }
  }
  return "";
}

} // namespace sl
