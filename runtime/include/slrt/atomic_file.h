// Whole-file writes that never leave a partial file behind.
#pragma once

#include <string>

namespace slrt {

// Writes `contents` to a temporary file beside `path`, flushes it and renames it over `path`. On
// any failure the temporary is removed, `path` is untouched, and an Error names the path.
void writeFileAtomically(const std::string &path, const std::string &contents);

// Throws Error naming the path unless writeFileAtomically could create its temporary beside `path`
// now (the directory exists and is writable) and `path` is not a directory. Lets a tool refuse an
// output path it cannot write before it does the work whose result would be lost.
void checkWritable(const std::string &path);

} // namespace slrt
