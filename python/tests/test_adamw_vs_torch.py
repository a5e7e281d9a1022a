"""The host AdamW (runtime/src/optimizer/adamw.cc) against torch.optim.AdamW.

Random parameters and five steps of random gradients go through torch's default AdamW (with
torch.nn.utils.clip_grad_norm_ and a LambdaLR schedule where asked) and through
adamw_reference_main, whose path ctest puts in SL_ADAMW_REFERENCE; the weights and both moments
must agree to float32 rounding.

Both round every float32 operation in the same order, except that torch's AVX2 kernels fuse the
multiply-add of each moment update (FMA) where ours round twice, and that the clipping norm is
summed in double here and in float32 by torch: an ulp or so per step, far inside the tolerance.
"""

import math
import os
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest
import torch

STEPS = 5
# Several parameters: a matrix, vectors with and without a vector-width remainder, one that spans
# several of the optimizer's work chunks.
SHAPES = [(37, 19), (1000,), (5,), (20003,)]
RTOL, ATOL = 1e-6, 1e-7


@dataclass
class Config:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    max_grad_norm: float = 0.0
    warmup_steps: int = 0
    decay_steps: int = 0
    min_lr: float = 0.0


def lr_at(c: Config, step: int) -> float:
    """AdamWConfig::lrAt: linear warmup from 0, then cosine from lr down to min_lr."""
    if step < c.warmup_steps:
        return c.lr * step / c.warmup_steps
    if c.decay_steps == 0:
        return c.lr
    decayed = step - c.warmup_steps
    if decayed >= c.decay_steps:
        return c.min_lr
    return c.min_lr + (c.lr - c.min_lr) * (0.5 * (1.0 + math.cos(math.pi * decayed / c.decay_steps)))


CASES = {
    "defaults": Config(),
    "weight_decay_0.1": Config(lr=1e-2, weight_decay=0.1),
    "betas_eps": Config(lr=3e-3, beta1=0.8, beta2=0.95, eps=1e-6),
    # Steps see lr 0, lr/2, lr, the middle of the cosine, min_lr.
    "warmup_cosine": Config(lr=1e-2, warmup_steps=2, decay_steps=2, min_lr=1e-3),
    # The gradients' norm is about 15: clipped every step.
    "clipping": Config(lr=1e-2, max_grad_norm=1.0),
    "clipping_not_reached": Config(lr=1e-2, max_grad_norm=100.0),
    "everything": Config(lr=1e-2, weight_decay=0.05, max_grad_norm=2.0, warmup_steps=1,
                         decay_steps=3, min_lr=1e-4),
}


@pytest.fixture
def reference() -> str:
    value = os.environ.get("SL_ADAMW_REFERENCE")
    if not value:
        pytest.skip("SL_ADAMW_REFERENCE is not set: point it at the built adamw_reference_main "
                    "(ctest does) to run this cross-check")
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        pytest.fail(f"SL_ADAMW_REFERENCE={value!r} is not an executable file")
    return value


def make_problem(seed: int):
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[(0.1 * rng.standard_normal(s)).astype(np.float32) for s in SHAPES]
             for _ in range(STEPS)]
    return params, grads


def run_torch(c: Config, params, grads):
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    opt = torch.optim.AdamW(tensors, lr=c.lr, betas=(c.beta1, c.beta2), eps=c.eps,
                            weight_decay=c.weight_decay)
    schedule = None
    if c.warmup_steps or c.decay_steps:
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_at(c, step) / c.lr)
    for step_grads in grads:
        for t, g in zip(tensors, step_grads):
            t.grad = torch.tensor(g)
        if c.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(tensors, c.max_grad_norm)
        opt.step()
        if schedule is not None:
            schedule.step()
    flat = lambda xs: np.concatenate([x.detach().numpy().ravel() for x in xs])  # noqa: E731
    return {
        "params": flat(tensors),
        "exp_avg": flat(opt.state[t]["exp_avg"] for t in tensors),
        "exp_avg_sq": flat(opt.state[t]["exp_avg_sq"] for t in tensors),
    }


def run_ours(exe: str, c: Config, params, grads, workdir):
    flat = lambda xs: np.concatenate([x.ravel() for x in xs])  # noqa: E731
    np.save(workdir / "params.npy", flat(params))
    for k, step_grads in enumerate(grads):
        np.save(workdir / f"grads_{k}.npy", flat(step_grads))
    # Hexadecimal floats reach the executable as exactly these doubles.
    cmd = [exe, "--dir", str(workdir), "--steps", str(len(grads)),
           "--sizes", ",".join(str(p.size) for p in params),
           "--lr", c.lr.hex(), "--beta1", c.beta1.hex(), "--beta2", c.beta2.hex(),
           "--eps", c.eps.hex(), "--weight-decay", c.weight_decay.hex(),
           "--max-grad-norm", c.max_grad_norm.hex(), "--warmup-steps", str(c.warmup_steps),
           "--decay-steps", str(c.decay_steps), "--min-lr", c.min_lr.hex()]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return {name: np.load(workdir / f"{name}_out.npy")
            for name in ("params", "exp_avg", "exp_avg_sq")}


def tolerance_used(ours, theirs) -> float:
    """The largest |ours - theirs| / (ATOL + RTOL * |theirs|): at most 1 passes."""
    diff = np.abs(ours.astype(np.float64) - theirs.astype(np.float64))
    return float(np.max(diff / (ATOL + RTOL * np.abs(theirs.astype(np.float64)))))


@pytest.mark.parametrize("case", list(CASES))
def test_adamw_matches_torch(reference, tmp_path, case):
    c = CASES[case]
    params, grads = make_problem(seed=sorted(CASES).index(case))
    theirs = run_torch(c, params, grads)
    ours = run_ours(reference, c, params, grads, tmp_path)
    for name in ("params", "exp_avg", "exp_avg_sq"):
        assert ours[name].dtype == np.float32
        print(f"{case} {name}: {tolerance_used(ours[name], theirs[name]):.3g} of the tolerance")
        np.testing.assert_allclose(ours[name], theirs[name], rtol=RTOL, atol=ATOL,
                                   err_msg=f"{case}: {name}")
    # The weights moved (by more than the tolerance), so the comparison means something.
    assert np.max(np.abs(theirs["params"] - np.concatenate([p.ravel() for p in params]))) > 1e-4


def test_schedule_formula_reaches_its_boundaries():
    # The lambda given to LambdaLR above is the schedule the runtime documents.
    c = Config(lr=1.0, warmup_steps=4, decay_steps=10, min_lr=0.1)
    assert [lr_at(c, s) for s in (0, 2, 4)] == [0.0, 0.5, 1.0]
    assert lr_at(c, 9) == pytest.approx(0.55, abs=1e-15)
    assert lr_at(c, 14) == lr_at(c, 100) == 0.1
