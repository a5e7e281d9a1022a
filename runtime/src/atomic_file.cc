#include "slrt/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <optional>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "slrt/error.h"
#include "temp_files.h"

namespace slrt {
namespace {

std::string errnoText() { return std::strerror(errno); }

// SL_TEST_STALL_WRITES=N, a testing hook: every write stops for good after N bytes of the output,
// saying so on standard error, so that a test can kill the process in the middle of a write.
// nullopt when unset; -1 when set to something that is not a byte count.
std::optional<long long> stallAfter() {
  static const std::optional<long long> value = []() -> std::optional<long long> {
    const char *text = std::getenv("SL_TEST_STALL_WRITES");
    if (!text)
      return std::nullopt;
    char *end = nullptr;
    errno = 0;
    long long n = std::strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || n < 0)
      return -1;
    return n;
  }();
  return value;
}

[[noreturn]] void stall(const std::string &temporary, size_t bytes) {
  std::string line = "SL_TEST_STALL_WRITES: stalled writing " + temporary + " after " +
                     std::to_string(bytes) + " bytes\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  for (;;)
    ::pause();
}

// Writes all of [data, data + size), retrying short writes and EINTR. errno says why on false.
bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return false;
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The process's umask, read without changing it (umask(2) can only be read by setting it, which
// would race with other threads creating files).
mode_t currentUmask() {
  if (std::FILE *status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    unsigned mask = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, status))
      found = std::sscanf(line, "Umask: %o", &mask) == 1;
    std::fclose(status);
    if (found)
      return static_cast<mode_t>(mask);
  }
  mode_t mask = ::umask(022);
  ::umask(mask);
  return mask;
}

// An existing regular file's permissions, so that replacing it keeps them (a 0600 checkpoint
// stays 0600); what an ordinary create would give otherwise.
mode_t modeFor(const std::string &path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode))
    return info.st_mode & 07777;
  return 0666 & ~currentUmask();
}

uint64_t randomBits() {
  uint64_t value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) == sizeof value)
    return value;
  // No entropy yet (early boot): O_EXCL still keeps names from clashing, this only spreads them.
  static std::atomic<uint64_t> counter{0};
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  uint64_t z = static_cast<uint64_t>(now.tv_nsec) ^ (static_cast<uint64_t>(now.tv_sec) << 30) ^
               (static_cast<uint64_t>(::getpid()) << 16) ^ (counter++ * 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Blocks the signals whose handler removes temporaries while a temporary is created and recorded
// (or renamed and forgotten), so that it is never left between the two in this thread.
class SignalsBlocked {
public:
  SignalsBlocked() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP})
      sigaddset(&set, s);
    ::pthread_sigmask(SIG_BLOCK, &set, &saved_);
  }
  ~SignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

private:
  sigset_t saved_;
};

} // namespace

AtomicWriter::~AtomicWriter() { discard(); }

bool AtomicWriter::fail(const std::string &what, const std::string &reason) {
  error_ = what + " (" + reason + ")";
  reason_ = reason;
  discard();
  return false;
}

bool AtomicWriter::open(const std::string &path) {
  discard();
  path_ = path;
  error_.clear();
  reason_.clear();
  written_ = 0;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      return fail("cannot write", "it is a directory");
    if (!S_ISREG(info.st_mode)) {
      // A device, FIFO or socket (/dev/null, /dev/stdout): there is no file to replace, and
      // renaming over it would replace the device node; it is written in place.
      int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
      if (fd < 0)
        return fail("cannot write", errnoText());
      fd_ = fd;
      direct_ = true;
      return true;
    }
  }
  size_t slash = path.rfind('/');
  std::string directory = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..")
    return fail("cannot write", "it is a directory");
  std::string prefix = temp_files::prefixFor(name);
  temp_files::removeStale(directory, prefix);
  std::string owner = temp_files::ownerTag();
  SignalsBlocked blocked;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char random[17];
    std::snprintf(random, sizeof random, "%016llx",
                  static_cast<unsigned long long>(randomBits()));
    std::string candidate = directory + prefix + owner + "." + random;
    // O_EXCL: nothing already at the name, file or symlink (planted, or another writer's), is
    // ever opened, truncated or followed; O_NOFOLLOW says so explicitly for a symlink.
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      fd_ = fd;
      temporary_ = candidate;
      slot_ = temp_files::remember(candidate);
      return true;
    }
    if (errno != EEXIST)
      break;
  }
  return fail("cannot create a temporary file to write it", errnoText());
}

bool AtomicWriter::write(const void *data, size_t size) {
  if (fd_ < 0)
    return error_.empty() ? fail("cannot write", "no file is open") : false;
  const char *bytes = static_cast<const char *>(data);
  if (std::optional<long long> limit = stallAfter()) {
    if (*limit < 0)
      return fail("cannot write", "SL_TEST_STALL_WRITES is not a byte count");
    size_t left = static_cast<size_t>(*limit) > written_ ? static_cast<size_t>(*limit) - written_ : 0;
    if (size > left) {
      writeAll(fd_, bytes, left);
      stall(temporary_, static_cast<size_t>(*limit));
    }
  }
  if (!writeAll(fd_, bytes, size))
    return fail("cannot write", errnoText());
  written_ += size;
  return true;
}

bool AtomicWriter::commit() {
  if (fd_ < 0)
    return error_.empty() ? fail("cannot write", "no file is open") : false;
  if (direct_) {
    int fd = fd_;
    fd_ = -1;
    direct_ = false;
    return ::close(fd) == 0 || fail("cannot write", errnoText());
  }
  // Permissions first, then the data and the metadata to disk: what is renamed is complete.
  if (::fchmod(fd_, modeFor(path_)) != 0 || ::fsync(fd_) != 0)
    return fail("cannot write", errnoText());
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    return fail("cannot write", errnoText());
  {
    SignalsBlocked blocked;
    if (::rename(temporary_.c_str(), path_.c_str()) != 0)
      return fail("cannot write", errnoText());
    temp_files::forget(slot_);
    slot_ = -1;
    temporary_.clear();
  }
  // The rename itself to disk. It is done whatever this says (some file systems cannot sync a
  // directory), so a failure here is not an error of the write.
  size_t slash = path_.rfind('/');
  std::string directory = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  int dir = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return true;
}

void AtomicWriter::discard() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  direct_ = false;
  if (!temporary_.empty()) {
    SignalsBlocked blocked;
    ::unlink(temporary_.c_str());
    temp_files::forget(slot_);
    slot_ = -1;
    temporary_.clear();
  }
}

void writeFileAtomically(const std::string &path, const std::string &contents) {
  AtomicWriter writer;
  if (!writer.open(path) || !writer.write(contents) || !writer.commit())
    throw makeError(path, ": ", writer.error());
}

void checkWritable(const std::string &path) {
  // The temporary writeFileAtomically would create: where it can be made, the write can be done,
  // short of a full disk.
  AtomicWriter writer;
  if (!writer.open(path))
    throw makeError(path, ": cannot write (", writer.reason(), ")");
}

} // namespace slrt
