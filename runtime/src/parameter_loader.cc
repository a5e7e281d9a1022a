#include "slrt/parameter_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>

#include "slrt/bfloat16.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/random_weights.h"

namespace slrt {
namespace {

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

// Reads `count` f32 values at `offset` and rounds them into the bf16 elements at `to`, a chunk at
// a time, so that a large parameter never needs its whole f32 copy in memory.
void readF32AsBfloat16(int fd, uint16_t *to, uint64_t count, uint64_t offset,
                       const std::string &path) {
  constexpr uint64_t kChunk = uint64_t{1} << 20; // elements: 4 MiB of f32
  std::vector<float> chunk(static_cast<size_t>(std::min(count, kChunk)));
  for (uint64_t done = 0; done < count;) {
    uint64_t n = std::min(count - done, kChunk);
    preadAll(fd, reinterpret_cast<std::byte *>(chunk.data()), n * sizeof(float),
             offset + done * sizeof(float), path);
    roundToBfloat16(chunk.data(), to + done, n);
    done += n;
  }
}

} // namespace

uint64_t loadParameters(const LoadedSchedule &loaded, const std::vector<TensorRef> &buffers,
                        int rank, std::optional<uint64_t> randomWeightsSeed) {
  const sl::schedule::Schedule &s = loaded.schedule;
  uint32_t world = std::max<uint32_t>(1, s.world());
  uint64_t bytesRead = 0;
  if (randomWeightsSeed) {
    if (world > 1)
      throw makeError(loaded.path,
                      ": random weights are for schedules of one rank; this one "
                      "is for ",
                      world);
    std::vector<RandomFill> fills;
    for (const sl::schedule::Parameter &p : s.parameters()) {
      const TensorRef &ref = buffers[p.buffer()];
      fills.push_back(
          {p.name(), ref.data, ref.bytes / std::max<uint64_t>(1, dtypeSize(ref.dtype)), ref.dtype});
    }
    fillRandomWeights(fills, *randomWeightsSeed);
    return 0;
  }
  // Parameters usually share one file; open each file once.
  std::map<std::string, std::unique_ptr<File>> files;
  for (const sl::schedule::Shard &shard : s.shards()) {
    const TensorRef &ref = buffers[shard.buffer()];
    std::memset(ref.data, 0, ref.bytes); // the padding between and after the parameters
  }
  uint64_t rankIndex = static_cast<uint64_t>(rank);
  for (int i = 0; i < s.parameters_size(); ++i) {
    const sl::schedule::Parameter &p = s.parameters(i);
    const std::string &path = loaded.parameterFiles[static_cast<size_t>(i)];
    std::unique_ptr<File> &file = files[path];
    if (!file)
      file = std::make_unique<File>(path);
    if (world == 1) {
      const TensorRef &ref = buffers[p.buffer()];
      bool converted = p.file_dtype() != sl::schedule::DTYPE_UNSPECIFIED &&
                       p.file_dtype() != p.dtype(); // f32 in the file, bf16 here (verified)
      if (converted)
        readF32AsBfloat16(file->fd(), reinterpret_cast<uint16_t *>(ref.data),
                          ref.bytes / sizeof(uint16_t), p.file_offset(), path);
      else
        preadAll(file->fd(), ref.data, p.bytes(), p.file_offset(), path);
      bytesRead += p.bytes();
      // No model has a NaN weight on purpose, and one would only show up steps later as a NaN
      // loss or output; infinities may be meant (a mask), so the trainer alone refuses those.
      // Rounding to bf16 keeps a NaN a NaN, so the converted buffer tells as well as the file.
      if (std::optional<NonFinite> bad = findNonFinite(
              ref.data, ref.bytes / std::max<uint64_t>(1, dtypeSize(p.dtype())), p.dtype(), true))
        throw makeError(path, ": parameter '", p.name(), "' holds NaN at element ", bad->index,
                        " of its ", dtypeName(p.dtype()), " ", formatShape(ref.shape), " (read",
                        converted ? " as " + dtypeName(p.file_dtype()) : std::string(),
                        " from offset ", p.file_offset(), "): the model file is corrupt");
      continue;
    }
    // The elements of the parameter that fall into this rank's part of its shard.
    const sl::schedule::Shard &shard = s.shards(static_cast<int>(p.shard()));
    uint64_t elementSize = dtypeSize(p.dtype());
    uint64_t part = shard.elements() / world;
    uint64_t begin = std::max(rankIndex * part, p.shard_offset());
    uint64_t end = std::min((rankIndex + 1) * part, p.shard_offset() + p.bytes() / elementSize);
    if (begin >= end)
      continue;
    std::byte *into = buffers[shard.buffer()].data + (begin - rankIndex * part) * elementSize;
    preadAll(file->fd(), into, (end - begin) * elementSize,
             p.file_offset() + (begin - p.shard_offset()) * elementSize, path);
    bytesRead += (end - begin) * elementSize;
    if (std::optional<NonFinite> bad = findNonFinite(into, end - begin, p.dtype(), true))
      throw makeError(path, ": parameter '", p.name(), "' holds NaN at element ",
                      begin - p.shard_offset() + bad->index, " of its ", dtypeName(p.dtype()), " [",
                      p.bytes() / elementSize, " elements] (read from offset ", p.file_offset(),
                      "): the model file is corrupt");
  }
  return bytesRead;
}

void writeConstants(const sl::schedule::Schedule &schedule, const std::vector<TensorRef> &buffers) {
  for (const sl::schedule::Constant &c : schedule.constants()) {
    const TensorRef &ref = buffers[c.buffer()];
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

} // namespace slrt
