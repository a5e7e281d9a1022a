"""Every gradient rule checked numerically, in float64, on the CPU backend.

Each case of test/Transforms/autodiff-rules.mlir (one op in a stage) is rewritten to float64 (its
f32 tensor types become f64; attributes such as alpha, scale and epsilon stay f32 and mean the same
in both precisions) and differentiated by sl-autodiff; the stage and its backward function are
scheduled on their own (`--schedule-entry`) and run by sl-run, whose CPU backend computes f64
schedules in double. The backward's gradients must equal central differences of the forward,
d/dx sum(y * dy), with a step of 1e-6: truncation error O(step^2) and rounding error
O(1e-16 / step) both stay near 1e-10, so an exact rule agrees to about 1e-8 of the gradient's
scale, and the tolerance of 1e-6 still catches a rule that is slightly off (a wrong constant, a
float-rounded coefficient), not only one that is wrong by O(1).

A case listed in F32_ONLY runs in float32 instead (step 1e-2, tolerance 2%), with the reason; it
is empty while the CPU backend computes every op of every rule in f64.
"""

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sl_helpers import check_ok

RULES = Path(__file__).resolve().parents[2] / "test" / "Transforms" / "autodiff-rules.mlir"
CASES = [c for c in RULES.read_text().split("// -----") if "func.func private @block(" in c]
SIGNATURE = re.compile(r"func\.func private @block\((.*?)\) -> (tensor<[^>]*>)")
TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z0-9]+)>")
F32_TENSOR = re.compile(r"tensor<((?:\d+x)*)f32>")

# Cases that cannot run in float64 (rule name -> why); they fall back to float32.
F32_ONLY = {}

# (numpy dtype, finite-difference step, relative tolerance) per precision.
PRECISION = {"f64": (np.float64, 1e-6, 1e-6), "f32": (np.float32, 1e-2, 2e-2)}


def shape_of(type_text):
    dims, _ = TENSOR.match(type_text).groups()
    return tuple(int(d) for d in dims.split("x") if d)


def to_f64(case):
    """The case with its f32 tensors as f64 tensors; f32 attributes are left as they are."""
    return F32_TENSOR.sub(r"tensor<\1f64>", case)


def run(sl_run, sched, inputs, n_out, tmp, dtype):
    cmd = [sl_run, sched]
    for i, value in enumerate(inputs):
        np.save(tmp / f"i{i}.npy", value.astype(dtype))
        cmd += ["--input", f"arg{i}={tmp / f'i{i}.npy'}"]
    for i in range(n_out):
        cmd += ["--output", f"output{i}={tmp / f'o{i}.npy'}"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    check_ok(proc)
    outputs = [np.load(tmp / f"o{i}.npy") for i in range(n_out)]
    for output in outputs:
        assert output.dtype == dtype, f"sl-run wrote {output.dtype}, expected {np.dtype(dtype)}"
    return [o.astype(np.float64) for o in outputs]


def rule_name(case):
    """The rule's name: the first word of the comment just above the case's CHECK-LABEL."""
    return re.search(r"^// (\w+)[^\n]*\n// CHECK-LABEL", case, re.MULTILINE).group(1)


@pytest.mark.parametrize("case", CASES, ids=[rule_name(c) for c in CASES])
def test_rule_matches_finite_differences(sl_tools, tmp_path, case):
    precision = "f32" if rule_name(case) in F32_ONLY else "f64"
    dtype, step, rtol = PRECISION[precision]
    if precision == "f64":
        case = to_f64(case)
        assert "xf32>" not in case and "tensor<f32>" not in case
    (tmp_path / "case.mlir").write_text(case)
    args_text, result_type = SIGNATURE.search(case).groups()
    shapes = [shape_of(t) for t in re.findall(r"tensor<[^>]*>", args_text)]
    for entry in ("block", "block_backward"):
        check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "case.mlir", "--sl-autodiff",
                                "-canonicalize", f"--schedule-entry={entry}",
                                "-o", tmp_path / f"{entry}.slsched"]))
    rng = np.random.default_rng(0)
    # Away from 0, where sqrt, reciprocal and division are steep and relu is not differentiable.
    inputs = [rng.uniform(0.5, 1.5, size=s) * rng.choice([-1, 1], size=s)
              if "sqrt" not in case else rng.uniform(0.5, 1.5, size=s) for s in shapes]
    inputs = [x.astype(dtype).astype(np.float64) for x in inputs]
    dy = rng.standard_normal(shape_of(result_type)).astype(dtype).astype(np.float64)

    grads = run(sl_tools.sl_run, tmp_path / "block_backward.slsched", inputs + [dy], len(inputs),
                tmp_path, dtype)

    def objective(values):
        (y,) = run(sl_tools.sl_run, tmp_path / "block.slsched", values, 1, tmp_path, dtype)
        return float(np.sum(y * dy))

    worst = 0.0
    for i, x in enumerate(inputs):
        numeric = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            plus, minus = [v.copy() for v in inputs], [v.copy() for v in inputs]
            plus[i][j] += step
            minus[i][j] -= step
            # The step actually taken once the perturbed inputs are rounded to the dtype.
            taken = float(dtype(plus[i][j])) - float(dtype(minus[i][j]))
            numeric[j] = (objective(plus) - objective(minus)) / taken
        scale = max(np.abs(numeric).max(), 1e-3)
        worst = max(worst, float(np.abs(grads[i] - numeric).max()) / scale)
        np.testing.assert_allclose(grads[i], numeric, rtol=rtol, atol=rtol * scale,
                                   err_msg=f"gradient of argument {i} ({precision})")
    print(f"{rule_name(case)} ({precision}): max error {worst:.2e} of the gradient's scale")
