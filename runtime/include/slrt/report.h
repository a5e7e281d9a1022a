// The JSON report of a run (sl-run --report).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slrt/executor.h"

namespace slrt {

// {"schedule", "kind", "producer", "backend", "wall_seconds", "load_seconds", "kernels",
//  "bytes_moved": {"host_to_device", "device_to_host", "within_space"}, "parameter_bytes_read",
//  "device_arena_bytes", "host_pool_bytes", "ops": {OP: {"count", "seconds"}},
//  "outputs": [{"name", "dtype", "shape"}]}
nlohmann::json makeReport(const LoadedSchedule &schedule, const std::string &backendName,
                          const RunStats &stats, const std::vector<NamedTensor> &outputs);

// Writes the report atomically, pretty-printed.
void writeReport(const std::string &path, const nlohmann::json &report);

} // namespace slrt
