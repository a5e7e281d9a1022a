//===- MachineProfiles.h - The machines sl-plan knows by name -------------------------*- C++ -*-===//
//
// sl-plan's machine is a handful of rates: the host<->device link, the device's compute rate by
// storage precision, and the host's AdamW rate. `target=NAME` takes them from a profile measured
// on that machine, so that a plan for a GPU is not made with a CPU's figures; link-gbps=,
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
  llvm::StringRef name;
  /// Pinned host->device GB/s (10^9 bytes per second), one direction.
  double linkGBps;
  /// Sustained TFLOP/s of the device's matrix products, by storage precision.
  double bf16Tflops, f32Tflops;
  /// The host's AdamW, in 10^9 parameters per second (0: not modelled).
  double hostOptimizerGParams;
  /// Where the figures come from.
  llvm::StringRef source;
};

/// The profile called `name`, or nullopt.
std::optional<MachineProfile> lookupMachineProfile(llvm::StringRef name);

/// The profiles' names, comma-separated, for error messages and help.
std::string machineProfileNames();

} // namespace sl

#endif // SL_ANALYSIS_MACHINEPROFILES_H
