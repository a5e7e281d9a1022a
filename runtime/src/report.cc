#include "slrt/report.h"

#include "slrt/atomic_file.h"

namespace slrt {

std::vector<ReportedOutput> reportedOutputs(const std::vector<NamedTensor> &outputs) {
  std::vector<ReportedOutput> reported;
  for (const NamedTensor &out : outputs)
    reported.push_back({out.name, out.tensor.dtype, out.tensor.shape});
  return reported;
}

nlohmann::json makeReport(const LoadedSchedule &schedule, const std::string &backendName,
                          const RunStats &stats, const std::vector<ReportedOutput> &outputs) {
  nlohmann::json ops = nlohmann::json::object();
  for (const auto &[name, op] : stats.perOp) {
    ops[name] = {{"count", op.count}, {"seconds", op.seconds}};
    if (op.flops > 0)
      ops[name]["flops"] = op.flops;
  }
  nlohmann::json streams = nlohmann::json::array();
  for (const StreamStats &stream : stats.perStream)
    streams.push_back({{"id", stream.id},
                       {"kind", streamTrackName(stream.kind)},
                       {"kernels", stream.kernels},
                       {"busy_seconds", stream.busySeconds},
                       {"wait_seconds", stream.waitSeconds}});
  nlohmann::json plan = nullptr;
  if (schedule.schedule.has_plan()) {
    const sl::schedule::Plan &p = schedule.schedule.plan();
    plan = {{"mode", p.mode()},
            {"num_sub_batches", p.num_sub_batches()},
            {"sub_batch_size", p.sub_batch_size()},
            {"live_blocks", p.live_blocks()},
            {"predicted_device_bytes", p.predicted_device_bytes()},
            {"predicted_host_bytes", p.predicted_host_bytes()},
            {"predicted_host_pool_bytes", p.predicted_host_pool_bytes()},
            {"predicted_step_seconds", p.predicted_step_seconds()},
            {"parameter_bytes", p.parameter_bytes()},
            {"boundary_activation_bytes", p.boundary_activation_bytes()}};
  }
  nlohmann::json outs = nlohmann::json::array();
  for (const ReportedOutput &out : outputs)
    outs.push_back({{"name", out.name}, {"dtype", dtypeName(out.dtype)}, {"shape", out.shape}});
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
        {"within_space", stats.bytesWithinSpace},
        {"collective", stats.bytesCollective}}},
      {"parameter_bytes_read", stats.parameterBytesRead},
      {"device_arena_bytes", stats.deviceArenaBytes},
      {"device_arena_peak_bytes", stats.deviceArenaPeakBytes},
      {"host_pool_bytes", stats.hostPoolBytes},
      {"host_pool_peak_bytes", stats.hostPoolPeakBytes},
      {"ops", ops},
      {"op_seconds_clock", stats.kernelsTimedOnDevice ? "device" : "host"},
      {"streams", streams},
      {"plan", plan},
      {"outputs", outs},
  };
}

void writeReport(const std::string &path, const nlohmann::json &report) {
  writeFileAtomically(path, report.dump(2) + "\n");
}

} // namespace slrt
