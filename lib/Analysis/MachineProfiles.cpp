//===- MachineProfiles.cpp - The machines sl-plan knows by name ---------------------------===//
//
// Every figure is a measurement, with where it was made; a machine nobody has measured has no
// profile (give its rates with link-gbps= and tflops=).
//
//===----------------------------------------------------------------------------------------===//

#include "sl/Analysis/MachineProfiles.h"

#include "llvm/ADT/STLExtras.h"

namespace sl {
namespace {

const MachineProfile kProfiles[] = {
    // sl-plan's defaults before profiles existed: fp32 GEMM on a few CPU cores, a PCIe 4 x16
    // link; the host optimizer is not modelled.
    {"cpu", 25.0, 0.2, 0.2, 0.0, "a few CPU cores (sl-plan's defaults)"},
    // bench/results/gpu-h200-2026-11-26.md, measured by the GPU suite's performance part with
    // PyTorch 2.11 on the device tool's H200 (16 host cores): bf16 GEMM 748-808 TFLOP/s at the
    // 7B probe's shapes (sl-run's own GEMMs ran at 806), f32 GEMM without TF32 49.7-51.7, pinned
    // host->device 55.3 GB/s; sl-run's host AdamW updated 0.667e9 parameters in 0.226 s.
    {"h200", 55.0, 770.0, 50.0, 2.9,
     "an NVIDIA H200 with 16 host cores, measured 2026-11-26 (bench/results/"
     "gpu-h200-2026-11-26.md)"},
};

} // namespace

std::optional<MachineProfile> lookupMachineProfile(llvm::StringRef name) {
  for (const MachineProfile &profile : kProfiles)
    if (profile.name == name)
      return profile;
  return std::nullopt;
}

std::string machineProfileNames() {
  std::string names;
  for (const MachineProfile &profile : kProfiles)
    names += (names.empty() ? "" : ", ") + profile.name.str();
  return names;
}

} // namespace sl
