// The MPI half of both communicator plugins: start-up, rank and size, host-memory collectives and
// waiting for a request with a deadline. Built into libslrt_mpi.so and libslrt_nccl.so only; slrt
// itself never includes mpi.h.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace slrt {

class MpiHost {
public:
  // Initialises MPI (threads: serialized, as the executor's collective thread and the trainer's
  // thread take turns) unless something already did, on a duplicate of MPI_COMM_WORLD whose
  // errors are returned, not fatal. Error when MPI cannot start.
  explicit MpiHost(double timeoutSeconds);
  // Frees the communicator and finalises MPI if this started it.
  ~MpiHost();
  MpiHost(const MpiHost &) = delete;
  MpiHost &operator=(const MpiHost &) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }
  double timeoutSeconds() const { return timeoutSeconds_; }

  // "rank R of W: ", for messages of the start-up, before sl-run knows its rank.
  std::string who() const;
  // Throws an Error naming `what` unless `rc` is MPI_SUCCESS. (sl-run names the rank when it
  // prints an error.)
  void check(int rc, const std::string &what) const;
  // Drives `request` to completion; throws an Error naming `what` when it has not completed
  // within the timeout (another rank died, stopped or fell behind) or fails.
  void wait(MPI_Request &request, const std::string &what) const;
  // An int count for MPI, or an Error for one past INT_MAX.
  int count(size_t n, const std::string &what) const;

  void allReduceSum(double *values, size_t count, const std::string &what) const;
  void allGatherBytes(const void *mine, void *all, size_t bytes, const std::string &what) const;
  void barrier(const std::string &what) const;
  void broadcast(void *data, size_t bytes, int root, const std::string &what) const;
  [[noreturn]] void abort(int code) const;

private:
  double timeoutSeconds_;
  int rank_ = 0, size_ = 1;
  bool finalize_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

} // namespace slrt
