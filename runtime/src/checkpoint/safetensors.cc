#include "slrt/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "slrt/atomic_file.h"
#include "slrt/checked.h"
#include "slrt/error.h"
#include "slrt/mapped_file.h"
#include "slrt/read_file.h"

namespace slrt {
namespace {

using sl::schedule::BF16;
using sl::schedule::BOOL;
using sl::schedule::F16;
using sl::schedule::F32;
using sl::schedule::F64;
using sl::schedule::I32;
using sl::schedule::I64;

constexpr uint64_t kMaxHeaderBytes = kSafetensorsMaxHeaderBytes;
constexpr uint64_t kLengthBytes = 8;
constexpr const char *kMetadataKey = "__metadata__";

struct DTypeName {
  const char *name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {{"F32", F32}, {"F16", F16}, {"BF16", BF16}, {"F64", F64},
                                 {"I64", I64}, {"I32", I32}, {"BOOL", BOOL}};
constexpr const char *kSupported = "F32, F16, BF16, F64, I64, I32, BOOL";

const char *safetensorsName(DType dtype) {
  for (const DTypeName &entry : kDTypes)
    if (entry.dtype == dtype)
      return entry.name;
  return nullptr;
}

std::optional<DType> parseDType(const std::string &name) {
  for (const DTypeName &entry : kDTypes)
    if (name == entry.name)
      return entry.dtype;
  return std::nullopt;
}

// Bytes of a `dtype` tensor of `shape`, or nullopt for a negative dimension or an overflow.
std::optional<uint64_t> byteSize(DType dtype, const Shape &shape) {
  std::optional<uint64_t> count = numel(shape);
  return count ? checkedMul(*count, dtypeSize(dtype)) : std::nullopt;
}

std::string formatRange(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// The events of a JSON parse, checking that no object repeats a key. A repeat or a syntax error
// stops the parse and is left here for the message.
class KeyCheck : public nlohmann::json_sax<nlohmann::json> {
public:
  std::string repeated;
  size_t repeatedDepth = 0; // 1: a key of the top-level object (a tensor name)
  std::string error;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return true;
  }
  bool key(string_t &key) override {
    if (open_.back().insert(key).second)
      return true;
    repeated = key;
    repeatedDepth = open_.size();
    return false;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &e) override {
    error = e.what();
    return false;
  }

private:
  std::vector<std::unordered_set<std::string>> open_;
};

// A tensor of the header, checked, before its bytes are copied.
struct Record {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

class Decoder {
public:
  Decoder(std::string_view bytes, const std::string &source) : bytes_(bytes), source_(source) {}

  SafetensorsFile decode() {
    if (bytes_.size() < kLengthBytes)
      throw fail("truncated: ", bytes_.size(), " bytes, fewer than the ", kLengthBytes,
                 " of the header length");
    uint64_t length = 0;
    for (uint64_t i = 0; i < kLengthBytes; ++i)
      length |= uint64_t{static_cast<unsigned char>(bytes_[i])} << (8 * i);
    if (length > bytes_.size() - kLengthBytes)
      throw fail("the header length ", length, " runs past the end of the file (", bytes_.size(),
                 " bytes): the file is truncated or not a safetensors file");
    if (length > kMaxHeaderBytes)
      throw fail("the header length ", length, " is over the limit of ", kMaxHeaderBytes, " bytes");
    std::string_view text = bytes_.substr(kLengthBytes, length);
    data_ = bytes_.substr(kLengthBytes + length);
    if (text.empty() || text.front() != '{')
      throw fail("the header is not a JSON object (it does not start with '{')");

    nlohmann::json header = parseHeader(text);
    SafetensorsFile file;
    std::vector<Record> records;
    for (auto &[name, info] : header.items()) {
      if (name == kMetadataKey)
        file.metadata = parseMetadata(info);
      else
        records.push_back(parseRecord(name, info));
    }
    checkCoverage(records);

    // Only now, with every check passed, allocate and copy.
    file.tensors.reserve(records.size());
    for (Record &record : records) {
      TensorEntry &entry = file.tensors.emplace_back();
      entry.name = std::move(record.name);
      entry.dtype = record.dtype;
      entry.shape = std::move(record.shape);
      entry.data.resize(record.end - record.begin);
      if (!entry.data.empty())
        std::memcpy(entry.data.data(), data_.data() + record.begin, entry.data.size());
    }
    return file;
  }

private:
  template <typename... Parts> Error fail(const Parts &...parts) const {
    return makeError(source_, ": ", parts...);
  }

  nlohmann::json parseHeader(std::string_view text) {
    // nlohmann::json keeps the last of repeated keys without a word, so a first pass over the
    // parser's events refuses them, at every nesting level. (Its callback parser could, but it
    // is quadratic: after each nested object it scans the whole parent; a header of 40k tensors
    // took 25 s.) Both passes are linear.
    KeyCheck check;
    if (!nlohmann::json::sax_parse(text.begin(), text.end(), &check)) {
      if (check.repeatedDepth == 1)
        throw fail("tensor '", quoteBounded(check.repeated), "' appears twice in the header");
      if (check.repeatedDepth > 1)
        throw fail("the header repeats the key '", quoteBounded(check.repeated), "'");
      throw fail("the header is not valid JSON (", quoteBounded(check.error), ")");
    }
    try {
      return nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception &e) {
      throw fail("the header is not valid JSON (", quoteBounded(e.what()), ")");
    }
  }

  SafetensorsMetadata parseMetadata(const nlohmann::json &info) const {
    if (!info.is_object())
      throw fail("\"", kMetadataKey, "\" is not an object of strings");
    SafetensorsMetadata metadata;
    for (auto &[key, value] : info.items()) {
      if (!value.is_string())
        throw fail("\"", kMetadataKey, "\" entry '", quoteBounded(key), "' is not a string");
      metadata[key] = value.get<std::string>();
    }
    return metadata;
  }

  Record parseRecord(const std::string &name, const nlohmann::json &info) const {
    auto bad = [&](const auto &...parts) {
      return fail("tensor '", quoteBounded(name), "': ", parts...);
    };
    if (!info.is_object())
      throw bad("its entry is not an object");
    for (auto &[key, value] : info.items())
      if (key != "dtype" && key != "shape" && key != "data_offsets")
        throw bad("unexpected key '", quoteBounded(key), "' (expected dtype, shape, data_offsets)");
    if (!info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      throw bad("its entry needs dtype, shape and data_offsets");

    Record record;
    record.name = name;
    const nlohmann::json &dtype = info["dtype"];
    if (!dtype.is_string())
      throw bad("dtype is not a string");
    std::optional<DType> parsed = parseDType(dtype.get<std::string>());
    if (!parsed)
      throw bad("unsupported dtype '", quoteBounded(dtype.get<std::string>()), "' (supported: ", kSupported, ")");
    record.dtype = *parsed;

    const nlohmann::json &shape = info["shape"];
    if (!shape.is_array())
      throw bad("shape is not an array");
    for (const nlohmann::json &dim : shape) {
      if (!dim.is_number_unsigned() ||
          dim.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()})
        throw bad("shape ", quoteBounded(shape.dump()), " is not a list of non-negative integers");
      record.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    }
    std::optional<uint64_t> bytes = byteSize(record.dtype, record.shape);
    if (!bytes)
      throw bad("shape ", formatShape(record.shape), " is too large");

    const nlohmann::json &offsets = info["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw bad("data_offsets ", quoteBounded(offsets.dump()), " is not a pair of non-negative integers");
    record.begin = offsets[0].get<uint64_t>();
    record.end = offsets[1].get<uint64_t>();
    if (record.begin > record.end)
      throw bad("data_offsets ", offsets.dump(), " end before they begin");
    if (record.end - record.begin != *bytes)
      throw bad("data_offsets ", formatRange(record.begin, record.end), " hold ",
                record.end - record.begin, " bytes, but a ", dtype.get<std::string>(), " ",
                formatShape(record.shape), " tensor has ", *bytes);
    if (record.end > data_.size())
      throw bad("data_offsets ", formatRange(record.begin, record.end),
                " run past the end of the data (", data_.size(), " bytes): the file is truncated");
    return record;
  }

  // The ranges must tile [0, data size) exactly: sorted by offset, each begins where the previous
  // one ends.
  void checkCoverage(std::vector<Record> &records) const {
    std::sort(records.begin(), records.end(), [](const Record &a, const Record &b) {
      return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    uint64_t covered = 0;
    const Record *previous = nullptr;
    for (const Record &record : records) {
      if (record.begin < covered)
        throw fail("tensor '", quoteBounded(record.name), "' ", formatRange(record.begin, record.end),
                   " overlaps tensor '", quoteBounded(previous->name), "' ",
                   formatRange(previous->begin, previous->end));
      if (record.begin > covered)
        throw fail("bytes ", formatRange(covered, record.begin),
                   " of the data belong to no tensor (the next is '", quoteBounded(record.name),
                   "')");
      covered = record.end;
      previous = &record;
    }
    if (covered != data_.size())
      throw fail(data_.size() - covered, " bytes after the end of the last tensor's data");
  }

  std::string_view bytes_;
  std::string_view data_;
  const std::string &source_;
};

} // namespace

std::string encodeSafetensors(const std::vector<TensorView> &tensors,
                              const SafetensorsMetadata &metadata) {
  // ordered_json keeps the tensors in the caller's order, which is also the order of their data.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header[kMetadataKey] = metadata;
  std::vector<uint64_t> sizes;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorView &tensor : tensors) {
    if (tensor.name == kMetadataKey)
      throw makeError("a tensor cannot be named '", kMetadataKey, "' (the name of the metadata)");
    if (!names.insert(tensor.name).second)
      throw makeError("two tensors are named '", tensor.name, "'");
    const char *dtype = safetensorsName(tensor.dtype);
    if (!dtype)
      throw makeError("tensor '", tensor.name, "': cannot store dtype ", dtypeName(tensor.dtype),
                      " (supported: ", kSupported, ")");
    std::optional<uint64_t> bytes = byteSize(tensor.dtype, tensor.shape);
    std::optional<uint64_t> last = bytes ? checkedAdd(offset, *bytes) : std::nullopt;
    if (!last)
      throw makeError("tensor '", tensor.name, "': invalid shape ", formatShape(tensor.shape));
    uint64_t end = *last;
    if (*bytes > 0 && !tensor.data)
      throw makeError("tensor '", tensor.name, "': no data");
    header[tensor.name] = {{"dtype", dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", nlohmann::ordered_json::array({offset, end})}};
    sizes.push_back(*bytes);
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception &e) {
    // A name or metadata string that is not UTF-8.
    throw makeError("cannot write the header (", e.what(), ")");
  }
  // Spaces are JSON whitespace: readers parse past them, and the data starts 8-byte aligned.
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');

  std::string out;
  out.reserve(kLengthBytes + text.size() + offset);
  for (uint64_t i = 0; i < kLengthBytes; ++i)
    out += static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xff);
  out += text;
  for (size_t i = 0; i < tensors.size(); ++i)
    out.append(static_cast<const char *>(tensors[i].data), sizes[i]);
  return out;
}

SafetensorsFile decodeSafetensors(std::string_view bytes, const std::string &source) {
  return Decoder(bytes, source).decode();
}

void writeSafetensors(const std::string &path, const std::vector<TensorView> &tensors,
                      const SafetensorsMetadata &metadata) {
  std::string bytes;
  try {
    bytes = encodeSafetensors(tensors, metadata);
  } catch (const Error &e) {
    throw makeError(path, ": ", e.what());
  }
  writeFileAtomically(path, bytes);
}

void writeSafetensors(const std::string &path, const std::vector<TensorEntry> &tensors,
                      const SafetensorsMetadata &metadata) {
  std::vector<TensorView> views;
  views.reserve(tensors.size());
  for (const TensorEntry &entry : tensors) {
    // The view's size comes from dtype and shape; a disagreeing entry must not be half-written.
    std::optional<uint64_t> bytes = byteSize(entry.dtype, entry.shape);
    if (dtypeSize(entry.dtype) != 0 && bytes && *bytes != entry.data.size())
      throw makeError(path, ": tensor '", entry.name, "' has ", entry.data.size(),
                      " bytes of data, but a ", dtypeName(entry.dtype), " ",
                      formatShape(entry.shape), " tensor has ", *bytes);
    views.push_back({entry.name, entry.dtype, entry.shape, entry.data.data()});
  }
  writeSafetensors(path, views, metadata);
}

SafetensorsFile readSafetensors(const std::string &path) {
  MappedFile file = MappedFile::open(path, "safetensors file");
  return decodeSafetensors(
      std::string_view(reinterpret_cast<const char *>(file.data()), file.size()), path);
}

} // namespace slrt
