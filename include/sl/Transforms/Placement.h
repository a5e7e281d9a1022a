//===- Placement.h - where generation keeps its weights and KV caches ---------------------------===//
#ifndef SL_TRANSFORMS_PLACEMENT_H
#define SL_TRANSFORMS_PLACEMENT_H

#include "llvm/Support/CommandLine.h"

#include <optional>

namespace sl {

/// Where `weights-on-device=` / `kv-cache-on-device=` (sl-split-generation, --sl-generate) put
/// the weights or the KV caches: `true` (kDevice) and `false` (kHost) force it; `auto`, the
/// default, leaves it to the planner (the device when device-memory= has room, else the host).
enum class Placement { kAuto, kDevice, kHost };

/// The option value's spelling: auto, true or false.
inline llvm::StringRef placementName(Placement placement) {
  switch (placement) {
  case Placement::kDevice:
    return "true";
  case Placement::kHost:
    return "false";
  case Placement::kAuto:
    break;
  }
  return "auto";
}

/// The option values and their spellings, shared by the pass and the pipeline.
inline llvm::cl::ValuesClass placementValues() {
  return llvm::cl::values(
      clEnumValN(Placement::kAuto, placementName(Placement::kAuto),
                 "chosen by device-memory= (the device when it fits), else streamed"),
      clEnumValN(Placement::kDevice, placementName(Placement::kDevice),
                 "on the device, whatever the planner would choose"),
      clEnumValN(Placement::kHost, placementName(Placement::kHost),
                 "streamed from the host pool"));
}

/// A forced placement as on the device (true) or in the host pool (false); nothing for `auto`.
inline std::optional<bool> forcedOnDevice(Placement placement) {
  if (placement == Placement::kAuto)
    return std::nullopt;
  return placement == Placement::kDevice;
}

} // namespace sl

#endif // SL_TRANSFORMS_PLACEMENT_H
