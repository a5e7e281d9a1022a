// Collectives across the ranks of a job (sl-run launched by `mpirun -np W`).
//
// A run of one rank needs no communicator and loads no MPI or NCCL library: openCommunicator
// returns null. A run launched with W > 1 ranks loads a plugin that sl-run's build put next to it
// (lib/libslrt_mpi.so for the CPU backend, lib/libslrt_nccl.so for CUDA), so that the sl-run
// binary itself links neither library:
//   - MPI starts the ranks, tells each its rank and the world size, and runs the collectives of the
//     CPU backend (whose device arena is RAM) and the trainer's small host collectives;
//   - NCCL runs the collectives of the CUDA backend on device memory, its unique id exchanged
//     over MPI.
//
// Every collective has a deadline (CommOptions::timeoutSeconds). One that has not completed by then
// throws an Error naming this rank and the operation; the caller prints it and calls abort(),
// which ends every rank of the job. A rank that dies makes mpirun end the others; each of them
// prints, as it is terminated, the collective it was waiting in (see openCommunicator).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace slrt {

// The longest collective timeout taken: longer ones are refused rather than wrapped.
constexpr double kMaxCollectiveTimeoutSeconds = 1e9;

struct CommOptions {
  // "cpu" or "cuda": which memory the kernel collectives (allGather, reduceScatter) work on.
  std::string backend = "cpu";
  // How long a collective may take before it is declared stalled: (0, kMaxCollectiveTimeoutSeconds].
  double timeoutSeconds = 300;
};

class Communicator {
public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "mpi" or "nccl".
  virtual std::string name() const = 0;

  // Kernel collectives on the backend's memory (the device arena), f32. `what` names the operation
  // for messages ("ALL_GATHER kernel 12 'all-gather layers 0'").
  //   allGather: `shard` holds `count` floats; `whole` receives every rank's, in rank order
  //              (size() * count floats).
  //   reduceScatter: `whole` holds size() * count floats; `shard` receives elements
  //              [rank() * count, (rank() + 1) * count) of their elementwise sum over the ranks.
  virtual void allGather(const float *shard, float *whole, size_t count,
                         const std::string &what) = 0;
  virtual void reduceScatter(const float *whole, float *shard, size_t count,
                             const std::string &what) = 0;

  // Host-memory collectives for the trainer: sums `count` doubles over the ranks, in place, the
  // same on every rank; gathers `bytes` bytes of every rank into `all` (size() * bytes, rank
  // order); waits for every rank.
  virtual void allReduceSum(double *values, size_t count, const std::string &what) = 0;
  virtual void allGatherBytes(const void *mine, void *all, size_t bytes,
                              const std::string &what) = 0;
  virtual void barrier(const std::string &what) = 0;

  // Ends every rank of the job with exit code `code` (MPI_Abort). Call it after printing why;
  // from then on a SIGTERM ends this rank without openCommunicator's report (it said why).
  [[noreturn]] virtual void abort(int code) = 0;
};

// How many ranks the process was launched as, from the environment the launcher sets
// (OMPI_COMM_WORLD_SIZE for Open MPI, PMI_SIZE for MPICH and Slurm, MV2_COMM_WORLD_SIZE for
// MVAPICH): 1 when none is set. Error when one is set but is not a positive integer.
int launchedWorldSize();

// The communicator of a job of launchedWorldSize() > 1 ranks, or null for a run of one rank.
// Loads the backend's plugin from the directory $SL_COMM_PLUGIN_DIR when it is set, else from the
// library directory beside the executable's (Error naming the paths tried when it is missing:
// sl-run was built without SL_ENABLE_MPI, or the CUDA build without NCCL); the plugin initialises
// MPI. From then on
// SIGTERM (what mpirun sends the other ranks when one dies) prints "rank R of W: terminated
// during <the collective in progress>" (or "while computing, after <the last one>") before the
// process exits.
std::unique_ptr<Communicator> openCommunicator(const CommOptions &options);

// Loads the communicator plugin at `path` and creates its communicator (openCommunicator does this
// with the plugin beside sl-run; tests load one by path). Error when it cannot be loaded or fails.
std::unique_ptr<Communicator> loadCommunicatorPlugin(const std::string &path,
                                                     const CommOptions &options);

// The names of the plugins, and the C entry point each exports:
//   extern "C" slrt::Communicator *slrt_create_communicator(const slrt::CommOptions *options,
//                                                           char *error, size_t errorSize);
// It returns null and writes a message into `error` when it fails.
inline constexpr const char *kMpiPlugin = "libslrt_mpi.so";
inline constexpr const char *kNcclPlugin = "libslrt_nccl.so";
inline constexpr const char *kCommPluginEntry = "slrt_create_communicator";
using CommPluginEntry = Communicator *(*)(const CommOptions *options, char *error,
                                          size_t errorSize);

} // namespace slrt
