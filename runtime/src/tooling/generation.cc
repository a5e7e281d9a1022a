#include "slrt/tooling/generation.h"

#include <cstdio>
#include <iostream>

#include "slrt/atomic_file.h"
#include "slrt/error.h"
#include "slrt/generator.h"
#include "slrt/prompts.h"
#include "slrt/report.h"

namespace slrt::tooling {

int runGeneration(const RunOptions &options, Backend &backend, const LoadedSchedule &loaded) {
  refuseFlags(options.trainFlagsGiven, "train", loaded);
  refuseInferenceOnlyFlags(options, loaded);
  for (const std::string &flag : options.inferFlagsGiven)
    if (flag == "--input")
      throw makeError("--input: a generate schedule reads its prompts from --prompts, not .npy "
                      "files");
  if (options.promptsPath.empty())
    throw makeError(loaded.path, " is a generate schedule: give --prompts FILE.jsonl");
  if (options.outputArgs.size() > 1)
    throw makeError("--output is given ", options.outputArgs.size(),
                    " times; a generate schedule writes one file (JSON Lines)");

  // The options and every prompt are checked before the parameters are read.
  GenerationOptions generation;
  generation.sampling = options.sampling;
  generation.stopTokens = options.stopTokens;
  generation.maxNewTokens = options.maxNewTokens;
  generation.tokenizer = parseTokenizer(options.tokenizer);
  generation.executor = executorOptions(options);
  generation.sampling.validate();
  generation.progress = [](const GenerationProgress &p) {
    std::fprintf(
        stderr,
        "batch %llu/%llu  sequences %llu/%llu  tokens %llu  tokens/s %.0f  "
        "elapsed %.2fs\n",
        static_cast<unsigned long long>(p.batch), static_cast<unsigned long long>(p.batches),
        static_cast<unsigned long long>(p.sequencesDone),
        static_cast<unsigned long long>(p.sequences),
        static_cast<unsigned long long>(p.generatedTokens),
        p.elapsedSeconds > 0 ? static_cast<double>(p.generatedTokens) / p.elapsedSeconds : 0.0,
        p.elapsedSeconds);
  };
  const sl::schedule::Generation &g = loaded.schedule.generation();
  PromptLimits limits{g.max_prompt_len(), g.vocab(), generation.tokenizer};
  std::vector<Prompt> prompts = readPrompts(options.promptsPath, limits);
  checkOutputPaths({{"--output", options.outputArgs.empty() ? "" : options.outputArgs[0]},
                    {"--report", options.reportPath},
                    {"--trace", options.tracePath}},
                   runInputs(options, loaded));
  checkMemory(loaded, backend, RunMemoryOptions{});
  Generator generator(loaded, backend, generation);
  std::vector<GeneratedSequence> sequences = generator.generate(prompts);

  std::string lines = generationJsonLines(sequences, generation.tokenizer);
  if (options.outputArgs.empty())
    std::cout << lines << std::flush;
  else
    writeFileAtomically(options.outputArgs[0], lines);
  if (!options.reportPath.empty()) {
    nlohmann::json report = makeReport(loaded, backend.name(), generator.executor().stats(), {});
    report["generation"] = generator.report();
    describeRun(report, options);
    writeReport(options.reportPath, report);
  }
  if (!options.tracePath.empty())
    generator.executor().writeTrace(options.tracePath);
  return 0;
}

} // namespace slrt::tooling
