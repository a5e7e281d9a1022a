//===- InitializerLocations.cpp - where initializer bytes are in a binary ONNX file -------------===//

#include "InitializerLocations.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

namespace sl::import {
namespace {

// Field numbers from onnx.proto.
constexpr int kModelGraph = 7;
constexpr int kGraphInitializer = 5;
constexpr int kTensorFloatData = 4;
constexpr int kTensorName = 8;
constexpr int kTensorRawData = 9;
constexpr int kTensorDoubleData = 10;

class Walker {
public:
  explicit Walker(llvm::StringRef bytes)
      : bytes(bytes),
        stream(reinterpret_cast<const uint8_t *>(bytes.data()), static_cast<int>(bytes.size())) {
    stream.SetTotalBytesLimit(INT32_MAX);
  }

  bool walkModel() {
    return walkMessage(static_cast<int>(bytes.size()), [&](uint32_t field, uint32_t length) {
      if (field != kModelGraph)
        return skip(length);
      return walkMessage(length, [&](uint32_t field, uint32_t length) {
        if (field != kGraphInitializer)
          return skip(length);
        return walkTensor(length);
      });
    });
  }

  llvm::StringMap<ByteRange> found;
  std::string error;

private:
  // Calls `onDelimited(field, length)` for each length-delimited field of a message of `length`
  // bytes; other wire types are skipped here. The callback must consume exactly `length` bytes.
  template <typename Fn> bool walkMessage(int length, Fn onDelimited) {
    CodedInputStream::Limit limit = stream.PushLimit(length);
    while (uint32_t tag = stream.ReadTag()) {
      if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        if (!WireFormatLite::SkipField(&stream, tag))
          return fail("malformed field");
        continue;
      }
      uint32_t fieldLength;
      if (!stream.ReadVarint32(&fieldLength) || fieldLength > uint32_t(stream.BytesUntilLimit()))
        return fail("field length runs past the end of its message");
      if (!onDelimited(WireFormatLite::GetTagFieldNumber(tag), fieldLength))
        return false;
    }
    if (!stream.ConsumedEntireMessage() || stream.BytesUntilLimit() != 0)
      return fail("truncated message");
    stream.PopLimit(limit);
    return true;
  }

  bool walkTensor(uint32_t length) {
    std::string name;
    std::optional<ByteRange> data;
    bool ok = walkMessage(length, [&](uint32_t field, uint32_t length) {
      if (field == kTensorName)
        return stream.ReadString(&name, length) || fail("truncated tensor name");
      if (field == kTensorRawData || field == kTensorFloatData || field == kTensorDoubleData)
        data = ByteRange{uint64_t(stream.CurrentPosition()), length};
      return skip(length);
    });
    if (ok && data && !name.empty())
      found[name] = *data;
    return ok;
  }

  bool skip(uint32_t length) { return stream.Skip(int(length)) || fail("truncated field"); }

  bool fail(const char *what) {
    if (error.empty())
      error = std::string(what) + " near byte " + std::to_string(stream.CurrentPosition());
    return false;
  }

  llvm::StringRef bytes;
  CodedInputStream stream;
};

} // namespace

std::optional<llvm::StringMap<ByteRange>> locateInitializerData(llvm::StringRef bytes,
                                                                std::string &error) {
  Walker walker(bytes);
  if (!walker.walkModel()) {
    error = walker.error;
    return std::nullopt;
  }
  return std::move(walker.found);
}

} // namespace sl::import
