"""Every gradient rule checked numerically on the CPU backend.

Each case of test/Transforms/autodiff-rules.mlir (one op in a stage) is differentiated by
sl-autodiff; the stage and its backward function are scheduled on their own (`--schedule-entry`)
and run by sl-run. The backward's gradients must equal central differences of the forward:
d/dx sum(y * dy). The CPU backend computes in float32, so the differences use a step of 1e-2 and
a tolerance of 2% (exact rules agree far closer; a wrong rule is off by O(1)).
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
STEP = 1e-2


def shape_of(type_text):
    dims, _ = TENSOR.match(type_text).groups()
    return tuple(int(d) for d in dims.split("x") if d)


def run(sl_run, sched, inputs, n_out, tmp):
    cmd = [sl_run, sched]
    for i, value in enumerate(inputs):
        np.save(tmp / f"i{i}.npy", value.astype(np.float32))
        cmd += ["--input", f"arg{i}={tmp / f'i{i}.npy'}"]
    for i in range(n_out):
        cmd += ["--output", f"output{i}={tmp / f'o{i}.npy'}"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    check_ok(proc)
    return [np.load(tmp / f"o{i}.npy").astype(np.float64) for i in range(n_out)]


@pytest.mark.parametrize("case", CASES, ids=[re.search(r"// (\w+)", c).group(1) for c in CASES])
def test_rule_matches_finite_differences(sl_tools, tmp_path, case):
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
    dy = rng.standard_normal(shape_of(result_type))

    grads = run(sl_tools.sl_run, tmp_path / "block_backward.slsched", inputs + [dy], len(inputs),
                tmp_path)

    def objective(values):
        (y,) = run(sl_tools.sl_run, tmp_path / "block.slsched", values, 1, tmp_path)
        return float(np.sum(y * dy))

    for i, x in enumerate(inputs):
        numeric = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            plus, minus = [v.copy() for v in inputs], [v.copy() for v in inputs]
            plus[i][j] += STEP
            minus[i][j] -= STEP
            numeric[j] = (objective(plus) - objective(minus)) / (2 * STEP)
        scale = max(np.abs(numeric).max(), 1e-3)
        np.testing.assert_allclose(grads[i], numeric, rtol=2e-2, atol=2e-2 * scale,
                                   err_msg=f"gradient of argument {i}")
