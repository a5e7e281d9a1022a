// Refusing an output that would replace one of the run's inputs or another of its outputs.
#pragma once

#include <string>
#include <vector>

namespace slrt {

// A file a tool reads or writes, with what names it in a message: a flag ("--data"), or words
// ("the model file of train.slsched").
struct NamedPath {
  std::string what;
  std::string path;
  // For an input: the output (by its `what`) that may be the same file, because the tool reads
  // the input whole before it writes that output atomically (--resume and --save of one
  // checkpoint). Empty: none may.
  std::string replaceableBy = {};
};

// The first conflict among the paths, as a message naming both sides, or "" when there is none:
// an output that is the same file as an input, or as another output. Two paths are the same file
// when both exist and have one device and inode (hard links, symlinks), or when their real paths
// are equal (for an output that does not exist yet: the real path of its directory and its name).
// Empty paths are skipped, and so are outputs that exist and are not regular files (/dev/null:
// written in place, they replace nothing). Reads only metadata; throws nothing.
std::string sameFileConflict(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs);

// Throws Error with sameFileConflict's message when there is one.
void checkOutputsAreDistinct(const std::vector<NamedPath> &inputs,
                             const std::vector<NamedPath> &outputs);

} // namespace slrt
