//===- InitializerLocations.h - where initializer bytes are in a binary ONNX file ---------------===//
//
// Protobuf parsing copies bytes out and forgets where they were; a parameter reference needs the
// byte offset of each initializer's data in the file. This walks the wire format of ModelProto ->
// graph -> initializer and records, per initializer name, the offset and length of `raw_data` or
// of packed `float_data` / `double_data` (both are the little-endian values, back to back).
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_LIB_IMPORT_INITIALIZERLOCATIONS_H
#define SL_LIB_IMPORT_INITIALIZERLOCATIONS_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace sl::import {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// Maps initializer name to the location of its data in `bytes` (the whole .onnx file). Returns
/// nullopt with `error` set if the wire format is malformed.
std::optional<llvm::StringMap<ByteRange>> locateInitializerData(llvm::StringRef bytes,
                                                                std::string &error);

} // namespace sl::import

#endif // SL_LIB_IMPORT_INITIALIZERLOCATIONS_H
