// Running a verified schedule on a backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "slrt/backend.h"
#include "slrt/comm.h"
#include "slrt/host_tensor.h"
#include "slrt/schedule_loader.h"
#include "slrt/trace.h"

namespace slrt {

struct OpStats {
  uint64_t count = 0;
  // Summed over the kernels of the op, whichever stream (host thread) ran them: kernels of
  // different streams overlap, so the sum over ops can exceed the run's wall time. A kernel the
  // backend runs on its streams counts the time the backend measured it running there when the
  // run timed kernels (RunStats::kernelsTimedOnDevice), else the host's time from the call to the
  // backend to its return: the kernel's whole run on the CPU backend, only the time to issue it
  // on an asynchronous one (CUDA, unless SLRT_CUDA_SYNC=1 makes each call wait). A kernel the
  // host runs (an OPTIMIZER_STEP, a collective, a kernel writing the host pool) always counts
  // its host time.
  double seconds = 0;
  // The arithmetic of the op's kernels (kernelFlops: the matrix products of MATMUL, GEMM,
  // ATTENTION and ATTENTION_GRAD; 0 for the others), so that flops / seconds is the op's rate.
  double flops = 0;
};

struct StreamStats {
  uint32_t id = 0;
  sl::schedule::StreamKind kind = sl::schedule::STREAM_KIND_UNSPECIFIED;
  uint64_t kernels = 0;
  // Time its kernels ran, each counted as in OpStats (a copy's includes the wait of a
  // PacedBackend's link pacing), and time its host thread was blocked waiting for events.
  double busySeconds = 0;
  double waitSeconds = 0;
};

// Everything but loadSeconds and parameterBytesRead describes the last run() or execute(), which
// ran the kernels of one program.
struct RunStats {
  // The program the last run ran (0 for a schedule without programs).
  uint32_t program = 0;
  uint64_t kernels = 0;
  // COPY traffic by direction; withinSpace counts host->host and device->device copies.
  uint64_t bytesHostToDevice = 0;
  uint64_t bytesDeviceToHost = 0;
  uint64_t bytesWithinSpace = 0;
  // Bytes moved by collectives: per ALL_GATHER its result's bytes, per REDUCE_SCATTER its
  // operand's, i.e. the whole (unsharded) tensor each time, the P of the traffic formulas. A ring
  // sends and receives (world - 1) / world of that per rank.
  uint64_t bytesCollective = 0;
  // Bytes read from parameter files when the executor was created.
  uint64_t parameterBytesRead = 0;
  // The arena and the pool are allocated once at their exact size.
  uint64_t deviceArenaBytes = 0;
  uint64_t hostPoolBytes = 0;
  // High-water marks actually touched: the largest offset + bytes of any buffer of that space a
  // kernel of the run used (an OPTIMIZER_STEP uses the host buffers of its parameters too).
  uint64_t deviceArenaPeakBytes = 0;
  uint64_t hostPoolPeakBytes = 0;
  double loadSeconds = 0;
  // Time of the last run(): inputs in, every kernel, outputs out (execute(): without the last).
  double wallSeconds = 0;
  // Keyed by op name ("MATMUL", "COPY", ...).
  std::map<std::string, OpStats> perOp;
  // Whether the seconds of the kernels the backend ran on its streams (perOp, perStream's
  // busySeconds, their trace spans) are the backend's own measurement of them
  // (ExecutorOptions::timeKernels on a backend that times kernels, and the run succeeded), or
  // host times around the calls.
  bool kernelsTimedOnDevice = false;
  // One per stream of the schedule, in stream order (streams without kernels stay at zero).
  std::vector<StreamStats> perStream;
};

struct ExecutorOptions {
  // Record a TraceSpan per kernel, per wait that blocked and per run. Runs are traced whole, from
  // the first, as long as fewer than traceSpanLimit spans are held when one starts.
  bool trace = false;
  size_t traceSpanLimit = 1000000;
  // On a backend that times kernels (Backend::timesKernels: CUDA), have it time every kernel it
  // runs on its streams, and count those times instead of the host's (OpStats, the trace's
  // kernel spans): on an asynchronous backend the host only sees the issuing. Costs two timing
  // records per kernel on the device streams and adds no synchronisation; a backend that does not
  // time kernels is asked nothing.
  bool timeKernels = false;
  // The ranks of the job: required for a schedule of world > 1 (with exactly that many ranks),
  // refused for a schedule of one rank when the job has more. Must outlive the executor.
  Communicator *comm = nullptr;
  // Instead of reading the parameters' files (which are then never opened), fill every parameter
  // with seeded random values (fillRandomWeights: normal, std 0.02, in its buffer's dtype, the
  // same for a seed whatever the thread count). Schedules of one rank only.
  std::optional<uint64_t> randomWeightsSeed;
};

// Runs on the HOST_COMPUTE stream's thread when an OPTIMIZER_STEP kernel's turn comes.
using OptimizerStepHook = std::function<void(const sl::schedule::Kernel &)>;

// Throws Error unless `name` is an input of program `program` of `schedule` (a schedule without
// programs has one, 0) and `tensor` has exactly the dtype and shape of its buffer, and, when a
// GATHER reads it as indices (token ids into an embedding), unless every index is within that
// GATHER's axis. Lets a tool check each input as it reads it, before any parameter is loaded.
void checkInput(const sl::schedule::Schedule &schedule, const std::string &name,
                const HostTensor &tensor, uint32_t program = 0);

// Throws Error unless `inputs` holds exactly the inputs of program `program`, each passing
// checkInput.
void checkInputs(const sl::schedule::Schedule &schedule,
                 const std::map<std::string, HostTensor> &inputs, uint32_t program = 0);

// Runs a verified schedule, one program at a time: every stream on a host thread of its own
// (started with the executor, kept for its lifetime), which walks its stream's kernels of the
// program in list order. A schedule without programs is one program (index 0) of every kernel;
// a schedule with programs (Schedule.programs, version 4: generation's "prefill" and "decode")
// runs one of them per run(), in any order and as often as the caller likes. Buffers persist
// between runs: what one program leaves in the host pool (a KV cache) the next one reads. Each
// thread issues its kernels to the backend (slrt/backend.h's device model), which may run them
// asynchronously on a stream of its own. Before a kernel the thread blocks until every event in
// its wait_events has had its record issued in this run (by another thread), then waits for the
// event on the backend: on its stream for a kernel the backend runs, on the host for one the host
// runs (OPTIMIZER_STEP, collectives, kernels writing the host pool), which also waits for the
// thread's own earlier work first. After the kernel it issues the record of each of its
// record_events, then flags it for the other threads. Every stream is drained before a run
// returns or reports an error, so outputs and gradients are read only once written. COPY kernels
// go to Backend::copy, OPTIMIZER_STEP to the hook (or nothing), ALL_GATHER and REDUCE_SCATTER to
// the communicator, the others to Backend::execute. The verifier has checked that this order cannot
// deadlock (every waited event is recorded by an earlier kernel) and that kernels of different
// streams that touch the same bytes are ordered by events, so the outputs are those of running the
// kernels one by one in list order.
class Executor {
public:
  // Allocates the backend's arena and pool, reads every parameter into its host buffer (with
  // world > 1: the part of it in this rank's part of its shard, into the shard's buffer, zeros
  // elsewhere) and writes every constant into its own (a one-element constant is repeated over
  // the whole buffer). Error when the job's ranks do not match the schedule's world.
  // `schedule` and `backend` must outlive the executor. Throws Error for a float parameter
  // holding a NaN (naming the parameter, the element and the file).
  Executor(const LoadedSchedule &schedule, Backend &backend, const ExecutorOptions &options = {});
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  // Checks the inputs of program `program` (checkInputs), copies them into their host buffers,
  // runs the program's kernels on every stream and returns the program's outputs in schedule
  // order once every stream has finished. Error for a program index out of range. The first error
  // on any stream stops the others (a stream finishes the kernel it is in and the work it has
  // issued, and a waiting one wakes) and is rethrown here: an Error from a kernel (a GATHER index
  // out of range, an integer division by zero) starts with "kernel N 'name' (OP): "; one that an
  // asynchronous backend reports only when the stream is drained starts with "stream N, finishing
  // the work issued before its run ended: "; an exception from the OPTIMIZER_STEP hook comes
  // through unchanged. The executor can run again after an error.
  std::vector<NamedTensor> run(const std::map<std::string, HostTensor> &inputs, uint32_t program);
  // The only program: Error for a schedule with more than one.
  std::vector<NamedTensor> run(const std::map<std::string, HostTensor> &inputs);

  // As run(), but leaves the outputs in their host buffers (outputBuffer) instead of copying them
  // out: a trainer reads every gradient where it lies.
  void execute(const std::map<std::string, HostTensor> &inputs, uint32_t program);
  void execute(const std::map<std::string, HostTensor> &inputs);

  // The number of programs (1 for a schedule without programs), and the index of the program
  // named `name` (Error, naming the programs there are, when there is none).
  uint32_t programCount() const;
  uint32_t programIndex(const std::string &name) const;

  // The host buffer Schedule.parameters(index) was read into. The weights are read from it by the
  // schedule's own copies on every run, so writing it between runs (a trainer's update) changes
  // the weights the next run computes with. Error for an index out of range.
  const TensorRef &parameterBuffer(int index) const;

  // World > 1: the host buffer of this rank's part of Schedule.shards(index), which the
  // schedule's copies read on every run (so writing it between runs updates the weights). A
  // sharded parameter has no parameterBuffer. Error for an index out of range.
  const TensorRef &shardBuffer(int index) const;

  // The schedule's world (1 for a schedule of one rank) and this process's rank in it.
  uint32_t world() const { return world_; }
  int rank() const { return options_.comm ? options_.comm->rank() : 0; }

  // The host buffer output `name` of program `program` is written to, valid until a run
  // overwrites it. Error for a name that is not an output of the program.
  const TensorRef &outputBuffer(const std::string &name, uint32_t program = 0) const;

  // Called with each OPTIMIZER_STEP kernel, on the HOST_COMPUTE stream's thread, while the other
  // streams go on: the kernel's operands (loss and gradients) are final, and the host buffers of
  // its parameters may be written (the verifier ordered every kernel that reads them before it).
  // Without a hook OPTIMIZER_STEP does nothing. Set it between runs only.
  void setOptimizerStepHook(OptimizerStepHook hook);

  const RunStats &stats() const { return stats_; }

  // The spans of the traced runs (ExecutorOptions::trace), and how many runs they cover.
  const std::vector<TraceSpan> &traceSpans() const { return traceSpans_; }
  TraceSummary traceSummary() const { return {runsTraced_, runs_}; }
  // Writes chromeTraceJson of the spans so far to `path`, atomically.
  void writeTrace(const std::string &path) const;

private:
  struct StreamRun;
  struct Threads;

  void prepareKernels();
  void startThreads();
  void workerMain(size_t worker);
  uint32_t onlyProgram() const;
  void runStream(StreamRun &run, bool tracing, bool timing, uint32_t program);
  void runKernel(int index, StreamRun &run);
  void runCollective(int index, StreamRun &run);
  bool waitForEvent(size_t worker, uint32_t slot, bool &blocked);
  void failIfStuck();
  void recordEvent(uint32_t slot);
  void fail(std::exception_ptr error);
  void mergeStats(bool tracing, uint32_t program,
                  const std::vector<std::pair<double, double>> *kernelTimes,
                  std::chrono::steady_clock::time_point timingReference);

  const LoadedSchedule &schedule_;
  Backend &backend_;
  ExecutorOptions options_;
  OptimizerStepHook optimizerStepHook_;
  uint32_t world_ = 1;
  // refs_[i] locates buffer i in its memory space.
  std::vector<TensorRef> refs_;
  // Per kernel, bound to this schedule's buffers and events: operand and result refs, the dense
  // slots (below) of its waited and recorded events, and the end of the furthest buffer it touches
  // in each space.
  struct BoundKernel {
    std::vector<const TensorRef *> operands, results;
    std::vector<uint32_t> waitSlots, recordSlots;
    uint64_t deviceEnd = 0, hostEnd = 0;
    // Its kernelFlops, counted into OpStats::flops each time it runs.
    double flops = 0;
    // Run on the host (an OPTIMIZER_STEP, a collective, a kernel writing the host pool): its
    // events are waited for on the host, after the stream's own earlier work.
    bool onHost = false;
    // Not onHost: its timing mark (Backend::markKernelStart), numbered densely in its program.
    uint32_t mark = 0;
  };
  std::vector<BoundKernel> bound_;
  // Events that some kernel records or waits for, numbered densely (a schedule's event ids may
  // be sparse).
  size_t eventSlots_ = 0;
  // One per stream that has kernels.
  std::vector<std::unique_ptr<StreamRun>> streamRuns_;
  // By kernel index: its program.
  std::vector<uint32_t> programOf_;
  // Whether runs time kernels on the backend, and by program the number of timing marks.
  bool timeKernels_ = false;
  std::vector<size_t> marksOf_;
  std::unique_ptr<Threads> threads_;
  RunStats stats_;
  std::vector<TraceSpan> traceSpans_;
  uint64_t runs_ = 0, runsTraced_ = 0;
  // Trace timestamps count from the start of the first traced run.
  std::chrono::steady_clock::time_point traceEpoch_;
};

} // namespace slrt
