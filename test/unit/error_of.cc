// errorOf (test_support.h): kept out of test_support.cc, which the fuzzers' seed writer builds
// without GoogleTest.
#include <gtest/gtest.h>

#include "slrt/error.h"
#include "slrt/schedule_verifier.h"
#include "test_support.h"

namespace slrt::test {

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an slrt::Error";
  return "";
}

std::string verifyError(const sl::schedule::Schedule &schedule) {
  try {
    verifySchedule(schedule);
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

} // namespace slrt::test
