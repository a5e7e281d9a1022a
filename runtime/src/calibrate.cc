#include "slrt/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <sstream>
#include <thread>
#include <vector>

#include "slrt/adamw.h"
#include "slrt/bfloat16.h"
#include "slrt/dtype.h"
#include "slrt/error.h"

namespace slrt {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds per run of `once`: one untimed warm-up run, then runs until `minSeconds` have passed
// (at least 3), `sync` before reading the clock each time. The mean over the runs, or with
// `fastest` the fastest run (for a fixed cost, which other work on the machine only adds to).
double secondsPerRun(const std::function<void()> &once, const std::function<void()> &sync,
                     double minSeconds, bool fastest = false) {
  once();
  sync();
  int runs = 0;
  Clock::time_point start = Clock::now(), last = start;
  double elapsed = 0, best = 0;
  do {
    once();
    ++runs;
    sync();
    Clock::time_point now = Clock::now();
    double run = std::chrono::duration<double>(now - last).count();
    best = runs == 1 ? run : std::min(best, run);
    last = now;
    elapsed = std::chrono::duration<double>(now - start).count();
  } while (runs < 3 || elapsed < minSeconds);
  return fastest ? best : elapsed / runs;
}

TensorRef tensorAt(std::byte *base, uint64_t offset, sl::schedule::MemorySpace space,
                   sl::schedule::DType dtype, Shape shape) {
  TensorRef t;
  t.data = base + offset;
  t.space = space;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes = dtypeSize(dtype);
  for (int64_t d : t.shape)
    t.bytes *= static_cast<uint64_t>(d);
  return t;
}

// Small values whatever the dtype: products of n of them stay far from overflow.
void fillHost(std::byte *data, sl::schedule::DType dtype, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) {
    float value = static_cast<float>((i * 2654435761u) % 1024) / 1024.0f - 0.5f;
    if (dtype == sl::schedule::BF16) {
      uint16_t b = floatToBfloat16(value);
      std::memcpy(data + i * 2, &b, 2);
    } else {
      std::memcpy(data + i * 4, &value, 4);
    }
  }
}

} // namespace

MachineCalibration calibrate(Backend &backend, const CalibrationOptions &options) {
  bool device = backend.name() != "cpu";
  MachineCalibration c;
  c.backend = backend.name();
  c.gemmSizeF32 = options.gemmSizeF32 > 0 ? options.gemmSizeF32 : (device ? 4096 : 512);
  c.gemmSizeBf16 = options.gemmSizeBf16 > 0 ? options.gemmSizeBf16 : (device ? 8192 : 512);
  c.copyBytes = options.copyBytes > 0 ? options.copyBytes : (device ? 1ull << 30 : 256ull << 20);
  c.optimizerParameters = options.optimizerParameters > 0 ? options.optimizerParameters
                                                           : (device ? 64ull << 20 : 16ull << 20);
  constexpr int64_t kMaxGemm = 1 << 15;
  if (c.gemmSizeF32 > kMaxGemm || c.gemmSizeBf16 > kMaxGemm)
    throw makeError("--calibrate: a matrix size above ", kMaxGemm, " is not measured");
  if (c.copyBytes > (64ull << 30) || c.optimizerParameters > (4ull << 30))
    throw makeError("--calibrate: the copy (at most 64 GiB) or the optimizer's parameters (at "
                    "most 4 Gi) are too large");
  if (!(options.minSeconds > 0) || options.minSeconds > 600)
    throw makeError("--calibrate: the minimum time per rate must be in (0, 600] seconds");

  // The device arena holds the three matrices of the larger product, then the copy's target; the
  // host pool the copy's source and the matrices' values before they are copied in.
  auto matrixBytes = [](int64_t n, sl::schedule::DType dtype) {
    return static_cast<uint64_t>(n) * static_cast<uint64_t>(n) * dtypeSize(dtype);
  };
  uint64_t gemmBytes = 3 * std::max(matrixBytes(c.gemmSizeF32, sl::schedule::F32),
                                    matrixBytes(c.gemmSizeBf16, sl::schedule::BF16));
  gemmBytes = (gemmBytes + 255) / 256 * 256;
  backend.allocate(gemmBytes + c.copyBytes, std::max(gemmBytes, c.copyBytes));
  std::byte *arena = backend.deviceArena();
  std::byte *pool = backend.hostPool();
  auto sync = [&] { backend.synchronize(); };

  auto gemmTflops = [&](int64_t n, sl::schedule::DType dtype) {
    uint64_t bytes = matrixBytes(n, dtype);
    std::vector<TensorRef> host, dev;
    for (int i = 0; i < 3; ++i) {
      host.push_back(tensorAt(pool, i * bytes, sl::schedule::HOST, dtype, {n, n}));
      dev.push_back(tensorAt(arena, i * bytes, sl::schedule::DEVICE, dtype, {n, n}));
    }
    fillHost(pool, dtype, 2 * static_cast<uint64_t>(n) * n);
    backend.copy(host[0], dev[0]);
    backend.copy(host[1], dev[1]);
    sync();
    sl::schedule::Kernel kernel;
    kernel.set_op(sl::schedule::MATMUL);
    kernel.set_name("calibrate.matmul");
    double seconds = secondsPerRun(
        [&] { backend.execute(kernel, {&dev[0], &dev[1]}, {&dev[2]}); }, sync, options.minSeconds);
    return 2.0 * n * n * static_cast<double>(n) / seconds / 1e12;
  };
  c.f32Tflops = gemmTflops(c.gemmSizeF32, sl::schedule::F32);
  c.bf16Tflops = gemmTflops(c.gemmSizeBf16, sl::schedule::BF16);

  // The fixed cost of a kernel: kKernelLaunches products of kSmallGemm^3 per run, one
  // synchronisation after them, less their FLOPs at the large product's rate. It is the launch
  // (on a device) and what a small kernel loses to its size (on the CPU: threads woken for a
  // little work, caches, blocking), which a step of small sub-batches pays on every kernel.
  {
    constexpr int64_t kSmallGemm = 64;
    constexpr int kKernelLaunches = 8;
    constexpr uint64_t kSmallBytes = kSmallGemm * kSmallGemm * 4;
    std::vector<TensorRef> small;
    for (int i = 0; i < 3; ++i)
      small.push_back(tensorAt(arena, i * kSmallBytes, sl::schedule::DEVICE, sl::schedule::F32,
                               {kSmallGemm, kSmallGemm}));
    fillHost(pool, sl::schedule::F32, 2 * kSmallGemm * kSmallGemm);
    TensorRef source = tensorAt(pool, 0, sl::schedule::HOST, sl::schedule::F32,
                                {2 * kSmallGemm, kSmallGemm});
    TensorRef target = tensorAt(arena, 0, sl::schedule::DEVICE, sl::schedule::F32,
                                {2 * kSmallGemm, kSmallGemm});
    backend.copy(source, target);
    sync();
    sl::schedule::Kernel kernel;
    kernel.set_op(sl::schedule::MATMUL);
    kernel.set_name("calibrate.kernel");
    double seconds = secondsPerRun(
        [&] {
          for (int i = 0; i < kKernelLaunches; ++i)
            backend.execute(kernel, {&small[0], &small[1]}, {&small[2]});
        },
        sync, options.minSeconds, /*fastest=*/true);
    double flopSeconds = 2.0 * kSmallGemm * kSmallGemm * kSmallGemm / (c.f32Tflops * 1e12);
    c.kernelOverheadUs = std::max(0.0, seconds / kKernelLaunches - flopSeconds) * 1e6;
  }

  // Host -> device: the host pool is what the schedules copy from (pinned on CUDA).
  c.copyBytes = c.copyBytes / 4 * 4;
  Shape wordsShape{static_cast<int64_t>(c.copyBytes / 4)};
  TensorRef src = tensorAt(pool, 0, sl::schedule::HOST, sl::schedule::F32, wordsShape);
  TensorRef dst = tensorAt(arena, gemmBytes, sl::schedule::DEVICE, sl::schedule::F32, wordsShape);
  std::memset(pool, 1, c.copyBytes);
  double copySeconds = secondsPerRun([&] { backend.copy(src, dst); }, sync, options.minSeconds);
  c.linkGBps = static_cast<double>(c.copyBytes) / copySeconds / 1e9;

  // The host AdamW as the trainer runs it on a bf16 model (Trainer::optimizerStep): the group's
  // gradient norms (the check for non-finite values), then one stepGroup over fp32 masters and
  // moments that writes the bf16 weights the next forward reads in the same pass. Without the
  // check and the write (until 2026-11-27) it read 5.4 G parameters/s on the H100 machine, whose
  // 7B step then spent 2.1-2.4 s on 6.74e9 parameters (2.8-3.2 G/s): the plan was 2x optimistic.
  AdamW optimizer{AdamWConfig{}};
  size_t count = static_cast<size_t>(c.optimizerParameters);
  optimizer.addParameter("calibrate", std::vector<float>(count, 0.01f));
  std::vector<float> grad(count);
  for (size_t i = 0; i < count; ++i)
    grad[i] = static_cast<float>(i % 97) * 1e-4f - 4e-3f;
  std::vector<uint16_t> weights(count);
  double stepSeconds = secondsPerRun(
      [&] {
        ParamGrad group{0, grad.data()};
        group.bf16WeightsOut = weights.data();
        optimizer.gradSquaredNorms({group});
        optimizer.stepGroup({group});
        optimizer.finishStep();
      },
      [] {}, options.minSeconds);
  c.hostOptimizerGParams = static_cast<double>(count) / stepSeconds / 1e9;
  return c;
}

std::string machineProfileJson(const MachineCalibration &c, const std::string &name) {
  auto quoted = [](const std::string &text) {
    std::string out = "\"";
    for (char ch : text) {
      if (ch == '"' || ch == '\\')
        out += '\\';
      if (static_cast<unsigned char>(ch) >= 0x20)
        out += ch;
    }
    return out + "\"";
  };
  auto number = [](double v) {
    std::ostringstream s;
    s << std::setprecision(4) << v;
    return s.str();
  };
  std::ostringstream source;
  source << "sl-run --calibrate on the " << c.backend << " backend, "
         << std::thread::hardware_concurrency() << " host threads: " << c.gemmSizeF32
         << "^3 f32 and " << c.gemmSizeBf16 << "^3 bf16 MATMUL, " << c.copyBytes
         << "-byte host->device copy, AdamW over " << c.optimizerParameters
         << " parameters, 64^3 f32 MATMUL launches";
  std::ostringstream json;
  json << "{\n  \"name\": " << quoted(name) << ",\n  \"source\": " << quoted(source.str()) << ",\n"
       << "  \"link_gbps\": " << number(c.linkGBps) << ",\n"
       << "  \"bf16_tflops\": " << number(c.bf16Tflops) << ",\n"
       << "  \"f32_tflops\": " << number(c.f32Tflops) << ",\n"
       << "  \"host_optimizer_gparams\": " << number(c.hostOptimizerGParams) << ",\n"
       << "  \"kernel_overhead_us\": " << number(c.kernelOverheadUs) << "\n}\n";
  return json.str();
}

} // namespace slrt
