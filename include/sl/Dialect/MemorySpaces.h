//===- MemorySpaces.h - where a value of an explicit step lives ---------------------------------===//
//
// After sl-schedule-subbatches a training step says where each value is: the host pool (function
// arguments, parameters, constants, sub-batch views of host values, offloaded values, host
// accumulations, concatenations of host values) or the device arena (everything a kernel
// computes, and prefetched or fetched copies). sl-assign-streams, sl-allocate, sl-insert-events
// and the schedule emitter all read it from here, so they cannot disagree.
//
//===--------------------------------------------------------------------------------------------===//
#ifndef SL_DIALECT_MEMORYSPACES_H
#define SL_DIALECT_MEMORYSPACES_H

#include "sl/Dialect/StepAttributes.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace sl {

enum class MemorySpace { Host, Device };

MemorySpace memorySpaceOf(mlir::Value value);

/// A value that is another value's bytes from an offset on (a reshape, a sub-batch of a host
/// tensor, a KV cache that sl.kv_write wrote in place): it needs no buffer of its own.
struct View {
  mlir::Value source;
  uint64_t byteOffset = 0;
};
std::optional<View> viewOf(mlir::Value value);

/// Whether `value` needs a buffer of its own: false for a parameter read only through the shards
/// of its group (sl.param_shard), whose bytes live in the shards.
bool hasStorage(mlir::Value value);

/// Bytes of a static tensor as the runtime stores it (a bool takes one byte).
uint64_t storageBytes(mlir::Type type);

/// The byte offset sl-allocate gave `value` in its memory space, if it has one.
std::optional<uint64_t> allocatedOffset(mlir::Value value);

} // namespace sl

#endif // SL_DIALECT_MEMORYSPACES_H
