// A timeline of the executor's streams, written as a Chrome trace (sl-run --trace): open it in
// chrome://tracing or https://ui.perfetto.dev.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/schedule.pb.h"

namespace slrt {

// One interval on one stream's track, in microseconds from the start of the first traced run.
struct TraceSpan {
  enum class Kind {
    kKernel, // a kernel ran (a copy's span includes its --link-gbps pacing)
    kWait,   // the stream was blocked waiting for `event` before kernel `kernel`
    kRun,    // a whole run (a training step), on a track of its own; `kernel` is -1
  };
  Kind kind = Kind::kKernel;
  uint32_t stream = 0;
  int kernel = -1;
  uint32_t event = 0;
  // The run (0, 1, ...) among all runs of the executor, traced or not.
  uint64_t run = 0;
  double startMicros = 0;
  double durationMicros = 0;
  // The program the run ran (0 for a schedule without programs).
  uint32_t program = 0;
  // kKernel: timed by the backend on its stream (ExecutorOptions::timeKernels): when the stream
  // ran the kernel rather than when the host thread issued it. Every other span is the host's.
  bool deviceClock = false;
};

struct TraceSummary {
  // Runs whose spans the trace holds (the first ones), and all runs of the executor.
  uint64_t runsTraced = 0;
  uint64_t runs = 0;
};

// The Chrome trace JSON ({"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}):
// one track (tid) per stream, named by its kind ("compute", "h2d", "d2h", "collective", "host",
// with " (stream N)" added where two streams share a kind), an "X" event per kernel (name: the
// kernel's name, or "kernel N" when it has none; cat: its op; args: its index, and bytes for a
// copy), an "X" event "wait event N" per wait that blocked, and an "X" event "run N" per run on a
// track "runs" of its own ("run N prefill": the program's name, for a schedule with programs).
// A stream with kernel spans timed on the device (TraceSpan::deviceClock) has its waits, which
// are its host thread's, on a track of their own after the streams', named "<its track> host
// waits". otherData holds the schedule path, the TraceSummary ("runs_traced", "runs") and
// "kernel_clock": "device" when any kernel span was timed on the device, else "host".
std::string chromeTraceJson(const sl::schedule::Schedule &schedule, const std::string &schedulePath,
                            const std::vector<TraceSpan> &spans, const TraceSummary &summary);

// The track name of a stream kind ("compute", "h2d", ...).
std::string streamTrackName(sl::schedule::StreamKind kind);

} // namespace slrt
