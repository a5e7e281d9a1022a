#include "slrt/tooling/run.h"

#include <iostream>
#include <memory>

#include "slrt/paced_backend.h"
#include "slrt/schedule_verifier.h"
#include "slrt/tooling/calibration.h"
#include "slrt/tooling/consolidation.h"
#include "slrt/tooling/generation.h"
#include "slrt/tooling/inference.h"
#include "slrt/tooling/training.h"
#include "slrt/trainer.h"

namespace slrt::tooling {
namespace {

int runSchedule(const RunOptions &options) {
  std::unique_ptr<Backend> backend =
      withLinkPacing(createBackend(options.backendName, backendOptions(options)), options.linkGbps);
  // With --random-weights the model's files are never opened: they need not exist.
  LoadedSchedule loaded =
      loadSchedule(options.schedulePath, !options.randomWeightsSeed, options.allowExternalPaths);
  if (!options.consolidatePath.empty())
    return runConsolidation(options, loaded);
  if (loaded.schedule.kind() == kTrainKind)
    return runTraining(options, *backend, loaded);
  if (options.randomWeightsSeed && isRankZero(options))
    std::cerr << "sl-run: the weights are random (--random-weights " << *options.randomWeightsSeed
              << "), not the model's: outputs and tokens mean nothing, speeds are real\n";
  if (loaded.schedule.kind() == kGenerateKind)
    return runGeneration(options, *backend, loaded);
  return runInference(options, *backend, loaded);
}

} // namespace

int run(const RunOptions &options) {
  checkRunOptions(options);
  if (!options.calibratePath.empty())
    return runCalibration(options);
  return runSchedule(options);
}

} // namespace slrt::tooling
