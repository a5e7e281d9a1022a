// Whole-file writes that never leave a partial file behind, and never follow or clobber a file
// that is not theirs. Every output of sl-run and sl-opt goes through AtomicWriter (docs/hardening.md,
// "Writers").
#pragma once

#include <cstddef>
#include <string>

namespace slrt {

// Writes one output file atomically:
//  - open(path) creates a temporary `.<name>.sl-tmp.<host>-<pid>.<random>` in path's directory
//    with O_CREAT|O_EXCL (a file or symlink already at that name is never opened, followed or
//    truncated: another name is tried), mode 0600 while it is written. Before that it removes the
//    temporaries of the same target that a process of this host left when it was killed (its
//    pid is gone), so that kill -9 does not make them pile up.
//  - write() appends; commit() fsyncs and closes it (every error checked: a full disk fails
//    here, not later), gives it the target's mode (an existing target's, e.g. a 0600 checkpoint
//    stays 0600; else 0666 less the umask), renames it over the target and fsyncs the directory.
//  - discard(), a failed call, or the destructor without commit() remove the temporary: the
//    target keeps its bytes.
//  - While a temporary exists, SIGINT, SIGTERM and SIGHUP remove it before the process ends (the
//    handler then does what was done before: the previous handler, or the default action).
// A target that exists and is not a regular file or a directory (/dev/null, a FIFO, /dev/stdout)
// is written in place: there is nothing to replace atomically.
// No member throws: error() says what failed, as "cannot write (reason)" or "cannot create a
// temporary file to write it (reason)", without the path (callers name the path or the flag).
// sl-opt, built without exceptions, uses this class directly.
class AtomicWriter {
public:
  AtomicWriter() = default;
  ~AtomicWriter();
  AtomicWriter(const AtomicWriter &) = delete;
  AtomicWriter &operator=(const AtomicWriter &) = delete;

  bool open(const std::string &path);
  bool write(const void *data, size_t size);
  bool write(const std::string &text) { return write(text.data(), text.size()); }
  bool commit();
  void discard();

  // The temporary's descriptor, for writers that stream through their own buffered stream (flush
  // it and check its errors before commit()); -1 when none is open.
  int fd() const { return fd_; }
  const std::string &temporaryPath() const { return temporary_; }
  const std::string &error() const { return error_; }
  // The reason alone, as the system says it ("No space left on device").
  const std::string &reason() const { return reason_; }

private:
  bool fail(const std::string &what, const std::string &reason);

  std::string path_, temporary_, error_, reason_;
  int fd_ = -1;
  int slot_ = -1;
  // The target is not a regular file (/dev/null): written in place, no temporary.
  bool direct_ = false;
  size_t written_ = 0;
};

// Writes `contents` to `path` with an AtomicWriter; on failure throws Error "PATH: REASON" and
// `path` is untouched.
void writeFileAtomically(const std::string &path, const std::string &contents);

// Throws Error naming the path unless writeFileAtomically could create its temporary beside `path`
// now (the directory exists and is writable) and `path` is not a directory. Lets a tool refuse an
// output path it cannot write before it does the work whose result would be lost.
void checkWritable(const std::string &path);

} // namespace slrt
