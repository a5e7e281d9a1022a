#include "slrt/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slrt/error.h"

namespace slrt {
namespace {

std::string errnoText() { return std::strerror(errno); }

// Writes all of `contents`, retrying short writes and EINTR.
bool writeAll(int fd, const std::string &contents) {
  const char *p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

} // namespace

void writeFileAtomically(const std::string &path, const std::string &contents) {
  // The temporary sits in the target's directory so that rename() stays within one file system and
  // is atomic; mkstemp makes its name unique among concurrent writers.
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw makeError(path, ": cannot create a temporary file to write it (", errnoText(), ")");
  // mkstemp creates 0600; give the file the permissions an ordinary create would.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  bool ok = writeAll(fd, contents) && ::fsync(fd) == 0;
  std::string why = ok ? "" : errnoText();
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = errnoText();
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    why = errnoText();
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw makeError(path, ": cannot write (", why, ")");
  }
}

void checkWritable(const std::string &path) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode))
    throw makeError(path, ": cannot write (it is a directory)");
  // The same temporary writeFileAtomically would create: where it can be made, the write can be
  // done, short of a full disk.
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw makeError(path, ": cannot write (", errnoText(), ")");
  ::close(fd);
  ::unlink(tmp.c_str());
}

} // namespace slrt
