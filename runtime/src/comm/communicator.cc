// Finding out how many ranks a run has, loading the communicator plugin when it has more than one,
// and saying which collective a rank was in when the job is torn down.
#include "slrt/comm.h"

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "slrt/checked.h"
#include "slrt/error.h"

namespace slrt {
namespace {

// The SIGTERM report. A collective's name is copied into one of two buffers before it starts and
// `current` then points at it, `inside` says whether it is still running; the handler only reads
// them and calls write(), which is async-signal-safe. Collectives never run concurrently (the
// executor's collective stream during a run, the trainer's host collectives between runs), so one
// writer alternates the buffers.
char prefix[96];
size_t prefixLength = 0;
char operations[2][320];
std::atomic<int> current{-1};
std::atomic<bool> inside{false};
int nextBuffer = 0;

void writeAll(const char *text, size_t length) {
  while (length > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, length);
    if (n <= 0)
      return;
    text += n;
    length -= static_cast<size_t>(n);
  }
}

void writeText(const char *text) { writeAll(text, std::strlen(text)); }

extern "C" void reportTermination(int signal) {
  writeAll(prefix, prefixLength);
  int op = current.load();
  if (op < 0) {
    writeText("terminated before its first collective");
  } else {
    // Outside a collective a rank computes or copies until its next one.
    writeText(inside.load() ? "terminated during " : "terminated while computing, after ");
    writeText(operations[op]);
  }
  writeText(signal == SIGTERM ? " (SIGTERM: mpirun is ending the job, most likely because another "
                                "rank failed or died; see its message)\n"
                              : " (signal)\n");
  ::_exit(128 + signal);
}

// Forwards to the plugin's communicator, noting each collective for the SIGTERM report.
class TrackedCommunicator : public Communicator {
public:
  explicit TrackedCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string name() const override { return inner_->name(); }

  void allGather(const float *shard, float *whole, size_t count,
                 const std::string &what) override {
    Scope scope(what);
    inner_->allGather(shard, whole, count, what);
  }
  void reduceScatter(const float *whole, float *shard, size_t count,
                     const std::string &what) override {
    Scope scope(what);
    inner_->reduceScatter(whole, shard, count, what);
  }
  void allReduceSum(double *values, size_t count, const std::string &what) override {
    Scope scope(what);
    inner_->allReduceSum(values, count, what);
  }
  void allGatherBytes(const void *mine, void *all, size_t bytes, const std::string &what) override {
    Scope scope(what);
    inner_->allGatherBytes(mine, all, bytes, what);
  }
  void barrier(const std::string &what) override {
    Scope scope(what);
    inner_->barrier(what);
  }
  [[noreturn]] void abort(int code) override {
    // This rank has said why it ends the job; the SIGTERM mpirun may send it meanwhile (when
    // another rank aborted at once, as ranks that disagree do) is no news worth a second line.
    ::signal(SIGTERM, SIG_DFL);
    inner_->abort(code);
    std::_Exit(code); // not reached: the plugin ends the job
  }

private:
  struct Scope {
    explicit Scope(const std::string &what) {
      char *buffer = operations[nextBuffer];
      size_t n = std::min(what.size(), sizeof operations[0] - 1);
      std::memcpy(buffer, what.data(), n);
      buffer[n] = '\0';
      current.store(nextBuffer);
      inside.store(true);
      nextBuffer ^= 1;
    }
    ~Scope() { inside.store(false); }
  };

  std::unique_ptr<Communicator> inner_;
};

std::string executableDirectory() {
  std::vector<char> path(PATH_MAX + 1);
  ssize_t n = ::readlink("/proc/self/exe", path.data(), PATH_MAX);
  if (n <= 0)
    return ".";
  std::string exe(path.data(), static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

} // namespace

int launchedWorldSize() {
  for (const char *variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}) {
    const char *value = std::getenv(variable);
    if (!value)
      continue;
    char *end = nullptr;
    errno = 0;
    long size = std::strtol(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || size < 1 || size > INT_MAX)
      throw makeError("the environment says the job has ", variable, "='", value,
                      "' ranks, which is not a positive integer");
    return static_cast<int>(size);
  }
  return 1;
}

std::unique_ptr<Communicator> openCommunicator(const CommOptions &options) {
  // Checked on one rank too, so that a command line is refused the same wherever it runs. The
  // plugins turn the timeout into a steady_clock deadline: int64 nanoseconds, which 1e10 s
  // would overflow into a deadline in the past (an immediate timeout).
  if (!(options.timeoutSeconds > 0) ||
      !checkedNanoseconds(options.timeoutSeconds, kMaxCollectiveTimeoutSeconds))
    throw makeError("the collective timeout must be positive and at most ",
                    kMaxCollectiveTimeoutSeconds, " s (about 31 years), got ",
                    options.timeoutSeconds, " s");
  int world = launchedWorldSize();
  if (world == 1)
    return nullptr;
  const char *plugin = options.backend == "cuda" ? kNcclPlugin : kMpiPlugin;
  std::vector<std::string> tried;
  if (const char *dir = std::getenv("SL_COMM_PLUGIN_DIR")) {
    tried.push_back(std::string(dir) + "/" + plugin);
  } else {
    std::string exeDir = executableDirectory();
    tried.push_back(exeDir + "/" SLRT_PLUGIN_RELATIVE_DIR "/" + plugin);
    tried.push_back(exeDir + "/../lib/" + plugin);
  }
  std::string path;
  for (const std::string &candidate : tried)
    if (::access(candidate.c_str(), F_OK) == 0) {
      path = candidate;
      break;
    }
  if (path.empty()) {
    std::string paths;
    for (const std::string &candidate : tried)
      paths += (paths.empty() ? "" : ", ") + candidate;
    throw makeError("launched as one of ", world, " ranks, but the ",
                    options.backend == "cuda" ? "NCCL" : "MPI", " plugin ", plugin,
                    " is not there (tried ", paths, "): this sl-run was built without ",
                    options.backend == "cuda" ? "SL_ENABLE_MPI and NCCL" : "SL_ENABLE_MPI");
  }
  std::unique_ptr<Communicator> communicator = loadCommunicatorPlugin(path, options);
  if (communicator->size() != world)
    throw makeError("the launcher's environment says ", world, " ranks, but ",
                    communicator->name(), " says ", communicator->size());
  int n = std::snprintf(prefix, sizeof prefix, "sl-run: error: rank %d of %d: ",
                        communicator->rank(), communicator->size());
  prefixLength = n > 0 ? std::min(static_cast<size_t>(n), sizeof prefix - 1) : 0;
  struct sigaction action = {};
  action.sa_handler = reportTermination;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  return communicator;
}

std::unique_ptr<Communicator> loadCommunicatorPlugin(const std::string &path,
                                                     const CommOptions &options) {
  // RTLD_GLOBAL: Open MPI loads components of its own that expect libmpi's symbols to be global.
  // The plugin stays loaded until the process exits (MPI must outlive every call into it).
  void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    throw makeError("cannot load the communicator plugin ", path, ": ", ::dlerror());
  auto entry = reinterpret_cast<CommPluginEntry>(::dlsym(handle, kCommPluginEntry));
  if (!entry)
    throw makeError(path, " has no entry point ", kCommPluginEntry);
  char error[1024] = {};
  Communicator *created = entry(&options, error, sizeof error);
  if (!created)
    throw makeError(error[0] ? error : "the communicator plugin failed without a message");
  return std::make_unique<TrackedCommunicator>(std::unique_ptr<Communicator>(created));
}

} // namespace slrt
