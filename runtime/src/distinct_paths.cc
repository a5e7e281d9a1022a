#include "slrt/distinct_paths.h"

#include <climits>
#include <cstdlib>
#include <sys/stat.h>
#include <vector>
#include <unistd.h>

#include "slrt/error.h"

namespace slrt {
namespace {

struct Identity {
  bool exists = false;
  bool regular = false;
  dev_t device = 0;
  ino_t inode = 0;
  std::string real;
};

std::string realPath(const std::string &path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) ? std::string(resolved) : std::string();
}

// The absolute path with "." and ".." taken lexically: for a path whose directory does not
// exist either (the write will fail anyway, and say so).
std::string lexicalPath(const std::string &path) {
  std::string absolute = path;
  if (path.empty() || path[0] != '/') {
    char cwd[PATH_MAX];
    absolute = (::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string()) + "/" + path;
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= absolute.size()) {
    size_t end = absolute.find('/', start);
    if (end == std::string::npos)
      end = absolute.size();
    std::string part = absolute.substr(start, end - start);
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = end + 1;
  }
  std::string out;
  for (const std::string &part : parts)
    out += "/" + part;
  return out.empty() ? "/" : out;
}

Identity identify(const std::string &path) {
  Identity id;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    id.exists = true;
    id.regular = S_ISREG(info.st_mode);
    id.device = info.st_dev;
    id.inode = info.st_ino;
    id.real = realPath(path);
  }
  if (id.real.empty()) {
    // Not there yet (or a dangling symlink, which the write replaces): its directory's real
    // path and its name.
    size_t slash = path.rfind('/');
    std::string directory = slash == std::string::npos ? "." : path.substr(0, slash + 1);
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    std::string real = realPath(directory);
    id.real = real.empty() ? lexicalPath(path) : (real == "/" ? "" : real) + "/" + name;
  }
  return id;
}

bool sameFile(const Identity &a, const Identity &b) {
  if (a.exists && b.exists && a.device == b.device && a.inode == b.inode)
    return true;
  return a.real == b.real;
}

std::string describe(const NamedPath &p) { return p.what + " " + p.path; }

} // namespace

std::string sameFileConflict(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs) {
  std::vector<Identity> in, out;
  for (const NamedPath &p : inputs)
    in.push_back(p.path.empty() ? Identity{} : identify(p.path));
  for (const NamedPath &p : outputs)
    out.push_back(p.path.empty() ? Identity{} : identify(p.path));
  for (size_t o = 0; o < outputs.size(); ++o) {
    // An existing device or FIFO (/dev/null) is written in place and replaces nothing.
    if (outputs[o].path.empty() || (out[o].exists && !out[o].regular))
      continue;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].path.empty() && inputs[i].replaceableBy != outputs[o].what &&
          sameFile(out[o], in[i]))
        return describe(outputs[o]) + " is the same file as " + describe(inputs[i]) +
               " (an input of this run): writing it would destroy the input; write the output "
               "elsewhere";
    for (size_t p = 0; p < o; ++p)
      if (!outputs[p].path.empty() && !(out[p].exists && !out[p].regular) &&
          sameFile(out[o], out[p]))
        return describe(outputs[o]) + " is the same file as " + describe(outputs[p]) +
               " (another output of this run): give each output its own file";
  }
  return "";
}

void checkOutputsAreDistinct(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs) {
  std::string conflict = sameFileConflict(inputs, outputs);
  if (!conflict.empty())
    throw Error(conflict);
}

} // namespace slrt
