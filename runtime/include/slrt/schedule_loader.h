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
// ExecutorOptions::randomWeightsSeed, which never opens them) every parameter file. Throws Error
// whose message starts with `path`.
LoadedSchedule loadSchedule(const std::string &path, bool checkParameterFiles = true);

// Resolves each parameter's file against `baseDir` (absolute paths are kept) and, with `check`,
// checks that the file exists and holds file_offset + bytes bytes. Returns the resolved paths in
// parameter order.
std::vector<std::string> resolveParameterFiles(const sl::schedule::Schedule &schedule,
                                               const std::string &baseDir, bool check = true);

} // namespace slrt
