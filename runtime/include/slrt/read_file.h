// Reading whole input files, their kind and size checked before a byte is read.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace slrt {

// Reads the whole of `path`, which must be a regular file of at most `maxBytes` bytes. A FIFO, a
// device (/dev/zero), a socket or a directory is refused at once, by what it is: none has a size
// to check, and reading one could block or never end. `limitReason` says why the limit is what it
// is ("protobuf parses at most 2 GiB"), for the message. Throws Error naming the path.
std::string readFile(const std::string &path,
                     uint64_t maxBytes = std::numeric_limits<uint64_t>::max(),
                     const char *limitReason = nullptr);

// The first `maxBytes` bytes of `path` (all of it when it is shorter) and the file's size, with
// readFile's checks of what the file is: for reading a header without the gigabytes after it.
struct FilePrefix {
  std::string bytes;
  uint64_t fileSize = 0;
};
FilePrefix readFilePrefix(const std::string &path, uint64_t maxBytes);

// `text` for an error message: at most `maxBytes` bytes of it (cut at a UTF-8 character
// boundary), then "... (N bytes)" when it was longer, so that a message quoting bad input never
// repeats megabytes of it.
std::string quoteBounded(const std::string &text, size_t maxBytes = 200);

} // namespace slrt
