#include "fuzz_file.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sl::fuzz {
namespace {

struct ScratchDir {
  ScratchDir() {
    // tmpfs where there is one: a disk-backed /tmp slows every input down and, on a busy machine,
    // stalls some past libFuzzer's -timeout.
    std::error_code ec;
    std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                     ? std::filesystem::path("/dev/shm")
                                     : std::filesystem::temp_directory_path();
    std::string pattern = (base / "sl-fuzz-XXXXXX").string();
    if (!mkdtemp(pattern.data())) {
      std::perror("sl-fuzz: mkdtemp");
      std::abort();
    }
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

} // namespace

std::string writeInput(const std::string &name, std::string_view bytes) {
  static ScratchDir dir;
  std::string path = dir.path + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.close();
  if (!out) {
    std::perror(("sl-fuzz: cannot write " + path).c_str());
    std::abort();
  }
  return path;
}

} // namespace sl::fuzz
