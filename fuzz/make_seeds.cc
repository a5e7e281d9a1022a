// Writes the seed corpora of the runtime's fuzz targets into <dir>/<target>/: the unit tests'
// schedules (slrt::test builders), checkpoints and safetensors files of several dtypes, and token
// files with their read parameters. Generated at test time, so no binary seed is committed.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "slrt/checkpoint.h"
#include "slrt/rank_agreement.h"
#include "slrt/safetensors.h"
#include "test_support.h"

namespace {

using slrt::test::writeBytes;

std::string scheduleBytes(const sl::schedule::Schedule &schedule) {
  std::string bytes;
  schedule.SerializeToString(&bytes);
  return bytes;
}

// The token fuzzer's 16-byte head (token_data_fuzzer.cc) followed by the tokens.
std::string tokenSeed(bool u32, int8_t batch, int8_t seq, int32_t vocab, uint64_t step,
                      const std::vector<uint32_t> &tokens) {
  std::string bytes(16, '\0');
  bytes[0] = u32 ? 1 : 0;
  bytes[1] = char(batch);
  bytes[2] = char(seq);
  std::memcpy(&bytes[3], &vocab, sizeof vocab);
  std::memcpy(&bytes[7], &step, sizeof step);
  for (uint32_t t : tokens) {
    if (u32)
      bytes.append(reinterpret_cast<const char *>(&t), 4);
    else {
      uint16_t v = uint16_t(t);
      bytes.append(reinterpret_cast<const char *>(&v), 2);
    }
  }
  return bytes;
}

// The prompts fuzzer's 4-byte head (prompts_fuzzer.cc) followed by the JSON Lines text.
std::string promptsSeed(bool bytes, int maxTokens, int vocab, const std::string &text) {
  std::string seed(4, '\0');
  seed[0] = bytes ? 1 : 0;
  seed[1] = char(maxTokens - 1);
  seed[2] = char((vocab - 1) & 0xff);
  seed[3] = char((vocab - 1) >> 8);
  return seed + text;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: sl-fuzz-seeds DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  fs::path dir(argv[1]);
  for (const char *target : {"schedule", "safetensors", "token_data", "prompts", "rank_agreement"})
    fs::create_directories(dir / target);

  writeBytes(dir / "schedule/tiny_mlp.slsched",
             scheduleBytes(slrt::test::TinyMlp::build(1).schedule));
  writeBytes(dir / "schedule/tiny_attention.slsched",
             scheduleBytes(slrt::test::TinyAttention::build(2).schedule));
  writeBytes(dir / "schedule/streamed.slsched",
             scheduleBytes(slrt::test::StreamedSchedule::build()));
  slrt::test::TinyTrain train = slrt::test::TinyTrain::build(3);
  train.addOptimizerSteps({{1}, {0}});
  writeBytes(dir / "schedule/tiny_train.slsched", scheduleBytes(train.schedule));
  writeBytes(dir / "schedule/tiny_generate.slsched",
             scheduleBytes(slrt::test::TinyGenerate::build(4).schedule));

  slrt::TrainingCheckpoint checkpoint;
  checkpoint.step = 7;
  checkpoint.modelFingerprint = "fuzz";
  checkpoint.dataPosition = 42;
  checkpoint.rngState = 9;
  checkpoint.parameters.push_back({"w", {2, 3}, {1, 2, 3, 4, 5, 6}, {0, 0, 0, 0, 0, 0},
                                   {1, 1, 1, 1, 1, 1}});
  checkpoint.parameters.push_back({"b", {3}, {1, 2, 3}, {0, 0, 0}, {1, 1, 1}});
  slrt::saveCheckpoint((dir / "safetensors/checkpoint.safetensors").string(), checkpoint);
  int64_t ids[] = {1, -2, 3};
  double halves[] = {0.5, 1.5};
  bool flags[] = {true, false, true, true};
  uint16_t bf16[] = {0x3f80, 0xbf80};
  writeBytes(dir / "safetensors/dtypes.safetensors",
             slrt::encodeSafetensors({{"ids", sl::schedule::I64, {3}, ids},
                                      {"halves", sl::schedule::F64, {1, 2}, halves},
                                      {"flags", sl::schedule::BOOL, {2, 2}, flags},
                                      {"bf", sl::schedule::BF16, {2}, bf16},
                                      {"empty", sl::schedule::F32, {0, 4}, halves},
                                      {"scalar", sl::schedule::F64, {}, halves}},
                                     {{"format", "pt"}}));

  writeBytes(dir / "token_data/u16.bin", tokenSeed(false, 2, 3, 50, 5, {1, 2, 3, 4, 5, 6, 7, 8}));
  writeBytes(dir / "token_data/u32.bin",
             tokenSeed(true, 1, 4, 70000, 1, {65536, 2, 69999, 4, 5, 6}));
  writeBytes(dir / "token_data/out_of_vocab.bin", tokenSeed(false, 1, 2, 3, 0, {1, 2, 9}));

  writeBytes(
      dir / "prompts/tokens.jsonl",
      promptsSeed(false, 8, 300,
                  "{\"tokens\": [1, 2, 299], \"id\": \"a\"}\n\n{\"tokens\": [0], \"id\": 7}\r\n"));
  writeBytes(dir / "prompts/text.jsonl",
             promptsSeed(true, 16, 256,
                         "{\"text\": \"h\\u00e9llo \\ud83d\\ude00\"}\n{\"tokens\": [255, 128]}\n"));
  writeBytes(dir / "prompts/bad.jsonl",
             promptsSeed(false, 2, 10,
                         "{\"tokens\": [1, 2, 3]}\n{\"text\": \"x\"}\n[1]\n{\"tokens\": [1.5]}\n"));

  // What sl-run's ranks exchange before training (a few of its fields), and an empty record.
  writeBytes(dir / "rank_agreement/training.bin",
             slrt::encodeAgreement({slrt::textField("schedule", "train.slsched: 4096 bytes"),
                                    slrt::textField("model parameters", "3 parameters"),
                                    slrt::numberField("--lr", 0.003),
                                    slrt::integerField("--steps", 5),
                                    slrt::textField("--save", "/tmp/" + std::string(120, 'c'))}));
  writeBytes(dir / "rank_agreement/empty.bin", slrt::encodeAgreement({}));
  return 0;
}
