//===- MachineProfiles.cpp - The machines sl-plan knows by name ---------------------------===//
//
// cpu and h200 are measurements, with where they were made. The H100 and A100 profiles are not
// measured here: each is its datasheet's peak scaled by the fraction of the H200's datasheet peak
// that the H200 measured (bf16 770 of 989 dense TFLOP/s: 0.78; f32 50 of 67: 0.75; a PCIe 5 x16
// link 55.3 of 64 GB/s: 0.86), and their host AdamW is not modelled (it is the host's, not the
// GPU's: give optimizer-gparams=, or measure the machine with `sl-run --calibrate`). No built-in
// profile models the per-kernel cost (`kernel_overhead_us`): it was not measured on a GPU yet;
// `sl-run --calibrate` measures it on the machine it runs on. The collective link between GPUs
// is the datasheet's NVLink (H100 SXM 450, A100 300 GB/s per direction) or PCIe peer link (H100
// PCIe, 64) scaled by the same 0.86 as the host link; no collective was measured yet, and cpu
// and h200 (one GPU) do not model it.
//
//===----------------------------------------------------------------------------------------===//

#include "sl/Analysis/MachineProfiles.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>

namespace sl {
namespace {

const MachineProfile kProfiles[] = {
    // sl-plan's defaults before profiles existed: fp32 GEMM on a few CPU cores, a PCIe 4 x16
    // link; the host optimizer is not modelled.
    {"cpu", 25.0, 0.2, 0.2, 0.0, 0.0, 0.0, "a few CPU cores (sl-plan's defaults)"},
    // bench/results/gpu-h200-2026-11-26.md, measured by the GPU suite's performance part with
    // PyTorch 2.11 on the device tool's H200 (16 host cores): bf16 GEMM 748-808 TFLOP/s at the
    // 7B probe's shapes (sl-run's own GEMMs ran at 806), f32 GEMM without TF32 49.7-51.7, pinned
    // host->device 55.3 GB/s; sl-run's host AdamW updated 0.667e9 parameters in 0.226 s.
    {"h200", 55.0, 770.0, 50.0, 2.9, 0.0, 0.0,
     "an NVIDIA H200 with 16 host cores, measured 2026-11-26 (bench/results/"
     "gpu-h200-2026-11-26.md)"},
    // Datasheet peaks (dense): H100 SXM 989 bf16 / 67 f32, H100 PCIe 756 / 51, A100 312 / 19.5
    // TFLOP/s; PCIe 5 x16 64 GB/s, PCIe 4 x16 32 GB/s; scaled as the file header says.
    {"h100-sxm", 55.0, 771.0, 50.0, 0.0, 0.0, 387.0,
     "NVIDIA H100 SXM, PCIe 5 host link: datasheet peaks x the H200's measured fractions (not "
     "measured)"},
    {"h100-pcie", 55.0, 590.0, 38.0, 0.0, 0.0, 55.0,
     "NVIDIA H100 PCIe, PCIe 5 host link: datasheet peaks x the H200's measured fractions (not "
     "measured)"},
    {"a100", 27.5, 243.0, 14.6, 0.0, 0.0, 258.0,
     "NVIDIA A100 80GB, PCIe 4 host link: datasheet peaks x the H200's measured fractions (not "
     "measured)"},
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
    names += (names.empty() ? "" : ", ") + profile.name;
  return names;
}

std::optional<MachineProfile> loadMachineProfile(llvm::StringRef path, std::string &error) {
  // A profile is a few hundred bytes; anything near this is not one.
  constexpr uint64_t kMaxBytes = 1 << 20;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    error = "cannot read the machine profile '" + path.str() + "': " + file.getError().message();
    return std::nullopt;
  }
  if ((*file)->getBufferSize() > kMaxBytes) {
    error = "the machine profile '" + path.str() + "' is larger than 1 MiB: not a profile";
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*file)->getBuffer());
  if (!parsed) {
    error = "the machine profile '" + path.str() +
            "' is not JSON: " + llvm::toString(parsed.takeError());
    return std::nullopt;
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object) {
    error = "the machine profile '" + path.str() + "' is not a JSON object";
    return std::nullopt;
  }
  MachineProfile profile;
  profile.name = llvm::sys::path::stem(path).str();
  profile.source = path.str();
  auto fail = [&](const llvm::Twine &why) {
    error = ("machine profile '" + path + "': " + why).str();
    return std::nullopt;
  };
  struct Rate {
    const char *key;
    double *into;
    bool required;
  };
  Rate rates[] = {{"link_gbps", &profile.linkGBps, true},
                  {"bf16_tflops", &profile.bf16Tflops, true},
                  {"f32_tflops", &profile.f32Tflops, true},
                  {"host_optimizer_gparams", &profile.hostOptimizerGParams, false},
                  {"kernel_overhead_us", &profile.kernelOverheadUs, false},
                  {"collective_gbps", &profile.collectiveGBps, false}};
  profile.hostOptimizerGParams = 0;
  profile.kernelOverheadUs = 0;
  profile.collectiveGBps = 0;
  for (const auto &[key, value] : *object) {
    if (key == "name" || key == "source") {
      std::optional<llvm::StringRef> text = value.getAsString();
      if (!text)
        return fail("\"" + key.str() + "\" must be a string");
      (key == "name" ? profile.name : profile.source) = text->str();
      continue;
    }
    const Rate *rate = llvm::find_if(rates, [&](const Rate &r) { return key == r.key; });
    if (rate == std::end(rates))
      return fail("unknown key \"" + key.str() +
                  "\" (a profile has name, source, link_gbps, bf16_tflops, f32_tflops, "
                  "host_optimizer_gparams, kernel_overhead_us and collective_gbps)");
    std::optional<double> number = value.getAsNumber();
    if (!number || !std::isfinite(*number) || *number < 0 || (rate->required && *number == 0))
      return fail("\"" + key.str() + "\" must be a " +
                  (rate->required ? "positive" : "non-negative") + " number");
    *rate->into = *number;
  }
  for (const Rate &rate : rates)
    if (rate.required && !object->get(rate.key))
      return fail(llvm::Twine("\"") + rate.key + "\" is missing");
  return profile;
}

} // namespace sl
