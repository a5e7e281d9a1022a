// Test-only converter between .npy files and safetensors files, for the Python cross-check
// (python/tests/test_safetensors_format.py):
//
//   safetensors_roundtrip write OUT.safetensors [--meta KEY=VALUE]... NAME=FILE.npy...
//       writes the arrays, in the order given, with the metadata
//   safetensors_roundtrip read IN.safetensors OUTDIR
//       writes tensor i to OUTDIR/i.npy (OUTDIR/i.bin, raw bytes, for dtypes .npy cannot hold
//       here, such as F16) and prints {"metadata": {...}, "tensors": [{"name", "dtype", "shape",
//       "file"}, ...]} on stdout
//
// Errors go to stderr with exit status 1.
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "slrt/atomic_file.h"
#include "slrt/error.h"
#include "slrt/npy.h"
#include "slrt/safetensors.h"

namespace {

using slrt::makeError;

std::pair<std::string, std::string> splitAt(const std::string &arg, const char *what) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos)
    throw makeError("expected ", what, ", got '", arg, "'");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

void write(const std::vector<std::string> &args) {
  if (args.empty())
    throw makeError("write: no output file");
  std::vector<slrt::TensorEntry> entries;
  slrt::SafetensorsMetadata metadata;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--meta" && i + 1 < args.size()) {
      auto [key, value] = splitAt(args[++i], "KEY=VALUE");
      metadata[key] = value;
      continue;
    }
    auto [name, file] = splitAt(args[i], "NAME=FILE.npy");
    slrt::HostTensor tensor = slrt::readNpy(file);
    entries.push_back({name, tensor.dtype, tensor.shape, std::move(tensor.data)});
  }
  slrt::writeSafetensors(args[0], entries, metadata);
}

void read(const std::vector<std::string> &args) {
  if (args.size() != 2)
    throw makeError("read: expected IN.safetensors OUTDIR");
  slrt::SafetensorsFile file = slrt::readSafetensors(args[0]);
  nlohmann::json manifest = {{"metadata", file.metadata}, {"tensors", nlohmann::json::array()}};
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    slrt::TensorEntry &entry = file.tensors[i];
    std::string stem = args[1] + "/" + std::to_string(i);
    slrt::HostTensor tensor{entry.dtype, entry.shape, std::move(entry.data)};
    std::string path;
    try {
      path = stem + ".npy";
      slrt::writeNpy(path, tensor);
    } catch (const slrt::Error &) {
      path = stem + ".bin";
      slrt::writeFileAtomically(
          path,
          std::string(reinterpret_cast<const char *>(tensor.data.data()), tensor.data.size()));
    }
    manifest["tensors"].push_back({{"name", entry.name},
                                   {"dtype", slrt::dtypeName(entry.dtype)},
                                   {"shape", entry.shape},
                                   {"file", path}});
  }
  std::cout << manifest.dump() << "\n";
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args[0] == "write")
      write({args.begin() + 1, args.end()});
    else if (!args.empty() && args[0] == "read")
      read({args.begin() + 1, args.end()});
    else
      throw makeError("usage: safetensors_roundtrip write OUT.safetensors [--meta KEY=VALUE]... "
                      "NAME=FILE.npy... | read IN.safetensors OUTDIR");
  } catch (const slrt::Error &e) {
    std::cerr << "safetensors_roundtrip: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
