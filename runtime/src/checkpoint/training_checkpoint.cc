#include "slrt/checkpoint.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "slrt/dtype.h"
#include "slrt/error.h"
#include "checkpoint/checkpoint_part.h"
#include "slrt/safetensors.h"
#include "parse_unsigned.h"

namespace slrt {
namespace {

constexpr const char *kVersionKey = "speedloader.checkpoint";
constexpr const char *kVersion = "1";
constexpr const char *kStepKey = "speedloader.step";
constexpr const char *kFingerprintKey = "speedloader.model_fingerprint";
constexpr const char *kDataPositionKey = "speedloader.data_position";
constexpr const char *kRngStateKey = "speedloader.rng_state";
constexpr const char *kRankKey = "speedloader.rank";
constexpr const char *kWorldKey = "speedloader.world";

// The three tensors of a parameter: name suffix, what they are (for messages), and where they live.
struct Slot {
  const char *suffix;
  const char *what;
  std::vector<float> ParameterState::*values;
};
constexpr Slot kSlots[] = {{"", "master weights", &ParameterState::master},
                           {".adam_m", "AdamW first moment", &ParameterState::adamM},
                           {".adam_v", "AdamW second moment", &ParameterState::adamV}};

class Loader {
public:
  Loader(const std::string &path, const std::string &fingerprint,
         const std::vector<ParameterSpec> &specs, uint32_t rank, uint32_t world)
      : path_(path), fingerprint_(fingerprint), specs_(specs), rank_(rank), world_(world) {}

  TrainingCheckpoint load() {
    SafetensorsFile file = readSafetensors(path_);
    TrainingCheckpoint checkpoint = readMetadata(file.metadata);
    if (checkpoint.world > 1 && world_ == 1)
      throw makeError(path_, ": this is rank ", checkpoint.rank, "'s part of a checkpoint sharded "
                      "over ", checkpoint.world, " ranks: resume from its index with ",
                      checkpoint.world, " ranks, or consolidate it first (sl-run SCHEDULE "
                      "--consolidate INDEX --save FILE)");
    if (checkpoint.world != world_ || checkpoint.rank != rank_)
      throw makeError(path_, ": it is ",
                      checkpoint.world == 1 ? std::string("not part of a sharded checkpoint")
                                            : "rank " + std::to_string(checkpoint.rank) + " of " +
                                                  std::to_string(checkpoint.world) + "'s part",
                      ", but rank ", rank_, " of ", world_, "'s part was expected");

    std::map<std::string, TensorEntry *> byName;
    for (TensorEntry &entry : file.tensors)
      byName[entry.name] = &entry;
    std::set<std::string> seen;
    for (const ParameterSpec &spec : specs_) {
      if (!seen.insert(spec.name).second)
        throw makeError(path_, ": the model lists parameter '", spec.name, "' twice");
      for (const Slot &slot : kSlots)
        checkTensor(byName, spec, slot);
    }
    for (const TensorEntry &entry : file.tensors)
      if (!expected_.count(entry.name))
        throw mismatch("it holds tensor '", entry.name, "' (", dtypeName(entry.dtype), " ",
                       formatShape(entry.shape), "), which is not a parameter of this model");
    if (checkpoint.modelFingerprint != fingerprint_)
      throw makeError(path_, ": the checkpoint is for another model: its fingerprint is '",
                      checkpoint.modelFingerprint, "', this model's is '", fingerprint_, "'");

    for (const ParameterSpec &spec : specs_) {
      ParameterState &state = checkpoint.parameters.emplace_back();
      state.name = spec.name;
      state.shape = spec.shape;
      for (const Slot &slot : kSlots) {
        TensorEntry &entry = *byName.at(spec.name + slot.suffix);
        std::vector<float> &values = state.*slot.values;
        values.resize(entry.data.size() / sizeof(float));
        if (!values.empty())
          std::memcpy(values.data(), entry.data.data(), entry.data.size());
        // Free each tensor as soon as it is copied: peak memory stays near one copy.
        std::vector<std::byte>().swap(entry.data);
        checkValues(spec, slot, values);
      }
    }
    return checkpoint;
  }

private:
  // A tensor mismatch, with the fingerprints when they differ too: they tell a user which model
  // the checkpoint came from.
  template <typename... Parts> Error mismatch(const Parts &...parts) const {
    std::string note;
    if (fileFingerprint_ != fingerprint_)
      note = " (it was written for model '" + fileFingerprint_ + "', this model is '" +
             fingerprint_ + "')";
    return makeError(path_, ": the checkpoint does not match this model: ", parts..., note);
  }

  TrainingCheckpoint readMetadata(const SafetensorsMetadata &metadata) {
    auto field = [&](const char *key) -> const std::string & {
      auto it = metadata.find(key);
      if (it == metadata.end())
        throw makeError(path_, ": not a SpeedLoader training checkpoint (its metadata has no '",
                        key, "')");
      return it->second;
    };
    auto number = [&](const char *key) {
      std::optional<uint64_t> value = parseUnsigned(field(key));
      if (!value)
        throw makeError(path_, ": metadata '", key, "' is '", field(key),
                        "', not a non-negative integer");
      return *value;
    };
    if (field(kVersionKey) != kVersion)
      throw makeError(path_, ": checkpoint layout version '", field(kVersionKey),
                      "' is not supported (this build reads version ", kVersion, ")");
    TrainingCheckpoint checkpoint;
    checkpoint.modelFingerprint = fileFingerprint_ = field(kFingerprintKey);
    checkpoint.step = number(kStepKey);
    checkpoint.dataPosition = number(kDataPositionKey);
    checkpoint.rngState = number(kRngStateKey);
    if (metadata.count(kWorldKey) || metadata.count(kRankKey)) {
      uint64_t world = number(kWorldKey), rank = number(kRankKey);
      if (world < 2 || world > UINT32_MAX || rank >= world)
        throw makeError(path_, ": metadata says rank ", rank, " of ", world,
                        " ranks, which is not a rank's part of a sharded checkpoint");
      checkpoint.world = static_cast<uint32_t>(world);
      checkpoint.rank = static_cast<uint32_t>(rank);
    }
    return checkpoint;
  }

  // Training never writes a non-finite weight or moment (a step that makes one stops before its
  // update), nor a negative second moment: such a value is corruption, and resuming from it would
  // train on NaN.
  void checkValues(const ParameterSpec &spec, const Slot &slot,
                   const std::vector<float> &values) const {
    std::string name = spec.name + slot.suffix;
    if (std::optional<NonFinite> bad =
            findNonFinite(values.data(), values.size(), sl::schedule::F32))
      throw makeError(path_, ": tensor '", name, "' (the ", slot.what, " of parameter '", spec.name,
                      "') holds ", bad->text, " at element ", bad->index,
                      ": the checkpoint is corrupt");
    if (slot.values == &ParameterState::adamV)
      for (size_t i = 0; i < values.size(); ++i)
        if (values[i] < 0)
          throw makeError(path_, ": tensor '", name, "' (the ", slot.what, " of parameter '",
                          spec.name, "') holds ", values[i], " at element ", i,
                          ", but a second moment is never negative: the checkpoint is corrupt");
  }

  void checkTensor(const std::map<std::string, TensorEntry *> &byName, const ParameterSpec &spec,
                   const Slot &slot) {
    std::string name = spec.name + slot.suffix;
    expected_.insert(name);
    auto it = byName.find(name);
    if (it == byName.end())
      throw mismatch("it has no tensor '", name, "' (the ", slot.what, " of parameter '", spec.name,
                     "', f32 ", formatShape(spec.shape), ")");
    const TensorEntry &entry = *it->second;
    if (entry.dtype != sl::schedule::F32 || entry.shape != spec.shape)
      throw mismatch("tensor '", name, "' is ", dtypeName(entry.dtype), " ",
                     formatShape(entry.shape), ", but parameter '", spec.name,
                     "' of this model is f32 ", formatShape(spec.shape));
  }

  const std::string &path_;
  const std::string &fingerprint_;
  const std::vector<ParameterSpec> &specs_;
  uint32_t rank_, world_;
  std::string fileFingerprint_;
  std::set<std::string> expected_;
};

} // namespace

void saveCheckpoint(const std::string &path, const TrainingCheckpoint &checkpoint) {
  std::vector<TensorView> views;
  views.reserve(3 * checkpoint.parameters.size());
  for (const ParameterState &state : checkpoint.parameters) {
    std::optional<uint64_t> count = numel(state.shape);
    if (!count)
      throw makeError(path, ": cannot save parameter '", state.name, "': invalid shape ",
                      formatShape(state.shape));
    for (const Slot &slot : kSlots) {
      const std::vector<float> &values = state.*slot.values;
      if (values.size() != *count)
        throw makeError(path, ": cannot save parameter '", state.name, "': its ", slot.what,
                        " hold ", values.size(), " values, its shape ", formatShape(state.shape),
                        " has ", *count);
      views.push_back({state.name + slot.suffix, sl::schedule::F32, state.shape, values.data()});
    }
  }
  SafetensorsMetadata metadata = {
      {kVersionKey, kVersion},
      {kStepKey, std::to_string(checkpoint.step)},
      {kFingerprintKey, checkpoint.modelFingerprint},
      {kDataPositionKey, std::to_string(checkpoint.dataPosition)},
      {kRngStateKey, std::to_string(checkpoint.rngState)},
  };
  if (checkpoint.world > 1) {
    metadata[kRankKey] = std::to_string(checkpoint.rank);
    metadata[kWorldKey] = std::to_string(checkpoint.world);
  }
  writeSafetensors(path, views, metadata);
}

TrainingCheckpoint loadCheckpoint(const std::string &path, const std::string &modelFingerprint,
                                  const std::vector<ParameterSpec> &parameters) {
  return Loader(path, modelFingerprint, parameters, 0, 1).load();
}

TrainingCheckpoint loadCheckpointPart(const std::string &path, const std::string &modelFingerprint,
                                      const std::vector<ParameterSpec> &parameters, uint32_t rank,
                                      uint32_t world) {
  return Loader(path, modelFingerprint, parameters, rank, world).load();
}

} // namespace slrt
