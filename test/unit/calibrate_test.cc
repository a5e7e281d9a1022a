// sl-run --calibrate's measurements on the CPU backend, at sizes small enough for a unit test:
// every rate positive and finite, and the profile JSON sl-opt reads.
#include "slrt/calibrate.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace slrt {
namespace {

using ::testing::HasSubstr;

TEST(Calibrate, MeasuresEveryRateOnTheCpuBackend) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  CalibrationOptions options;
  options.gemmSizeF32 = 64;
  options.gemmSizeBf16 = 64;
  options.copyBytes = 1 << 20;
  // More than one of the AdamW's chunks, through the trainer's path: the gradient check, then the
  // update writing bf16 weights.
  options.optimizerParameters = 3 << 20;
  options.minSeconds = 0.01;
  MachineCalibration c = calibrate(*backend, options);
  for (double rate : {c.linkGBps, c.f32Tflops, c.bf16Tflops, c.hostOptimizerGParams}) {
    EXPECT_GT(rate, 0);
    EXPECT_TRUE(std::isfinite(rate));
  }
  EXPECT_GE(c.kernelOverheadUs, 0);
  EXPECT_EQ(c.optimizerParameters, uint64_t{3} << 20);
  std::string json = machineProfileJson(c, "test-machine");
  EXPECT_THAT(json, HasSubstr("\"name\": \"test-machine\""));
  EXPECT_THAT(json, HasSubstr("\"host_optimizer_gparams\": "));
}

} // namespace
} // namespace slrt
