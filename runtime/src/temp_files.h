// The temporaries of AtomicWriter: their names, the ones killed processes left, and their removal
// when the process is ended by a signal.
#pragma once

#include <string>

namespace slrt::temp_files {

// ".<name>.sl-tmp.": what every temporary of a target whose file name is `name` starts with. A
// long name is shortened, so that the temporary's name stays within NAME_MAX.
std::string prefixFor(const std::string &name);

// "<host>-<pid>": which process made a temporary (host: 8 hex digits of a hash of the host name,
// so that a process on another machine sharing the directory is never taken for a dead one).
std::string ownerTag();

// Removes the temporaries in `directory` whose names start with `prefix` and that a process of
// this host left when it was killed: the pid they name is gone. Only regular files owned by this
// user are removed; anything else is left alone.
void removeStale(const std::string &directory, const std::string &prefix);

// Records `path` as a live temporary that SIGINT, SIGTERM and SIGHUP must remove, installing the
// handler (chained to the one installed before, and not on a signal that is ignored). Returns the
// slot to forget it by, or -1 when the path is too long or all slots are taken (it is then left to
// removeStale).
int remember(const std::string &path);
void forget(int slot);

} // namespace slrt::temp_files
