// Rank agreement: fields, their fixed-size record, and the comparison (slrt/rank_agreement.h).
#include "slrt/rank_agreement.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "slrt/comm.h"
#include "slrt/error.h"
#include "slrt/mapped_file.h"
#include "slrt/schedule_loader.h"

namespace slrt {
namespace {

constexpr char kMagic[8] = {'S', 'L', 'A', 'G', 'R', 'E', 'E', '1'};

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool printable(char c) { return c >= 0x20 && c < 0x7f; }

void putU32(std::string &out, size_t at, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out[at + static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
}

void putU64(std::string &out, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    out[at + static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
}

uint64_t getLittleEndian(std::string_view bytes, size_t at, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)]);
  return value;
}

// `text` fitted into `capacity` - 1 characters of printable ASCII: cut in front (the end of a
// path says more than its start), marked "...".
std::string fitted(const std::string &text, size_t capacity) {
  std::string out = text;
  for (char &c : out)
    if (!printable(c))
      c = '?';
  size_t room = capacity - 1;
  if (out.size() > room)
    out = "..." + out.substr(out.size() - (room - 3));
  return out;
}

// A NUL-padded text field of a record: the text before the first NUL, which must exist, with only
// NULs after it and only printable ASCII before.
std::string readText(std::string_view slot, const std::string &what, int rank) {
  size_t end = slot.find('\0');
  if (end == std::string_view::npos)
    throw makeError("rank ", rank, "'s agreement record: ", what, " has no terminating NUL");
  for (size_t i = 0; i < end; ++i)
    if (!printable(slot[i]))
      throw makeError("rank ", rank, "'s agreement record: ", what, " holds byte ",
                      static_cast<int>(static_cast<unsigned char>(slot[i])), " at ", i,
                      ", which is not printable ASCII");
  for (size_t i = end; i < slot.size(); ++i)
    if (slot[i] != '\0')
      throw makeError("rank ", rank, "'s agreement record: ", what,
                      " has bytes after its terminating NUL");
  return std::string(slot.substr(0, end));
}

std::string rankList(const std::vector<int> &ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0)
      text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

} // namespace

uint64_t hashBytes(const void *data, size_t size, uint64_t hash) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

AgreementField textField(const std::string &name, const std::string &text) {
  uint64_t length = text.size();
  return {name, text, hashBytes(text.data(), text.size(), hashBytes(&length, sizeof length))};
}

AgreementField numberField(const std::string &name, double value) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, value);
  std::string shown = ec == std::errc() ? std::string(text, end) : "?";
  return {name, shown, hashBytes(&value, sizeof value)};
}

AgreementField integerField(const std::string &name, int64_t value) {
  return {name, std::to_string(value), hashBytes(&value, sizeof value)};
}

uint64_t sampledHash(const void *data, uint64_t size) {
  constexpr uint64_t kWhole = 1 << 20, kEnds = 64 << 10, kWindow = 1 << 10, kWindows = 256;
  const auto *bytes = static_cast<const unsigned char *>(data);
  uint64_t hash = hashBytes(&size, sizeof size);
  if (size <= kWhole)
    return hashBytes(bytes, size, hash);
  hash = hashBytes(bytes, kEnds, hash);
  hash = hashBytes(bytes + size - kEnds, kEnds, hash);
  // Windows spread evenly over what lies between the two ends.
  uint64_t span = size - 2 * kEnds - kWindow;
  for (uint64_t i = 0; i < kWindows; ++i) {
    uint64_t at = kEnds + static_cast<uint64_t>(static_cast<unsigned __int128>(span) * i /
                                                (kWindows - 1));
    hash = hashBytes(bytes + at, kWindow, hash);
  }
  return hash;
}

AgreementField fileField(const std::string &name, const std::string &path,
                         const std::string &what) {
  MappedFile file = MappedFile::open(path, what);
  uint64_t hash = sampledHash(file.data(), file.size());
  return {name, path + ": " + std::to_string(file.size()) + " bytes, sampled fnv1a64 " + hex(hash),
          hash};
}

AgreementField scheduleField(const LoadedSchedule &schedule) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    schedule.schedule.SerializeToCodedStream(&out);
  }
  uint64_t hash = hashBytes(bytes.data(), bytes.size());
  return {"schedule",
          schedule.path + ": " + std::to_string(bytes.size()) + " bytes, fnv1a64 " + hex(hash),
          hash};
}

AgreementField modelFilesField(const LoadedSchedule &schedule) {
  std::vector<std::string> files;
  for (const std::string &file : schedule.parameterFiles)
    if (std::find(files.begin(), files.end(), file) == files.end())
      files.push_back(file);
  uint64_t hash = hashBytes(nullptr, 0);
  uint64_t bytes = 0;
  for (const std::string &path : files) {
    MappedFile file = MappedFile::open(path, "model file");
    uint64_t sampled = sampledHash(file.data(), file.size());
    hash = hashBytes(&sampled, sizeof sampled, hash);
    bytes += file.size();
  }
  std::string shown = files.size() == 1 ? files[0] : std::to_string(files.size()) + " files";
  return {"model files",
          shown + ": " + std::to_string(bytes) + " bytes, sampled fnv1a64 " + hex(hash), hash};
}

std::string encodeAgreement(const std::vector<AgreementField> &fields) {
  if (fields.size() > kMaxAgreementFields)
    throw makeError("rank agreement: ", fields.size(), " fields, more than the record's ",
                    kMaxAgreementFields);
  std::string record(kAgreementRecordBytes, '\0');
  std::memcpy(record.data(), kMagic, sizeof kMagic);
  putU32(record, 8, static_cast<uint32_t>(fields.size()));
  std::set<std::string> names;
  for (size_t i = 0; i < fields.size(); ++i) {
    const AgreementField &field = fields[i];
    if (field.name.empty() || field.name.size() >= kAgreementNameBytes ||
        !std::all_of(field.name.begin(), field.name.end(), printable))
      throw makeError("rank agreement: field name '", field.name,
                      "' is empty, too long or not printable ASCII");
    if (!names.insert(field.name).second)
      throw makeError("rank agreement: field '", field.name, "' is given twice");
    size_t at = 16 + i * kAgreementSlotBytes;
    std::memcpy(record.data() + at, field.name.data(), field.name.size());
    std::string value = fitted(field.value, kAgreementValueBytes);
    std::memcpy(record.data() + at + kAgreementNameBytes, value.data(), value.size());
    putU64(record, at + kAgreementNameBytes + kAgreementValueBytes, field.hash);
  }
  return record;
}

std::vector<AgreementField> decodeAgreement(std::string_view record, int rank) {
  if (record.size() != kAgreementRecordBytes)
    throw makeError("rank ", rank, "'s agreement record is ", record.size(), " bytes, not ",
                    kAgreementRecordBytes);
  if (std::memcmp(record.data(), kMagic, sizeof kMagic) != 0)
    throw makeError("rank ", rank, "'s agreement record does not start with \"SLAGREE1\" (is it "
                    "another sl-run build?)");
  uint64_t count = getLittleEndian(record, 8, 4);
  if (count > kMaxAgreementFields)
    throw makeError("rank ", rank, "'s agreement record has ", count, " fields, more than ",
                    kMaxAgreementFields);
  if (getLittleEndian(record, 12, 4) != 0)
    throw makeError("rank ", rank, "'s agreement record: bytes 12-15 are not zero");
  std::vector<AgreementField> fields;
  std::set<std::string> names;
  for (size_t i = 0; i < kMaxAgreementFields; ++i) {
    std::string_view slot = record.substr(16 + i * kAgreementSlotBytes, kAgreementSlotBytes);
    if (i >= count) {
      if (slot.find_first_not_of('\0') != std::string_view::npos)
        throw makeError("rank ", rank, "'s agreement record: unused slot ", i, " is not zero");
      continue;
    }
    std::string what = "field " + std::to_string(i);
    AgreementField field;
    field.name = readText(slot.substr(0, kAgreementNameBytes), what + "'s name", rank);
    if (field.name.empty())
      throw makeError("rank ", rank, "'s agreement record: ", what, " has no name");
    field.value = readText(slot.substr(kAgreementNameBytes, kAgreementValueBytes),
                           "field '" + field.name + "''s value", rank);
    field.hash = getLittleEndian(slot, kAgreementNameBytes + kAgreementValueBytes, 8);
    if (!names.insert(field.name).second)
      throw makeError("rank ", rank, "'s agreement record names field '", field.name, "' twice");
    fields.push_back(std::move(field));
  }
  return fields;
}

std::string describeDisagreement(const std::vector<std::vector<AgreementField>> &ranks) {
  // Every field name, in the order of the first rank that has it.
  std::vector<std::string> names;
  for (const std::vector<AgreementField> &fields : ranks)
    for (const AgreementField &field : fields)
      if (std::find(names.begin(), names.end(), field.name) == names.end())
        names.push_back(field.name);
  std::vector<std::string> differences;
  for (const std::string &name : names) {
    // The ranks of each value, in order of first appearance; a missing field is a value too.
    struct Group {
      bool present;
      uint64_t hash;
      std::string value;
      std::vector<int> ranks;
    };
    std::vector<Group> groups;
    for (size_t r = 0; r < ranks.size(); ++r) {
      auto field = std::find_if(ranks[r].begin(), ranks[r].end(),
                                [&](const AgreementField &f) { return f.name == name; });
      bool present = field != ranks[r].end();
      uint64_t hash = present ? field->hash : 0;
      auto group = std::find_if(groups.begin(), groups.end(), [&](const Group &g) {
        return g.present == present && (!present || g.hash == hash);
      });
      if (group == groups.end()) {
        groups.push_back({present, hash, present ? field->value : "(none)", {}});
        group = groups.end() - 1;
      }
      group->ranks.push_back(static_cast<int>(r));
    }
    if (groups.size() < 2)
      continue;
    // The largest group (the lowest rank on a tie) is the one the others differ from: last.
    std::stable_sort(groups.begin(), groups.end(), [](const Group &a, const Group &b) {
      return a.ranks.size() != b.ranks.size() ? a.ranks.size() < b.ranks.size()
                                              : a.ranks.front() > b.ranks.front();
    });
    std::string text = name + ":";
    for (size_t g = 0; g < groups.size(); ++g) {
      // Values that show alike (cut short) are told apart by their hash.
      bool ambiguous = false;
      for (size_t h = 0; h < groups.size(); ++h)
        ambiguous = ambiguous || (h != g && groups[h].value == groups[g].value);
      text += (g == 0 ? " " : ", ") + rankList(groups[g].ranks) +
              (groups[g].ranks.size() == 1 ? " has " : " have ") + groups[g].value +
              (ambiguous ? " (hash " + hex(groups[g].hash) + ")" : "");
    }
    differences.push_back(text);
  }
  if (differences.empty())
    return "";
  std::string message =
      "the ranks disagree (every rank must run the same schedule, model, data and settings):";
  for (const std::string &difference : differences)
    message += "\n  " + difference;
  return message;
}

void checkRanksAgree(const std::vector<AgreementField> &mine, Communicator &comm) {
  std::string record = encodeAgreement(mine);
  size_t world = static_cast<size_t>(comm.size());
  std::string all(world * kAgreementRecordBytes, '\0');
  comm.allGatherBytes(record.data(), all.data(), record.size(),
                      "checking that the ranks agree (schedule, model, data, settings)");
  std::vector<std::vector<AgreementField>> ranks;
  for (size_t r = 0; r < world; ++r)
    ranks.push_back(decodeAgreement(
        std::string_view(all).substr(r * kAgreementRecordBytes, kAgreementRecordBytes),
        static_cast<int>(r)));
  std::string message = describeDisagreement(ranks);
  if (!message.empty())
    throw Error(message);
}

} // namespace slrt
