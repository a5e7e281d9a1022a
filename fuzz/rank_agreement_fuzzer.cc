// libFuzzer target: the rank-agreement record each rank receives from every other before training
// (slrt/rank_agreement.h). The input is decoded as it is, and also zero-padded or cut to a record's
// size, so that most inputs reach the checks of the fields. A record that decodes must encode back
// to the very same bytes and agree with itself; comparing it with another must not fail.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "slrt/error.h"
#include "slrt/rank_agreement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view raw(reinterpret_cast<const char *>(data), size);
  try {
    slrt::decodeAgreement(raw, 1);
  } catch (const slrt::Error &) {
  }

  std::string record(slrt::kAgreementRecordBytes, '\0');
  std::memcpy(record.data(), data, std::min(size, record.size()));
  std::vector<slrt::AgreementField> fields;
  try {
    fields = slrt::decodeAgreement(record, 1);
  } catch (const slrt::Error &) {
    return 0;
  }
  if (slrt::encodeAgreement(fields) != record)
    std::abort();
  if (!slrt::describeDisagreement({fields, fields}).empty())
    std::abort();
  std::vector<slrt::AgreementField> reference = {slrt::textField("schedule", "s"),
                                                 slrt::numberField("--lr", 0.003)};
  (void)slrt::describeDisagreement({reference, fields, reference});
  return 0;
}
