// Reading one rank's file of a sharded checkpoint (shared by training_checkpoint.cc, which knows
// the file layout, and sharded_checkpoint.cc, which knows the index).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "slrt/checkpoint.h"

namespace slrt {

// loadCheckpoint for rank `rank` of `world`'s file: its metadata must say that rank and world.
TrainingCheckpoint loadCheckpointPart(const std::string &path, const std::string &modelFingerprint,
                                      const std::vector<ParameterSpec> &parameters, uint32_t rank,
                                      uint32_t world);

} // namespace slrt
