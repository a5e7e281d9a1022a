// Reading a schedule file into memory, verified.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "schedule/schedule.pb.h"

namespace slrt {

struct LoadedSchedule {
  // The path the schedule was read from, as given.
  std::string path;
  sl::schedule::Schedule schedule;
  // parameterFiles[i] is schedule.parameters(i).file resolved against the schedule's directory.
  std::vector<std::string> parameterFiles;
};

// Parses and verifies a schedule file's bytes: the magic bytes (0x0D then 'SLSC'), the protobuf, the
// version, the end marker and verifySchedule. Throws Error (without a path: loadSchedule adds it).
// Does not look at parameter files.
sl::schedule::Schedule parseSchedule(std::string_view bytes);

// Reads, parses and verifies a schedule file: the magic bytes (0x0D then 'SLSC'), the protobuf, the
// version, verifySchedule, and (unless `checkParameterFiles` is false: a run with
// ExecutorOptions::randomWeightsSeed, which never opens them) every parameter file, as
// resolveParameterFiles does. Throws Error whose message starts with `path`.
LoadedSchedule loadSchedule(const std::string &path, bool checkParameterFiles = true,
                            bool allowExternalPaths = false);

// Resolves each parameter's file against `baseDir` (the schedule's directory) and, with `check`,
// checks it: unless `allowExternalPaths` (sl-run --allow-external-paths, for a schedule the user
// trusts), the name must be relative without a `..` component, and the file it resolves to with
// every symbolic link followed (realpath) must lie inside `baseDir` as it resolves: a schedule
// must not read, and a run then copy into its outputs, files outside its directory. Then the file
// must be a regular file holding file_offset + bytes bytes. Returns the paths in parameter order,
// as the schedule names them joined to `baseDir` (absolute ones kept).
std::vector<std::string> resolveParameterFiles(const sl::schedule::Schedule &schedule,
                                               const std::string &baseDir, bool check = true,
                                               bool allowExternalPaths = false);

} // namespace slrt
