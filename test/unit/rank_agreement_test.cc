// Rank agreement (slrt/rank_agreement.h): the fields, their fixed-size record and how a difference
// is named. distributed_test.cc exchanges records between ranks; test_distributed.py runs ranks
// that disagree under mpirun.
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/rank_agreement.h"
#include "test_support.h"

namespace slrt::test {
namespace {

using ::testing::HasSubstr;

std::vector<AgreementField> someFields() {
  return {textField("schedule", "train.slsched: 100 bytes"), numberField("--lr", 0.003),
          integerField("--steps", 5), textField("--save", "")};
}

std::string messageOf(std::string_view record, int rank) {
  try {
    decodeAgreement(record, rank);
  } catch (const Error &e) {
    return e.what();
  }
  return "(decoded)";
}

TEST(RankAgreement, RecordsRoundTrip) {
  std::vector<AgreementField> fields = someFields();
  std::string record = encodeAgreement(fields);
  EXPECT_EQ(record.size(), kAgreementRecordBytes);
  std::vector<AgreementField> decoded = decodeAgreement(record, 0);
  ASSERT_EQ(decoded.size(), fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_EQ(decoded[i].name, fields[i].name);
    EXPECT_EQ(decoded[i].value, fields[i].value);
    EXPECT_EQ(decoded[i].hash, fields[i].hash);
  }
  EXPECT_EQ(decoded[1].value, "0.003");
  EXPECT_EQ(encodeAgreement({}).size(), kAgreementRecordBytes);

  // A long value keeps its end; bytes outside printable ASCII are shown as '?'. The hash is the
  // whole value's.
  AgreementField path = textField("--save", "/data/" + std::string(200, 'd') + "/ckpt\n");
  std::vector<AgreementField> cut = decodeAgreement(encodeAgreement({path}), 0);
  EXPECT_EQ(cut[0].value.size(), kAgreementValueBytes - 1);
  EXPECT_EQ(cut[0].value.substr(0, 3), "...");
  EXPECT_EQ(cut[0].value.substr(cut[0].value.size() - 6), "/ckpt?");
  EXPECT_EQ(cut[0].hash, path.hash);
}

TEST(RankAgreement, FieldsHashWhatDecides) {
  // Numbers by their bits: 1e-3 and 0.001 are one number.
  EXPECT_EQ(numberField("--lr", 1e-3).hash, numberField("--lr", 0.001).hash);
  EXPECT_NE(numberField("--lr", 1e-3).hash, numberField("--lr", 1.0000000000000002e-3).hash);
  EXPECT_EQ(numberField("--lr", 1.0000000000000002e-3).value, "0.0010000000000000002");
  EXPECT_NE(textField("--save", "").hash, textField("--save", "(none)").hash);
  EXPECT_NE(integerField("--steps", 5).hash, integerField("--steps", 6).hash);

  // A large buffer is sampled: a change in a sampled window counts, and the size always does.
  std::vector<unsigned char> big(8 << 20, 7);
  uint64_t base = sampledHash(big.data(), big.size());
  big[10] = 8; // in the first 64 KiB
  EXPECT_NE(sampledHash(big.data(), big.size()), base);
  big[10] = 7;
  big[big.size() - 1] = 8; // in the last 64 KiB
  EXPECT_NE(sampledHash(big.data(), big.size()), base);
  big[big.size() - 1] = 7;
  EXPECT_NE(sampledHash(big.data(), big.size() - 1), base);
  // Up to 1 MiB every byte counts.
  std::vector<unsigned char> small(1 << 20, 7);
  uint64_t smallBase = sampledHash(small.data(), small.size());
  small[(1 << 19) + 3] = 9;
  EXPECT_NE(sampledHash(small.data(), small.size()), smallBase);

  TempDir dir;
  writeBytes(dir.path() + "/a", "tokens");
  writeBytes(dir.path() + "/b", "tokens");
  writeBytes(dir.path() + "/c", "tokenz");
  AgreementField a = fileField("--data", dir.path() + "/a", "token file");
  EXPECT_EQ(a.hash, fileField("--data", dir.path() + "/b", "token file").hash);
  EXPECT_NE(a.hash, fileField("--data", dir.path() + "/c", "token file").hash);
  EXPECT_THAT(a.value, HasSubstr(dir.path() + "/a: 6 bytes, sampled fnv1a64 "));
  try {
    fileField("--data", dir.path() + "/absent", "token file");
    FAIL() << "a missing file was described";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.path() + "/absent: cannot open token file"));
  }
}

TEST(RankAgreement, TheEncoderRefusesWhatTheRecordCannotHold) {
  EXPECT_THROW(encodeAgreement({textField("", "x")}), Error);
  EXPECT_THROW(encodeAgreement({textField(std::string(kAgreementNameBytes, 'n'), "x")}), Error);
  EXPECT_THROW(encodeAgreement({textField("a\tb", "x")}), Error);
  EXPECT_THROW(encodeAgreement({textField("a", "x"), textField("a", "y")}), Error);
  EXPECT_THROW(
      encodeAgreement(std::vector<AgreementField>(kMaxAgreementFields + 1, textField("a", "x"))),
      Error);
}

TEST(RankAgreement, BrokenRecordsAreRefusedNamingTheRank) {
  std::string good = encodeAgreement(someFields());
  EXPECT_THAT(messageOf(good.substr(1), 3), HasSubstr("rank 3's agreement record is 6159 bytes"));
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_THAT(messageOf(bad, 1), HasSubstr("does not start with \"SLAGREE1\""));
  bad = good;
  bad[8] = static_cast<char>(kMaxAgreementFields + 1);
  EXPECT_THAT(messageOf(bad, 1), HasSubstr("49 fields, more than 48"));
  bad = good;
  bad[13] = 1;
  EXPECT_THAT(messageOf(bad, 1), HasSubstr("bytes 12-15 are not zero"));
  // Field 0's name filled to the end of its slot: no NUL.
  bad = good;
  std::memset(bad.data() + 16, 'n', kAgreementNameBytes);
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("field 0's name has no terminating NUL"));
  bad = good;
  bad[16 + 1] = '\x01';
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("field 0's name holds byte 1 at 1"));
  bad = good;
  bad[16 + kAgreementNameBytes - 1] = 'x';
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("bytes after its terminating NUL"));
  bad = good;
  bad[16] = '\0';
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("bytes after its terminating NUL"));
  bad = good;
  std::memset(bad.data() + 16, 0, kAgreementNameBytes);
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("field 0 has no name"));
  bad = good;
  bad[16 + kAgreementNameBytes] = '\x80';
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("field 'schedule''s value holds byte 128"));
  // Field 1 renamed to field 0's name.
  bad = good;
  std::memcpy(bad.data() + 16 + kAgreementSlotBytes, bad.data() + 16, kAgreementNameBytes);
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("names field 'schedule' twice"));
  bad = good;
  bad[bad.size() - 1] = 1;
  EXPECT_THAT(messageOf(bad, 2), HasSubstr("unused slot 47 is not zero"));
}

TEST(RankAgreement, ADisagreementNamesTheRanksAndTheField) {
  std::vector<AgreementField> same = someFields();
  EXPECT_EQ(describeDisagreement({same, same, same}), "");
  EXPECT_EQ(describeDisagreement({same}), "");

  std::vector<AgreementField> lr = same;
  lr[1] = numberField("--lr", 0.001);
  EXPECT_EQ(describeDisagreement({same, same, lr, same}),
            "the ranks disagree (every rank must run the same schedule, model, data and "
            "settings):\n  --lr: rank 2 has 0.001, ranks 0, 1 and 3 have 0.003");
  // Two ranks: the one that is not rank 0 is named first.
  EXPECT_EQ(describeDisagreement({same, lr}),
            "the ranks disagree (every rank must run the same schedule, model, data and "
            "settings):\n  --lr: rank 1 has 0.001, rank 0 has 0.003");
  // Rank 0 may be the odd one out.
  EXPECT_THAT(describeDisagreement({lr, same, same}),
              HasSubstr("--lr: rank 0 has 0.001, ranks 1 and 2 have 0.003"));

  // Every field that differs, a missing one as "(none)"; values that show alike by their hash.
  std::vector<AgreementField> other = lr;
  other.pop_back();
  other[0].hash ^= 1;
  std::string message = describeDisagreement({same, other});
  EXPECT_THAT(message, HasSubstr("\n  schedule: rank 1 has train.slsched: 100 bytes (hash "));
  EXPECT_THAT(message, HasSubstr(", rank 0 has train.slsched: 100 bytes (hash "));
  EXPECT_THAT(message, HasSubstr("\n  --lr: rank 1 has 0.001, rank 0 has 0.003"));
  EXPECT_THAT(message, HasSubstr("\n  --save: rank 1 has (none), rank 0 has "));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("--steps")));
}

} // namespace
} // namespace slrt::test
