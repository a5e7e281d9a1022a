// libslrt_mpi.so: the communicator of the CPU backend. Its kernel collectives run on RAM (the CPU
// backend's device arena) through MPI's nonblocking collectives, waited for with a deadline.
#include <cstdio>
#include <exception>

#include "comm/mpi_host.h"
#include "slrt/comm.h"

namespace slrt {
namespace {

class MpiCommunicator : public Communicator {
public:
  explicit MpiCommunicator(const CommOptions &options) : mpi_(options.timeoutSeconds) {}

  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  std::string name() const override { return "MPI"; }

  void allGather(const float *shard, float *whole, size_t count,
                 const std::string &what) override {
    MPI_Request request;
    int n = mpi_.count(count, what);
    mpi_.check(MPI_Iallgather(shard, n, MPI_FLOAT, whole, n, MPI_FLOAT, mpi_.comm(), &request),
               what);
    mpi_.wait(request, what);
  }

  void reduceScatter(const float *whole, float *shard, size_t count,
                     const std::string &what) override {
    MPI_Request request;
    mpi_.check(MPI_Ireduce_scatter_block(whole, shard, mpi_.count(count, what), MPI_FLOAT, MPI_SUM,
                                         mpi_.comm(), &request),
               what);
    mpi_.wait(request, what);
  }

  void allReduceSum(double *values, size_t count, const std::string &what) override {
    mpi_.allReduceSum(values, count, what);
  }
  void allGatherBytes(const void *mine, void *all, size_t bytes, const std::string &what) override {
    mpi_.allGatherBytes(mine, all, bytes, what);
  }
  void barrier(const std::string &what) override { mpi_.barrier(what); }
  [[noreturn]] void abort(int code) override { mpi_.abort(code); }

private:
  MpiHost mpi_;
};

} // namespace
} // namespace slrt

extern "C" __attribute__((visibility("default"))) slrt::Communicator *
slrt_create_communicator(const slrt::CommOptions *options, char *error, size_t errorSize) {
  try {
    return new slrt::MpiCommunicator(*options);
  } catch (const std::exception &e) {
    std::snprintf(error, errorSize, "%s", e.what());
    return nullptr;
  }
}
