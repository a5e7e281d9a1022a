// safetensors files: how checkpoints are stored, readable by other tools (Hugging Face's
// safetensors, PyTorch, JAX).
//
// The format: an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the data. The
// header maps each tensor name to {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
// offsets in bytes from the start of the data, and may hold "__metadata__", an object of strings.
// Tensors are row-major and little-endian, and their byte ranges tile the data exactly.
//
// Dtypes: F32, F16, BF16, F64, I64, I32, BOOL (the runtime's DType); others are refused on reading.
// The writer pads the header with spaces to a multiple of 8 bytes, as the reference implementation
// does, so that the data starts 8-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "slrt/dtype.h"
#include "slrt/shape.h"

namespace slrt {

using SafetensorsMetadata = std::map<std::string, std::string>;

// The reference implementation refuses larger headers; a length past it is a corrupt file, and
// refusing it early keeps a lying length from making us parse garbage.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// A tensor as read: the bytes are owned. Reading maps the file and copies each tensor out of the
// mapping once, then unmaps it: a caller (a resumed optimizer) copies them into its own memory in
// any case, and owned entries cannot outlive a mapping by mistake.
struct TensorEntry {
  std::string name;
  DType dtype = DType::DTYPE_UNSPECIFIED;
  Shape shape;
  std::vector<std::byte> data;
};

// A tensor to write, borrowing its dtype-size * numel(shape) bytes at `data`, so that saving state
// that lives elsewhere (optimizer moments) does not copy it into entries first.
struct TensorView {
  std::string name;
  DType dtype = DType::DTYPE_UNSPECIFIED;
  Shape shape;
  const void *data = nullptr;
};

struct SafetensorsFile {
  // In the order of their data in the file.
  std::vector<TensorEntry> tensors;
  SafetensorsMetadata metadata;
};

// The bytes of a safetensors file holding `tensors` in the given order. Error (naming the tensor)
// for an unknown dtype, a negative or overflowing shape, a missing data pointer, a duplicate name
// or the reserved name "__metadata__".
std::string encodeSafetensors(const std::vector<TensorView> &tensors,
                              const SafetensorsMetadata &metadata);

// Parses and strictly checks a whole file's bytes: header length within the file, JSON that parses,
// no duplicate keys, known dtypes, data_offsets matching shape and dtype, ranges within the data,
// neither overlapping nor leaving gaps, and no bytes after the last tensor. `source` (the path)
// starts every error message; errors about a tensor name it.
SafetensorsFile decodeSafetensors(std::string_view bytes, const std::string &source);

// Writes atomically (temporary file, fsync, rename): on any Error the file at `path` is unchanged
// and no temporary is left behind.
void writeSafetensors(const std::string &path, const std::vector<TensorView> &tensors,
                      const SafetensorsMetadata &metadata = {});
void writeSafetensors(const std::string &path, const std::vector<TensorEntry> &tensors,
                      const SafetensorsMetadata &metadata = {});

SafetensorsFile readSafetensors(const std::string &path);

} // namespace slrt
