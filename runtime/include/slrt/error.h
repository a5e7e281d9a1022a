// The one exception type of the runtime.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace slrt {

// Every failure a user can cause (a bad file, a wrong input, an unsupported option) is reported as
// an Error whose message names the file and the thing that is wrong, so tools can print what() and
// exit without a stack trace. Programming errors stay assertions.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Builds an Error from streamable pieces: makeError("buffer ", id, " is out of bounds").
template <typename... Parts> Error makeError(const Parts &...parts) {
  std::ostringstream message;
  (message << ... << parts);
  return Error(message.str());
}

} // namespace slrt
