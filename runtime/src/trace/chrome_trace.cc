#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "slrt/trace.h"

namespace slrt {
namespace {

using sl::schedule::StreamKind;

// Chrome traces need a pid; every track of a run is a thread of this one process.
constexpr int kPid = 1;

} // namespace

std::string streamTrackName(StreamKind kind) {
  switch (kind) {
  case sl::schedule::COMPUTE:
    return "compute";
  case sl::schedule::HOST_TO_DEVICE:
    return "h2d";
  case sl::schedule::DEVICE_TO_HOST:
    return "d2h";
  case sl::schedule::COLLECTIVE:
    return "collective";
  case sl::schedule::HOST_COMPUTE:
    return "host";
  default:
    return "stream";
  }
}

std::string chromeTraceJson(const sl::schedule::Schedule &schedule, const std::string &schedulePath,
                            const std::vector<TraceSpan> &spans, const TraceSummary &summary) {
  nlohmann::json events = nlohmann::json::array();
  // Stream i is track i + 1; track 0 holds the runs, above the streams.
  const int runTrack = 0;
  auto metadata = [&](int tid, const std::string &name) {
    events.push_back({{"ph", "M"},
                      {"pid", kPid},
                      {"tid", tid},
                      {"name", "thread_name"},
                      {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"},
                      {"pid", kPid},
                      {"tid", tid},
                      {"name", "thread_sort_index"},
                      {"args", {{"sort_index", tid}}}});
  };
  events.push_back(
      {{"ph", "M"}, {"pid", kPid}, {"name", "process_name"}, {"args", {{"name", "sl-run"}}}});
  metadata(runTrack, "runs");
  std::map<StreamKind, int> kindCount;
  for (const sl::schedule::Stream &stream : schedule.streams())
    ++kindCount[stream.kind()];
  // A stream whose kernels the device timed runs them later than its host thread issues them, so
  // the host thread's waits would overlap its kernels on one track: they get a track of their own,
  // after every stream's.
  std::set<uint32_t> deviceTimed;
  for (const TraceSpan &span : spans)
    if (span.kind == TraceSpan::Kind::kKernel && span.deviceClock)
      deviceTimed.insert(span.stream);
  const int waitTrackBase = schedule.streams_size() + 1;
  auto waitTrack = [&](uint32_t stream) {
    return static_cast<int>(stream) + (deviceTimed.count(stream) ? waitTrackBase : 1);
  };
  for (const sl::schedule::Stream &stream : schedule.streams()) {
    std::string name = streamTrackName(stream.kind());
    if (kindCount[stream.kind()] > 1)
      name += " (stream " + std::to_string(stream.id()) + ")";
    metadata(static_cast<int>(stream.id()) + 1, name);
    if (deviceTimed.count(stream.id()))
      metadata(waitTrack(stream.id()), name + " host waits");
  }

  for (const TraceSpan &span : spans) {
    nlohmann::json event = {
        {"ph", "X"}, {"pid", kPid}, {"ts", span.startMicros}, {"dur", span.durationMicros}};
    switch (span.kind) {
    case TraceSpan::Kind::kRun:
      event["tid"] = runTrack;
      event["name"] = "run " + std::to_string(span.run);
      if (span.program < static_cast<uint32_t>(schedule.programs_size()))
        event["name"] = event["name"].get<std::string>() + " " +
                        schedule.programs(static_cast<int>(span.program)).name();
      event["cat"] = "run";
      break;
    case TraceSpan::Kind::kWait:
      event["tid"] = waitTrack(span.stream);
      event["name"] = "wait event " + std::to_string(span.event);
      event["cat"] = "wait";
      event["args"] = {{"kernel", span.kernel}, {"run", span.run}};
      break;
    case TraceSpan::Kind::kKernel: {
      const sl::schedule::Kernel &kernel = schedule.kernels(span.kernel);
      event["tid"] = static_cast<int>(span.stream) + 1;
      event["name"] =
          kernel.name().empty() ? "kernel " + std::to_string(span.kernel) : kernel.name();
      event["cat"] = sl::schedule::OpKind_Name(kernel.op());
      nlohmann::json args = {{"kernel", span.kernel}, {"run", span.run}};
      if (kernel.op() == sl::schedule::COPY)
        args["bytes"] = schedule.buffers(static_cast<int>(kernel.operands(0))).bytes();
      event["args"] = std::move(args);
      break;
    }
    }
    events.push_back(std::move(event));
  }
  nlohmann::json trace = {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"schedule", schedulePath},
        {"runs_traced", summary.runsTraced},
        {"runs", summary.runs},
        {"kernel_clock", deviceTimed.empty() ? "host" : "device"}}},
  };
  return trace.dump() + "\n";
}

} // namespace slrt
