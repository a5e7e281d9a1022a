#include "temp_files.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace slrt::temp_files {
namespace {

// Names longer than this are cut in the temporary's name: with the ~45 bytes of the rest it stays
// under NAME_MAX (255).
constexpr size_t kMaxNameInPrefix = 200;

// --- the live temporaries, for the signal handler -------------------------------------------------
// A fixed table of fixed buffers: the handler may only read memory and call async-signal-safe
// functions (unlink). A slot is claimed (kClaimed) while its path is copied in and becomes visible
// to the handler only once complete (kLive).
constexpr int kSlots = 64;
constexpr size_t kPathBytes = 4096;
enum : int { kFree = 0, kClaimed = 1, kLive = 2 };
struct Slot {
  std::atomic<int> state{kFree};
  char path[kPathBytes];
};
Slot slots[kSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler reads slot states");

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kSignalCount = sizeof kSignals / sizeof kSignals[0];
// What each signal did before the handler was installed: it does the same after removing the
// temporaries. Written only while the handler is not installed for that signal.
struct sigaction previous[kSignalCount];
std::mutex installing;

int signalIndex(int signal) {
  for (int i = 0; i < kSignalCount; ++i)
    if (kSignals[i] == signal)
      return i;
  return -1;
}

extern "C" void removeTemporariesOnSignal(int signal, siginfo_t *info, void *context) {
  int savedErrno = errno;
  for (Slot &slot : slots)
    if (slot.state.load() == kLive)
      ::unlink(slot.path);
  int i = signalIndex(signal);
  const struct sigaction &before = previous[i < 0 ? 0 : i];
  if (i >= 0 && (before.sa_flags & SA_SIGINFO) && before.sa_sigaction) {
    before.sa_sigaction(signal, info, context);
  } else if (i >= 0 && !(before.sa_flags & SA_SIGINFO) && before.sa_handler != SIG_DFL &&
             before.sa_handler != SIG_IGN) {
    before.sa_handler(signal);
  } else {
    // The default action (ending the process) once this handler returns: the signal is blocked
    // while it runs, so the raised one waits until then.
    struct sigaction fallback = {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    ::sigaction(signal, &fallback, nullptr);
    ::raise(signal);
  }
  errno = savedErrno;
}

bool isOurs(const struct sigaction &action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == removeTemporariesOnSignal;
}

// Installs the handler for each signal where another (or the default) is installed now, so that
// a handler installed after an earlier write (the communicator's SIGTERM report) is chained too.
// A signal that is ignored (SIGINT of a background job) stays ignored.
void installHandlers() {
  std::lock_guard<std::mutex> lock(installing);
  for (int i = 0; i < kSignalCount; ++i) {
    struct sigaction current = {};
    if (::sigaction(kSignals[i], nullptr, &current) != 0 || isOurs(current))
      continue;
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN)
      continue;
    previous[i] = current;
    struct sigaction mine = {};
    mine.sa_sigaction = removeTemporariesOnSignal;
    mine.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&mine.sa_mask);
    for (int s : kSignals)
      sigaddset(&mine.sa_mask, s);
    ::sigaction(kSignals[i], &mine, nullptr);
  }
}

uint32_t hostHash() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0)
    name[0] = '\0';
  uint32_t hash = 2166136261u; // FNV-1a
  for (const char *p = name; *p; ++p)
    hash = (hash ^ static_cast<unsigned char>(*p)) * 16777619u;
  return hash;
}

std::string hostTag() {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", hostHash());
  return text;
}

bool isHex(const std::string &text) {
  if (text.empty())
    return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return false;
  return true;
}

} // namespace

std::string prefixFor(const std::string &name) {
  return "." + name.substr(0, kMaxNameInPrefix) + ".sl-tmp.";
}

std::string ownerTag() { return hostTag() + "-" + std::to_string(::getpid()); }

namespace {

// Whether process `pid` has ended: no such process, or a zombie (ended, not yet reaped by its
// parent: a rank killed by SIGKILL stays one for a while when mpirun exits before reaping it, and
// may be reparented to an init that reaps late). Another user's live process (EPERM) is not gone.
bool processGone(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE *stat = std::fopen(path, "r");
  if (!stat)
    return false;
  // "<pid> (<comm>) <state> ...": comm may hold spaces and parentheses, so the state follows the
  // last ')'.
  char buffer[512];
  size_t n = std::fread(buffer, 1, sizeof buffer - 1, stat);
  std::fclose(stat);
  buffer[n] = '\0';
  const char *close = std::strrchr(buffer, ')');
  return close && close[1] == ' ' && close[2] == 'Z';
}

} // namespace

void removeStale(const std::string &directory, const std::string &prefix) {
  DIR *dir = ::opendir(directory.empty() ? "." : directory.c_str());
  if (!dir)
    return;
  const std::string host = hostTag();
  const pid_t self = ::getpid();
  while (const dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    // <host>-<pid>.<random>
    std::string rest = name.substr(prefix.size());
    size_t dash = rest.find('-'), dot = rest.find('.');
    if (dash == std::string::npos || dot == std::string::npos || dot < dash ||
        rest.substr(0, dash) != host || !isHex(rest.substr(dot + 1)))
      continue;
    std::string digits = rest.substr(dash + 1, dot - dash - 1);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      continue;
    pid_t pid = static_cast<pid_t>(std::stol(digits));
    // Alive, or another user's (EPERM): not ours to remove.
    if (pid <= 0 || pid == self || !processGone(pid))
      continue;
    struct stat info;
    if (::fstatat(::dirfd(dir), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(info.st_mode) || info.st_uid != ::geteuid())
      continue;
    ::unlinkat(::dirfd(dir), name.c_str(), 0);
  }
  ::closedir(dir);
}

int remember(const std::string &path) {
  if (path.size() >= kPathBytes)
    return -1;
  installHandlers();
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!slots[i].state.compare_exchange_strong(expected, kClaimed))
      continue;
    std::memcpy(slots[i].path, path.c_str(), path.size() + 1);
    slots[i].state.store(kLive);
    return i;
  }
  return -1;
}

void forget(int slot) {
  if (slot >= 0 && slot < kSlots)
    slots[slot].state.store(kFree);
}

} // namespace slrt::temp_files
