// A whole string as a decimal uint64_t (checkpoint metadata, /proc and cgroup files).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>

namespace slrt {

// The value of `text` when all of it is a decimal number that fits a uint64_t; nullopt otherwise
// (empty, a sign, spaces, trailing characters, overflow).
inline std::optional<uint64_t> parseUnsigned(const std::string &text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

} // namespace slrt
