#include "slrt/executor.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <unistd.h>

#include "slrt/error.h"

namespace slrt {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// An open file descriptor, closed on scope exit.
class File {
public:
  explicit File(const std::string &path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0)
      throw makeError(path, ": cannot open (", std::strerror(errno), ")");
  }
  ~File() { ::close(fd_); }
  File(const File &) = delete;
  File &operator=(const File &) = delete;
  int fd() const { return fd_; }

private:
  int fd_;
};

// Reads exactly `bytes` bytes at `offset`, retrying short reads; the file may have changed since
// loadSchedule checked its size, so running out of bytes is an Error, not a silent zero fill.
void preadAll(int fd, std::byte *dst, uint64_t bytes, uint64_t offset, const std::string &path) {
  while (bytes > 0) {
    ssize_t n = ::pread(fd, dst, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw makeError(path, ": read failed (", std::strerror(errno), ")");
    if (n == 0)
      throw makeError(path, ": file ended early (it changed after the schedule was loaded)");
    dst += n;
    bytes -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

std::string inputList(const sl::schedule::Schedule &schedule) {
  std::string names;
  for (const sl::schedule::Binding &input : schedule.inputs())
    names += (names.empty() ? "" : ", ") + input.name();
  return names.empty() ? "none" : names;
}

} // namespace

void checkInput(const sl::schedule::Schedule &schedule, const std::string &name,
                const HostTensor &tensor) {
  auto binding = std::find_if(schedule.inputs().begin(), schedule.inputs().end(),
                              [&](const sl::schedule::Binding &b) { return b.name() == name; });
  if (binding == schedule.inputs().end())
    throw makeError("unknown input '", name, "' (the schedule's inputs: ", inputList(schedule),
                    ")");
  const sl::schedule::Buffer &buffer = schedule.buffers(static_cast<int>(binding->buffer()));
  Shape shape = toShape(buffer.shape());
  if (tensor.dtype != buffer.dtype() || tensor.shape != shape)
    throw makeError("input '", name, "' is ", dtypeName(tensor.dtype), " ",
                    formatShape(tensor.shape), ", but the schedule expects ",
                    dtypeName(buffer.dtype()), " ", formatShape(shape));
  if (tensor.data.size() != buffer.bytes())
    throw makeError("input '", name, "' holds ", tensor.data.size(), " bytes, but ",
                    dtypeName(buffer.dtype()), " ", formatShape(shape), " needs ", buffer.bytes());
}

void checkInputs(const sl::schedule::Schedule &schedule,
                 const std::map<std::string, HostTensor> &inputs) {
  for (const auto &[name, tensor] : inputs)
    checkInput(schedule, name, tensor);
  for (const sl::schedule::Binding &binding : schedule.inputs())
    if (!inputs.count(binding.name()))
      throw makeError("missing input '", binding.name(),
                      "' (the schedule's inputs: ", inputList(schedule), ")");
}

Executor::Executor(const LoadedSchedule &schedule, Backend &backend)
    : schedule_(schedule), backend_(backend) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  if (schedule_.parameterFiles.size() != static_cast<size_t>(s.parameters_size()))
    throw makeError(schedule_.path,
                    ": parameter files are not resolved (load it with loadSchedule)");
  auto start = Clock::now();
  backend_.allocate(s.device_arena_bytes(), s.host_pool_bytes());
  stats_.deviceArenaBytes = s.device_arena_bytes();
  stats_.hostPoolBytes = s.host_pool_bytes();
  for (const sl::schedule::Buffer &b : s.buffers()) {
    std::byte *base =
        b.space() == sl::schedule::DEVICE ? backend_.deviceArena() : backend_.hostPool();
    refs_.push_back(
        TensorRef{base + b.offset(), b.space(), b.dtype(), toShape(b.shape()), b.bytes()});
  }
  loadParameters();
  writeConstants();
  stats_.loadSeconds = secondsSince(start);
}

void Executor::loadParameters() {
  const sl::schedule::Schedule &s = schedule_.schedule;
  // Parameters usually share one file; open each file once.
  std::map<std::string, std::unique_ptr<File>> files;
  for (int i = 0; i < s.parameters_size(); ++i) {
    const sl::schedule::Parameter &p = s.parameters(i);
    const std::string &path = schedule_.parameterFiles[static_cast<size_t>(i)];
    std::unique_ptr<File> &file = files[path];
    if (!file)
      file = std::make_unique<File>(path);
    preadAll(file->fd(), refs_[p.buffer()].data, p.bytes(), p.file_offset(), path);
    stats_.parameterBytesRead += p.bytes();
  }
}

void Executor::writeConstants() {
  for (const sl::schedule::Constant &c : schedule_.schedule.constants()) {
    const TensorRef &ref = refs_[c.buffer()];
    // The verifier allows exactly two sizes: the whole buffer, or one element to repeat.
    if (c.data().size() == ref.bytes) {
      std::memcpy(ref.data, c.data().data(), ref.bytes);
      continue;
    }
    // A splat: one element, then the filled prefix doubled until the buffer is full.
    uint64_t filled = std::min<uint64_t>(c.data().size(), ref.bytes);
    std::memcpy(ref.data, c.data().data(), filled);
    for (; filled < ref.bytes; filled *= 2)
      std::memcpy(ref.data + filled, ref.data, std::min(filled, ref.bytes - filled));
  }
}

const TensorRef &Executor::parameterBuffer(int index) const {
  const sl::schedule::Schedule &s = schedule_.schedule;
  if (index < 0 || index >= s.parameters_size())
    throw makeError("parameter index ", index, " is out of range (the schedule has ",
                    s.parameters_size(), " parameters)");
  return refs_[s.parameters(index).buffer()];
}

const TensorRef &Executor::outputBuffer(const std::string &name) const {
  for (const sl::schedule::Binding &binding : schedule_.schedule.outputs())
    if (binding.name() == name)
      return refs_[binding.buffer()];
  throw makeError("the schedule has no output '", name, "'");
}

std::vector<NamedTensor> Executor::run(const std::map<std::string, HostTensor> &inputs) {
  execute(inputs);
  auto start = Clock::now();
  std::vector<NamedTensor> outputs;
  for (const sl::schedule::Binding &binding : schedule_.schedule.outputs()) {
    const TensorRef &ref = refs_[binding.buffer()];
    NamedTensor out{binding.name(), HostTensor::zeros(ref.dtype, ref.shape)};
    std::memcpy(out.tensor.data.data(), ref.data, ref.bytes);
    outputs.push_back(std::move(out));
  }
  stats_.wallSeconds += secondsSince(start);
  return outputs;
}

void Executor::execute(const std::map<std::string, HostTensor> &inputs) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  checkInputs(s, inputs);
  auto start = Clock::now();
  stats_.kernels = 0;
  stats_.bytesHostToDevice = stats_.bytesDeviceToHost = stats_.bytesWithinSpace = 0;
  stats_.perOp.clear();

  for (const sl::schedule::Binding &binding : s.inputs()) {
    const HostTensor &tensor = inputs.at(binding.name());
    std::memcpy(refs_[binding.buffer()].data, tensor.data.data(), tensor.data.size());
  }

  // List order is a valid issue order: every waited event was recorded by an earlier kernel, and
  // this executor completes each kernel before issuing the next.
  std::vector<const TensorRef *> operands, results;
  for (int index = 0; index < s.kernels_size(); ++index) {
    const sl::schedule::Kernel &kernel = s.kernels(index);
    auto kernelStart = Clock::now();
    if (kernel.op() == sl::schedule::COPY) {
      const TensorRef &src = refs_[kernel.operands(0)];
      const TensorRef &dst = refs_[kernel.results(0)];
      backend_.copy(src, dst);
      uint64_t &counter = src.space == dst.space              ? stats_.bytesWithinSpace
                          : dst.space == sl::schedule::DEVICE ? stats_.bytesHostToDevice
                                                              : stats_.bytesDeviceToHost;
      counter += src.bytes;
    } else {
      operands.clear();
      results.clear();
      for (uint32_t id : kernel.operands())
        operands.push_back(&refs_[id]);
      for (uint32_t id : kernel.results())
        results.push_back(&refs_[id]);
      try {
        backend_.execute(kernel, operands, results);
      } catch (const Error &e) {
        // Backends describe what went wrong with the data; which kernel it was is named here.
        throw makeError("kernel ", index, kernel.name().empty() ? "" : " '" + kernel.name() + "'",
                        " (", sl::schedule::OpKind_Name(kernel.op()), "): ", e.what());
      }
    }
    // Synchronous issue keeps per-op times honest; overlapping streams is a backend's job later.
    backend_.synchronize();
    OpStats &op = stats_.perOp[sl::schedule::OpKind_Name(kernel.op())];
    ++op.count;
    op.seconds += secondsSince(kernelStart);
    ++stats_.kernels;
  }

  stats_.wallSeconds = secondsSince(start);
}

} // namespace slrt
