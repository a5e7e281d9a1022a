// Sharded checkpoints: one file per rank, an index written last (slrt/checkpoint.h).
#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_part.h"
#include "slrt/atomic_file.h"
#include "slrt/checkpoint.h"
#include "slrt/comm.h"
#include "slrt/error.h"
#include "slrt/read_file.h"

namespace slrt {
namespace {

constexpr const char *kFormat = "speedloader.sharded_checkpoint";
constexpr int kVersion = 1;

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Rank `rank`'s file, named after the index and the step so that a new save never overwrites the
// files the previous index names.
std::string partFileName(const std::string &indexPath, uint64_t step, uint32_t rank,
                         uint32_t world) {
  return baseName(indexPath) + ".step" + std::to_string(step) + ".rank" + std::to_string(rank) +
         "-of-" + std::to_string(world) + ".safetensors";
}

// The rank's part of each shard, as loadCheckpoint expects it.
std::vector<ParameterSpec> partSpecs(const ShardedLayout &layout) {
  std::vector<ParameterSpec> specs;
  for (const CheckpointShard &shard : layout.shards)
    specs.push_back({shard.name, {static_cast<int64_t>(shard.elements / layout.world)}});
  return specs;
}

nlohmann::json layoutJson(const ShardedLayout &layout) {
  nlohmann::json shards = nlohmann::json::array(), parameters = nlohmann::json::array();
  for (const CheckpointShard &shard : layout.shards)
    shards.push_back({{"name", shard.name}, {"elements", shard.elements}});
  for (const ShardedParameter &p : layout.parameters)
    parameters.push_back(
        {{"name", p.name}, {"shape", p.shape}, {"shard", p.shard}, {"offset", p.offset}});
  return {{"shards", shards}, {"parameters", parameters}};
}

struct Index {
  std::string path;
  uint64_t step = 0, dataPosition = 0;
  std::string fingerprint;
  ShardedLayout layout;
  std::vector<std::string> files; // resolved against the index's directory
};

Index readIndex(const std::string &path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(readFile(path));
  } catch (const nlohmann::json::exception &e) {
    throw makeError(path, ": not a sharded checkpoint index (", e.what(), ")");
  }
  Index index;
  index.path = path;
  try {
    if (!json.is_object() || json.value("format", "") != kFormat)
      throw makeError(path, ": not a sharded checkpoint index (no \"format\": \"", kFormat, "\")");
    if (json.at("version").get<int>() != kVersion)
      throw makeError(path, ": sharded checkpoint version ", json.at("version").dump(),
                      " is not supported (this build reads version ", kVersion, ")");
    index.step = json.at("step").get<uint64_t>();
    index.dataPosition = json.at("data_position").get<uint64_t>();
    index.fingerprint = json.at("model_fingerprint").get<std::string>();
    index.layout.world = json.at("world").get<uint32_t>();
    if (index.layout.world < 2)
      throw makeError(path, ": world ", index.layout.world, " is not that of a sharded checkpoint");
    for (const nlohmann::json &shard : json.at("shards"))
      index.layout.shards.push_back(
          {shard.at("name").get<std::string>(), shard.at("elements").get<uint64_t>()});
    for (const nlohmann::json &p : json.at("parameters"))
      index.layout.parameters.push_back({p.at("name").get<std::string>(),
                                         p.at("shape").get<Shape>(), p.at("shard").get<uint32_t>(),
                                         p.at("offset").get<uint64_t>()});
    for (const nlohmann::json &file : json.at("files")) {
      std::string name = file.get<std::string>();
      if (name.empty() || name.find('/') != std::string::npos)
        throw makeError(path, ": file '", name, "' is not a file name beside the index");
      index.files.push_back(directoryOf(path) + name);
    }
  } catch (const nlohmann::json::exception &e) {
    throw makeError(path, ": a field of the sharded checkpoint index is missing or has the wrong "
                          "type (",
                    e.what(), ")");
  }
  if (index.files.size() != index.layout.world)
    throw makeError(path, ": it names ", index.files.size(), " files for ", index.layout.world,
                    " ranks");
  for (const ShardedParameter &p : index.layout.parameters) {
    std::optional<uint64_t> count = numel(p.shape);
    if (p.shard >= index.layout.shards.size() || !count ||
        p.offset > index.layout.shards[p.shard].elements ||
        *count > index.layout.shards[p.shard].elements - p.offset)
      throw makeError(path, ": parameter '", p.name, "' does not lie inside its shard");
  }
  for (const CheckpointShard &shard : index.layout.shards)
    if (shard.elements % index.layout.world != 0)
      throw makeError(path, ": shard '", shard.name, "' has ", shard.elements,
                      " elements, not a multiple of the ", index.layout.world, " ranks");
  return index;
}

// The index's layout must be the run's, field by field.
void checkLayout(const Index &index, const ShardedLayout &layout) {
  const ShardedLayout &saved = index.layout;
  if (saved.world != layout.world)
    throw makeError(index.path, ": the checkpoint is sharded over ", saved.world,
                    " ranks, this run has ", layout.world,
                    "; resume with as many ranks, or consolidate it (sl-run SCHEDULE --consolidate "
                    "INDEX --save FILE) for a run of one rank");
  auto differs = [&](const std::string &what) {
    return makeError(index.path, ": the checkpoint's shards are laid out differently from this "
                                 "schedule's (",
                     what, "); consolidate it and resume a run of one rank, or compile the "
                           "schedule as the checkpoint's was");
  };
  if (saved.shards.size() != layout.shards.size())
    throw differs(std::to_string(saved.shards.size()) + " shards against " +
                  std::to_string(layout.shards.size()));
  for (size_t i = 0; i < saved.shards.size(); ++i)
    if (saved.shards[i].name != layout.shards[i].name ||
        saved.shards[i].elements != layout.shards[i].elements)
      throw differs("shard " + std::to_string(i) + " is '" + saved.shards[i].name + "' of " +
                    std::to_string(saved.shards[i].elements) + " elements against '" +
                    layout.shards[i].name + "' of " + std::to_string(layout.shards[i].elements));
  if (saved.parameters.size() != layout.parameters.size())
    throw differs(std::to_string(saved.parameters.size()) + " parameters against " +
                  std::to_string(layout.parameters.size()));
  for (size_t i = 0; i < saved.parameters.size(); ++i) {
    const ShardedParameter &a = saved.parameters[i], &b = layout.parameters[i];
    if (a.name != b.name || a.shape != b.shape || a.shard != b.shard || a.offset != b.offset)
      throw differs("parameter '" + b.name + "'");
  }
}

// Rank `rank`'s file, checked against the index it was listed in.
TrainingCheckpoint readPart(const Index &index, uint32_t rank) {
  TrainingCheckpoint part = loadCheckpointPart(index.files[rank], index.fingerprint,
                                               partSpecs(index.layout), rank, index.layout.world);
  if (part.step != index.step || part.dataPosition != index.dataPosition)
    throw makeError(index.files[rank], ": it is of step ", part.step, " (data position ",
                    part.dataPosition, "), but its index ", index.path, " is of step ", index.step,
                    " (data position ", index.dataPosition, ")");
  return part;
}

} // namespace

bool isShardedCheckpointIndex(const std::string &path) {
  // Only the start of the file is read: a checkpoint may be gigabytes. A safetensors file starts
  // with its header's length (8 bytes, little-endian) and then the header's '{'; an index is JSON
  // from its first byte. A file that cannot be read is left to the safetensors reader's message,
  // and so is one that is not a regular file: opening a FIFO would wait for a writer.
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    return false;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  char head[64] = {};
  in.read(head, sizeof head);
  std::string bytes(head, static_cast<size_t>(in.gcount()));
  in.clear();
  in.seekg(0, std::ios::end);
  uint64_t size = static_cast<uint64_t>(std::max<std::streamoff>(0, in.tellg()));
  if (bytes.size() >= 9 && bytes[8] == '{') {
    uint64_t headerBytes = 0;
    for (int i = 7; i >= 0; --i)
      headerBytes = (headerBytes << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    if (headerBytes <= size - 8)
      return false;
  }
  size_t first = bytes.find_first_not_of(" \t\r\n");
  return first != std::string::npos && bytes[first] == '{';
}

void saveShardedCheckpoint(const std::string &indexPath, const TrainingCheckpoint &part,
                           const ShardedLayout &layout, Communicator &comm) {
  uint32_t world = layout.world;
  std::string name = partFileName(indexPath, part.step, part.rank, world);
  std::string error;
  try {
    saveCheckpoint(directoryOf(indexPath) + name, part);
  } catch (const std::exception &e) {
    error = e.what();
  }
  // Every rank learns which ranks failed; the index is written only when none did.
  std::vector<double> failed(world, 0.0);
  failed[part.rank] = error.empty() ? 0.0 : 1.0;
  comm.allReduceSum(failed.data(), failed.size(), "saving " + indexPath + ": the ranks' files");
  std::string failures;
  for (uint32_t r = 0; r < world; ++r)
    if (failed[r] != 0)
      failures += (failures.empty() ? "" : ", ") + std::to_string(r);
  if (!failures.empty())
    throw makeError("the checkpoint ", indexPath, " was not written: rank(s) ", failures,
                    " could not write their part",
                    error.empty() ? std::string(" (see their messages)") : " (" + error + ")",
                    "; no index was written, so no partial checkpoint can be resumed");

  std::string indexError;
  if (comm.rank() == 0) {
    nlohmann::json files = nlohmann::json::array();
    for (uint32_t r = 0; r < world; ++r)
      files.push_back(partFileName(indexPath, part.step, r, world));
    nlohmann::json json = layoutJson(layout);
    json["format"] = kFormat;
    json["version"] = kVersion;
    json["step"] = part.step;
    json["world"] = world;
    json["model_fingerprint"] = part.modelFingerprint;
    json["data_position"] = part.dataPosition;
    json["files"] = files;
    try {
      writeFileAtomically(indexPath, json.dump(1) + "\n");
    } catch (const std::exception &e) {
      indexError = e.what();
    }
  }
  // No rank reports success before the index exists.
  double indexFailed = indexError.empty() ? 0.0 : 1.0;
  comm.allReduceSum(&indexFailed, 1, "saving " + indexPath + ": the index");
  if (indexFailed != 0)
    throw makeError("the checkpoint index ", indexPath, " was not written",
                    indexError.empty() ? std::string(" (see rank 0's message)")
                                       : " (" + indexError + ")");
}

TrainingCheckpoint loadShardedCheckpoint(const std::string &indexPath,
                                         const std::string &modelFingerprint,
                                         const ShardedLayout &layout, uint32_t rank) {
  Index index = readIndex(indexPath);
  if (index.fingerprint != modelFingerprint)
    throw makeError(indexPath, ": the checkpoint is for another model: its fingerprint is '",
                    index.fingerprint, "', this model's is '", modelFingerprint, "'");
  checkLayout(index, layout);
  return readPart(index, rank);
}

TrainingCheckpoint consolidateShardedCheckpoint(const std::string &indexPath,
                                                const std::string &modelFingerprint,
                                                const std::vector<ParameterSpec> &parameters) {
  Index index = readIndex(indexPath);
  if (index.fingerprint != modelFingerprint)
    throw makeError(indexPath, ": the checkpoint is for another model: its fingerprint is '",
                    index.fingerprint, "', this schedule's model's is '", modelFingerprint, "'");
  std::map<std::string, const ShardedParameter *> byName;
  for (const ShardedParameter &p : index.layout.parameters)
    byName[p.name] = &p;
  for (const ParameterSpec &spec : parameters) {
    auto it = byName.find(spec.name);
    if (it == byName.end() || it->second->shape != spec.shape)
      throw makeError(indexPath, ": the checkpoint has no parameter '", spec.name, "' of shape ",
                      formatShape(spec.shape));
  }
  if (parameters.size() != index.layout.parameters.size())
    throw makeError(indexPath, ": the checkpoint has ", index.layout.parameters.size(),
                    " parameters, the schedule's model ", parameters.size());

  // Each shard's flattened master weights and moments, the ranks' parts one after another.
  uint32_t world = index.layout.world;
  std::vector<std::array<std::vector<float>, 3>> flat(index.layout.shards.size());
  for (size_t s = 0; s < flat.size(); ++s)
    for (std::vector<float> &values : flat[s])
      values.reserve(index.layout.shards[s].elements);
  for (uint32_t r = 0; r < world; ++r) {
    TrainingCheckpoint part = readPart(index, r);
    for (size_t s = 0; s < flat.size(); ++s) {
      ParameterState &state = part.parameters[s];
      flat[s][0].insert(flat[s][0].end(), state.master.begin(), state.master.end());
      flat[s][1].insert(flat[s][1].end(), state.adamM.begin(), state.adamM.end());
      flat[s][2].insert(flat[s][2].end(), state.adamV.begin(), state.adamV.end());
      state = ParameterState();
    }
  }
  TrainingCheckpoint whole;
  whole.step = index.step;
  whole.modelFingerprint = index.fingerprint;
  whole.dataPosition = index.dataPosition;
  for (const ParameterSpec &spec : parameters) {
    const ShardedParameter &p = *byName.at(spec.name);
    size_t count = static_cast<size_t>(*numel(p.shape));
    auto slice = [&](int which) {
      const std::vector<float> &values = flat[p.shard][which];
      return std::vector<float>(values.begin() + static_cast<std::ptrdiff_t>(p.offset),
                                values.begin() + static_cast<std::ptrdiff_t>(p.offset + count));
    };
    whole.parameters.push_back({p.name, p.shape, slice(0), slice(1), slice(2)});
  }
  return whole;
}

} // namespace slrt
