// The readers that take a path (token data, checkpoints, ONNX models) are fuzzed through a file
// in a directory of the process's own, rewritten for each input.
#pragma once

#include <string>
#include <string_view>

namespace sl::fuzz {

// Writes `bytes` to `name` in this process's scratch directory (created on first use under
// /dev/shm, else $TMPDIR; removed at exit) and returns its path. Aborts if it cannot: that is the
// harness's failure, not the reader's.
std::string writeInput(const std::string &name, std::string_view bytes);

} // namespace sl::fuzz
