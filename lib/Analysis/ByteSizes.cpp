//===- ByteSizes.cpp - byte sizes as users write and read them --------------------------------===//
//
// parseByteSize ("24GB", "16GiB", "1e9") for every pipeline's budgets, and formatBytes for reports
// and errors.
//
//===--------------------------------------------------------------------------------------------===//

#include "sl/Analysis/CostModel.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace sl {

std::optional<double> parseByteSize(llvm::StringRef text) {
  text = text.trim();
  size_t unitStart = text.find_first_not_of("0123456789.eE+");
  // An exponent's `e` must be followed by digits; "1e9" is a number, "16GiB" has no exponent.
  llvm::StringRef number = text.substr(0, unitStart);
  llvm::StringRef unit = unitStart == llvm::StringRef::npos ? "" : text.substr(unitStart).trim();
  double value;
  if (number.empty() || number.getAsDouble(value) || value < 0)
    return std::nullopt;
  std::optional<double> scale = llvm::StringSwitch<std::optional<double>>(unit.lower())
                                    .Cases("", "b", 1.0)
                                    .Case("kb", 1e3)
                                    .Case("mb", 1e6)
                                    .Case("gb", 1e9)
                                    .Case("tb", 1e12)
                                    .Case("kib", 1024.0)
                                    .Case("mib", 1024.0 * 1024)
                                    .Case("gib", 1024.0 * 1024 * 1024)
                                    .Case("tib", 1024.0 * 1024 * 1024 * 1024)
                                    .Default(std::nullopt);
  if (!scale)
    return std::nullopt;
  return std::floor(value * *scale);
}

LogicalResult parseMemoryBudget(llvm::StringRef pass, llvm::StringRef option,
                                llvm::StringRef text, std::optional<double> &budget,
                                llvm::function_ref<InFlightDiagnostic()> emitError) {
  budget.reset();
  if (text.empty())
    return success();
  budget = parseByteSize(text);
  if (!budget)
    return emitError() << pass << ": " << option << "='" << text
                       << "' is not a byte count (a number, optionally with B, KB, MB, GB, TB, "
                          "KiB, MiB, GiB or TiB)";
  return success();
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0)
    return llvm::formatv("{0} B", int64_t(std::ceil(bytes))).str();
  return llvm::formatv("{0:F2} {1}", bytes, units[unit]).str();
}

} // namespace sl
