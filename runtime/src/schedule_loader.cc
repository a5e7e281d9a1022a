#include "slrt/schedule_loader.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "slrt/read_file.h"
#include "slrt/error.h"
#include "slrt/schedule_verifier.h"
#include "kernel_verifier.h"

namespace slrt {

namespace {

// realpath(3) of `path`, or "" when it cannot be resolved (errno says why).
std::string realPath(const std::string &path) {
  char *resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved)
    return "";
  std::string result(resolved);
  std::free(resolved);
  return result;
}

bool isInside(const std::string &path, const std::string &dir) {
  if (dir == "/")
    return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

bool hasDotDot(const std::filesystem::path &file) {
  for (const std::filesystem::path &part : file)
    if (part == "..")
      return true;
  return false;
}

} // namespace

std::vector<std::string> resolveParameterFiles(const sl::schedule::Schedule &schedule,
                                               const std::string &baseDir, bool check,
                                               bool allowExternalPaths) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  std::string realBase;
  if (check && !allowExternalPaths) {
    realBase = realPath(baseDir);
    if (realBase.empty())
      throw makeError("cannot resolve the schedule's directory '", baseDir, "' (",
                      std::strerror(errno), ")");
  }
  for (const sl::schedule::Parameter &p : schedule.parameters()) {
    fs::path file(p.file());
    std::string path = (file.is_absolute() ? file : fs::path(baseDir) / file).lexically_normal();
    if (!check) {
      paths.push_back(std::move(path));
      continue;
    }
    if (!allowExternalPaths) {
      if (file.is_absolute() || hasDotDot(file))
        throw makeError("parameter '", p.name(), "': file '", p.file(), "' is ",
                        file.is_absolute() ? "an absolute path" : "a path with '..'",
                        ": a schedule reads parameter files only inside its own directory "
                        "(compile it with -o beside the model, or give --allow-external-paths "
                        "if you trust it)");
      std::string real = realPath(path);
      if (!real.empty() && !isInside(real, realBase))
        throw makeError("parameter '", p.name(), "': file '", p.file(), "' resolves to '", real,
                        "' (through a symbolic link), outside the schedule's directory '",
                        realBase, "'; a schedule reads parameter files only inside it (give "
                        "--allow-external-paths if you trust it)");
    }
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      throw makeError("parameter '", p.name(), "': file '", path,
                      fs::exists(path, ec) ? "' is not a regular file" : "' does not exist");
    uint64_t size = fs::file_size(path, ec);
    if (ec)
      throw makeError("parameter '", p.name(), "': cannot read the size of '", path, "' (",
                      ec.message(), ")");
    if (p.file_offset() > size || p.bytes() > size - p.file_offset())
      throw makeError("parameter '", p.name(), "' reads ", p.bytes(), " bytes at offset ",
                      p.file_offset(), " of '", path, "', which has only ", size, " bytes");
    paths.push_back(std::move(path));
  }
  return paths;
}

sl::schedule::Schedule parseSchedule(std::string_view bytes) {
  // Field 1 (fixed32 magic) is serialized first: its tag byte 0x0D, then 'SLSC' little-endian.
  static constexpr unsigned char kHead[5] = {0x0D, kScheduleMagic & 0xff,
                                             (kScheduleMagic >> 8) & 0xff,
                                             (kScheduleMagic >> 16) & 0xff, kScheduleMagic >> 24};
  if (bytes.size() < sizeof kHead ||
      bytes.compare(0, sizeof kHead, reinterpret_cast<const char *>(kHead), sizeof kHead) != 0)
    throw Error("not a SpeedLoader schedule (bad magic)");
  sl::schedule::Schedule schedule;
  if (bytes.size() > size_t(INT_MAX) || !schedule.ParseFromArray(bytes.data(), int(bytes.size())))
    throw Error("truncated or corrupt schedule (protobuf parse failed)");
  if (schedule.version() < kOldestScheduleVersion || schedule.version() > kScheduleVersion)
    throw makeError("schedule version ", schedule.version(),
                    " is not supported (this runtime supports versions ", kOldestScheduleVersion,
                    " to ", kScheduleVersion, ")");
  if (schedule.version() < 5)
    for (int i = 0; i < schedule.kernels_size(); ++i)
    {
      if (schedule.kernels(i).has_matmul())
        throw makeError(kernelText(i, schedule.kernels(i)), ": has matmul attributes, which ",
                        "schedule version ", schedule.version(), " does not have (version 5 does)");
      if (schedule.kernels(i).has_attention() && schedule.kernels(i).attention().alibi())
        throw makeError(kernelText(i, schedule.kernels(i)), ": has ALiBi slopes, which ",
                        "schedule version ", schedule.version(), " does not have (version 5 does)");
    }
  if (schedule.version() < 6)
    for (int i = 0; i < schedule.kernels_size(); ++i)
      if (schedule.kernels(i).has_attention() &&
          schedule.kernels(i).attention().layout() != sl::schedule::AttentionAttributes::BHSD)
        throw makeError(kernelText(i, schedule.kernels(i)), ": has attention layout ",
                        sl::schedule::AttentionAttributes::Layout_Name(
                            schedule.kernels(i).attention().layout()),
                        ", which schedule version ", schedule.version(),
                        " does not have (version 6 does)");
  if (schedule.version() < 7)
    for (int i = 0; i < schedule.kernels_size(); ++i)
      if (schedule.kernels(i).has_kv_write())
        throw makeError(kernelText(i, schedule.kernels(i)), ": has kv_write attributes, which ",
                        "schedule version ", schedule.version(),
                        " does not have (version 7 does)");
  if (schedule.end_magic() != kScheduleMagic)
    throw Error("truncated schedule (the end marker is missing)");
  verifySchedule(schedule);
  return schedule;
}

LoadedSchedule loadSchedule(const std::string &path, bool checkParameterFiles,
                            bool allowExternalPaths) {
  LoadedSchedule loaded;
  loaded.path = path;
  // Its errors already name the path.
  std::string bytes = readFile(path, INT_MAX, "protobuf parses at most 2 GiB");
  try {
    loaded.schedule = parseSchedule(bytes);
    std::string dir = std::filesystem::path(path).parent_path().string();
    loaded.parameterFiles = resolveParameterFiles(loaded.schedule, dir.empty() ? "." : dir,
                                                  checkParameterFiles, allowExternalPaths);
  } catch (const Error &e) {
    throw makeError(path, ": ", e.what());
  }
  return loaded;
}

} // namespace slrt
