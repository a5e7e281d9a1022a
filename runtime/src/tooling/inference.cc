#include "slrt/tooling/inference.h"

#include <algorithm>
#include <iostream>

#include "slrt/bfloat16.h"
#include "slrt/checked.h"
#include "slrt/error.h"
#include "slrt/executor.h"
#include "slrt/npy.h"
#include "slrt/rank_agreement.h"
#include "slrt/report.h"

namespace slrt::tooling {
namespace {

void printOutput(const std::string &name, const HostTensorView &t) {
  std::cout << name << ": " << dtypeName(t.dtype) << " " << formatShape(t.shape);
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
    case sl::schedule::BF16:
      std::cout << ' ' << bfloat16ToFloat(t.as<uint16_t>()[i]);
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
      std::cout << " (values of " << dtypeName(t.dtype) << " are not printed)\n";
      return;
    }
  }
  std::cout << (t.numel() > n ? " ...\n" : "\n");
}

// NumPy has no bf16: an input the schedule takes as bf16 is given as a float32 .npy and rounded
// to nearest even, as torch's tensor.to(torch.bfloat16) does. Other inputs are returned as they
// are (checkInput checks them).
HostTensor bfloat16Input(const sl::schedule::Schedule &schedule, const std::string &name,
                         HostTensor tensor) {
  for (const sl::schedule::Binding &b : schedule.inputs()) {
    if (b.name() != name ||
        schedule.buffers(static_cast<int>(b.buffer())).dtype() != sl::schedule::BF16)
      continue;
    if (tensor.dtype != sl::schedule::F32)
      throw makeError("input '", name, "' is ", dtypeName(tensor.dtype),
                      ", but the schedule takes it as bf16: give it as float32 (rounded to bf16 "
                      "on reading; NumPy has no bf16)");
    return roundedToBfloat16(tensor);
  }
  return tensor;
}

// A schedule of world > 1 (sl-opt --sl-infer="... world=W") runs on W ranks, each on batch= rows
// of its own: an input file holds every rank's rows, rank r's being rows [r B, (r + 1) B) of its
// first axis (B the schedule's), and the outputs are every rank's rows in the same order.
HostTensor rowsOfRank(HostTensor whole, const sl::schedule::Schedule &schedule,
                      const std::string &name, uint32_t world, int rank) {
  const sl::schedule::Binding *binding = nullptr;
  for (const sl::schedule::Binding &b : schedule.inputs())
    if (b.name() == name)
      binding = &b;
  const sl::schedule::Buffer &buffer = schedule.buffers(static_cast<int>(binding->buffer()));
  if (buffer.shape_size() == 0 || whole.shape.empty())
    throw makeError("input '", name, "': a schedule for ", world,
                    " ranks splits its inputs along their first axis, and this one has none");
  int64_t rows = static_cast<int64_t>(buffer.shape(0)), ranks = static_cast<int64_t>(world);
  if (whole.shape[0] != rows * ranks)
    throw makeError("input '", name, "' has ", whole.shape[0], " rows along its first axis; ",
                    "the schedule is for ", world, " ranks of ", rows,
                    " each (compiled with world=", world, "), so it takes ", rows * ranks,
                    ": every rank's rows, rank r's from row r x ", rows);
  HostTensor mine;
  mine.dtype = whole.dtype;
  mine.shape = whole.shape;
  mine.shape[0] = rows;
  uint64_t bytes = whole.data.size() / world;
  mine.data.assign(whole.data.begin() + static_cast<std::ptrdiff_t>(bytes * uint64_t(rank)),
                   whole.data.begin() + static_cast<std::ptrdiff_t>(bytes * uint64_t(rank + 1)));
  return mine;
}

// Every rank's rows of an output, in rank order along its first axis.
HostTensor rowsOfEveryRank(const HostTensor &mine, Communicator &comm, const std::string &name) {
  HostTensor whole;
  whole.dtype = mine.dtype;
  whole.shape = mine.shape;
  whole.shape[0] *= comm.size();
  whole.data.resize(mine.data.size() * static_cast<size_t>(comm.size()));
  comm.allGatherBytes(mine.data.data(), whole.data.data(), mine.data.size(),
                      "output '" + name + "': every rank's rows");
  return whole;
}

} // namespace

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

int runInference(const RunOptions &options, Backend &backend, const LoadedSchedule &loaded) {
  const sl::schedule::Schedule &schedule = loaded.schedule;
  refuseFlags(options.trainFlagsGiven, "train", loaded);
  refuseFlags(options.generateFlagsGiven, "generate", loaded);
  if (schedule.programs_size() > 1)
    throw makeError(loaded.path, " has ", schedule.programs_size(),
                    " programs; sl-run runs a schedule of several programs only when it is a "
                    "generate schedule, and this one is of kind '",
                    schedule.kind(), "'");

  // Everything the user gave is checked before parameters are loaded or anything runs.
  std::map<std::string, std::string> inputFiles =
      assignFiles(options.inputArgs, schedule.inputs(), "input");
  std::map<std::string, std::string> outputFiles =
      assignFiles(options.outputArgs, schedule.outputs(), "output");
  for (const sl::schedule::Binding &b : schedule.inputs())
    if (!inputFiles.count(b.name()))
      throw makeError("missing input '", b.name(), "': give --input ",
                      schedule.inputs_size() == 1 ? "FILE.npy" : b.name() + "=FILE.npy");
  const uint32_t world = std::max<uint32_t>(1, schedule.world());
  const int rank = options.comm ? options.comm->rank() : 0;
  const int ranks = options.comm ? options.comm->size() : 1;
  if (world > 1 && static_cast<uint32_t>(ranks) != world)
    throw makeError(loaded.path, ": the schedule is for ", world,
                    " ranks (compiled with world=", world, "), but ",
                    ranks == 1 ? "this is a run of one rank; launch it with mpirun -np " +
                                     std::to_string(world)
                               : "the job has " + std::to_string(ranks) + " ranks");
  if (world > 1) {
    // Ranks that would compute different things stop here, before any collective of the
    // schedule. Inputs count by their contents, so they may lie at other paths on other nodes.
    std::vector<AgreementField> fields = {scheduleField(loaded), modelFilesField(loaded),
                                          integerField("--warmup-runs", options.warmupRuns)};
    for (const auto &[name, file] : inputFiles)
      fields.push_back(fileField("--input " + name, file, "input file"));
    checkRanksAgree(fields, *options.comm);
  }
  std::map<std::string, HostTensor> inputs;
  for (const auto &[name, file] : inputFiles) {
    // Twice the input's bytes (an f32 file for a bf16 input, or a wider integer type, which
    // checkInput then names) and room for the header: a file past it cannot be the input, and is
    // refused before it is read.
    uint64_t inputBytes = 0;
    for (const sl::schedule::Binding &b : schedule.inputs())
      if (b.name() == name)
        inputBytes = schedule.buffers(static_cast<int>(b.buffer())).bytes();
    HostTensor tensor =
        readNpy(file,
                saturatingMulAdd<uint64_t>(saturatingMul<uint64_t>(inputBytes, world), 2,
                                           uint64_t{1} << 20),
                world > 1 ? "twice every rank's input bytes, and 1 MiB for the header"
                          : "twice the input's bytes, and 1 MiB for the header");
    try {
      tensor = bfloat16Input(schedule, name, std::move(tensor));
      if (world > 1)
        tensor = rowsOfRank(std::move(tensor), schedule, name, world, rank);
      checkInput(schedule, name, tensor);
    } catch (const Error &e) {
      throw makeError(file, ": ", e.what());
    }
    inputs.emplace(name, std::move(tensor));
  }
  std::vector<std::pair<const char *, std::string>> outputPaths = {{"--report", options.reportPath},
                                                                   {"--trace", options.tracePath}};
  for (const auto &[name, file] : outputFiles)
    outputPaths.emplace_back("--output", file);
  checkOutputPaths(outputPaths, runInputs(options, loaded, inputFiles));
  RunMemoryOptions memory;
  memory.outputCopies = world > 1 ? 1 + world : 0;
  checkMemory(loaded, backend, memory);

  Executor executor(loaded, backend, executorOptions(options));
  // Warm-up runs pay what a backend does once (loading kernels, building attention graphs, the
  // first touch of memory), so that the run reported is a steady one; their wall times are
  // reported apart.
  std::vector<double> warmupSeconds;
  for (int64_t i = 0; i < options.warmupRuns; ++i) {
    executor.execute(inputs);
    warmupSeconds.push_back(executor.stats().wallSeconds);
  }
  // The outputs are read where the run left them, in the host pool: a file is streamed from
  // there (a 0.5 GB logits tensor is neither copied out nor widened whole). With several ranks,
  // every rank's rows are gathered into one tensor first.
  executor.execute(inputs);
  std::vector<std::pair<std::string, HostTensorView>> outputs;
  std::vector<HostTensor> gathered;
  gathered.reserve(static_cast<size_t>(schedule.outputs_size()));
  for (const sl::schedule::Binding &b : schedule.outputs()) {
    const TensorRef &ref = executor.outputBuffer(b.name());
    HostTensorView view{ref.dtype, ref.shape, ref.data, ref.bytes};
    if (world > 1) {
      HostTensor mine{ref.dtype, ref.shape, std::vector<std::byte>(ref.data, ref.data + ref.bytes)};
      gathered.push_back(rowsOfEveryRank(mine, *options.comm, b.name()));
      view = gathered.back().view();
    }
    outputs.emplace_back(b.name(), view);
  }
  if (world > 1) {
    // Rank 0 writes the outputs and the report; each rank its trace.
    if (!options.tracePath.empty())
      executor.writeTrace(tracePathOf(options));
    if (rank != 0)
      return 0;
  }

  std::vector<ReportedOutput> reported;
  for (const auto &[name, view] : outputs) {
    auto file = outputFiles.find(name);
    if (file != outputFiles.end())
      // NumPy has no bf16: a bf16 output is written as float32, widened exactly.
      writeNpyAsF32(file->second, view);
    else if (outputFiles.empty())
      printOutput(name, view);
    reported.push_back({name, view.dtype, view.shape});
  }
  if (!options.reportPath.empty()) {
    nlohmann::json report = makeReport(loaded, backend.name(), executor.stats(), reported);
    describeRun(report, options);
    report["warmup_seconds"] = warmupSeconds;
    writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty() && world == 1)
    executor.writeTrace(options.tracePath);
  return 0;
}

} // namespace slrt::tooling
