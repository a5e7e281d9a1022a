#include "slrt/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "gather_indices.h"
#include "kernel_verifier.h"
#include "slrt/atomic_file.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/kernel_flops.h"
#include "slrt/parameter_loader.h"

namespace slrt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kNotWaiting = -1;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "the schedule's inputs: x, y" or, for a schedule with programs, "the inputs of program
// 'decode': input_ids, position".
std::string inputList(const sl::schedule::Schedule &schedule, uint32_t program) {
  std::string names;
  for (const sl::schedule::Binding &input : schedule.inputs())
    if (input.program() == program)
      names += (names.empty() ? "" : ", ") + input.name();
  std::string what =
      schedule.programs_size() == 0
          ? std::string("the schedule's inputs: ")
          : "the inputs of program '" + schedule.programs(static_cast<int>(program)).name() + "': ";
  return what + (names.empty() ? "none" : names);
}

void checkProgram(const sl::schedule::Schedule &schedule, uint32_t program) {
  uint32_t count = std::max(1, schedule.programs_size());
  if (program >= count)
    throw makeError("program ", program, " is out of range (the schedule has ", count,
                    count == 1 ? " program)" : " programs)");
}

} // namespace

void checkInput(const sl::schedule::Schedule &schedule, const std::string &name,
                const HostTensor &tensor, uint32_t program) {
  checkProgram(schedule, program);
  auto binding = std::find_if(
      schedule.inputs().begin(), schedule.inputs().end(),
      [&](const sl::schedule::Binding &b) { return b.name() == name && b.program() == program; });
  if (binding == schedule.inputs().end())
    throw makeError("unknown input '", name, "' (", inputList(schedule, program), ")");
  const sl::schedule::Buffer &buffer = schedule.buffers(static_cast<int>(binding->buffer()));
  Shape shape = toShape(buffer.shape());
  if (tensor.dtype != buffer.dtype() || tensor.shape != shape)
    throw makeError("input '", name, "' is ", dtypeName(tensor.dtype), " ",
                    formatShape(tensor.shape), ", but the schedule expects ",
                    dtypeName(buffer.dtype()), " ", formatShape(shape));
  if (tensor.data.size() != buffer.bytes())
    throw makeError("input '", name, "' holds ", tensor.data.size(), " bytes, but ",
                    dtypeName(buffer.dtype()), " ", formatShape(shape), " needs ", buffer.bytes());
  checkGatherIndices(schedule, name, tensor);
}

void checkInputs(const sl::schedule::Schedule &schedule,
                 const std::map<std::string, HostTensor> &inputs, uint32_t program) {
  checkProgram(schedule, program);
  for (const auto &[name, tensor] : inputs)
    checkInput(schedule, name, tensor, program);
  for (const sl::schedule::Binding &binding : schedule.inputs())
    if (binding.program() == program && !inputs.count(binding.name()))
      throw makeError("missing input '", binding.name(), "' (", inputList(schedule, program), ")");
}

// The per-run work and results of one stream's thread; only that thread writes them during a
// run, and the caller reads them once every thread has finished.
struct Executor::StreamRun {
  size_t worker = 0; // index in streamRuns_
  uint32_t stream = 0;
  std::vector<int> kernels;
  // By program: the range [first, second) of `kernels` that belongs to it (programs are
  // contiguous in the kernel list, so each stream's share of one is too).
  std::vector<std::pair<size_t, size_t>> programRanges;
  RunStats stats; // kernels, bytes, peaks, perOp (seconds of the kernels not in `timed`)
  double busySeconds = 0, waitSeconds = 0;
  std::vector<TraceSpan> spans;
  // The kernels of a run that times kernels which the backend timed: their seconds (the backend's,
  // or these host ones when the run failed) are counted once the run is over.
  struct Timed {
    int kernel;
    uint32_t mark;
    double hostSeconds;
    size_t span; // its kernel span in `spans`, or kNoSpan when not tracing
  };
  static constexpr size_t kNoSpan = SIZE_MAX;
  std::vector<Timed> timed;
};

// The threads and what they share. One mutex guards the run's state; `wake` starts a run (or ends
// the threads), `progress` announces recorded events, failures and finished streams.
struct Executor::Threads {
  std::mutex mutex;
  std::condition_variable wake, progress;
  uint64_t generation = 0; // bumped to start a run
  bool shutdown = false;
  bool tracing = false;          // whether the current run is traced
  bool timing = false;           // whether the current run times kernels on the backend
  uint32_t program = 0;          // the program the current run runs
  size_t running = 0;            // threads still in the current run
  std::vector<uint8_t> recorded; // by event slot, reset every run
  // By worker: the event slot it is blocked on, or kNotWaiting.
  std::vector<int64_t> waitingOn;
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::vector<std::thread> threads;
};

Executor::Executor(const LoadedSchedule &schedule, Backend &backend, const ExecutorOptions &options)
    : schedule_(schedule), backend_(backend), options_(options),
      threads_(std::make_unique<Threads>()) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  if (schedule_.parameterFiles.size() != static_cast<size_t>(s.parameters_size()))
    throw makeError(schedule_.path,
                    ": parameter files are not resolved (load it with loadSchedule)");
  world_ = std::max<uint32_t>(1, s.world());
  int ranks = options_.comm ? options_.comm->size() : 1;
  if (world_ > 1 && static_cast<uint32_t>(ranks) != world_)
    throw makeError(schedule_.path, ": the schedule is for ", world_, " ranks (compiled with world=",
                    world_, "), but ",
                    ranks == 1 ? std::string("this is a run of one rank; launch it with mpirun -np ") +
                                     std::to_string(world_)
                               : "the job has " + std::to_string(ranks) + " ranks");
  if (world_ == 1 && ranks > 1)
    throw makeError(schedule_.path, ": the schedule is for one rank, but the job has ", ranks,
                    " ranks; compile it for them (--sl-train=\"... world=", ranks, "\")");
  auto start = Clock::now();
  backend_.allocate(s.device_arena_bytes(), s.host_pool_bytes());
  stats_.deviceArenaBytes = s.device_arena_bytes();
  stats_.hostPoolBytes = s.host_pool_bytes();
  // Only a caller that asks for timings asks the backend anything about them.
  timeKernels_ = options_.timeKernels && backend_.timesKernels();
  for (const sl::schedule::Buffer &b : s.buffers()) {
    std::byte *base =
        b.space() == sl::schedule::DEVICE ? backend_.deviceArena() : backend_.hostPool();
    refs_.push_back(
        TensorRef{base + b.offset(), b.space(), b.dtype(), toShape(b.shape()), b.bytes()});
  }
  stats_.parameterBytesRead = loadParameters(schedule_, refs_, rank(), options_.randomWeightsSeed);
  writeConstants(s, refs_);
  prepareKernels();
  backend_.createEvents(eventSlots_);
  // Whatever timing needs the backend creates now, for the largest program, not in a run's time.
  if (timeKernels_)
    backend_.beginKernelTiming(*std::max_element(marksOf_.begin(), marksOf_.end()));
  startThreads();
  stats_.loadSeconds = secondsSince(start);
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(threads_->mutex);
    threads_->shutdown = true;
  }
  threads_->wake.notify_all();
  for (std::thread &thread : threads_->threads)
    thread.join();
}

void Executor::prepareKernels() {
  const sl::schedule::Schedule &s = schedule_.schedule;
  std::unordered_map<uint32_t, uint32_t> slotOf;
  std::map<uint32_t, size_t> runOf; // stream id -> index in streamRuns_
  bound_.resize(static_cast<size_t>(s.kernels_size()));
  programOf_.assign(static_cast<size_t>(s.kernels_size()), 0);
  marksOf_.assign(programCount(), 0);
  for (int p = 0; p < s.programs_size(); ++p)
    for (uint32_t k = 0; k < s.programs(p).num_kernels(); ++k)
      programOf_[s.programs(p).first_kernel() + k] = static_cast<uint32_t>(p);
  for (int index = 0; index < s.kernels_size(); ++index) {
    const sl::schedule::Kernel &k = s.kernels(index);
    BoundKernel &bound = bound_[static_cast<size_t>(index)];
    bound.flops = kernelFlops(s, k);
    auto touch = [&](uint32_t id) {
      const sl::schedule::Buffer &b = s.buffers(static_cast<int>(id));
      uint64_t &end = b.space() == sl::schedule::DEVICE ? bound.deviceEnd : bound.hostEnd;
      end = std::max(end, b.offset() + b.bytes());
    };
    for (uint32_t id : k.operands()) {
      bound.operands.push_back(&refs_[id]);
      touch(id);
    }
    for (uint32_t id : k.results()) {
      bound.results.push_back(&refs_[id]);
      touch(id);
    }
    if (k.op() == sl::schedule::OPTIMIZER_STEP) {
      for (uint32_t parameter : k.optimizer_step().parameters())
        touch(s.parameters(static_cast<int>(parameter)).buffer());
      for (uint32_t shard : k.optimizer_step().shards())
        touch(s.shards(static_cast<int>(shard)).buffer());
    }
    // Slots in order of first mention; events are few next to num_events' range.
    auto slot = [&](uint32_t event) {
      return slotOf.emplace(event, static_cast<uint32_t>(slotOf.size())).first->second;
    };
    for (uint32_t event : k.wait_events())
      bound.waitSlots.push_back(slot(event));
    for (uint32_t event : k.record_events())
      bound.recordSlots.push_back(slot(event));
    // What the host runs itself may touch memory only once the work it waits for is done;
    // everything else is issued to the calling thread's backend stream, ordered there.
    bound.onHost = k.op() == sl::schedule::OPTIMIZER_STEP || k.op() == sl::schedule::ALL_GATHER ||
                  k.op() == sl::schedule::REDUCE_SCATTER ||
                  (k.op() != sl::schedule::COPY && executesOnHost(bound.results));
    if (!bound.onHost)
      bound.mark = static_cast<uint32_t>(marksOf_[programOf_[static_cast<size_t>(index)]]++);
    auto [run, inserted] = runOf.emplace(k.stream(), streamRuns_.size());
    if (inserted) {
      streamRuns_.push_back(std::make_unique<StreamRun>());
      streamRuns_.back()->stream = k.stream();
      streamRuns_.back()->worker = streamRuns_.size() - 1;
    }
    streamRuns_[run->second]->kernels.push_back(index);
  }
  eventSlots_ = slotOf.size();
  for (const std::unique_ptr<StreamRun> &run : streamRuns_) {
    run->programRanges.assign(programCount(), {0, 0});
    // Kernels are in list order, so each program's are one run of the stream's list.
    size_t begin = 0;
    for (uint32_t p = 0; p < programCount(); ++p) {
      size_t end = begin;
      while (end < run->kernels.size() && programOf_[static_cast<size_t>(run->kernels[end])] == p)
        ++end;
      run->programRanges[p] = {begin, end};
      begin = end;
    }
  }
}

void Executor::startThreads() {
  threads_->waitingOn.assign(streamRuns_.size(), kNotWaiting);
  try {
    for (size_t worker = 0; worker < streamRuns_.size(); ++worker)
      threads_->threads.emplace_back([this, worker] { workerMain(worker); });
  } catch (const std::system_error &e) {
    // The destructor does not run for a constructor that throws: end the threads started.
    {
      std::lock_guard<std::mutex> lock(threads_->mutex);
      threads_->shutdown = true;
    }
    threads_->wake.notify_all();
    for (std::thread &thread : threads_->threads)
      thread.join();
    throw makeError("cannot start a host thread for each of the schedule's ", streamRuns_.size(),
                    " streams (", e.what(), ")");
  }
}

const TensorRef &Executor::parameterBuffer(int index) const {
  const sl::schedule::Schedule &s = schedule_.schedule;
  if (index < 0 || index >= s.parameters_size())
    throw makeError("parameter index ", index, " is out of range (the schedule has ",
                    s.parameters_size(), " parameters)");
  if (world_ > 1)
    throw makeError("parameter '", s.parameters(index).name(), "' is sharded over ", world_,
                    " ranks: it has no buffer of its own (see shardBuffer)");
  return refs_[s.parameters(index).buffer()];
}

const TensorRef &Executor::shardBuffer(int index) const {
  const sl::schedule::Schedule &s = schedule_.schedule;
  if (index < 0 || index >= s.shards_size())
    throw makeError("shard index ", index, " is out of range (the schedule has ", s.shards_size(),
                    " shards)");
  return refs_[s.shards(index).buffer()];
}

const TensorRef &Executor::outputBuffer(const std::string &name, uint32_t program) const {
  for (const sl::schedule::Binding &binding : schedule_.schedule.outputs())
    if (binding.name() == name && binding.program() == program)
      return refs_[binding.buffer()];
  if (schedule_.schedule.programs_size() == 0)
    throw makeError("the schedule has no output '", name, "'");
  checkProgram(schedule_.schedule, program);
  throw makeError("program '", schedule_.schedule.programs(static_cast<int>(program)).name(),
                  "' has no output '", name, "'");
}

uint32_t Executor::programCount() const {
  return static_cast<uint32_t>(std::max(1, schedule_.schedule.programs_size()));
}

uint32_t Executor::programIndex(const std::string &name) const {
  const sl::schedule::Schedule &s = schedule_.schedule;
  std::string names;
  for (int p = 0; p < s.programs_size(); ++p) {
    if (s.programs(p).name() == name)
      return static_cast<uint32_t>(p);
    names += (names.empty() ? "'" : ", '") + s.programs(p).name() + "'";
  }
  throw makeError("the schedule has no program '", name,
                  "' (its programs: ", names.empty() ? "none" : names, ")");
}

uint32_t Executor::onlyProgram() const {
  if (programCount() > 1)
    throw makeError("the schedule has ", programCount(),
                    " programs: name the one to run (Executor::run(inputs, program))");
  return 0;
}

std::vector<NamedTensor> Executor::run(const std::map<std::string, HostTensor> &inputs) {
  return run(inputs, onlyProgram());
}

void Executor::execute(const std::map<std::string, HostTensor> &inputs) {
  execute(inputs, onlyProgram());
}

std::vector<NamedTensor> Executor::run(const std::map<std::string, HostTensor> &inputs,
                                       uint32_t program) {
  execute(inputs, program);
  auto start = Clock::now();
  std::vector<NamedTensor> outputs;
  for (const sl::schedule::Binding &binding : schedule_.schedule.outputs()) {
    if (binding.program() != program)
      continue;
    const TensorRef &ref = refs_[binding.buffer()];
    NamedTensor out{binding.name(), HostTensor::zeros(ref.dtype, ref.shape)};
    if (ref.bytes != 0) // an empty output may have no storage; memcpy may not get null
      std::memcpy(out.tensor.data.data(), ref.data, ref.bytes);
    outputs.push_back(std::move(out));
  }
  stats_.wallSeconds += secondsSince(start);
  return outputs;
}

void Executor::setOptimizerStepHook(OptimizerStepHook hook) {
  optimizerStepHook_ = std::move(hook);
}

void Executor::execute(const std::map<std::string, HostTensor> &inputs, uint32_t program) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  checkInputs(s, inputs, program);
  auto start = Clock::now();
  for (const sl::schedule::Binding &binding : s.inputs()) {
    if (binding.program() != program)
      continue;
    const HostTensor &tensor = inputs.at(binding.name());
    std::memcpy(refs_[binding.buffer()].data, tensor.data.data(), tensor.data.size());
  }

  bool tracing = options_.trace && traceSpans_.size() < options_.traceSpanLimit;
  if (tracing && runsTraced_ == 0)
    traceEpoch_ = start;
  // Every stream is idle (the last run drained them), as beginKernelTiming needs; the device's
  // reference is taken now, so the host's clock reads the same moment.
  Clock::time_point timingReference;
  if (timeKernels_) {
    backend_.beginKernelTiming(marksOf_[program]);
    timingReference = Clock::now();
  }
  Threads &t = *threads_;
  {
    std::unique_lock<std::mutex> lock(t.mutex);
    t.recorded.assign(eventSlots_, 0);
    backend_.resetEvents(); // every stream is idle: the last run drained them
    t.failed = false;
    t.error = nullptr;
    t.running = streamRuns_.size();
    t.tracing = tracing;
    t.timing = timeKernels_;
    t.program = program;
    ++t.generation;
    t.wake.notify_all();
    t.progress.wait(lock, [&] { return t.running == 0; });
  }
  auto end = Clock::now();
  // A failed run may have left marks unended: it keeps its host times.
  std::vector<std::pair<double, double>> kernelTimes;
  bool timed = false;
  if (timeKernels_ && !t.error) {
    try {
      kernelTimes = backend_.kernelTimes();
      if (kernelTimes.size() != marksOf_[program])
        throw makeError("the ", backend_.name(), " backend gave ", kernelTimes.size(),
                        " kernel times for the run's ", marksOf_[program], " timed kernels");
      timed = true;
    } catch (...) {
      t.error = std::current_exception();
    }
  }
  mergeStats(tracing, program, timed ? &kernelTimes : nullptr, timingReference);
  if (tracing) {
    TraceSpan span;
    span.kind = TraceSpan::Kind::kRun;
    span.run = runs_;
    span.program = program;
    span.startMicros = std::chrono::duration<double, std::micro>(start - traceEpoch_).count();
    span.durationMicros = std::chrono::duration<double, std::micro>(end - start).count();
    traceSpans_.push_back(span);
    ++runsTraced_;
  }
  ++runs_;
  stats_.wallSeconds = std::chrono::duration<double>(end - start).count();
  if (t.error)
    std::rethrow_exception(t.error);
}

void Executor::mergeStats(bool tracing, uint32_t program,
                          const std::vector<std::pair<double, double>> *kernelTimes,
                          Clock::time_point timingReference) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  stats_.kernelsTimedOnDevice = kernelTimes != nullptr;
  double referenceMicros =
      std::chrono::duration<double, std::micro>(timingReference - traceEpoch_).count();
  stats_.program = program;
  stats_.kernels = 0;
  stats_.bytesHostToDevice = stats_.bytesDeviceToHost = stats_.bytesWithinSpace = 0;
  stats_.bytesCollective = 0;
  stats_.deviceArenaPeakBytes = stats_.hostPoolPeakBytes = 0;
  stats_.perOp.clear();
  stats_.perStream.assign(static_cast<size_t>(s.streams_size()), StreamStats());
  for (int i = 0; i < s.streams_size(); ++i) {
    stats_.perStream[static_cast<size_t>(i)].id = static_cast<uint32_t>(i);
    stats_.perStream[static_cast<size_t>(i)].kind = s.streams(i).kind();
  }
  for (const std::unique_ptr<StreamRun> &run : streamRuns_) {
    const RunStats &r = run->stats;
    stats_.kernels += r.kernels;
    stats_.bytesHostToDevice += r.bytesHostToDevice;
    stats_.bytesDeviceToHost += r.bytesDeviceToHost;
    stats_.bytesWithinSpace += r.bytesWithinSpace;
    stats_.bytesCollective += r.bytesCollective;
    stats_.deviceArenaPeakBytes = std::max(stats_.deviceArenaPeakBytes, r.deviceArenaPeakBytes);
    stats_.hostPoolPeakBytes = std::max(stats_.hostPoolPeakBytes, r.hostPoolPeakBytes);
    for (const auto &[name, op] : r.perOp) {
      OpStats &total = stats_.perOp[name];
      total.count += op.count;
      total.seconds += op.seconds;
      total.flops += op.flops;
    }
    StreamStats &stream = stats_.perStream[run->stream];
    stream.kernels = r.kernels;
    stream.busySeconds = run->busySeconds;
    stream.waitSeconds = run->waitSeconds;
    for (const StreamRun::Timed &timed : run->timed) {
      double seconds = kernelTimes ? (*kernelTimes)[timed.mark].second : timed.hostSeconds;
      stats_.perOp[sl::schedule::OpKind_Name(s.kernels(timed.kernel).op())].seconds += seconds;
      stream.busySeconds += seconds;
      if (kernelTimes && timed.span != StreamRun::kNoSpan) {
        TraceSpan &span = run->spans[timed.span];
        span.startMicros = referenceMicros + (*kernelTimes)[timed.mark].first * 1e6;
        span.durationMicros = seconds * 1e6;
        span.deviceClock = true;
      }
    }
    if (tracing) {
      for (TraceSpan &span : run->spans) {
        span.run = runs_;
        span.program = program;
      }
      traceSpans_.insert(traceSpans_.end(), run->spans.begin(), run->spans.end());
    }
  }
}

void Executor::workerMain(size_t worker) {
  Threads &t = *threads_;
  StreamRun &run = *streamRuns_[worker];
  uint64_t seen = 0;
  for (;;) {
    bool tracing, timing;
    uint32_t program;
    {
      std::unique_lock<std::mutex> lock(t.mutex);
      t.wake.wait(lock, [&] { return t.shutdown || t.generation != seen; });
      if (t.shutdown)
        return;
      seen = t.generation;
      tracing = t.tracing;
      timing = t.timing;
      program = t.program;
    }
    try {
      runStream(run, tracing, timing, program);
    } catch (...) {
      fail(std::current_exception());
    }
    // Drained whether the stream finished, stopped for another's error or failed itself, so that
    // nothing is in flight when the run returns or reports its error; work that failed only
    // asynchronously reports here.
    try {
      backend_.synchronize();
    } catch (const Error &e) {
      fail(std::make_exception_ptr(makeError(
          "stream ", run.stream, ", finishing the work issued before its run ended: ", e.what())));
    } catch (...) {
      fail(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(t.mutex);
    --t.running;
    failIfStuck();
    t.progress.notify_all();
  }
}

void Executor::runStream(StreamRun &run, bool tracing, bool timing, uint32_t program) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  run.stats = RunStats();
  run.busySeconds = run.waitSeconds = 0;
  run.spans.clear();
  run.timed.clear();
  auto micros = [&](Clock::time_point at) {
    return std::chrono::duration<double, std::micro>(at - traceEpoch_).count();
  };
  auto [first, last] = run.programRanges[program];
  for (size_t position = first; position < last; ++position) {
    int index = run.kernels[position];
    const BoundKernel &bound = bound_[static_cast<size_t>(index)];
    const sl::schedule::Kernel &kernel = s.kernels(index);
    // First until another thread has issued the event's record (the executor's host-side flag),
    // then on the backend: this stream's next work waits for the event, or, for a kernel the host
    // runs, this thread blocks until it has completed.
    for (size_t i = 0; i < bound.waitSlots.size(); ++i) {
      auto waitStart = Clock::now();
      bool blocked = false;
      if (!waitForEvent(run.worker, bound.waitSlots[i], blocked))
        return;
      blocked |= backend_.waitEvent(bound.waitSlots[i], bound.onHost);
      if (blocked) {
        auto waitEnd = Clock::now();
        run.waitSeconds += std::chrono::duration<double>(waitEnd - waitStart).count();
        if (tracing)
          run.spans.push_back({TraceSpan::Kind::kWait, run.stream, index,
                               kernel.wait_events(static_cast<int>(i)), 0, micros(waitStart),
                               micros(waitEnd) - micros(waitStart)});
      }
    }
    if (threads_->failed)
      return;
    // What this stream issued before must be done before the host runs a kernel itself.
    if (bound.onHost)
      backend_.synchronize();
    // The backend times what it runs on this thread's stream; what the host runs, the host times.
    bool timed = timing && !bound.onHost;
    if (timed)
      backend_.markKernelStart(bound.mark);
    auto kernelStart = Clock::now();
    runKernel(index, run);
    auto kernelEnd = Clock::now();
    if (timed)
      backend_.markKernelEnd(bound.mark);
    double seconds = std::chrono::duration<double>(kernelEnd - kernelStart).count();
    OpStats &op = run.stats.perOp[sl::schedule::OpKind_Name(kernel.op())];
    ++op.count;
    op.flops += bound.flops;
    if (timed) {
      run.timed.push_back(
          {index, bound.mark, seconds, tracing ? run.spans.size() : StreamRun::kNoSpan});
    } else {
      run.busySeconds += seconds;
      op.seconds += seconds;
    }
    ++run.stats.kernels;
    run.stats.deviceArenaPeakBytes = std::max(run.stats.deviceArenaPeakBytes, bound.deviceEnd);
    run.stats.hostPoolPeakBytes = std::max(run.stats.hostPoolPeakBytes, bound.hostEnd);
    if (tracing)
      run.spans.push_back({TraceSpan::Kind::kKernel, run.stream, index, 0, 0, micros(kernelStart),
                           micros(kernelEnd) - micros(kernelStart)});
    // The backend's record is issued before the flag that lets other threads wait for it is set.
    for (uint32_t slot : bound.recordSlots) {
      backend_.recordEvent(slot);
      recordEvent(slot);
    }
  }
}

void Executor::runKernel(int index, StreamRun &run) {
  const sl::schedule::Kernel &kernel = schedule_.schedule.kernels(index);
  const BoundKernel &bound = bound_[static_cast<size_t>(index)];
  if (kernel.op() == sl::schedule::OPTIMIZER_STEP) {
    // The hook's own errors say what they mean; they are the caller's, not the kernel's.
    if (optimizerStepHook_)
      optimizerStepHook_(kernel);
    return;
  }
  if (kernel.op() == sl::schedule::ALL_GATHER || kernel.op() == sl::schedule::REDUCE_SCATTER)
    return runCollective(index, run);
  try {
    if (kernel.op() == sl::schedule::COPY) {
      const TensorRef &src = *bound.operands[0];
      const TensorRef &dst = *bound.results[0];
      backend_.copy(src, dst);
      uint64_t &counter = src.space == dst.space              ? run.stats.bytesWithinSpace
                          : dst.space == sl::schedule::DEVICE ? run.stats.bytesHostToDevice
                                                              : run.stats.bytesDeviceToHost;
      counter += src.bytes;
    } else {
      backend_.execute(kernel, bound.operands, bound.results);
    }
  } catch (const Error &e) {
    // Backends describe what went wrong with the data; which kernel it was is named here.
    throw makeError("kernel ", index, kernel.name().empty() ? "" : " '" + kernel.name() + "'", " (",
                    sl::schedule::OpKind_Name(kernel.op()), "): ", e.what());
  }
}

void Executor::runCollective(int index, StreamRun &run) {
  const sl::schedule::Kernel &kernel = schedule_.schedule.kernels(index);
  const BoundKernel &bound = bound_[static_cast<size_t>(index)];
  const TensorRef &in = *bound.operands[0];
  const TensorRef &out = *bound.results[0];
  // The communicator's errors name the rank and this kernel: they are not wrapped again.
  std::string what = kernelText(index, kernel);
  // Whatever computed the operand (another stream's kernel) has completed: a collective runs on
  // the host, which waited for its events there (BoundKernel::onHost).
  if (kernel.op() == sl::schedule::ALL_GATHER) {
    options_.comm->allGather(reinterpret_cast<const float *>(in.data),
                             reinterpret_cast<float *>(out.data), in.bytes / sizeof(float), what);
    run.stats.bytesCollective += out.bytes;
  } else {
    options_.comm->reduceScatter(reinterpret_cast<const float *>(in.data),
                                 reinterpret_cast<float *>(out.data), out.bytes / sizeof(float),
                                 what);
    run.stats.bytesCollective += in.bytes;
  }
}

bool Executor::waitForEvent(size_t worker, uint32_t slot, bool &blocked) {
  Threads &t = *threads_;
  std::unique_lock<std::mutex> lock(t.mutex);
  if (!t.recorded[slot] && !t.failed) {
    blocked = true;
    t.waitingOn[worker] = slot;
    failIfStuck();
    t.progress.wait(lock, [&] { return t.recorded[slot] || t.failed; });
    t.waitingOn[worker] = kNotWaiting;
  }
  return !t.failed;
}

void Executor::failIfStuck() {
  // Called with the mutex held. When every stream still running waits for an event not yet
  // recorded, nobody is left to record one. The verifier rules this out (every waited event is
  // recorded by an earlier kernel); the check keeps any other schedule from hanging.
  Threads &t = *threads_;
  if (t.running == 0 || t.failed)
    return;
  size_t stuck = 0;
  for (int64_t slot : t.waitingOn)
    if (slot != kNotWaiting && !t.recorded[static_cast<size_t>(slot)])
      ++stuck;
  if (stuck < t.running)
    return;
  t.error = std::make_exception_ptr(
      makeError("every running stream waits for an event that no kernel is left to record"));
  t.failed = true;
  t.progress.notify_all();
}

void Executor::recordEvent(uint32_t slot) {
  Threads &t = *threads_;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.recorded[slot] = 1;
  }
  t.progress.notify_all();
}

void Executor::fail(std::exception_ptr error) {
  Threads &t = *threads_;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    if (!t.error)
      t.error = error;
    t.failed = true;
  }
  t.progress.notify_all();
}

void Executor::writeTrace(const std::string &path) const {
  writeFileAtomically(
      path, chromeTraceJson(schedule_.schedule, schedule_.path, traceSpans_, traceSummary()));
}

} // namespace slrt
