// Sharded checkpoints: one file per rank, an index written last (slrt/checkpoint.h).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_part.h"
#include "parse_unsigned.h"
#include "slrt/atomic_file.h"
#include "slrt/checkpoint.h"
#include "slrt/comm.h"
#include "slrt/error.h"
#include "slrt/read_file.h"
#include "slrt/safetensors.h"
#include "temp_files.h"

namespace slrt {
namespace {

constexpr const char *kFormat = "speedloader.sharded_checkpoint";
constexpr int kVersion = 1;
constexpr size_t kSaveIdDigits = 16;
constexpr const char *kFailPartHook = "SL_TEST_FAIL_CHECKPOINT_PART";

std::string directoryOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

std::string baseName(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Rank `rank`'s file of the save `saveId`. The step makes the name readable; the save id, drawn
// afresh for every save, makes it unique, so that a save never writes over a file that an
// existing index names (not even a re-save at the same step).
std::string partFileName(const std::string &indexPath, uint64_t step, const std::string &saveId,
                         uint32_t rank, uint32_t world) {
  return baseName(indexPath) + ".step" + std::to_string(step) + "." + saveId + ".rank" +
         std::to_string(rank) + "-of-" + std::to_string(world) + ".safetensors";
}

// Whether `name` is named like a part file of the index `indexPath`:
// <index>.step<S>[.<save id>].rank<R>-of-<W>.safetensors (without the save id: written before
// parts had one). Only such files are removed when a new index replaces an old one, whatever the
// old index lists.
bool isPartFileName(const std::string &indexPath, const std::string &name) {
  std::string prefix = baseName(indexPath) + ".step", suffix = ".safetensors";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  std::string rest = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  size_t i = 0;
  auto digits = [&] {
    size_t start = i;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])))
      ++i;
    return i > start;
  };
  auto literal = [&](const char *text) {
    size_t n = std::strlen(text);
    if (rest.compare(i, n, text) != 0)
      return false;
    i += n;
    return true;
  };
  if (!digits())
    return false;
  if (i + kSaveIdDigits + 1 <= rest.size() && rest[i] == '.' &&
      std::all_of(rest.begin() + static_cast<std::ptrdiff_t>(i + 1),
                  rest.begin() + static_cast<std::ptrdiff_t>(i + 1 + kSaveIdDigits),
                  [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    i += kSaveIdDigits + 1;
  return literal(".rank") && digits() && literal("-of-") && digits() && i == rest.size();
}

uint64_t randomSaveId() {
  try {
    std::random_device random;
    return (static_cast<uint64_t>(random()) << 32) ^ random();
  } catch (const std::exception &e) {
    throw makeError("cannot draw a random save id for the checkpoint (", e.what(), ")");
  }
}

std::string hexSaveId(uint64_t id) {
  char hex[kSaveIdDigits + 1];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(id));
  return hex;
}

// The testing hook SL_TEST_FAIL_CHECKPOINT_PART=R: rank R's part is not written, as when its
// write fails (docs/hardening.md). There is no other way to fail one rank's write alone: the ranks
// write into one directory, and root (the tests' user) writes despite permissions.
void failIfTheTestAsks(uint32_t rank, const std::string &path) {
  const char *value = std::getenv(kFailPartHook);
  if (!value)
    return;
  std::optional<uint64_t> failing = parseUnsigned(value);
  if (!failing)
    throw makeError(kFailPartHook, "='", value, "' is not a rank");
  if (*failing == rank)
    throw makeError(path, ": cannot write (", kFailPartHook, " fails rank ", rank, "'s part)");
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
  std::vector<std::string> names; // the files as the index lists them, beside it
  std::vector<std::string> files; // resolved against the index's directory
};

// The "__metadata__" of a safetensors file, reading its header only (a checkpoint may be
// gigabytes); nullopt when it is not a safetensors file with string metadata.
std::optional<std::map<std::string, std::string>> safetensorsMetadata(const std::string &path) {
  constexpr uint64_t kLengthBytes = 8;
  FilePrefix prefix = readFilePrefix(path, kLengthBytes);
  if (prefix.bytes.size() < kLengthBytes)
    return std::nullopt;
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | static_cast<unsigned char>(prefix.bytes[i]);
  if (headerBytes > kSafetensorsMaxHeaderBytes || headerBytes > prefix.fileSize - kLengthBytes)
    return std::nullopt;
  prefix = readFilePrefix(path, kLengthBytes + headerBytes);
  if (prefix.bytes.size() < kLengthBytes + headerBytes)
    return std::nullopt; // the file shrank since
  std::string_view header = std::string_view(prefix.bytes).substr(kLengthBytes);
  nlohmann::json json = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object())
    return std::nullopt;
  std::map<std::string, std::string> metadata;
  auto it = json.find("__metadata__");
  if (it != json.end() && it->is_object())
    for (const auto &[key, value] : it->items())
      if (value.is_string())
        metadata[key] = value.get<std::string>();
  return metadata;
}

// The error for a file given as a sharded checkpoint's index that is not one: what it is instead
// (a checkpoint of one rank, a rank's part, something else) and what to do. `runWorld`: the ranks
// of the run that resumes it; 0 for --consolidate.
Error notAnIndex(const std::string &path, uint32_t runWorld) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode))
    (void)readFile(path); // throws the reason: missing, a directory, unreadable
  std::optional<std::map<std::string, std::string>> metadata = safetensorsMetadata(path);
  if (!metadata)
    return makeError(path, ": not a sharded checkpoint index (neither JSON nor a safetensors "
                           "file)");
  auto world = metadata->find("speedloader.world"), rank = metadata->find("speedloader.rank");
  if (world != metadata->end() && rank != metadata->end())
    return makeError(path, ": this is rank ", rank->second, "'s part of a checkpoint sharded over ",
                     world->second, " ranks, not its index: give the index (the file --save "
                     "named)");
  if (!metadata->count("speedloader.checkpoint"))
    return makeError(path, ": not a sharded checkpoint index (a safetensors file, but not a "
                           "SpeedLoader checkpoint)");
  if (runWorld == 0)
    return makeError(path, ": this is the checkpoint of a run of one rank, not the index of a "
                           "sharded checkpoint: there is nothing to consolidate (a run of one "
                           "rank resumes it as it is)");
  return makeError(path, ": this is the checkpoint of a run of one rank (world 1), not the index "
                         "of a sharded checkpoint, and this run has ",
                   runWorld, " ranks (world ", runWorld,
                   "): resume it with a run of one rank; a checkpoint is not re-sharded for "
                   "another number of ranks");
}

Index readIndex(const std::string &path, uint32_t runWorld) {
  if (!isShardedCheckpointIndex(path))
    throw notAnIndex(path, runWorld);
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
      index.names.push_back(name);
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

// Every file in the index's directory named like a part file of the index at `indexPath`
// (isPartFileName), whichever save wrote it: the parts of the checkpoint a new index replaces, and
// those of saves that were killed before their index was written (kill -9 cannot be caught, so
// they are swept by the next save that completes, rather than piling up). Files not named like
// this index's parts are never listed, whatever an index names.
std::vector<std::string> partNamedFiles(const std::string &indexPath) {
  std::vector<std::string> names;
  std::error_code error;
  std::string dir = directoryOf(indexPath);
  for (const auto &entry :
       std::filesystem::directory_iterator(dir.empty() ? "." : dir, error)) {
    std::string name = entry.path().filename().string();
    if (isPartFileName(indexPath, name) && entry.is_regular_file(error) && !error)
      names.push_back(name);
  }
  return names;
}

// Removes the temporaries that part writes of this index left when their process was killed
// (kill -9 cannot be caught): a killed save's parts have names no later save writes again, so the
// writer's own sweep of a target's stale temporaries never meets them. Only temporaries of
// part-named targets whose process is gone are removed (temp_files::removeStale).
void removeStalePartTemporaries(const std::string &indexPath) {
  std::error_code error;
  std::string dir = directoryOf(indexPath);
  std::string directory = dir.empty() ? "." : dir;
  const std::string marker = ".sl-tmp.";
  std::vector<std::string> targets;
  for (const auto &entry : std::filesystem::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    size_t at = name.find(marker);
    if (name.empty() || name[0] != '.' || at == std::string::npos)
      continue;
    std::string target = name.substr(1, at - 1);
    if (isPartFileName(indexPath, target))
      targets.push_back(target);
  }
  for (const std::string &target : targets)
    temp_files::removeStale(directory, temp_files::prefixFor(target));
}

// Whether the index at `indexPath` is that of the save `saveId`.
bool indexHasSaveId(const std::string &indexPath, const std::string &saveId) {
  try {
    nlohmann::json json =
        nlohmann::json::parse(readFile(indexPath), nullptr, /*allow_exceptions=*/false);
    return json.is_object() && json.value("save_id", "") == saveId;
  } catch (const std::exception &) {
    return false;
  }
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
  // and so is one that is not a regular file (readFilePrefix refuses it without waiting on a FIFO).
  FilePrefix prefix;
  try {
    prefix = readFilePrefix(path, 64);
  } catch (const Error &) {
    return false;
  }
  const std::string &bytes = prefix.bytes;
  uint64_t size = prefix.fileSize;
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
  std::string what = "saving " + indexPath;
  // Every rank names its part with rank 0's save id.
  std::vector<uint64_t> ids(world);
  uint64_t mine = randomSaveId();
  comm.allGatherBytes(&mine, ids.data(), sizeof mine, what + ": the save id");
  std::string saveId = hexSaveId(ids[0]);
  std::string myPart =
      directoryOf(indexPath) + partFileName(indexPath, part.step, saveId, part.rank, world);

  std::string error;
  bool written = false;
  try {
    failIfTheTestAsks(part.rank, myPart);
    saveCheckpoint(myPart, part);
    written = true;
  } catch (const std::exception &e) {
    error = e.what();
  }
  // This save's own part goes when the save fails; a barrier then makes sure every rank has
  // removed its part before any rank reports the failure (which ends the job).
  auto removeMyPart = [&] {
    if (written)
      ::unlink(myPart.c_str());
    comm.barrier(what + ": removing this save's parts");
  };
  // Every rank learns which ranks failed; the index is written only when none did.
  std::vector<double> failed(world, 0.0);
  failed[part.rank] = error.empty() ? 0.0 : 1.0;
  comm.allReduceSum(failed.data(), failed.size(), what + ": the ranks' files");
  std::string failures;
  for (uint32_t r = 0; r < world; ++r)
    if (failed[r] != 0)
      failures += (failures.empty() ? "" : ", ") + std::to_string(r);
  if (!failures.empty()) {
    removeMyPart();
    throw makeError("the checkpoint ", indexPath, " was not written: rank(s) ", failures,
                    " could not write their part",
                    error.empty() ? std::string(" (see their messages)") : " (" + error + ")",
                    "; no index was written and this save's parts were removed, so the previous "
                    "checkpoint at ",
                    indexPath, " (if any) and every file it names are as they were");
  }

  // Rank 0 writes the index, then removes the parts of the checkpoint it replaced. The index
  // state: 0 written, 1 not written, 2 in place although the write reported an error.
  std::string indexError;
  double indexState = 0;
  std::vector<std::string> files;
  for (uint32_t r = 0; r < world; ++r)
    files.push_back(partFileName(indexPath, part.step, saveId, r, world));
  if (comm.rank() == 0) {
    nlohmann::json json = layoutJson(layout);
    json["format"] = kFormat;
    json["version"] = kVersion;
    json["save_id"] = saveId;
    json["step"] = part.step;
    json["world"] = world;
    json["model_fingerprint"] = part.modelFingerprint;
    json["data_position"] = part.dataPosition;
    json["files"] = files;
    try {
      writeFileAtomically(indexPath, json.dump(1) + "\n");
    } catch (const std::exception &e) {
      indexError = e.what();
      indexState = indexHasSaveId(indexPath, saveId) ? 2 : 1;
    }
  }
  // No rank reports success before the index exists.
  comm.allReduceSum(&indexState, 1, what + ": the index");
  if (indexState == 1) {
    removeMyPart();
    throw makeError("the checkpoint index ", indexPath, " was not written",
                    indexError.empty() ? std::string(" (see rank 0's message)")
                                       : " (" + indexError + ")",
                    "; this save's parts were removed, so the previous checkpoint at ", indexPath,
                    " (if any) and every file it names are as they were");
  }
  if (indexState != 0)
    throw makeError("the checkpoint index ", indexPath, " is in place, but writing it reported ",
                    indexError.empty() ? std::string("an error (see rank 0's message)")
                                       : "an error (" + indexError + ")",
                    "; the previous checkpoint's parts were kept");
  // Rank 0 then removes every other part-named file of this index: the replaced checkpoint's and
  // any left by killed saves. Another job saving to the same path at the same time would lose its
  // parts: two jobs must not share a checkpoint path (docs/distributed.md).
  if (comm.rank() == 0)
    for (const std::string &name : partNamedFiles(indexPath))
      if (std::find(files.begin(), files.end(), name) == files.end())
        ::unlink((directoryOf(indexPath) + name).c_str()); // best effort: at worst an orphan
  if (comm.rank() == 0)
    removeStalePartTemporaries(indexPath);
}

uint32_t shardedCheckpointWorld(const std::string &indexPath) {
  return readIndex(indexPath, 0).layout.world;
}

TrainingCheckpoint loadShardedCheckpoint(const std::string &indexPath,
                                         const std::string &modelFingerprint,
                                         const ShardedLayout &layout, uint32_t rank) {
  Index index = readIndex(indexPath, layout.world);
  if (index.fingerprint != modelFingerprint)
    throw makeError(indexPath, ": the checkpoint is for another model: its fingerprint is '",
                    index.fingerprint, "', this model's is '", modelFingerprint, "'");
  checkLayout(index, layout);
  return readPart(index, rank);
}

TrainingCheckpoint consolidateShardedCheckpoint(const std::string &indexPath,
                                                const std::string &modelFingerprint,
                                                const std::vector<ParameterSpec> &parameters) {
  Index index = readIndex(indexPath, 0);
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
