// libslrt_nccl.so: the communicator of the CUDA backend. MPI starts the ranks and carries NCCL's
// unique id from rank 0 to the others; NCCL runs the kernel collectives on device memory, on a
// stream of its own, and each is waited for with a deadline (a stalled one aborts the NCCL
// communicator, so that no kernel is left spinning on the GPU); the trainer's small host
// collectives go through MPI.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/mpi_host.h"
#include "slrt/comm.h"
#include "slrt/device_rule.h"
#include "slrt/error.h"

namespace slrt {
namespace {

using Clock = std::chrono::steady_clock;

class NcclCommunicator : public Communicator {
public:
  explicit NcclCommunicator(const CommOptions &options) : mpi_(options.timeoutSeconds) {
    // One GPU per rank: the ranks of a node take its devices in turn.
    int devices = 0;
    checkCuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices == 0)
      throw makeError(mpi_.who(), "no CUDA device is visible");
    MPI_Comm node;
    mpi_.check(MPI_Comm_split_type(mpi_.comm(), MPI_COMM_TYPE_SHARED, mpi_.rank(), MPI_INFO_NULL,
                                   &node),
               "finding the ranks of this node");
    int localRank = 0;
    MPI_Comm_rank(node, &localRank);
    MPI_Comm_free(&node);
    // The CUDA backend chose its device from the launcher's local rank, before MPI started; the
    // collectives must run on that device too.
    std::optional<int> announced = launcherLocalRank();
    if (announced && *announced != localRank)
      throw makeError(mpi_.who(), "the launcher says this is local rank ", *announced,
                      " of its node but MPI counts it as ", localRank,
                      ", so its kernels and its collectives would run on different GPUs");
    device_ = deviceOfLocalRank(localRank, devices);
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");

    ncclUniqueId id;
    if (mpi_.rank() == 0)
      checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    mpi_.broadcast(&id, sizeof id, 0, "broadcasting the NCCL unique id");
    // Nonblocking, so that a rank that never joins makes this one time out rather than hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    checkNccl(ncclCommInitRankConfig(&comm_, mpi_.size(), id, mpi_.rank(), &config),
              "ncclCommInitRankConfig");
    waitForComm("creating the NCCL communicator");
  }

  ~NcclCommunicator() override {
    if (comm_)
      ncclCommDestroy(comm_);
    if (stream_)
      cudaStreamDestroy(stream_);
  }

  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  std::string name() const override { return "NCCL"; }

  void allGather(const float *shard, float *whole, size_t count,
                 const std::string &what) override {
    // The executor's collective thread calls this: the current device is per thread.
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    checkNccl(ncclAllGather(shard, whole, count, ncclFloat32, comm_, stream_), what);
    waitForStream(what);
  }

  void reduceScatter(const float *whole, float *shard, size_t count,
                     const std::string &what) override {
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    checkNccl(ncclReduceScatter(whole, shard, count, ncclFloat32, ncclSum, comm_, stream_), what);
    waitForStream(what);
  }

  void allReduceSum(double *values, size_t count, const std::string &what) override {
    mpi_.allReduceSum(values, count, what);
  }
  void allGatherBytes(const void *mine, void *all, size_t bytes, const std::string &what) override {
    mpi_.allGatherBytes(mine, all, bytes, what);
  }
  void barrier(const std::string &what) override { mpi_.barrier(what); }
  [[noreturn]] void abort(int code) override {
    if (comm_)
      ncclCommAbort(comm_);
    comm_ = nullptr;
    mpi_.abort(code);
  }

private:
  void checkCuda(cudaError_t rc, const std::string &what) const {
    if (rc != cudaSuccess)
      throw makeError(what, " failed: ", cudaGetErrorString(rc));
  }
  void checkNccl(ncclResult_t rc, const std::string &what) const {
    if (rc != ncclSuccess && rc != ncclInProgress)
      throw makeError(what, " failed: ", ncclGetErrorString(rc), " (",
                      ncclGetLastError(comm_), ")");
  }

  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(mpi_.timeoutSeconds()));
  }

  [[noreturn]] void timedOut(const std::string &what) {
    // The collective's kernel may spin on the GPU forever: abort the communicator first.
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw makeError(what, " did not complete within ", mpi_.timeoutSeconds(),
                    " s (--collective-timeout): another rank has died, stopped or fallen behind");
  }

  void waitForComm(const std::string &what) {
    auto end = deadline();
    for (;;) {
      ncclResult_t state;
      checkNccl(ncclCommGetAsyncError(comm_, &state), what);
      if (state == ncclSuccess)
        return;
      checkNccl(state, what);
      if (Clock::now() > end)
        timedOut(what);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void waitForStream(const std::string &what) {
    auto end = deadline();
    // On a nonblocking communicator the call may return before the collective is on the stream
    // (ncclInProgress): the stream is not worth asking until NCCL says it is.
    for (;;) {
      ncclResult_t state;
      checkNccl(ncclCommGetAsyncError(comm_, &state), what);
      if (state == ncclSuccess)
        break;
      checkNccl(state, what);
      if (Clock::now() > end)
        timedOut(what);
      std::this_thread::yield();
    }
    for (;;) {
      cudaError_t rc = cudaStreamQuery(stream_);
      if (rc == cudaSuccess)
        return;
      if (rc != cudaErrorNotReady)
        checkCuda(rc, what);
      ncclResult_t state;
      checkNccl(ncclCommGetAsyncError(comm_, &state), what);
      checkNccl(state, what);
      if (Clock::now() > end)
        timedOut(what);
      std::this_thread::yield();
    }
  }

  MpiHost mpi_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

} // namespace
} // namespace slrt

extern "C" __attribute__((visibility("default"))) slrt::Communicator *
slrt_create_communicator(const slrt::CommOptions *options, char *error, size_t errorSize) {
  try {
    return new slrt::NcclCommunicator(*options);
  } catch (const std::exception &e) {
    std::snprintf(error, errorSize, "%s", e.what());
    return nullptr;
  }
}
