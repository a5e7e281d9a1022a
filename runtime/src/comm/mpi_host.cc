#include "comm/mpi_host.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>
#include <vector>

#include "slrt/error.h"

namespace slrt {

MpiHost::MpiHost(double timeoutSeconds) : timeoutSeconds_(timeoutSeconds) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      throw makeError("MPI_Init_thread failed");
    finalize_ = true;
    if (provided < MPI_THREAD_SERIALIZED)
      throw makeError("this MPI library does not allow calls from more than one thread "
                      "(MPI_THREAD_SERIALIZED), which sl-run needs");
  }
  // Errors on our own communicator come back as return codes, so that a message can say which
  // rank and which operation failed before the job is ended.
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm_) != MPI_SUCCESS)
    throw makeError("MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiHost::~MpiHost() {
  if (comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalize_ && !finalized)
    MPI_Finalize();
}

std::string MpiHost::who() const {
  return "rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": ";
}

void MpiHost::check(int rc, const std::string &what) const {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw makeError(what, " failed: ", std::string(text, static_cast<size_t>(length)));
}

void MpiHost::wait(MPI_Request &request, const std::string &what) const {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeoutSeconds_));
  // MPI progresses a nonblocking collective only inside MPI calls: test often at first, then
  // back off to at most 200 us between tests, so that ranks sharing cores (oversubscribed) leave
  // them to the ranks that compute.
  auto pause = std::chrono::microseconds(1);
  for (int polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done)
      return;
    if (Clock::now() > deadline)
      throw makeError(what, " did not complete within ", timeoutSeconds_,
                      " s (--collective-timeout): another rank has died, stopped or fallen "
                      "behind");
    if (polls > 64) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }
}

int MpiHost::count(size_t n, const std::string &what) const {
  if (n > static_cast<size_t>(INT_MAX))
    throw makeError(what, ": ", n, " elements is more than one MPI call moves (", INT_MAX,
                    ")");
  return static_cast<int>(n);
}

void MpiHost::allReduceSum(double *values, size_t n, const std::string &what) const {
  // Gathered and summed in rank order, so that every rank gets the very same bits (MPI's own
  // reductions need not give every rank the same rounding).
  std::vector<double> all(n * static_cast<size_t>(size_));
  allGatherBytes(values, all.data(), n * sizeof(double), what);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0;
    for (int r = 0; r < size_; ++r)
      sum += all[static_cast<size_t>(r) * n + i];
    values[i] = sum;
  }
}

void MpiHost::allGatherBytes(const void *mine, void *all, size_t bytes,
                             const std::string &what) const {
  MPI_Request request;
  int n = count(bytes, what);
  check(MPI_Iallgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_, &request), what);
  wait(request, what);
}

void MpiHost::barrier(const std::string &what) const {
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), what);
  wait(request, what);
}

void MpiHost::broadcast(void *data, size_t bytes, int root, const std::string &what) const {
  MPI_Request request;
  check(MPI_Ibcast(data, count(bytes, what), MPI_BYTE, root, comm_, &request), what);
  wait(request, what);
}

void MpiHost::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code); // MPI_Abort does not return; if it did, end this rank at least
}

} // namespace slrt
