"""bench/gpu/perf_summary.py computes op rates only from op seconds that measure the kernels: a
CUDA report whose op seconds are host times (the issuing of asynchronous calls) gets a line
saying so instead of rates, one timed on the GPU (op_seconds_clock "device") gets its rates, and a
CPU report's host times are the kernels' own."""

import json
import subprocess
import sys

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "bench" / "gpu" / "perf_summary.py"

PROBE = {"layers": 1, "hidden": 64, "ffn": 128, "vocab": 100, "heads": 4, "seq": 16, "batch": 2}
# Matmul parameters per token: 4 * 64 * 64 + 3 * 64 * 128 + 64 * 100 = 47360.
MATMUL_PARAMS = 47360


def summary(tmp_path, backend, clock, ops=None, extra=None):
    (tmp_path / "probe.json").write_text(json.dumps(PROBE))
    (tmp_path / "roofline.json").write_text(json.dumps(
        {"gemm": [{"dtype": "bfloat16", "tflops": 500.0}], "attention": [], "copies": {}}))
    report = {
        "backend": backend,
        "wall_seconds": 0.5,
        "ops": ops or {"MATMUL": {"count": 10, "seconds": 1e-6}},
        "streams": [{"kind": "h2d", "busy_seconds": 0.001}],
        "bytes_moved": {"host_to_device": 10**6},
        "train": {"tokens_per_step": 32, "step_seconds": [0.5]},
    }
    if clock is not None:
        report["op_seconds_clock"] = clock
    report.update(extra or {})
    (tmp_path / "train.json").write_text(json.dumps(report))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--probe", str(tmp_path / "probe.json"), "--roofline",
         str(tmp_path / "roofline.json"), "--train", str(tmp_path / "train.json")],
        capture_output=True, text=True, check=True)
    return out.stdout


def gemm_rate(text):
    rows = [line.split() for line in text.splitlines() if "GEMM TFLOP/s" in line]
    return float(rows[0][3]) if rows else None


def test_host_clock_op_seconds_of_a_cuda_run_give_no_rates(tmp_path):
    for clock in ("host", None):
        text = summary(tmp_path, "cuda", clock)
        assert gemm_rate(text) is None
        assert "H2D GB/s" not in text and "busiest ops" not in text
        assert "op rates" in text and "not computed" in text
        assert f"op_seconds_clock: {clock or 'missing'}" in text
        # The wall-time figures stay.
        assert "tokens/s" in text


def test_device_clock_op_seconds_give_rates(tmp_path):
    # 2 * params * tokens * 4 passes over 1 us.
    expected = 2 * MATMUL_PARAMS * 32 * 4 / 1e-6 / 1e12
    text = summary(tmp_path, "cuda", "device")
    assert abs(gemm_rate(text) - expected) < 0.01
    assert "not computed" not in text
    assert "H2D GB/s" in text


def test_cpu_reports_host_times_are_the_kernels(tmp_path):
    text = summary(tmp_path, "cpu", "host")
    assert gemm_rate(text) is not None
    assert "not computed" not in text


def test_flops_that_sl_run_reports_replace_the_model(tmp_path):
    # sl-run reports each op's FLOPs from its kernels' shapes: the rates come from those, not from
    # the probe's parameter count times 4 passes (which counted a head that is not recomputed).
    ops = {"MATMUL": {"count": 10, "seconds": 2e-6, "flops": 3e6},
           "ATTENTION": {"count": 2, "seconds": 1e-6, "flops": 1e5},
           "ATTENTION_GRAD": {"count": 1, "seconds": 1e-6, "flops": 2.5e5}}
    text = summary(tmp_path, "cuda", "device", ops)
    assert abs(gemm_rate(text) - 3e6 / 2e-6 / 1e12) < 1e-9
    rows = [line.split() for line in text.splitlines() if "attention TFLOP/s" in line]
    assert abs(float(rows[0][3]) - 3.5e5 / 2e-6 / 1e12) < 1e-9


def test_the_first_run_of_an_inference_with_warmups_is_shown(tmp_path):
    text = summary(tmp_path, "cpu", "host", extra={"warmup_seconds": [0.679]})
    assert "first run s (warm-up)" in text and "0.679" in text
