"""Helpers for the tests that run sl-opt and sl-run (imported by conftest.py and the tests)."""

import re
import subprocess

TOOL_TIMEOUT_S = 300


class SLTools:
    """Runs sl-opt and sl-run the way the end-to-end tests need them."""

    def __init__(self, sl_opt: str, sl_run: str):
        self.sl_opt = sl_opt
        self.sl_run = sl_run

    @staticmethod
    def _run(cmd):
        return subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=TOOL_TIMEOUT_S)

    def compile(self, onnx_path, sched_path, *, batch: int, seq: int, fuse=None):
        """`$SL_OPT model.onnx --sl-infer="batch=B seq=S" -o model.slsched`; with `fuse` True or
        False, `--sl-infer="batch=B seq=S fuse=true|false"`."""
        options = f"batch={batch} seq={seq}"
        if fuse is not None:
            options += f" fuse={'true' if fuse else 'false'}"
        return self._run([self.sl_opt, onnx_path, f"--sl-infer={options}", "-o", sched_path])

    def run(self, sched_path, x_path, y_path, report_path, *, input_name=None,
            output_name=None):
        """`$SL_RUN model.slsched --input x.npy --output y.npy --report report.json`; with names,
        `--input NAME=x.npy` / `--output NAME=y.npy`."""
        x_arg = f"{input_name}={x_path}" if input_name else x_path
        y_arg = f"{output_name}={y_path}" if output_name else y_path
        return self._run([self.sl_run, sched_path, "--input", x_arg, "--output", y_arg,
                          "--report", report_path])


def describe(proc) -> str:
    return (f"command: {' '.join(map(str, proc.args))}\nexit: {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")


def check_ok(proc) -> None:
    assert proc.returncode == 0, describe(proc)


def shape_pattern(shape) -> "re.Pattern[str]":
    """Matches a shape written as [2, 33], (2,33), 2x33, 2 x 33, 2*33 or '2 33'.

    A 1-D shape must be bracketed ([64], (64,), <64>), or any number would do."""
    dims = [str(int(d)) for d in shape]
    if len(dims) == 1:
        return re.compile(r"[\[(<{]\s*" + dims[0] + r"\s*,?\s*[\])>}]")
    sep = r"(?:\s*[,x×*]\s*|\s+)"
    return re.compile(r"(?<!\d)" + sep.join(dims) + r"(?!\d)")
