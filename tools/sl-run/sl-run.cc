// sl-run: executes a SpeedLoader schedule written by sl-opt.
#include <algorithm>
#include <chrono>
#include <cstdio>
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
#include "slrt/onnx_export.h"
#include "slrt/report.h"
#include "slrt/schedule_loader.h"
#include "slrt/token_data.h"
#include "slrt/trainer.h"

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

struct Options {
  std::string schedulePath, reportPath, tracePath, backendName = "cpu";
  double linkGbps = 0;
  std::vector<std::string> inputArgs, outputArgs;
  // Training.
  std::string dataPath, dataDType = "uint16", savePath, resumePath, exportOnnxPath;
  int64_t steps = 0, vocab = 0;
  slrt::AdamWConfig adamw;
  // The flags given that only a train schedule takes ("--data", ...), and those it refuses.
  std::vector<std::string> trainFlagsGiven, inferFlagsGiven;
};

slrt::ExecutorOptions executorOptions(const Options &options) {
  slrt::ExecutorOptions executor;
  executor.linkGbps = options.linkGbps;
  executor.trace = !options.tracePath.empty();
  return executor;
}

std::string flagList(const std::vector<std::string> &flags) {
  std::string list;
  for (const std::string &flag : flags)
    list += (list.empty() ? "" : ", ") + flag;
  return list;
}

int infer(const Options &options, slrt::Backend &backend, const slrt::LoadedSchedule &loaded) {
  const sl::schedule::Schedule &schedule = loaded.schedule;
  if (!options.trainFlagsGiven.empty())
    throw makeError(flagList(options.trainFlagsGiven), ": only a train schedule takes ",
                    options.trainFlagsGiven.size() == 1 ? "this option" : "these options", " (",
                    loaded.path, " is of kind '", schedule.kind(), "')");

  // Everything the user gave is checked before parameters are loaded or anything runs.
  std::map<std::string, std::string> inputFiles =
      assignFiles(options.inputArgs, schedule.inputs(), "input");
  std::map<std::string, std::string> outputFiles =
      assignFiles(options.outputArgs, schedule.outputs(), "output");
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

  slrt::Executor executor(loaded, backend, executorOptions(options));
  std::vector<slrt::NamedTensor> outputs = executor.run(inputs);

  for (const slrt::NamedTensor &out : outputs) {
    auto file = outputFiles.find(out.name);
    if (file != outputFiles.end())
      slrt::writeNpy(file->second, out.tensor);
    else if (outputFiles.empty())
      printOutput(out);
  }
  if (!options.reportPath.empty()) {
    nlohmann::json report = slrt::makeReport(loaded, backend.name(), executor.stats(), outputs);
    report["link_gbps"] = options.linkGbps;
    slrt::writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    executor.writeTrace(options.tracePath);
  return 0;
}

int train(const Options &options, slrt::Backend &backend, const slrt::LoadedSchedule &loaded) {
  if (!options.inferFlagsGiven.empty())
    throw makeError(flagList(options.inferFlagsGiven),
                    ": a train schedule reads its inputs from "
                    "--data and writes a checkpoint with --save, not .npy files");
  if (options.dataPath.empty())
    throw makeError(loaded.path, " is a train schedule: give --data FILE (token ids)");
  if (options.steps <= 0)
    throw makeError(loaded.path, " is a train schedule: give --steps N");

  // Everything that can be checked is, before the parameters are read: the schedule, the
  // optimizer settings, and that the token file holds one step's tokens.
  try {
    slrt::checkTrainSchedule(loaded.schedule);
  } catch (const slrt::Error &e) {
    throw makeError(loaded.path, ": ", e.what());
  }
  options.adamw.validate();
  slrt::TokenData data =
      slrt::TokenData::open(options.dataPath, slrt::parseTokenDType(options.dataDType));
  slrt::TrainerOptions trainerOptions;
  trainerOptions.adamw = options.adamw;
  trainerOptions.vocabSize = options.vocab;
  trainerOptions.executor = executorOptions(options);
  slrt::Trainer trainer(loaded, backend, data, trainerOptions);

  if (!options.resumePath.empty()) {
    uint64_t saved = trainer.resume(options.resumePath);
    if (saved != trainer.dataPosition())
      std::cerr << "sl-run: warning: " << options.resumePath << " was saved where the next step "
                << "reads from token " << saved << " of its data, but step "
                << trainer.completedSteps() + 1 << " of this run reads from token "
                << trainer.dataPosition() << " of " << data.path()
                << ": the token file or the batch shape changed, so the data order does not "
                   "continue the checkpoint's\n";
  }

  uint64_t last = trainer.completedSteps() + static_cast<uint64_t>(options.steps);
  auto start = std::chrono::steady_clock::now();
  try {
    for (int64_t i = 0; i < options.steps; ++i) {
      slrt::StepRecord r = trainer.step();
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %llu/%llu  loss %.4f  lr %.2e  tokens/s %.0f  elapsed %.2fs\n",
                  static_cast<unsigned long long>(r.step), static_cast<unsigned long long>(last),
                  static_cast<double>(r.loss), r.lr, r.tokensPerSecond, elapsed);
      std::fflush(stdout);
    }
  } catch (const slrt::Error &e) {
    if (options.savePath.empty() && options.reportPath.empty() && options.tracePath.empty())
      throw;
    throw makeError(e.what(), " (nothing was saved: --save, --report and --trace are written "
                              "only after the last step)");
  }

  if (!options.savePath.empty())
    trainer.save(options.savePath);
  if (!options.exportOnnxPath.empty())
    slrt::exportTrainedOnnx(loaded, trainer.executor(), options.exportOnnxPath);
  if (!options.reportPath.empty()) {
    nlohmann::json report =
        slrt::makeReport(loaded, backend.name(), trainer.executor().stats(), {});
    for (const sl::schedule::Binding &b : loaded.schedule.outputs()) {
      const sl::schedule::Buffer &buffer = loaded.schedule.buffers(static_cast<int>(b.buffer()));
      report["outputs"].push_back({{"name", b.name()},
                                   {"dtype", slrt::dtypeName(buffer.dtype())},
                                   {"shape", slrt::toShape(buffer.shape())}});
    }
    report["train"] = trainer.report();
    report["link_gbps"] = options.linkGbps;
    slrt::writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    trainer.executor().writeTrace(options.tracePath);
  return 0;
}

int run(const Options &options) {
  std::unique_ptr<slrt::Backend> backend = slrt::createBackend(options.backendName);
  slrt::LoadedSchedule loaded = slrt::loadSchedule(options.schedulePath);
  if (loaded.schedule.kind() == slrt::kTrainKind)
    return train(options, *backend, loaded);
  return infer(options, *backend, loaded);
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "sl-run: execute a SpeedLoader schedule (written by sl-opt) on a backend.\n"
      "An inference schedule runs once: inputs and outputs are NumPy .npy files (float32, "
      "float64, int64, int32, bool); without --output, each output's name, dtype, shape and "
      "first values are printed.\n"
      "A train schedule (kind \"train\") runs --steps training steps on the token ids of --data: "
      "each step computes the loss and every gradient, then AdamW updates the weights; a progress "
      "line per step is printed."};
  app.get_formatter()->column_width(30);
  Options o;
  app.add_option("SCHEDULE", o.schedulePath, "The schedule file (.slsched) to run")
      ->required()
      ->type_name("");
  std::vector<CLI::Option *> inferOptions, trainOptions;
  inferOptions.push_back(
      app.add_option("--input,-i", o.inputArgs,
                     "An input as NAME=FILE.npy, or FILE.npy when the schedule has one input; "
                     "repeat for each input (inference)")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name("[NAME=]FILE"));
  inferOptions.push_back(
      app.add_option("--output,-o", o.outputArgs,
                     "Where to write an output, as NAME=FILE.npy, or FILE.npy when the schedule "
                     "has one output; repeatable. Files are written atomically. Outputs not "
                     "named are not written (inference)")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name("[NAME=]FILE"));
  app.add_option("--report", o.reportPath,
                 "Write a JSON report (timings, kernels, bytes moved per direction, arena and pool "
                 "sizes and peak use, busy and wait seconds per stream, the schedule's plan, "
                 "outputs; for training also a \"train\" section: per-step loss, lr and bytes "
                 "moved, tokens/s, the AdamW settings) to FILE, atomically, after the run")
      ->type_name("FILE");
  app.add_option("--trace", o.tracePath,
                 "Write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the run to FILE, "
                 "atomically, after the run: a track per stream, a span per kernel and per wait "
                 "that blocked. Training traces every step until the trace holds a million "
                 "spans; later steps are left out (otherData.runs_traced says how many are in)")
      ->type_name("FILE");
  app.add_option("--link-gbps", o.linkGbps,
                 "Pace host<->device copies to at most G GB/s per direction, to emulate a PCIe "
                 "link on the CPU backend; 0: unthrottled")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str()
      ->type_name("G");
  app.add_option("--backend", o.backendName,
                 "Where kernels run: cpu, or cuda (an NVIDIA GPU, in a build with the CUDA "
                 "backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();

  const char *training = "Training (train schedules only)";
  auto trainOption = [&](CLI::Option *option) {
    option->group(training);
    trainOptions.push_back(option);
    return option;
  };
  trainOption(app.add_option("--data", o.dataPath,
                             "The token file: raw little-endian token ids, no header. Each step "
                             "reads batch*seq+1 tokens, starting where the previous step's inputs "
                             "end (the first at token 0) and wrapping at the end of the file; "
                             "the labels are the inputs shifted by one")
                  ->type_name("FILE"));
  trainOption(app.add_option("--data-dtype", o.dataDType, "The type of the token ids in --data")
                  ->check(CLI::IsMember({"uint16", "uint32"}))
                  ->capture_default_str());
  trainOption(app.add_option("--steps", o.steps,
                             "Training steps to run (after a --resume checkpoint's steps)")
                  ->check(CLI::PositiveNumber)
                  ->type_name("N"));
  trainOption(app.add_option("--vocab", o.vocab,
                             "The vocabulary size: a token id at or past it stops training, "
                             "naming its position in --data. Without it, such an id is refused "
                             "by the kernel that reads it")
                  ->check(CLI::PositiveNumber)
                  ->type_name("N"));
  trainOption(app.add_option("--lr", o.adamw.lr, "AdamW learning rate (peak, with a schedule)")
                  ->capture_default_str());
  trainOption(app.add_option("--weight-decay", o.adamw.weightDecay, "AdamW decoupled weight decay")
                  ->capture_default_str());
  trainOption(app.add_option("--beta1", o.adamw.beta1, "AdamW beta1")->capture_default_str());
  trainOption(app.add_option("--beta2", o.adamw.beta2, "AdamW beta2")->capture_default_str());
  trainOption(app.add_option("--eps", o.adamw.eps, "AdamW epsilon")->capture_default_str());
  trainOption(app.add_option("--max-grad-norm", o.adamw.maxGradNorm,
                             "Clip the global gradient L2 norm to this; 0 is off")
                  ->capture_default_str());
  trainOption(app.add_option("--warmup-steps", o.adamw.warmupSteps,
                             "Linear learning-rate warmup from 0 over this many steps")
                  ->capture_default_str());
  trainOption(app.add_option("--decay-steps", o.adamw.decaySteps,
                             "Cosine decay from --lr to --min-lr over this many steps after the "
                             "warmup; 0: constant after the warmup")
                  ->capture_default_str());
  trainOption(app.add_option("--min-lr", o.adamw.minLr, "The learning rate after the decay")
                  ->capture_default_str());
  trainOption(app.add_option("--save", o.savePath,
                             "Write a checkpoint (safetensors: master weights under their ONNX "
                             "names, AdamW moments, the step) atomically after the last step")
                  ->type_name("FILE"));
  trainOption(app.add_option("--export-onnx", o.exportOnnxPath,
                             "After the last step, write the model with its trained weights as "
                             "ONNX (the exported graph, byte for byte, with new parameter values)")
                  ->type_name("FILE"));
  trainOption(app.add_option("--resume", o.resumePath,
                             "Continue from a checkpoint written by --save for the same model: "
                             "its weights, moments and step count; --steps more steps follow")
                  ->type_name("FILE"));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help is reported as a "parse error" with exit code 0; every real error exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }
  for (CLI::Option *option : trainOptions)
    if (option->count() > 0)
      o.trainFlagsGiven.push_back(option->get_name());
  for (CLI::Option *option : inferOptions)
    if (option->count() > 0)
      o.inferFlagsGiven.push_back(option->get_name());
  try {
    return run(o);
  } catch (const std::exception &e) {
    std::cerr << "sl-run: error: " << e.what() << "\n";
    return 1;
  }
}
