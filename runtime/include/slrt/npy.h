// NumPy .npy files: how sl-run takes inputs and writes outputs.
//
// Supported: format versions 1.0 and 2.0, C order, little-endian '<f4', '<f8', '<i8', '<i4', and
// '|b1' (bool).
// Anything else is refused with a message that says what was found, never guessed at.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "slrt/host_tensor.h"

namespace slrt {

// Parses the bytes of a .npy file. `source` names them in error messages (usually the path).
HostTensor decodeNpy(const std::string &bytes, const std::string &source);

// The bytes of a version 1.0 .npy file (2.0 only if the header needs it). Throws Error for a dtype
// .npy cannot express here.
std::string encodeNpy(const HostTensor &tensor);

// Reads and decodes a .npy file: a regular file of at most `maxBytes` bytes (readFile).
HostTensor readNpy(const std::string &path,
                   uint64_t maxBytes = std::numeric_limits<uint64_t>::max(),
                   const char *limitReason = nullptr);

// Writes atomically: readers see the old file or the whole new one, never a partial file. The
// data is streamed from the tensor, not copied. Error "PATH: REASON" on failure.
void writeNpy(const std::string &path, const HostTensor &tensor);
void writeNpy(const std::string &path, const HostTensorView &tensor);

// As writeNpy, but a bf16 tensor (which NumPy has no dtype for) is written as float32, widened
// exactly a chunk at a time as it is written, never as a whole f32 copy; other dtypes as they are.
void writeNpyAsF32(const std::string &path, const HostTensorView &tensor);

} // namespace slrt
