#include "slrt/random_weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <system_error>
#include <thread>

#include "slrt/bfloat16.h"
#include "slrt/error.h"

namespace slrt {
namespace {

// SplitMix64's finalizer: a bijective mix whose outputs for consecutive inputs pass BigCrush.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t parameterKey(uint64_t seed, const std::string &name) {
  uint64_t h = 0xcbf29ce484222325ull; // FNV-1a
  for (unsigned char c : name)
    h = (h ^ c) * 0x100000001b3ull;
  return mix64(mix64(seed) ^ h);
}

// Elements per unit of work: large enough that the atomic counter costs nothing, small enough
// that 16 threads share a 7B model's smallest layers.
constexpr uint64_t kChunk = uint64_t(1) << 20;

template <typename Store>
void fillRange(uint64_t key, uint64_t begin, uint64_t end, Store store) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  constexpr float kInv24 = 1.0f / 16777216.0f;
  // Pair p gives elements 2p and 2p + 1; begin is even (chunks are).
  for (uint64_t i = begin; i < end; i += 2) {
    uint64_t h = mix64(key + (i / 2) * 0x9e3779b97f4a7c15ull);
    float u1 = (float(h >> 40) + 0.5f) * kInv24; // (0, 1): log is finite
    float u2 = float((h >> 16) & 0xffffff) * kInv24;
    float r = kRandomWeightStd * std::sqrt(-2.0f * std::log(u1));
    float angle = kTwoPi * u2;
    store(i, r * std::cos(angle));
    if (i + 1 < end)
      store(i + 1, r * std::sin(angle));
  }
}

} // namespace

void fillRandomWeights(const std::vector<RandomFill> &targets, uint64_t seed, unsigned threads) {
  for (const RandomFill &t : targets)
    if (t.dtype != sl::schedule::F32 && t.dtype != sl::schedule::F64 &&
        t.dtype != sl::schedule::BF16)
      throw makeError("--random-weights: parameter '", t.name, "' is ", dtypeName(t.dtype),
                      "; random values are drawn for f32, f64 and bf16 parameters only");
  struct Work {
    size_t target;
    uint64_t begin, end;
  };
  std::vector<Work> work;
  std::vector<uint64_t> keys;
  for (size_t t = 0; t < targets.size(); ++t) {
    keys.push_back(parameterKey(seed, targets[t].name));
    for (uint64_t b = 0; b < targets[t].count; b += kChunk)
      work.push_back({t, b, std::min(targets[t].count, b + kChunk)});
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t w; (w = next.fetch_add(1)) < work.size();) {
      const RandomFill &t = targets[work[w].target];
      uint64_t key = keys[work[w].target];
      switch (t.dtype) {
      case sl::schedule::F32:
        fillRange(key, work[w].begin, work[w].end,
                  [p = static_cast<float *>(t.data)](uint64_t i, float v) { p[i] = v; });
        break;
      case sl::schedule::F64:
        fillRange(key, work[w].begin, work[w].end,
                  [p = static_cast<double *>(t.data)](uint64_t i, float v) { p[i] = v; });
        break;
      default: // BF16
        fillRange(key, work[w].begin, work[w].end, [p = static_cast<uint16_t *>(t.data)](
                                                       uint64_t i, float v) {
          p[i] = floatToBfloat16(v);
        });
        break;
      }
    }
  };
  unsigned n = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  n = static_cast<unsigned>(std::min<size_t>(n, std::max<size_t>(1, work.size())));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error &) {
      break; // fewer threads: the same values, later
    }
  }
  worker();
  for (std::thread &thread : pool)
    thread.join();
}

} // namespace slrt
