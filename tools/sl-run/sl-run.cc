// sl-run: executes a SpeedLoader schedule written by sl-opt. The command line only: every mode
// (inference, training, generation, --consolidate, --calibrate) is runtime code (slrt/tooling/).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "slrt/comm.h"
#include "slrt/tooling/run.h"

namespace {

// CLI11's PositiveNumber and NonNegativeNumber name their range in full ("0.000000 to 1797693...",
// 309 digits of DBL_MAX); these say what is wrong in a few words, under the same names in --help.
CLI::Validator signCheck(bool zeroAllowed, const char *name) {
  return CLI::Validator(
      [=](std::string &text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value))
          return "not a number: " + text;
        if (value > 0 || (zeroAllowed && value == 0))
          return "";
        return std::string("must be ") + (zeroAllowed ? "at least 0" : "more than 0") + ", not " +
               text;
      },
      name);
}
const CLI::Validator kPositive = signCheck(false, "POSITIVE");
const CLI::Validator kNonNegative = signCheck(true, "NONNEGATIVE");

} // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "sl-run: execute a SpeedLoader schedule (written by sl-opt) on a backend.\n"
      "An inference schedule runs once: inputs and outputs are NumPy .npy files (float32, "
      "float64, int64, int32, bool; NumPy has no bf16, so a bf16 input is given as float32 and "
      "rounded to nearest even, and a bf16 output is written as float32, widened exactly); "
      "without --output, each output's name, dtype, shape and first values are printed.\n"
      "A train schedule (kind \"train\") runs --steps training steps on the token ids of --data: "
      "each step computes the loss and every gradient, then AdamW updates the weights; a progress "
      "line per step is printed.\n"
      "A generate schedule (kind \"generate\") continues each prompt of --prompts (JSON Lines) "
      "token by token and writes the new tokens to --output (JSON Lines; standard output without "
      "it); a progress line per batch goes to standard error."};
  app.get_formatter()->column_width(30);
  slrt::tooling::RunOptions o;
  CLI::Option *scheduleOption =
      app.add_option("SCHEDULE", o.schedulePath, "The schedule file (.slsched) to run")
          ->type_name("");
  std::vector<CLI::Option *> inferOptions, trainOptions;
  inferOptions.push_back(
      app.add_option("--input,-i", o.inputArgs,
                     "An input as NAME=FILE.npy, or FILE.npy when the schedule has one input; "
                     "repeat for each input (inference). With several ranks (a schedule compiled "
                     "with world=W, under mpirun -np W) the file holds every rank's rows along "
                     "its first axis, rank r's from row r x batch, and rank 0 writes every rank's "
                     "outputs in that order")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name("[NAME=]FILE"));
  inferOptions.push_back(
      app.add_option("--output,-o", o.outputArgs,
                     "Where to write an output, as NAME=FILE.npy, or FILE.npy when the schedule "
                     "has one output; repeatable. Files are written atomically. Outputs not "
                     "named are not written (inference). For a generate schedule: the JSON Lines "
                     "file of generated tokens, written atomically (without --output, the lines "
                     "go to standard output)")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->type_name("[NAME=]FILE"));
  inferOptions.push_back(
      app.add_option("--warmup-runs", o.warmupRuns,
                     "Inference: run the schedule N times on the same inputs before the run that "
                     "is reported, traced last and written, so that what a backend does once "
                     "(loading kernels, building cuDNN's attention graphs) stays out of its "
                     "timings; the report lists their wall times as \"warmup_seconds\"")
          ->check(CLI::Range(int64_t{0}, int64_t{1000}))
          ->type_name("N"));
  app.add_option("--report", o.reportPath,
                 "Write a JSON report (timings, seconds per op kind, kernels, bytes moved per "
                 "direction, arena and pool sizes and peak use, busy and wait seconds per stream, "
                 "the schedule's plan, outputs; for training also a \"train\" section: per-step "
                 "loss, lr and bytes moved, tokens/s, the AdamW settings; for generation a "
                 "\"generation\" section: prefill and decode tokens/s, bytes moved and peak "
                 "memory over all runs, the sampling settings, the schedule's generation shape) "
                 "to FILE, atomically, after the run. On the CUDA backend the GPU times each "
                 "kernel and copy it runs (two timing events each, no synchronisation added) and "
                 "their seconds are those times (\"op_seconds_clock\": \"device\"); what the "
                 "host runs (the optimizer, host accumulation, collectives), and everything on "
                 "the CPU backend, counts host time (\"host\" on the CPU backend)")
      ->type_name("FILE");
  app.add_option("--trace", o.tracePath,
                 "Write a Chrome trace (chrome://tracing, ui.perfetto.dev) of the run to FILE, "
                 "atomically, after the run: a track per stream, a span per kernel and per wait "
                 "that blocked. On the CUDA backend a kernel's span is when the GPU ran it, and "
                 "the waits of its host thread go on a track of their own (\"<track> host "
                 "waits\"). Training and generation trace every run (step, prefill, "
                 "decode step) until the trace holds a million spans; later runs are left out "
                 "(otherData.runs_traced says how many are in)")
      ->type_name("FILE");
  app.add_option("--link-gbps", o.linkGbps,
                 "Pace host<->device copies to at most G GB/s per direction, to emulate a PCIe "
                 "link on the CPU backend; 0: unthrottled")
      ->check(kNonNegative)
      ->capture_default_str()
      ->type_name("G");
  app.add_flag("--tf32", o.tf32,
              "Compute the GEMMs of f32 tensors on tensor cores in TF32 (inputs rounded to a "
              "10-bit mantissa, f32 accumulation; PyTorch's allow_tf32): faster on a GPU, less "
              "exact. The CUDA backend only (the CPU backend computes f32); off by default; the "
              "report's \"tf32\" says whether it was used. bf16 schedules are not affected");
  app.add_option("--collective-timeout", o.collectiveTimeout,
                 "With several ranks (mpirun -np W): seconds a collective may take before the job "
                 "is ended with an error naming the rank and the collective")
      ->check(kPositive)
      ->capture_default_str()
      ->type_name("SECONDS");
  app.add_option("--random-weights", o.randomWeightsSeed,
                 "Instead of reading the model's parameter files (which need not exist), fill "
                 "every parameter with random values: normal, std 0.02, in the parameter's "
                 "dtype, the same for a seed on any machine and thread count. For measuring "
                 "generation, inference and training steps of models whose weights are not at "
                 "hand; the report says so (\"random_weights\"). A train schedule refuses --save, "
                 "--export-onnx and --resume with it")
      ->type_name("SEED");
  app.add_flag("--allow-external-paths", o.allowExternalPaths,
               "Read parameter files that the schedule names outside its own directory (an "
               "absolute path, a '..', or a symbolic link that leads out of it). Without it "
               "such a schedule is refused: a schedule from elsewhere must not make sl-run read "
               "(and copy into its outputs) any file it can reach. Give it only for schedules "
               "you compiled or trust");
  app.add_option("--backend", o.backendName,
                 "Where kernels run: cpu, or cuda (an NVIDIA GPU, in a build with the CUDA "
                 "backend; its kernels and copies run asynchronously, ordered by CUDA events, "
                 "and SLRT_CUDA_SYNC=1 in the environment makes each wait for its work, so that "
                 "a fault names its kernel)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();

  CLI::Option *calibrateOption =
      app.add_option("--calibrate", o.calibratePath,
                     "Instead of running a schedule: measure this machine with --backend (matrix "
                     "products in f32 and bf16, host->device copies, the host AdamW) and write "
                     "the rates as a machine profile (JSON) to FILE, for sl-opt's "
                     "--sl-train=\"... target=FILE\"")
          ->type_name("FILE")
          ->excludes(scheduleOption);
  app.add_option("--calibrate-seconds", o.calibrateSeconds,
                 "With --calibrate: the least time each rate is measured over")
      ->check(CLI::Range(0.01, 600.0))
      ->capture_default_str()
      ->needs(calibrateOption)
      ->type_name("SECONDS");

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
                  ->check(kPositive)
                  ->type_name("N"));
  trainOption(app.add_option("--vocab", o.vocab,
                             "The vocabulary size: a token id at or past it stops training, "
                             "naming its position in --data. Default: the model's (the last "
                             "dimension of the logits its loss reads); more than that is an "
                             "error")
                  ->check(kPositive)
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
                             "names, AdamW moments, the step) atomically after the last step. "
                             "With several ranks, FILE is the index of a sharded checkpoint: "
                             "each rank's part is written beside it, the index last; a save that "
                             "fails leaves the previous checkpoint as it was")
                  ->type_name("FILE"));
  trainOption(app.add_option("--export-onnx", o.exportOnnxPath,
                             "After the last step, write the model with its trained weights as "
                             "ONNX (the exported graph, byte for byte, with new parameter values)")
                  ->type_name("FILE"));
  trainOption(app.add_option("--resume", o.resumePath,
                             "Continue from a checkpoint written by --save for the same model: "
                             "its weights, moments and step count; --steps more steps follow. "
                             "With several ranks, the index of a sharded checkpoint written with "
                             "as many ranks")
                  ->type_name("FILE"));
  app.add_option("--consolidate", o.consolidatePath,
                 "Instead of running: read the sharded checkpoint whose index is INDEX (written "
                 "by --save in a run of several ranks) and write it whole, for SCHEDULE's model, "
                 "as one checkpoint (--save FILE, which a run of one rank can --resume) and/or "
                 "as ONNX with the trained weights (--export-onnx FILE)")
      ->group(training)
      ->type_name("INDEX");

  const char *generation = "Generation (generate schedules only)";
  std::vector<CLI::Option *> generateOptions;
  auto generateOption = [&](CLI::Option *option) {
    option->group(generation);
    generateOptions.push_back(option);
    return option;
  };
  generateOption(
      app.add_option("--prompts", o.promptsPath,
                     "The prompts: JSON Lines, one object per line, {\"tokens\": [ids]} or "
                     "{\"text\": \"...\"} (with --tokenizer bytes), optionally with an \"id\" "
                     "that the output repeats. Prompts run in batches of the schedule's batch "
                     "size; each output line is {\"index\", \"id\", \"prompt_tokens\", "
                     "\"tokens\", \"text\" (with a tokenizer), \"finish_reason\": \"stop\" or "
                     "\"length\"}, in prompt order")
          ->type_name("FILE"));
  generateOption(app.add_option("--tokenizer", o.tokenizer,
                                "How \"text\" becomes token ids and tokens text: none (prompts "
                                "give \"tokens\"), or bytes (each UTF-8 byte is a token, ids "
                                "0..255, as speedloader.data writes training data)")
                     ->check(CLI::IsMember({"none", "bytes"}))
                     ->capture_default_str());
  generateOption(app.add_option("--max-new-tokens", o.maxNewTokens,
                                "The most tokens generated per prompt (default and most: the "
                                "schedule's max_new_tokens)")
                     ->check(kPositive)
                     ->type_name("N"));
  generateOption(app.add_option("--stop-token", o.stopTokens,
                                "A token id that ends a sequence (kept in its output, finish "
                                "reason \"stop\"); repeatable")
                     ->expected(1)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                     ->type_name("ID"));
  generateOption(app.add_option("--temperature", o.sampling.temperature,
                                "Sampling temperature; 0 (the default) is greedy: the most "
                                "probable token, the lowest id on ties, deterministic")
                     ->check(kNonNegative)
                     ->capture_default_str()
                     ->type_name("T"));
  generateOption(app.add_option("--top-k", o.sampling.topK,
                                "Sample among the K most probable tokens only; 0: all")
                     ->check(kNonNegative)
                     ->capture_default_str()
                     ->type_name("K"));
  generateOption(app.add_option("--top-p", o.sampling.topP,
                                "Nucleus sampling: among the fewest most probable tokens whose "
                                "probability sums to at least P (after --top-k); 1: all")
                     ->check(CLI::Range(0.0, 1.0))
                     ->capture_default_str()
                     ->type_name("P"));
  generateOption(app.add_option("--seed", o.sampling.seed,
                                "Seed of the sampling: prompt i draws from a stream seeded by "
                                "(seed, i), so its tokens do not depend on its batch")
                     ->capture_default_str()
                     ->type_name("N"));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help is reported as a "parse error" with exit code 0; every real error exits 1.
    return app.exit(e) == 0 ? 0 : 1;
  }
  if (o.calibratePath.empty() && o.schedulePath.empty()) {
    std::cerr << "SCHEDULE is required\nRun with --help for more information.\n";
    return 1;
  }
  for (CLI::Option *option : trainOptions)
    if (option->count() > 0)
      o.trainFlagsGiven.push_back(option->get_name());
  for (CLI::Option *option : inferOptions)
    if (option->count() > 0)
      o.inferFlagsGiven.push_back(option->get_name());
  for (CLI::Option *option : generateOptions)
    if (option->count() > 0)
      o.generateFlagsGiven.push_back(option->get_name());
  std::unique_ptr<slrt::Communicator> comm;
  try {
    // First, so that every rank of a job is in MPI before any can fail and abort the job.
    slrt::CommOptions commOptions;
    commOptions.backend = o.backendName;
    commOptions.timeoutSeconds = o.collectiveTimeout;
    comm = slrt::openCommunicator(commOptions);
    o.comm = comm.get();
    return slrt::tooling::run(o);
  } catch (const std::exception &e) {
    if (!comm) {
      std::cerr << "sl-run: error: " << e.what() << "\n";
      return 1;
    }
    // One rank's error ends the job: the others would wait for it in their next collective. The
    // line goes out in one write, so that ranks failing at once (ranks that disagree) do not
    // interleave their messages.
    std::cerr << "sl-run: error: rank " + std::to_string(comm->rank()) + " of " +
                     std::to_string(comm->size()) + ": " + e.what() + "\n"
              << std::flush;
    comm->abort(1);
  }
}
