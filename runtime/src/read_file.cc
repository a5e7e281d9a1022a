#include "slrt/read_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slrt/error.h"

namespace slrt {
namespace {

std::string errnoText() { return std::strerror(errno); }

const char *kindOf(mode_t mode) {
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

// Opens `path` for reading after checking that it is a regular file; its size in `size`. Throws
// Error naming the path.
int openRegular(const std::string &path, uint64_t &size) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever if none
  // comes, before fstat could say what it is. It changes nothing for a regular file.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw makeError(path, ": cannot open (", errnoText(), ")");
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    std::string why = errnoText();
    ::close(fd);
    throw makeError(path, ": cannot read (", why, ")");
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    throw makeError(path, ": cannot read (", std::strerror(EISDIR), ")");
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw makeError(path, ": cannot read it: it is ", kindOf(info.st_mode),
                    ", not a regular file");
  }
  size = static_cast<uint64_t>(info.st_size);
  return fd;
}

// Up to `count` bytes from the start of `fd`, which it closes: fewer when the file shrank since
// fstat (what is there is the file).
std::string readAndClose(int fd, uint64_t count, const std::string &path) {
  std::string contents;
  contents.resize(count);
  size_t done = 0;
  std::string why;
  while (done < count) {
    ssize_t n = ::read(fd, contents.data() + done, count - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      why = errnoText();
      break;
    }
    if (n == 0)
      break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!why.empty())
    throw makeError(path, ": cannot read (", why, ")");
  contents.resize(done);
  return contents;
}

} // namespace

std::string readFile(const std::string &path, uint64_t maxBytes, const char *limitReason) {
  uint64_t size = 0;
  int fd = openRegular(path, size);
  if (size > maxBytes) {
    ::close(fd);
    throw makeError(path, ": the file is ", size, " bytes, more than the limit of ", maxBytes,
                    " bytes", limitReason ? " (" : "", limitReason ? limitReason : "",
                    limitReason ? ")" : "");
  }
  return readAndClose(fd, size, path);
}

FilePrefix readFilePrefix(const std::string &path, uint64_t maxBytes) {
  FilePrefix prefix;
  int fd = openRegular(path, prefix.fileSize);
  prefix.bytes = readAndClose(fd, std::min(prefix.fileSize, maxBytes), path);
  return prefix;
}

std::string quoteBounded(const std::string &text, size_t maxBytes) {
  if (text.size() <= maxBytes)
    return text;
  size_t cut = maxBytes;
  // Back up over UTF-8 continuation bytes so that the cut does not split a character.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;
  return text.substr(0, cut) + "... (" + std::to_string(text.size()) + " bytes)";
}

} // namespace slrt
