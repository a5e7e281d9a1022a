// Running a verified schedule on a backend.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "slrt/backend.h"
#include "slrt/host_tensor.h"
#include "slrt/schedule_loader.h"

namespace slrt {

struct OpStats {
  uint64_t count = 0;
  double seconds = 0;
};

struct RunStats {
  uint64_t kernels = 0;
  // COPY traffic by direction; withinSpace counts host->host and device->device copies.
  uint64_t bytesHostToDevice = 0;
  uint64_t bytesDeviceToHost = 0;
  uint64_t bytesWithinSpace = 0;
  // Bytes read from parameter files when the executor was created.
  uint64_t parameterBytesRead = 0;
  // The arena and the pool are allocated once at their exact size, so they are the peak memory.
  uint64_t deviceArenaBytes = 0;
  uint64_t hostPoolBytes = 0;
  double loadSeconds = 0;
  // Time of the last run(): inputs in, every kernel, outputs out (execute(): without the last).
  double wallSeconds = 0;
  // Keyed by op name ("MATMUL", "COPY", ...); accumulated over the kernels of the last run().
  std::map<std::string, OpStats> perOp;
};

// Throws Error unless `name` is an input of `schedule` and `tensor` has exactly the dtype and shape
// of its buffer. Lets a tool check each input as it reads it, before any parameter is loaded.
void checkInput(const sl::schedule::Schedule &schedule, const std::string &name,
                const HostTensor &tensor);

// Throws Error unless `inputs` holds exactly the schedule's inputs, each passing checkInput.
void checkInputs(const sl::schedule::Schedule &schedule,
                 const std::map<std::string, HostTensor> &inputs);

class Executor {
public:
  // Allocates the backend's arena and pool, reads every parameter into its host buffer and writes
  // every constant into its own (a one-element constant is repeated over the whole buffer).
  // `schedule` and `backend` must outlive the executor.
  Executor(const LoadedSchedule &schedule, Backend &backend);

  // Checks the inputs (checkInputs), copies them into their host buffers, runs every kernel in list
  // order (each waited event is recorded by an earlier kernel, so list order honours every wait)
  // and returns the outputs in schedule order. An Error from a kernel (a GATHER index out of range,
  // an integer division by zero) starts with "kernel N 'name' (OP): ".
  std::vector<NamedTensor> run(const std::map<std::string, HostTensor> &inputs);

  // As run(), but leaves the outputs in their host buffers (outputBuffer) instead of copying them
  // out: a trainer reads every gradient where it lies.
  void execute(const std::map<std::string, HostTensor> &inputs);

  // The host buffer Schedule.parameters(index) was read into. The weights are read from it by the
  // schedule's own copies on every run, so writing it between runs (a trainer's update) changes
  // the weights the next run computes with. Error for an index out of range.
  const TensorRef &parameterBuffer(int index) const;

  // The host buffer output `name` is written to, valid until the next run overwrites it. Error
  // for a name that is not an output.
  const TensorRef &outputBuffer(const std::string &name) const;

  const RunStats &stats() const { return stats_; }

private:
  void loadParameters();
  void writeConstants();

  const LoadedSchedule &schedule_;
  Backend &backend_;
  // refs_[i] locates buffer i in its memory space.
  std::vector<TensorRef> refs_;
  RunStats stats_;
};

} // namespace slrt
