// Which GPU a rank uses: the one rule that the CUDA backend and the NCCL communicator both follow,
// so that a rank's kernels and its collectives run on the same device. The ranks of a node take
// its devices in turn: local rank r uses device r mod (devices visible). A run of one rank (no
// launcher) uses device 0.
#pragma once

#include <cstdlib>
#include <optional>

namespace slrt {

// The rank within its node as the launcher announces it before MPI starts (Open MPI, MPICH,
// MVAPICH, Slurm), or nullopt when no launcher set one.
inline std::optional<int> launcherLocalRank() {
  for (const char *variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                               "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    if (const char *value = std::getenv(variable)) {
      char *end = nullptr;
      long rank = std::strtol(value, &end, 10);
      if (end != value && *end == '\0' && rank >= 0 && rank < (1 << 20))
        return static_cast<int>(rank);
    }
  return std::nullopt;
}

// The device of local rank `localRank` among `devices` visible ones (devices > 0).
inline int deviceOfLocalRank(int localRank, int devices) {
  return devices > 0 && localRank > 0 ? localRank % devices : 0;
}

} // namespace slrt
