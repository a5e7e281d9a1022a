#include "slrt/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "slrt/error.h"

namespace slrt {

MappedFile MappedFile::open(const std::string &path, const std::string &what) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before fstat can refuse it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw makeError(path, ": cannot open ", what, " (", std::strerror(errno), ")");
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int err = errno;
    ::close(fd);
    throw makeError(path, ": cannot stat ", what, " (", std::strerror(err), ")");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw makeError(path, ": the ", what, " is not a regular file (",
                    S_ISDIR(info.st_mode)    ? "a directory"
                    : S_ISFIFO(info.st_mode) ? "a FIFO"
                    : S_ISCHR(info.st_mode)  ? "a character device"
                                             : "a device or socket",
                    ")");
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(info.st_size);
  if (file.size_ > 0) {
    void *addr = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw makeError(path, ": cannot map ", what, " into memory (", std::strerror(err), ")");
    }
    file.data_ = static_cast<const std::byte *>(addr);
  }
  // The mapping keeps the file alive; the descriptor is no longer needed.
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

void MappedFile::unmap() {
  if (data_)
    ::munmap(const_cast<std::byte *>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace slrt
