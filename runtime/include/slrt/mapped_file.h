// A whole file mapped read-only into memory: how the runtime reads token data and checkpoints
// without copying them into the heap first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace slrt {

class MappedFile {
public:
  // Maps the regular file at `path` with PROT_READ and MAP_PRIVATE. `what` names the kind of file
  // in error messages ("token file"). An empty file gives an empty mapping (mmap refuses length 0).
  static MappedFile open(const std::string &path, const std::string &what);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const std::byte *data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  void unmap();

  const std::byte *data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

} // namespace slrt
