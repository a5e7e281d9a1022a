// The JSON report of a run (sl-run --report).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slrt/executor.h"

namespace slrt {

// What "outputs" says of each output.
struct ReportedOutput {
  std::string name;
  DType dtype = DType::DTYPE_UNSPECIFIED;
  Shape shape;
};
std::vector<ReportedOutput> reportedOutputs(const std::vector<NamedTensor> &outputs);

// {"schedule", "kind", "producer", "backend", "wall_seconds", "load_seconds", "kernels",
//  "bytes_moved": {"host_to_device", "device_to_host", "within_space", "collective"},
//  "parameter_bytes_read", "device_arena_bytes", "device_arena_peak_bytes", "host_pool_bytes",
//  "host_pool_peak_bytes", "ops": {OP: {"count", "seconds", and for MATMUL, GEMM, ATTENTION and
//  ATTENTION_GRAD "flops" (kernelFlops)}}, "op_seconds_clock",
//  "streams": [{"id", "kind", "kernels", "busy_seconds", "wait_seconds"}],
//  "plan": {"mode", "num_sub_batches", "sub_batch_size", "live_blocks", "predicted_device_bytes",
//           "predicted_host_bytes", "predicted_host_pool_bytes", "predicted_step_seconds",
//           "parameter_bytes",
//           "boundary_activation_bytes"} or null when the schedule has none,
//  "outputs": [{"name", "dtype", "shape"}]}
// Everything about the run (wall_seconds, kernels, bytes_moved, the peaks, ops, streams) is the
// last run's: for training, the last step's. "ops" seconds are summed over the streams' threads;
// a stream's "kind" is its trace track name ("compute", "h2d", "d2h", "collective", "host").
// "op_seconds_clock" says what the seconds of the kernels the backend ran on its streams ("ops",
// "busy_seconds") measure: "device", the backend's timing of them (RunStats::kernelsTimedOnDevice),
// or "host", the host's time around each call (on an asynchronous backend, only the issuing).
nlohmann::json makeReport(const LoadedSchedule &schedule, const std::string &backendName,
                          const RunStats &stats, const std::vector<ReportedOutput> &outputs);

// Writes the report atomically, pretty-printed.
void writeReport(const std::string &path, const nlohmann::json &report);

} // namespace slrt
