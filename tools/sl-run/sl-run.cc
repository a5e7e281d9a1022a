// sl-run: executes a SpeedLoader schedule written by sl-opt.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "slrt/backend.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/npy.h"
#include "slrt/report.h"
#include "slrt/schedule_loader.h"

namespace {

using slrt::makeError;

// Maps each --input (or --output) argument to a binding name. An argument is NAME=FILE when the
// text before its first '=' is a binding name, or a bare FILE when there is no '=' and the schedule
// has exactly one binding; anything else is an error rather than a guess.
std::map<std::string, std::string>
assignFiles(const std::vector<std::string> &args,
            const google::protobuf::RepeatedPtrField<sl::schedule::Binding> &bindings,
            const std::string &kind) {
  std::string names;
  for (const sl::schedule::Binding &b : bindings)
    names += (names.empty() ? "" : ", ") + b.name();
  if (names.empty())
    names = "none";
  std::map<std::string, std::string> files;
  for (const std::string &arg : args) {
    std::string name, file;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      file = arg.substr(eq + 1);
      bool known = false;
      for (const sl::schedule::Binding &b : bindings)
        known = known || b.name() == name;
      if (!known)
        throw makeError("--", kind, " ", arg, ": unknown ", kind, " '", name, "' (the schedule's ",
                        kind, "s: ", names, ")");
    } else if (bindings.size() == 1) {
      name = bindings[0].name();
      file = arg;
    } else {
      throw makeError("--", kind, " ", arg, ": the schedule has ", bindings.size(), " ", kind,
                      "s (", names, "), so name it: --", kind, " NAME=FILE");
    }
    if (file.empty())
      throw makeError("--", kind, " ", arg, ": no file given");
    if (!files.emplace(name, file).second)
      throw makeError(kind, " '", name, "' is given twice");
  }
  return files;
}

void printOutput(const slrt::NamedTensor &out) {
  const slrt::HostTensor &t = out.tensor;
  std::cout << out.name << ": " << slrt::dtypeName(t.dtype) << " " << slrt::formatShape(t.shape);
  constexpr uint64_t kShown = 8;
  uint64_t n = std::min(t.numel(), kShown);
  std::cout << " =";
  for (uint64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
    case sl::schedule::F32:
      std::cout << ' ' << t.as<float>()[i];
      break;
    case sl::schedule::F64:
      std::cout << ' ' << t.as<double>()[i];
      break;
    case sl::schedule::I64:
      std::cout << ' ' << t.as<int64_t>()[i];
      break;
    case sl::schedule::I32:
      std::cout << ' ' << t.as<int32_t>()[i];
      break;
    case sl::schedule::BOOL:
      std::cout << (t.as<uint8_t>()[i] != 0 ? " true" : " false");
      break;
    default:
      std::cout << " (values of " << slrt::dtypeName(t.dtype) << " are not printed)\n";
      return;
    }
  }
  std::cout << (t.numel() > n ? " ...\n" : "\n");
}

int run(const std::string &schedulePath, const std::vector<std::string> &inputArgs,
        const std::vector<std::string> &outputArgs, const std::string &reportPath,
        const std::string &backendName) {
  std::unique_ptr<slrt::Backend> backend = slrt::createBackend(backendName);
  slrt::LoadedSchedule loaded = slrt::loadSchedule(schedulePath);
  const sl::schedule::Schedule &schedule = loaded.schedule;

  // Everything the user gave is checked before parameters are loaded or anything runs.
  std::map<std::string, std::string> inputFiles =
      assignFiles(inputArgs, schedule.inputs(), "input");
  std::map<std::string, std::string> outputFiles =
      assignFiles(outputArgs, schedule.outputs(), "output");
  for (const sl::schedule::Binding &b : schedule.inputs())
    if (!inputFiles.count(b.name()))
      throw makeError("missing input '", b.name(), "': give --input ",
                      schedule.inputs_size() == 1 ? "FILE.npy" : b.name() + "=FILE.npy");
  std::map<std::string, slrt::HostTensor> inputs;
  for (const auto &[name, file] : inputFiles) {
    slrt::HostTensor tensor = slrt::readNpy(file);
    try {
      slrt::checkInput(schedule, name, tensor);
    } catch (const slrt::Error &e) {
      throw makeError(file, ": ", e.what());
    }
    inputs.emplace(name, std::move(tensor));
  }

  slrt::Executor executor(loaded, *backend);
  std::vector<slrt::NamedTensor> outputs = executor.run(inputs);

  for (const slrt::NamedTensor &out : outputs) {
    auto file = outputFiles.find(out.name);
    if (file != outputFiles.end())
      slrt::writeNpy(file->second, out.tensor);
    else if (outputFiles.empty())
      printOutput(out);
  }
  if (!reportPath.empty())
    slrt::writeReport(reportPath,
                      slrt::makeReport(loaded, backend->name(), executor.stats(), outputs));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"sl-run: execute a SpeedLoader schedule (written by sl-opt) on a backend.\n"
               "Inputs and outputs are NumPy .npy files (float32, float64, int64, int32, bool). "
               "Without --output, each output's name, dtype, shape and first values are "
               "printed."};
  app.get_formatter()->column_width(30);
  std::string schedulePath, reportPath, backendName = "cpu";
  std::vector<std::string> inputArgs, outputArgs;
  app.add_option("SCHEDULE", schedulePath, "The schedule file (.slsched) to run")
      ->required()
      ->type_name("");
  app.add_option("--input,-i", inputArgs,
                 "An input as NAME=FILE.npy, or FILE.npy when the schedule has one input; repeat "
                 "for each input")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("[NAME=]FILE");
  app.add_option(
         "--output,-o", outputArgs,
         "Where to write an output, as NAME=FILE.npy, or FILE.npy when the schedule has one "
         "output; repeatable. Files are written atomically. Outputs not named are not "
         "written.")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->type_name("[NAME=]FILE");
  app.add_option("--report", reportPath,
                 "Write a JSON report (timings, kernels, bytes moved, memory, outputs) to FILE")
      ->type_name("FILE");
  app.add_option("--backend", backendName,
                 "Where kernels run: cpu (the CUDA backend does not execute schedules yet)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help is reported as a "parse error" with exit code 0; every real error exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }
  try {
    return run(schedulePath, inputArgs, outputArgs, reportPath, backendName);
  } catch (const std::exception &e) {
    std::cerr << "sl-run: error: " << e.what() << "\n";
    return 1;
  }
}
