#include "slrt/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <vector>

#include "slrt/atomic_file.h"
#include "slrt/bfloat16.h"
#include "slrt/checked.h"
#include "slrt/error.h"
#include "slrt/read_file.h"

namespace slrt {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DescrEntry {
  const char *descr;
  DType dtype;
};
// Only little-endian: the runtime runs on little-endian machines and never byte-swaps.
constexpr DescrEntry kDescrs[] = {
    {"<f4", sl::schedule::F32},
    {"<f8", sl::schedule::F64},
    {"<i8", sl::schedule::I64},
    {"<i4", sl::schedule::I32},
    // One byte, no byte order; numpy writes 0 or 1, and the runtime reads any non-zero as true.
    {"|b1", sl::schedule::BOOL},
};

// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This parser accepts exactly the subset NumPy writes: string keys; string, bool and int-tuple
// values.
class HeaderParser {
public:
  HeaderParser(const std::string &text, const std::string &source) : text_(text), source_(source) {}

  struct Header {
    std::string descr;
    bool fortranOrder = false;
    Shape shape;
  };

  Header parse() {
    Header header;
    bool seenDescr = false, seenOrder = false, seenShape = false;
    expect('{');
    while (!peek('}')) {
      std::string key = parseString();
      expect(':');
      if (key == "descr" && !seenDescr) {
        header.descr = parseString();
        seenDescr = true;
      } else if (key == "fortran_order" && !seenOrder) {
        header.fortranOrder = parseBool();
        seenOrder = true;
      } else if (key == "shape" && !seenShape) {
        header.shape = parseShape();
        seenShape = true;
      } else {
        fail("unexpected or repeated key '" + quoteBounded(key) + "'");
      }
      if (!peek('}'))
        expect(',');
    }
    expect('}');
    skipSpace();
    if (pos_ != text_.size())
      fail("unexpected text after the header dict");
    if (!seenDescr || !seenOrder || !seenShape)
      fail("the header must have the keys 'descr', 'fortran_order' and 'shape'");
    return header;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw makeError(source_, ": bad .npy header: ", what, " in \"", quoteBounded(text_), "\"");
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }

  bool peek(char c) {
    skipSpace();
    return pos_ < text_.size() && text_[pos_] == c;
  }

  void expect(char c) {
    if (!peek(c))
      fail(std::string("expected '") + c + "'");
    ++pos_;
  }

  std::string parseString() {
    skipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("expected a string");
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string::npos)
      fail("unterminated string");
    std::string value = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return value;
  }

  bool parseBool() {
    skipSpace();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      size_t len = std::strlen(word);
      if (text_.compare(pos_, len, word) == 0) {
        pos_ += len;
        return value;
      }
    }
    fail("expected True or False");
  }

  Shape parseShape() {
    Shape shape;
    expect('(');
    while (!peek(')')) {
      size_t start = pos_;
      std::optional<int64_t> dim = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        dim = checkedMul<int64_t>(*dim, 10);
        if (dim)
          dim = checkedAdd<int64_t>(*dim, text_[pos_] - '0');
        if (!dim)
          fail("dimension too large");
        ++pos_;
      }
      if (pos_ == start)
        fail("expected a non-negative integer dimension");
      shape.push_back(*dim);
      if (!peek(')'))
        expect(',');
    }
    expect(')');
    return shape;
  }

  const std::string &text_;
  const std::string &source_;
  size_t pos_ = 0;
};

uint32_t readLittleEndian(const std::string &bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i)
    value |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

} // namespace

HostTensor decodeNpy(const std::string &bytes, const std::string &source) {
  if (bytes.size() < kMagicSize + 2 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0)
    throw makeError(source, ": not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(bytes[6]);
  int minor = static_cast<unsigned char>(bytes[7]);
  if ((major != 1 && major != 2) || minor != 0)
    throw makeError(source, ": .npy format version ", major, ".", minor,
                    " is not supported (supported: 1.0, 2.0)");
  // Version 1.0 stores the header length in 2 bytes, 2.0 in 4.
  size_t lengthWidth = major == 1 ? 2 : 4;
  size_t headerStart = kMagicSize + 2 + lengthWidth;
  if (bytes.size() < headerStart)
    throw makeError(source, ": truncated .npy header");
  uint64_t headerLength = readLittleEndian(bytes, kMagicSize + 2, lengthWidth);
  if (bytes.size() - headerStart < headerLength)
    throw makeError(source, ": truncated .npy header (", headerLength, " bytes declared, ",
                    bytes.size() - headerStart, " present)");
  std::string text = bytes.substr(headerStart, headerLength);
  if (text.empty() || text.back() != '\n')
    throw makeError(source, ": bad .npy header: it does not end with a newline");
  HeaderParser::Header header = HeaderParser(text, source).parse();

  const DescrEntry *entry = nullptr;
  for (const DescrEntry &candidate : kDescrs)
    if (header.descr == candidate.descr)
      entry = &candidate;
  if (!entry) {
    if (!header.descr.empty() && header.descr[0] == '>')
      throw makeError(source, ": big-endian data ('", quoteBounded(header.descr),
                    "') is not supported");
    throw makeError(source, ": unsupported dtype '", quoteBounded(header.descr),
                    "' (supported: '<f4', '<f8', '<i8', '<i4', '|b1'",
                    header.descr == "<u2" || header.descr == "<i2"
                        ? "; numpy has no bfloat16: give a bf16 input as float32, which is "
                          "rounded to bf16)"
                        : ")");
  }
  if (header.fortranOrder)
    throw makeError(source, ": Fortran-order arrays are not supported; save a C-order array");

  // Check the size against the bytes present before allocating, so a lying header cannot make us
  // allocate more than the file holds.
  std::optional<uint64_t> count = numel(header.shape);
  std::optional<uint64_t> size = count ? checkedMul(*count, dtypeSize(entry->dtype)) : std::nullopt;
  if (!size)
    throw makeError(source, ": shape ", formatShape(header.shape), " is too large");
  uint64_t needed = *size;
  size_t dataStart = headerStart + headerLength;
  uint64_t present = bytes.size() - dataStart;
  if (present != needed)
    throw makeError(source, ": a ", dtypeName(entry->dtype), " ", formatShape(header.shape),
                    " array needs ", needed, " bytes of data but the file has ", present,
                    present < needed ? " (truncated)" : "");
  HostTensor tensor = HostTensor::zeros(entry->dtype, header.shape);
  if (!tensor.data.empty()) // an empty vector's data() may be null, which memcpy may not get
    std::memcpy(tensor.data.data(), bytes.data() + dataStart, tensor.data.size());
  return tensor;
}

namespace {

// The file's bytes before the data: magic, version, header length and the header dictionary for a
// C-order array of `dtype` and `shape`. Throws Error for a dtype .npy cannot express here.
std::string npyPreamble(DType dtype, const Shape &shape) {
  const DescrEntry *entry = nullptr;
  for (const DescrEntry &candidate : kDescrs)
    if (dtype == candidate.dtype)
      entry = &candidate;
  if (!entry)
    throw makeError("cannot write a ", dtypeName(dtype), " tensor as .npy");

  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    dims += ","; // Python's one-element tuple
  std::string dict = std::string("{'descr': '") + entry->descr +
                     "', 'fortran_order': False, 'shape': (" + dims + "), }";

  // NumPy pads the header with spaces and ends it with a newline so that the data starts 64-byte
  // aligned. Version 1.0 is used unless the header length does not fit its 2-byte field.
  auto paddedHeader = [&](size_t preamble) {
    size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
    return dict + std::string(total - preamble - dict.size() - 1, ' ') + "\n";
  };
  int major = 1;
  size_t preamble = kMagicSize + 2 + 2;
  std::string header = paddedHeader(preamble);
  if (header.size() > 0xffff) {
    major = 2;
    preamble = kMagicSize + 2 + 4;
    header = paddedHeader(preamble);
  }

  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < preamble - kMagicSize - 2; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  return out;
}

// Streams the preamble and then what `writeData` writes into one AtomicWriter: the data never
// becomes one more copy of the tensor in memory. Error "PATH: REASON" on failure, `path` untouched.
template <typename WriteData>
void writeNpyStreamed(const std::string &path, DType dtype, const Shape &shape,
                      WriteData &&writeData) {
  std::string preamble;
  try {
    preamble = npyPreamble(dtype, shape);
  } catch (const Error &e) {
    throw makeError(path, ": ", e.what());
  }
  AtomicWriter writer;
  if (!writer.open(path) || !writer.write(preamble) || !writeData(writer) || !writer.commit())
    throw makeError(path, ": ", writer.error());
}

} // namespace

std::string encodeNpy(const HostTensor &tensor) {
  std::string out = npyPreamble(tensor.dtype, tensor.shape);
  out.append(reinterpret_cast<const char *>(tensor.data.data()), tensor.data.size());
  return out;
}

HostTensor readNpy(const std::string &path, uint64_t maxBytes, const char *limitReason) {
  return decodeNpy(readFile(path, maxBytes, limitReason), path);
}

void writeNpy(const std::string &path, const HostTensor &tensor) { writeNpy(path, tensor.view()); }

void writeNpy(const std::string &path, const HostTensorView &tensor) {
  writeNpyStreamed(path, tensor.dtype, tensor.shape, [&](AtomicWriter &writer) {
    return tensor.bytes == 0 || writer.write(tensor.data, tensor.bytes);
  });
}

void writeNpyAsF32(const std::string &path, const HostTensorView &tensor) {
  if (tensor.dtype != sl::schedule::BF16) {
    writeNpy(path, tensor);
    return;
  }
  writeNpyStreamed(path, sl::schedule::F32, tensor.shape, [&](AtomicWriter &writer) {
    // Widened a chunk at a time (exactly: every bf16 value is an f32 value).
    constexpr uint64_t kChunk = uint64_t{1} << 20;
    std::vector<float> wide(static_cast<size_t>(std::min<uint64_t>(kChunk, tensor.numel())));
    const uint16_t *narrow = tensor.as<uint16_t>();
    for (uint64_t done = 0, n = tensor.numel(); done < n;) {
      uint64_t count = std::min(kChunk, n - done);
      widenBfloat16(narrow + done, wide.data(), count);
      if (!writer.write(wide.data(), static_cast<size_t>(count) * sizeof(float)))
        return false;
      done += count;
    }
    return true;
  });
}

} // namespace slrt
