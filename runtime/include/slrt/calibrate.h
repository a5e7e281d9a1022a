// sl-run --calibrate: the rates sl-opt's planner models, measured on the machine and backend that
// will run the schedules, written as a machine profile that `--sl-train="... target=FILE.json"`
// (and --sl-plan) reads.
//
// Measured: matrix products (MATMUL kernels through the backend, f32 and bf16, square, in the
// device arena), host->device copies (host pool to device arena, through the backend's copy: a
// pinned-memory transfer on CUDA, memcpy on the CPU backend), the host AdamW (slrt::AdamW
// over one parameter, as sl-run's trainer steps a bf16 model: the gradient check, then the update
// writing the bf16 weights), and the fixed cost of a kernel (products of
// 64 x 64 matrices launched many times, less their FLOPs at the large product's rate). Each is
// timed over repeated runs after a warm-up run, until a minimum time has passed; the rate is the
// mean over the timed runs.
#pragma once

#include <cstdint>
#include <string>

#include "slrt/backend.h"

namespace slrt {

struct CalibrationOptions {
  // Square matrix sizes of the f32 and bf16 products (0: the backend's default: 512 on the CPU
  // backend, 4096 and 8192 on a device).
  int64_t gemmSizeF32 = 0;
  int64_t gemmSizeBf16 = 0;
  // Bytes of one host->device copy (0: 256 MiB on the CPU backend, 1 GiB on a device).
  uint64_t copyBytes = 0;
  // Parameters of the timed AdamW step (0: 16 Mi on the CPU backend, 64 Mi with a device).
  uint64_t optimizerParameters = 0;
  // Each rate is timed over at least this many seconds (and at least 3 runs).
  double minSeconds = 0.3;
};

struct MachineCalibration {
  std::string backend;
  double linkGBps = 0;             // host -> device, 10^9 bytes per second
  double f32Tflops = 0;            // 10^12 floating-point operations per second
  double bf16Tflops = 0;
  double hostOptimizerGParams = 0; // 10^9 parameters per second
  double kernelOverheadUs = 0;     // microseconds per kernel launched
  // What was measured, for the profile's "source".
  int64_t gemmSizeF32 = 0, gemmSizeBf16 = 0;
  uint64_t copyBytes = 0, optimizerParameters = 0;
};

// Measures `backend`, which must be fresh: this allocates its arena and pool. Throws Error when a
// size is out of range or the backend fails.
MachineCalibration calibrate(Backend &backend, const CalibrationOptions &options);

// The profile as JSON: {"name", "source", "link_gbps", "bf16_tflops", "f32_tflops",
// "host_optimizer_gparams", "kernel_overhead_us"}, the format sl-opt's target=FILE.json reads.
std::string machineProfileJson(const MachineCalibration &calibration, const std::string &name);

} // namespace slrt
