"""plot_trace renders sl-run's Chrome trace as a PNG, and says clearly when a file is not one."""

import json

import pytest

from speedloader.plot_trace import Span, TraceError, classify, load_trace, main, plot_trace


def synthetic_trace():
    """Two runs over four streams, in the shape chrome_trace.cc writes."""
    events = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "sl-run"}}]
    for tid, name in enumerate(["runs", "compute", "h2d", "d2h", "host"]):
        events.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name",
                       "args": {"name": name}})
        events.append({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index",
                       "args": {"sort_index": tid}})

    def x(tid, name, cat, ts, dur, run, **args):
        events.append({"ph": "X", "pid": 1, "tid": tid, "name": name, "cat": cat, "ts": ts,
                       "dur": dur, "args": dict(args, run=run)})

    for run in range(2):
        base = run * 1000.0
        events.append({"ph": "X", "pid": 1, "tid": 0, "name": f"run {run}", "cat": "run",
                       "ts": base, "dur": 900.0})
        x(2, "model.layers.0.mlp.weight", "COPY", base, 200, run, kernel=0, bytes=4096)
        x(2, "act 0", "COPY", base + 200, 50, run, kernel=1, bytes=512)
        x(1, "wait event 0", "wait", base, 250, run, kernel=2)
        x(1, "matmul", "MATMUL", base + 250, 300, run, kernel=2)
        x(3, "out 0", "COPY", base + 550, 100, run, kernel=3, bytes=512)
        x(4, "grad acc", "ACCUMULATE", base + 650, 50, run, kernel=4)
        x(4, "adamw", "OPTIMIZER_STEP", base + 700, 150, run, kernel=5)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"schedule": "x.slsched", "runs_traced": 2, "runs": 2}}


def test_renders_whole_trace_and_one_run(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(synthetic_trace()))
    trace = load_trace(path)
    assert trace.tracks == ["compute", "h2d", "d2h", "host"]
    assert [r[0] for r in trace.runs] == [0, 1]
    for out, kwargs in [(tmp_path / "all.png", {}), (tmp_path / "run1.png", {"run": 1}),
                        (tmp_path / "win.png", {"window": (0.1, 0.6)})]:
        plot_trace(path, out, title="synthetic", **kwargs)
        data = out.read_bytes()
        assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"


def test_command_line(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(synthetic_trace()))
    assert main([str(path), str(tmp_path / "cli.png"), "--run", "0", "--xmax", "2"]) == 0
    assert (tmp_path / "cli.png").stat().st_size > 0


def test_classifies_spans():
    def span(track, name, cat):
        return Span(track, name, cat, 0.0, 1.0)

    assert classify(span("compute", "m", "MATMUL")) == "compute"
    assert classify(span("h2d", "model.layers.0.mlp.weight", "COPY")) == "fetch"
    assert classify(span("h2d", "stage 1 out", "COPY")) == "prefetch"
    assert classify(span("h2d", "w_q", "COPY"), param_prefix="w_") == "fetch"
    assert classify(span("d2h", "x", "COPY")) == "offload"
    assert classify(span("host", "g", "ACCUMULATE")) == "host"
    assert classify(span("host", "o", "OPTIMIZER_STEP")) == "optimizer"
    assert classify(span("compute", "wait event 3", "wait")) == "wait"


@pytest.mark.parametrize("content,message", [
    ("{not json", "not JSON"),
    ('{"events": []}', "traceEvents"),
    ('{"traceEvents": [{"ph": "X", "tid": 1, "ts": 0}]}', "has no \"dur\""),
    ('{"traceEvents": [{"ph": "X", "tid": 1, "ts": "a", "dur": 1}]}', "non-numeric"),
    ('{"traceEvents": [42]}', "event 0 is not an object"),
    ('{"traceEvents": [{"ph": "M", "name": "thread_name", "tid": 1, "args": {}}]}', "no spans"),
])
def test_malformed_trace_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        plot_trace(path, tmp_path / "bad.png")
    assert not (tmp_path / "bad.png").exists()
    assert main([str(path), str(tmp_path / "bad.png")]) == 1


def test_missing_run_and_file(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(synthetic_trace()))
    with pytest.raises(TraceError, match="no run 5 .runs traced: 0, 1"):
        plot_trace(path, tmp_path / "x.png", run=5)
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "absent.json")
