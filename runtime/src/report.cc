#include "slrt/report.h"

#include "slrt/atomic_file.h"

namespace slrt {

nlohmann::json makeReport(const LoadedSchedule &schedule, const std::string &backendName,
                          const RunStats &stats, const std::vector<NamedTensor> &outputs) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto &[name, op] : stats.perOp)
    ops[name] = {{"count", op.count}, {"seconds", op.seconds}};
  nlohmann::json outs = nlohmann::json::array();
  for (const NamedTensor &out : outputs)
    outs.push_back(
        {{"name", out.name}, {"dtype", dtypeName(out.tensor.dtype)}, {"shape", out.tensor.shape}});
  return {
      {"schedule", schedule.path},
      {"kind", schedule.schedule.kind()},
      {"producer", schedule.schedule.producer()},
      {"backend", backendName},
      {"wall_seconds", stats.wallSeconds},
      {"load_seconds", stats.loadSeconds},
      {"kernels", stats.kernels},
      {"bytes_moved",
       {{"host_to_device", stats.bytesHostToDevice},
        {"device_to_host", stats.bytesDeviceToHost},
        {"within_space", stats.bytesWithinSpace}}},
      {"parameter_bytes_read", stats.parameterBytesRead},
      {"device_arena_bytes", stats.deviceArenaBytes},
      {"host_pool_bytes", stats.hostPoolBytes},
      {"ops", ops},
      {"outputs", outs},
  };
}

void writeReport(const std::string &path, const nlohmann::json &report) {
  writeFileAtomically(path, report.dump(2) + "\n");
}

} // namespace slrt
