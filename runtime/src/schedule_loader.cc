#include "slrt/schedule_loader.h"

#include <climits>
#include <filesystem>
#include <system_error>

#include "slrt/atomic_file.h"
#include "slrt/error.h"
#include "slrt/schedule_verifier.h"

namespace slrt {

std::vector<std::string> resolveParameterFiles(const sl::schedule::Schedule &schedule,
                                               const std::string &baseDir, bool check) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  for (const sl::schedule::Parameter &p : schedule.parameters()) {
    fs::path file(p.file());
    std::string path = (file.is_absolute() ? file : fs::path(baseDir) / file).lexically_normal();
    if (!check) {
      paths.push_back(std::move(path));
      continue;
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
  if (schedule.version() != kScheduleVersion)
    throw makeError("schedule version ", schedule.version(),
                    " is not supported (this runtime supports version ", kScheduleVersion, ")");
  if (schedule.end_magic() != kScheduleMagic)
    throw Error("truncated schedule (the end marker is missing)");
  verifySchedule(schedule);
  return schedule;
}

LoadedSchedule loadSchedule(const std::string &path, bool checkParameterFiles) {
  LoadedSchedule loaded;
  loaded.path = path;
  std::string bytes = readFile(path); // its errors already name the path
  try {
    loaded.schedule = parseSchedule(bytes);
    std::string dir = std::filesystem::path(path).parent_path().string();
    loaded.parameterFiles = resolveParameterFiles(loaded.schedule, dir.empty() ? "." : dir,
                                                  checkParameterFiles);
  } catch (const Error &e) {
    throw makeError(path, ": ", e.what());
  }
  return loaded;
}

} // namespace slrt
