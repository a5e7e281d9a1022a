//===- MachineProfiles.h - The machines sl-plan knows by name -------------------------*- C++ -*-===//
//
// sl-plan's machine is a handful of rates: the host<->device link, the device's compute rate by
// storage precision, and the host's AdamW rate. `target=NAME` takes them from a built-in profile,
// so that a plan for a GPU is not made with a CPU's figures, and `target=FILE.json` from a
// profile file (what `sl-run --calibrate FILE.json` writes on the machine itself); link-gbps=,
// tflops= and optimizer-gparams= still override each one.
//
//===----------------------------------------------------------------------------------------===//

#ifndef SL_ANALYSIS_MACHINEPROFILES_H
#define SL_ANALYSIS_MACHINEPROFILES_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace sl {

struct MachineProfile {
  std::string name;
  /// Pinned host->device GB/s (10^9 bytes per second), one direction.
  double linkGBps;
  /// Sustained TFLOP/s of the device's matrix products, by storage precision.
  double bf16Tflops, f32Tflops;
  /// The host's AdamW, in 10^9 parameters per second (0: not modelled).
  double hostOptimizerGParams;
  /// Microseconds every kernel costs beyond its FLOPs (0: not modelled).
  double kernelOverheadUs;
  /// The link between the devices of several ranks: the bus bandwidth of one rank's all-gather
  /// and reduce-scatter (NCCL's busbw: a ring moves (W - 1) / W of the tensor through each rank),
  /// GB/s. 0: not modelled (collectives cost nothing in the step's time).
  double collectiveGBps;
  /// Where the figures come from.
  std::string source;
};

/// The profile called `name`, or nullopt.
std::optional<MachineProfile> lookupMachineProfile(llvm::StringRef name);

/// The profiles' names, comma-separated, for error messages and help.
std::string machineProfileNames();

/// The profile in JSON file `path`: an object with "link_gbps", "bf16_tflops" and "f32_tflops"
/// (positive), and optionally "host_optimizer_gparams", "kernel_overhead_us" and
/// "collective_gbps" (0 or more; 0: not modelled), "name" and "source" (strings); any other key is
/// an error. On failure, nullopt and `error` says why.
std::optional<MachineProfile> loadMachineProfile(llvm::StringRef path, std::string &error);

} // namespace sl

#endif // SL_ANALYSIS_MACHINEPROFILES_H
