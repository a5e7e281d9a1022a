#include "slrt/tooling/calibration.h"

#include <iostream>
#include <memory>

#include "slrt/atomic_file.h"
#include "slrt/calibrate.h"

namespace slrt::tooling {

int runCalibration(const RunOptions &options) {
  std::unique_ptr<Backend> backend = createBackend(options.backendName, backendOptions(options));
  CalibrationOptions calibration;
  calibration.minSeconds = options.calibrateSeconds;
  checkWritable(options.calibratePath);
  MachineCalibration measured = calibrate(*backend, calibration);
  std::string json = machineProfileJson(measured, "calibrated-" + options.backendName);
  writeFileAtomically(options.calibratePath, json);
  std::cout << json << "sl-run: wrote the machine profile " << options.calibratePath
            << ": plan with sl-opt --sl-train=\"... target=" << options.calibratePath << "\"\n";
  return 0;
}

} // namespace slrt::tooling
