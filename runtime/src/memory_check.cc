#include "slrt/memory_check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "slrt/backend.h"
#include "slrt/checked.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/shape.h"
#include "parse_unsigned.h"

namespace slrt {
namespace {

constexpr const char *kHostHook = "SL_TEST_HOST_MEMORY_AVAILABLE";
constexpr const char *kDeviceHook = "SL_TEST_DEVICE_MEMORY_AVAILABLE";

// The first whitespace-separated word of a file ("max", "123"), or nullopt when it cannot be read.
std::optional<std::string> firstWord(const std::string &path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word))
    return std::nullopt;
  return word;
}

// The value of `key` in a "key value" file (memory.stat), or 0.
uint64_t statValue(const std::string &path, const std::string &key) {
  std::ifstream in(path);
  std::string name;
  uint64_t value;
  while (in >> name >> value)
    if (name == key)
      return value;
  return 0;
}

// Room left under a cgroup limit: the limit minus the usage, not counting inactive file cache,
// which the kernel reclaims before it fails an allocation. nullopt without a (finite) limit.
std::optional<uint64_t> cgroupRoom(const std::string &limitFile, const std::string &usageFile,
                                   const std::string &statFile, const std::string &inactiveKey) {
  std::optional<std::string> limitText = firstWord(limitFile);
  std::optional<std::string> usageText = firstWord(usageFile);
  if (!limitText || !usageText)
    return std::nullopt;
  std::optional<uint64_t> limit = parseUnsigned(*limitText);
  std::optional<uint64_t> usage = parseUnsigned(*usageText);
  // "max" (v2), or a v1 limit near 2^63 rounded to pages: no limit.
  if (!limit || !usage || *limit >= (uint64_t{1} << 62))
    return std::nullopt;
  uint64_t inactive = statValue(statFile, inactiveKey);
  uint64_t used = *usage > inactive ? *usage - inactive : 0;
  return *limit > used ? *limit - used : 0;
}

std::string formatBytes(uint64_t bytes) {
  static const char *const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0)
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  return text;
}

// "1.25 KiB (1280 bytes)", as sl-plan writes budgets.
std::string bytesWithCount(uint64_t bytes) {
  return formatBytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

// The byte count of a testing hook, or nullopt when it is not set.
std::optional<uint64_t> hook(const char *name) {
  const char *value = std::getenv(name);
  if (!value)
    return std::nullopt;
  std::optional<uint64_t> bytes = parseUnsigned(value);
  if (!bytes)
    throw makeError(name, "='", value, "' is not a byte count (a non-negative integer)");
  return bytes;
}

} // namespace

MemoryNeed runMemoryNeed(const sl::schedule::Schedule &schedule, const RunMemoryOptions &options) {
  MemoryNeed need;
  need.deviceArena = schedule.device_arena_bytes();
  need.host.push_back({"host pool", schedule.host_pool_bytes()});
  if (options.training) {
    // One f32 tensor per parameter; the train contract makes every parameter f32.
    uint64_t oneCopy = 0;
    for (const sl::schedule::Parameter &p : schedule.parameters())
      oneCopy = saturatingAdd<uint64_t>(
          oneCopy,
          saturatingMul<uint64_t>(numel(toShape(p.shape())).value_or(UINT64_MAX), sizeof(float)));
    uint64_t state = saturatingMul<uint64_t>(oneCopy, 3);
    need.host.push_back({"AdamW state (master weights and two moments)", state});
    // A resume's reading and a save's copying and encoding do not overlap: one is before the first
    // step, the other after the last.
    uint64_t checkpoint =
        options.save ? saturatingMul<uint64_t>(state, 2) : options.resume ? state : 0;
    if (checkpoint > 0)
      need.host.push_back(
          {options.save ? "checkpoint being saved" : "checkpoint being read", checkpoint});
  } else {
    uint64_t outputs = 0;
    for (const sl::schedule::Binding &b : schedule.outputs())
      if (b.buffer() < static_cast<uint32_t>(schedule.buffers_size()))
        outputs = saturatingAdd<uint64_t>(outputs,
                                          schedule.buffers(static_cast<int>(b.buffer())).bytes());
    outputs = saturatingMul<uint64_t>(outputs, options.outputCopies);
    if (outputs > 0)
      need.host.push_back({"outputs", outputs});
  }
  return need;
}

unsigned deviceStreamCount(const sl::schedule::Schedule &schedule) {
  unsigned count = 0;
  for (const sl::schedule::Stream &stream : schedule.streams())
    if (stream.kind() != sl::schedule::HOST_COMPUTE)
      ++count;
  return count;
}

MemoryAvailable availableHostMemory(const std::string &root) {
  std::string meminfo = root + "/proc/meminfo";
  std::ifstream in(meminfo);
  if (!in)
    throw makeError(meminfo, ": cannot open, so the free memory is unknown");
  std::optional<uint64_t> available, free;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib;
    if (!(fields >> key >> kib))
      continue;
    if (key == "MemAvailable:")
      available = saturatingMul<uint64_t>(kib, 1024);
    else if (key == "MemFree:")
      free = saturatingMul<uint64_t>(kib, 1024);
  }
  MemoryAvailable result;
  // Kernels before 3.14 have no MemAvailable; MemFree then undercounts, which errs on the safe
  // side.
  if (available) {
    result.hostBytes = *available;
    result.hostSource = "MemAvailable in " + meminfo;
  } else if (free) {
    result.hostBytes = *free;
    result.hostSource = "MemFree in " + meminfo;
  } else {
    throw makeError(meminfo, ": has neither MemAvailable nor MemFree, so the free memory is "
                             "unknown");
  }

  std::string cgroup = root + "/sys/fs/cgroup";
  std::optional<uint64_t> room = cgroupRoom(cgroup + "/memory.max", cgroup + "/memory.current",
                                            cgroup + "/memory.stat", "inactive_file");
  std::string source = "the memory cgroup's memory.max less its memory.current";
  if (!room) {
    room = cgroupRoom(cgroup + "/memory/memory.limit_in_bytes",
                      cgroup + "/memory/memory.usage_in_bytes", cgroup + "/memory/memory.stat",
                      "total_inactive_file");
    source = "the memory cgroup's memory.limit_in_bytes less its memory.usage_in_bytes";
  }
  if (room && *room < result.hostBytes) {
    result.hostBytes = *room;
    result.hostSource = source;
  }
  return result;
}

MemoryAvailable availableMemory(const Backend &backend) {
  MemoryAvailable result;
  if (std::optional<uint64_t> bytes = hook(kHostHook)) {
    result.hostBytes = *bytes;
    result.hostSource = kHostHook;
  } else {
    result = availableHostMemory();
  }
  if (std::optional<uint64_t> bytes = hook(kDeviceHook)) {
    result.deviceBytes = *bytes;
    result.deviceSource = kDeviceHook;
  } else if (std::optional<uint64_t> bytes = backend.deviceMemoryAvailable()) {
    result.deviceBytes = *bytes;
    result.deviceSource = "free on the " + backend.name() + " device";
  }
  return result;
}

void checkMemoryFits(const std::string &what, const MemoryNeed &need,
                     const MemoryAvailable &available) {
  if (available.deviceBytes &&
      saturatingAdd<uint64_t>(need.deviceArena, need.deviceWorking) > *available.deviceBytes)
    throw makeError(what, ": the device arena needs ", bytesWithCount(need.deviceArena),
                    need.deviceWorking > 0
                        ? " of device memory, plus " + bytesWithCount(need.deviceWorking) +
                              " the backend uses beside it (library workspaces, scratch, "
                              "kernels),"
                        : std::string(" of device memory,"),
                    " but only ", bytesWithCount(*available.deviceBytes), " is available (",
                    available.deviceSource,
                    "); compile the model for a smaller device budget (sl-opt --sl-train=\"... "
                    "device-memory=BYTES\") or free the device");

  std::vector<MemoryItem> host = need.host;
  if (!available.deviceBytes)
    host.insert(host.begin() + 1, {"device arena (host memory on this backend)", need.deviceArena});
  uint64_t total = 0;
  std::string parts;
  for (const MemoryItem &item : host) {
    if (item.bytes == 0)
      continue;
    total = saturatingAdd<uint64_t>(total, item.bytes);
    parts += (parts.empty() ? "" : ", ") + item.what + " " + formatBytes(item.bytes);
  }
  if (total > available.hostBytes)
    throw makeError(what, ": the run needs ", bytesWithCount(total), " of host memory (", parts,
                    "), but only ", bytesWithCount(available.hostBytes), " is available (",
                    available.hostSource,
                    "); free some, or compile the model for less (a smaller batch, or sl-opt "
                    "--sl-train=\"... host-memory=BYTES\")");
}

} // namespace slrt
