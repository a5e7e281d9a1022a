// Training checkpoints (sl-run --save / --resume): everything a run needs to continue
// bit-identically, in one safetensors file that other tools can also read the weights from.
//
// Layout of the file (slrt/safetensors.h):
//   <name>          f32, the parameter's fp32 master weights, under its ONNX initializer name, so
//                   that safetensors.torch.load_file() or any safetensors reader gets the model's
//                   weights under the names the exported model uses
//   <name>.adam_m   f32, same shape: AdamW's first moment
//   <name>.adam_v   f32, same shape: AdamW's second moment
// in the order of TrainingCheckpoint::parameters; in __metadata__, numbers as decimal strings:
//   "speedloader.checkpoint"         "1", the version of this layout
//   "speedloader.step"               TrainingCheckpoint::step
//   "speedloader.model_fingerprint"  TrainingCheckpoint::modelFingerprint
//   "speedloader.data_position"      TrainingCheckpoint::dataPosition
//   "speedloader.rng_state"          TrainingCheckpoint::rngState
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "slrt/shape.h"

namespace slrt {

// One trained parameter and its AdamW state; each vector holds numel(shape) values, row-major.
struct ParameterState {
  std::string name; // the ONNX initializer name
  Shape shape;
  std::vector<float> master;
  std::vector<float> adamM;
  std::vector<float> adamV;
};

struct TrainingCheckpoint {
  // Optimizer steps completed: a resumed run's first step is step `step`.
  uint64_t step = 0;
  // Identifies the model (the caller's choice, e.g. a hash of the schedule's parameters); a resume
  // refuses a checkpoint with another fingerprint.
  std::string modelFingerprint;
  // Index in the token file of the first token the next step reads (slrt/token_data.h), and the
  // state of the run's random generator; stored so that a resume can check or restore them.
  uint64_t dataPosition = 0;
  uint64_t rngState = 0;
  std::vector<ParameterState> parameters;
};

// What the resuming model expects a checkpoint to hold.
struct ParameterSpec {
  std::string name;
  Shape shape;
};

// Writes `checkpoint` atomically (slrt/safetensors.h: writeSafetensors). Error, leaving `path`
// unchanged, when a parameter's vectors do not hold numel(shape) values or two tensor names clash.
void saveCheckpoint(const std::string &path, const TrainingCheckpoint &checkpoint);

// Reads a checkpoint for the model with `modelFingerprint` and `parameters`, and returns its
// parameters in the order of `parameters`. Error, naming the first mismatch, when the file is not a
// SpeedLoader checkpoint, a parameter or moment is missing or has another dtype or shape, the file
// holds a tensor the model does not have, or the fingerprint differs, and when a value is NaN or
// infinite or a second moment negative (corruption: training never saves such values); the values
// are bit-identical to those saved.
TrainingCheckpoint loadCheckpoint(const std::string &path, const std::string &modelFingerprint,
                                  const std::vector<ParameterSpec> &parameters);

} // namespace slrt
