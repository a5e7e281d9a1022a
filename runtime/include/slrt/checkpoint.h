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
// and, in a rank's file of a sharded checkpoint (below) only:
//   "speedloader.rank", "speedloader.world"
//
// Sharded checkpoints (a run of W > 1 ranks, whose parameters and AdamW state are sharded): every
// rank writes its part, its shards' master weights and moments, as a file of the layout above (the
// tensors named after the shards, f32 [elements / W] each), atomically; once every rank has
// confirmed its file, rank 0 writes the index, atomically, last. The index is what --save names
// and --resume and --consolidate read. Every save draws a random save id that the part files'
// names carry, so a save never writes over a file an existing index names, even at the same step.
// A save that fails anywhere removes this save's parts and leaves the previous index and its files
// as they were, so no half-written checkpoint is ever read; once a new index is in place, the
// part files of the index it replaced are removed. The index is JSON:
//   {"format": "speedloader.sharded_checkpoint", "version": 1, "save_id": "<16 hex digits>",
//    "step": S, "world": W, "model_fingerprint": "...", "data_position": D,
//    "shards": [{"name": "layers 0", "elements": E}, ...],
//    "parameters": [{"name": "...", "shape": [...], "shard": i, "offset": o}, ...],
//    "files": ["<index file name>.step<S>.<save id>.rank<R>-of-<W>.safetensors", ...]}
// with the files relative to the index's directory, one per rank in rank order, and the
// parameters where they are in the flattened shards (Schedule.parameters, slrt/trainer.h).
// (Indexes written before save ids have no "save_id" and files named without it; they read the
// same.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "slrt/shape.h"

namespace slrt {

class Communicator;

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
  // In a rank's file of a sharded checkpoint: whose part it is (world 1: not sharded).
  uint32_t rank = 0;
  uint32_t world = 1;
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

// How a sharded run lays out its parameters: the shards (Schedule.shards) and where each parameter
// is in them (Schedule.parameters).
struct CheckpointShard {
  std::string name;
  uint64_t elements = 0; // of the whole flattened group; each rank holds elements / world
};
struct ShardedParameter {
  std::string name;
  Shape shape;
  uint32_t shard = 0;
  uint64_t offset = 0; // in elements
};
struct ShardedLayout {
  uint32_t world = 1;
  std::vector<CheckpointShard> shards;
  std::vector<ShardedParameter> parameters;
};

// Whether `path` holds a sharded checkpoint's index (JSON) rather than a checkpoint file
// (safetensors). Error when it cannot be read.
bool isShardedCheckpointIndex(const std::string &path);

// Called by every rank with its part (`part.parameters`: one state per shard, in layout order,
// named after the shard; part.rank and part.world set): writes the rank's file, then, once every
// rank has, the index at `indexPath` (rank 0), then removes the part files of the index it
// replaced (rank 0; only files named like this index's parts; best effort). Error on every rank,
// naming the ranks that failed, when any could not write its file or the index could not be
// written; every rank has then removed its file of this save, and a previous index at `indexPath`
// and its files are untouched. Testing hook: SL_TEST_FAIL_CHECKPOINT_PART=R makes rank R's write
// fail (docs/hardening.md).
void saveShardedCheckpoint(const std::string &indexPath, const TrainingCheckpoint &part,
                           const ShardedLayout &layout, Communicator &comm);

// How many ranks saved the sharded checkpoint whose index is `indexPath`. Error when it is not
// an index that reads.
uint32_t shardedCheckpointWorld(const std::string &indexPath);

// Rank `rank`'s part of the sharded checkpoint whose index is `indexPath`, for a run with
// `layout` (same world, shards and parameters) and `modelFingerprint`. Error naming the mismatch;
// for a file that is no index (a checkpoint of one rank, a rank's part) it says what the file is,
// and the world sizes of both.
TrainingCheckpoint loadShardedCheckpoint(const std::string &indexPath,
                                         const std::string &modelFingerprint,
                                         const ShardedLayout &layout, uint32_t rank);

// The whole model's state from every rank's file: an unsharded checkpoint (per parameter, in the
// order of `parameters`) that saveCheckpoint writes and a run of one rank resumes. Error when the
// index's fingerprint is not `modelFingerprint` or a file is missing or does not match.
TrainingCheckpoint consolidateShardedCheckpoint(const std::string &indexPath,
                                                const std::string &modelFingerprint,
                                                const std::vector<ParameterSpec> &parameters);

} // namespace slrt
