#include "slrt/tooling/consolidation.h"

#include <cstdio>

#include "slrt/checkpoint.h"
#include "slrt/error.h"
#include "slrt/onnx_export.h"
#include "slrt/trainer.h"

namespace slrt::tooling {

int runConsolidation(const RunOptions &options, const LoadedSchedule &loaded) {
  if (options.comm)
    throw makeError("--consolidate runs as one process; run it without mpirun");
  if (options.randomWeightsSeed)
    throw makeError("--consolidate writes a checkpoint's weights: --random-weights does not go "
                    "with it");
  if (options.savePath.empty() && options.exportOnnxPath.empty())
    throw makeError("--consolidate ", options.consolidatePath,
                    ": give --save FILE and/or --export-onnx FILE to say what to write");
  checkOutputPaths({{"--save", options.savePath}, {"--export-onnx", options.exportOnnxPath}},
                   runInputs(options, loaded));
  std::vector<ParameterSpec> specs;
  for (const sl::schedule::Parameter &p : loaded.schedule.parameters())
    specs.push_back({p.name(), toShape(p.shape())});
  TrainingCheckpoint whole = consolidateShardedCheckpoint(options.consolidatePath,
                                                          modelFingerprint(loaded.schedule), specs);
  if (!options.exportOnnxPath.empty()) {
    std::vector<const float *> masters;
    for (const ParameterState &state : whole.parameters)
      masters.push_back(state.master.data());
    exportMasterWeightsOnnx(loaded, masters, options.exportOnnxPath);
  }
  if (!options.savePath.empty()) {
    try {
      saveCheckpoint(options.savePath, whole);
    } catch (const Error &e) {
      if (options.exportOnnxPath.empty())
        throw;
      throw makeError(e.what(), " (--export-onnx ", options.exportOnnxPath,
                      " was written before the checkpoint failed)");
    }
  }
  std::printf("consolidated %s (step %llu, %d parameters)%s%s%s%s\n",
              options.consolidatePath.c_str(), static_cast<unsigned long long>(whole.step),
              static_cast<int>(whole.parameters.size()), options.savePath.empty() ? "" : " into ",
              options.savePath.c_str(), options.exportOnnxPath.empty() ? "" : " and ",
              options.exportOnnxPath.c_str());
  return 0;
}

} // namespace slrt::tooling
