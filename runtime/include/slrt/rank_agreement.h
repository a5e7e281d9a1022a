// Rank agreement: before a job of several ranks does its first step, every rank describes what it
// is about to run (the schedule, the model's parameters and files, the data, the checkpoint it
// resumes, every setting that must be the same everywhere) as a list of named fields, each a
// 64-bit hash and a short text to show, and the ranks compare them. A rank that differs stops the
// job before any collective of the schedule runs, with a message that names the rank and the
// field, e.g.
//   the ranks disagree (every rank must run the same schedule, model, data and settings):
//   --lr: rank 1 has 0.001, rank 0 has 0.003
// instead of training on silently, or corrupting memory in a collective whose sizes differ.
//
// The exchange is one all-gather of a fixed-size record per rank (kAgreementRecordBytes, whatever
// the fields), so ranks whose schedules differ still exchange the same number of bytes. The
// record, little-endian:
//   bytes 0-7     "SLAGREE1" (the layout's version is its last byte)
//   bytes 8-11    the number of fields F (at most kMaxAgreementFields)
//   bytes 12-15   zero
//   then kMaxAgreementFields slots of kAgreementSlotBytes, the first F used, the rest zero:
//     name   kAgreementNameBytes   printable ASCII, NUL-padded, not empty, at least one NUL
//     value  kAgreementValueBytes  printable ASCII, NUL-padded, at least one NUL (may be empty)
//     hash   8 bytes
// The names of a record are unique. A received record is checked strictly (decodeAgreement).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace slrt {

class Communicator;
struct LoadedSchedule;

inline constexpr size_t kMaxAgreementFields = 48;
inline constexpr size_t kAgreementNameBytes = 32;
inline constexpr size_t kAgreementValueBytes = 88;
inline constexpr size_t kAgreementSlotBytes = kAgreementNameBytes + kAgreementValueBytes + 8;
inline constexpr size_t kAgreementRecordBytes = 16 + kMaxAgreementFields * kAgreementSlotBytes;

// One thing the ranks must agree on. `hash` decides; `value` is what a message shows (it may be
// cut short in the record, with "..." in front).
struct AgreementField {
  std::string name;
  std::string value;
  uint64_t hash = 0;
};

// FNV-1a, 64 bits, continuing from `hash`.
uint64_t hashBytes(const void *data, size_t size, uint64_t hash = 0xcbf29ce484222325ull);

// Fields of a text (hashed as it is) and of a number (its bits; the text shows it as the
// shortest decimal that reads back to it).
AgreementField textField(const std::string &name, const std::string &text);
AgreementField numberField(const std::string &name, double value);
AgreementField integerField(const std::string &name, int64_t value);

// A hash of `size` bytes that reads at most about 1 MiB of them: all of them up to 1 MiB; beyond
// that the size, the first and last 64 KiB and 256 windows of 1 KiB spread evenly between. Files
// that differ only outside those windows hash the same: the price of not reading a 100 GB model on
// every rank.
uint64_t sampledHash(const void *data, uint64_t size);

// The field `name` for the file at `path` (a `what`: "token file"): its size and sampledHash,
// shown as "FILE: N bytes, sampled fnv1a64 H". Error naming the path when it cannot be read.
AgreementField fileField(const std::string &name, const std::string &path,
                         const std::string &what);

// The schedule: a hash of its deterministic serialisation (what runs, however the file is named).
AgreementField scheduleField(const LoadedSchedule &schedule);
// The model's files: every distinct parameter file of the schedule, in order, by size and
// sampledHash. Error naming a file that cannot be read.
AgreementField modelFilesField(const LoadedSchedule &schedule);

// The record of `fields` (layout above). Error when there are more than kMaxAgreementFields, a name
// is empty, too long or not printable ASCII, or two names are the same. A value that is too long
// is cut, keeping its end; characters outside printable ASCII become '?'.
std::string encodeAgreement(const std::vector<AgreementField> &fields);

// The fields of rank `rank`'s record. Error, naming the rank, when the record is not one that
// encodeAgreement writes: wrong size or magic (another sl-run build?), a field count past the
// limit, a name or value without its NUL or with bytes outside printable ASCII, non-zero padding,
// a repeated name.
std::vector<AgreementField> decodeAgreement(std::string_view record, int rank);

// The message that says how the ranks' fields differ, or "" when every rank has the same hash for
// every field. For each field that differs, in the first rank's order: the ranks grouped by value,
// the largest group last (on a tie, the one with the lowest rank), e.g. "--lr: rank 1 has 0.001,
// ranks 0, 2 and 3 have 0.003". A field that some rank lacks counts as differing ("(none)").
std::string describeDisagreement(const std::vector<std::vector<AgreementField>> &ranks);

// Exchanges `mine` with every rank of `comm` (one all-gather, within the collective timeout) and
// throws an Error with describeDisagreement's message (on every rank alike) when they differ, or
// when a rank's record does not decode.
void checkRanksAgree(const std::vector<AgreementField> &mine, Communicator &comm);

} // namespace slrt
