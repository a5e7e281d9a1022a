"""What the peer drivers share: the model shapes, the JSON line every driver prints, the token
ids, FLOP counts, peak memory and versions.

Every driver (train_deepspeed.py, train_fsdp.py, gen_accelerate.py, gen_flexgen.py,
speedloader_run.py) prints exactly one JSON line on standard output, last, as `RESULT {json}`
(the prefix tells it from the frameworks' own printing), and appends the same object to --jsonl
when given. The object always has: system, task ("train" or "generate"), status ("ok", "error" or
"skipped", with "error" or "reason"), model (the shape), config (everything that decides the run,
exactly as given), command, versions, device; an ok training line has tokens_per_step,
step_seconds (every timed step), tokens_per_second (tokens_per_step over the median timed step),
sub_batches (gradient-accumulation steps or SpeedLoader's sub-batch count),
model_flops_per_token, device_peak_bytes (torch.cuda.max_memory_allocated, or sl-run's arena
peak) and host_peak_rss_bytes (the process's ru_maxrss); an ok generation line has batch,
prompt_len, new_tokens, prefill_seconds, decode_seconds, decode_tokens_per_second,
bytes_to_device_per_decode_step and the same memory figures. speedloader.peer_tables reads them.

Nothing here needs a GPU, transformers or the speedloader package: the drivers import their
frameworks themselves, so that a missing one becomes a "skipped" line, not a traceback.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

# Model shapes. llama2-7b is speedloader.models' preset of that name (python/tests/test_peers.py
# checks that they agree); opt-6.7b is FlexGen's (flexgen.opt_config) and Hugging Face's
# facebook/opt-6.7b. `tiny-*` are the smoke-test shapes of --tiny: every op of the big one, in
# seconds on a CPU.
SHAPES: Dict[str, Dict[str, Any]] = {
    "llama2-7b": dict(arch="llama", layers=32, hidden=4096, heads=32, kv_heads=32, ffn=11008,
                      vocab=32000, max_positions=4096, rms_norm_eps=1e-5),
    "opt-6.7b": dict(arch="opt", layers=32, hidden=4096, heads=32, kv_heads=32, ffn=16384,
                     vocab=50272, max_positions=2048),
    "tiny-llama": dict(arch="llama", layers=2, hidden=64, heads=4, kv_heads=4, ffn=128, vocab=256,
                       max_positions=1024, rms_norm_eps=1e-5),
    "tiny-opt": dict(arch="opt", layers=2, hidden=64, heads=4, kv_heads=4, ffn=256, vocab=256,
                     max_positions=1024),
}

RESULT_PREFIX = "RESULT "
TOKEN_SEED = 0


def shape(name: str, layers: Optional[int] = None) -> Dict[str, Any]:
    """The named shape with `layers` blocks instead of its own (a slice of the big model: the
    embedding, the head and `layers` identical blocks)."""
    if name not in SHAPES:
        raise SystemExit(f"unknown model shape {name!r}; known: {', '.join(SHAPES)}")
    s = dict(SHAPES[name], name=name)
    if layers is not None:
        if layers < 1:
            raise SystemExit(f"--layers must be at least 1, got {layers}")
        s["layers"] = layers
    s["parameters"] = parameter_count(s)
    return s


def parameter_count(s: Dict[str, Any]) -> int:
    """Every parameter of the untied model (embedding, blocks, final norm, head)."""
    h, f, v, layers = s["hidden"], s["ffn"], s["vocab"], s["layers"]
    kv = h * s["kv_heads"] // s["heads"]
    if s["arch"] == "llama":
        block = h * h * 2 + 2 * h * kv + 3 * h * f + 2 * h  # q o, k v, gate up down, 2 norms
        return v * h * 2 + layers * block + h
    # OPT: biases everywhere, LayerNorms with bias, learned positions with an offset of 2, the
    # head tied to the embedding (as facebook/opt-* ship it).
    block = 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h
    return v * h + (s["max_positions"] + 2) * h + layers * block + 2 * h


def matmul_parameters(s: Dict[str, Any]) -> int:
    """Parameters that take part in a GEMM per token: the blocks' linear layers and the head
    (the embedding is a lookup)."""
    h, f, layers = s["hidden"], s["ffn"], s["layers"]
    kv = h * s["kv_heads"] // s["heads"]
    if s["arch"] == "llama":
        per_block = 2 * h * h + 2 * h * kv + 3 * h * f
    else:
        per_block = 4 * h * h + 2 * h * f
    return layers * per_block + s["vocab"] * h


def train_flops_per_token(s: Dict[str, Any], seq: int) -> float:
    """Model FLOPs per trained token, recomputation not counted (the usual MFU convention,
    PaLM appendix B): 6 per GEMM parameter, plus attention's 12 * layers * hidden * seq (the
    score and value products, forward and backward, over the full square; causal masking is not
    subtracted, as in that convention)."""
    return 6.0 * matmul_parameters(s) + 12.0 * s["layers"] * s["hidden"] * seq


def token_ids(count: int, vocab: int, seed: int = TOKEN_SEED):
    """`count` token ids drawn uniformly from the vocabulary, the same on every machine."""
    import numpy as np

    return np.random.default_rng(seed).integers(0, vocab, size=count, dtype=np.int64)


def prompt_ids(batch: int, prompt_len: int, vocab: int, seed: int = TOKEN_SEED):
    """`batch` prompts of `prompt_len` random ids; every system generates from these."""
    return token_ids(batch * prompt_len, vocab, seed).reshape(batch, prompt_len)


def host_peak_rss_bytes(children: bool = False) -> int:
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss * 1024


def median(xs: List[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def versions(*modules: str) -> Dict[str, str]:
    out = {"python": platform.python_version()}
    for m in modules:
        try:
            mod = __import__(m)
            out[m] = getattr(mod, "__version__", "unknown")
        except Exception as e:  # noqa: BLE001 - a missing module is a fact to record
            out[m] = f"not importable ({type(e).__name__})"
    if "torch" in modules:
        try:
            import torch

            out["torch_cuda"] = str(torch.version.cuda)
            if torch.cuda.is_available():
                out["cudnn"] = str(torch.backends.cudnn.version())
        except Exception:  # noqa: BLE001
            pass
    return out


def smi_gpu_name() -> Optional[str]:
    """The first GPU's name from nvidia-smi, or None (no driver, no GPU): asks no framework."""
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    name = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else ""
    return name if proc.returncode == 0 and name else None


def device_name(use_torch: bool = True) -> str:
    if use_torch:
        try:
            import torch

            if torch.cuda.is_available():
                return torch.cuda.get_device_name(0)
        except Exception:  # noqa: BLE001
            pass
    else:
        name = smi_gpu_name()
        if name:
            return name
    return f"cpu ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)"


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])


def emit(result: Dict[str, Any], jsonl: Optional[str]) -> None:
    """Print the result line (last on stdout) and append it to `jsonl`."""
    line = json.dumps(result, sort_keys=True)
    if jsonl:
        with open(jsonl, "a") as f:
            f.write(line + "\n")
    sys.stdout.flush()
    print(RESULT_PREFIX + line, flush=True)


def run_driver(system: str, task: str, model: Dict[str, Any], config: Dict[str, Any],
               jsonl: Optional[str], body: Callable[[], Dict[str, Any]],
               modules: tuple = ()) -> int:
    """Runs `body` (which returns the measured fields, or raises Skip) and emits one line,
    whatever happens: an exception becomes status "error" with its message and the last lines
    of its traceback. Returns the process exit status (0 ok or skipped, 1 error)."""
    base = {"system": system, "task": task, "model": model, "config": config,
            "command": command_line(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": platform.node()}
    start = time.time()
    try:
        fields = body()
        result = dict(base, status="ok", **fields)
        code = 0
    except Skip as s:
        result = dict(base, status="skipped", reason=str(s))
        code = 0
    except BaseException as e:  # noqa: BLE001 - every failure is recorded, KeyboardInterrupt too
        if isinstance(e, SystemExit) and e.code in (0, None):
            raise
        tb = traceback.format_exc().strip().splitlines()
        result = dict(base, status="error", error=f"{type(e).__name__}: {e}"[:2000],
                      traceback=tb[-12:])
        code = 1
    result["wall_seconds"] = time.time() - start
    result.setdefault("versions", versions(*modules))
    result.setdefault("device", device_name(use_torch="torch" in modules))
    result.setdefault("host_peak_rss_bytes", host_peak_rss_bytes())
    emit(result, jsonl)
    return code


class Skip(Exception):
    """The run cannot happen here (no GPU, a framework missing): a "skipped" line, exit 0."""


def timed_steps(step: Callable[[], None], warmup: int, steps: int,
                sync: Callable[[], None]) -> List[float]:
    """Runs `warmup` untimed and `steps` timed calls of `step`, each timed between two `sync`s
    (device work is asynchronous); returns the timed seconds."""
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def common_arguments(ap, task: str) -> None:
    """The options every driver of a task takes (same names, same defaults)."""
    ap.add_argument("--model", default="llama2-7b" if task == "train" else None,
                    help="model shape (bench/peers/common.py SHAPES)")
    ap.add_argument("--layers", type=int, default=None,
                    help="blocks of the shape to run (a slice of the full model: embedding, "
                         "head and this many blocks). A 15-minute GPU window fits 2 or 4 "
                         "layers of llama2-7b for training")
    ap.add_argument("--tiny", action="store_true",
                    help="smoke test: a tiny shape, short sequences, one timed step; runs on a "
                         "CPU where the framework allows")
    ap.add_argument("--jsonl", help="also append the result line to this file")
    if task == "train":
        ap.add_argument("--seq", type=int, default=2048)
        ap.add_argument("--batch", type=int, default=4,
                        help="sequences per optimizer step (tokens per step = batch * seq; "
                             "SpeedLoader's probes use 4 x 2048)")
        ap.add_argument("--sub-batches", type=int, default=2,
                        help="gradient-accumulation steps per optimizer step (micro-batch = "
                             "batch / sub-batches), SpeedLoader's num-sub-batches")
        ap.add_argument("--steps", type=int, default=3, help="timed optimizer steps")
        ap.add_argument("--warmup", type=int, default=1, help="untimed optimizer steps first")
        ap.add_argument("--lr", type=float, default=1e-4)
    else:
        ap.add_argument("--batch", type=int, default=32, help="prompts generated together")
        ap.add_argument("--prompt-len", type=int, default=512)
        ap.add_argument("--new-tokens", type=int, default=32)


def train_shape(args) -> Dict[str, Any]:
    """Applies --tiny to a training driver's arguments and checks the batch split; returns the
    model shape."""
    if args.tiny:
        args.model = "tiny-llama"
        args.seq = min(args.seq, 32)
        args.steps = min(args.steps, 1)
    if args.batch < 1 or args.sub_batches < 1 or args.batch % args.sub_batches:
        raise SystemExit(f"--batch {args.batch} must be a positive multiple of --sub-batches "
                         f"{args.sub_batches}")
    return shape(args.model, args.layers)


def train_fields(args, s, times: List[float]) -> Dict[str, Any]:
    tokens = args.batch * args.seq
    med = median(times)
    return {"tokens_per_step": tokens, "step_seconds": times, "step_seconds_median": med,
            "tokens_per_second": tokens / med, "sub_batches": args.sub_batches,
            "micro_batch": args.batch // args.sub_batches, "seq": args.seq,
            "model_flops_per_token": train_flops_per_token(s, args.seq)}
