"""Generation with the weights in host memory: SpeedLoader against Hugging Face accelerate's
offloaded generation and against the bound the host-to-device link sets.

The model is LLaMA-shaped with random weights (a --weightless export: its graph, no weights; the
runtime draws them with `sl-run --random-weights`), the prompts random token ids, all of one
length, greedy decoding of a fixed number of new tokens. Three steps, each a subcommand:

  prepare   (here, where sl-opt is) export the model weightless, compile the generation schedule,
            write bench.json (sizes, commands); bench/gpu/prepare_generation.sh wraps it, packs
            the runtime and prints the device command.
  run       (on the GPU machine) phases, in this order, each writing PHASE.json to --out:
              bandwidth    pinned (and pageable) host<->device copy bandwidth, PyTorch, 1 GiB
                           copies timed with CUDA events, median of --repeats
              speedloader  sl-run --backend cuda --random-weights on the compiled schedule
              accelerate   transformers' LlamaForCausalLM of the same shape, bf16, every weight
                           in CPU memory (accelerate dispatch_model, device_map "cpu": each
                           block's weights are copied to the GPU at its forward), generate() on
                           the same prompts, greedy; after sl-run has exited
            then prints and writes generation-offload.md (the table of every phase found).
  table     merge the PHASE.json files of several runs (from several device commands) into
            the table.

Decode tokens/s counts every generated token after the first (the first comes out of prefill);
the link bound on it is batch / (bytes to the device per decoding step / pinned H2D bandwidth),
with bytes per step as sl-run's report counts them (weights once, KV cache chunks unless they stay
on the device) and, for accelerate, its offloaded weights once.

On this machine, `run --backend cpu` (and `--tiny`) runs the same pipeline on the CPU backend
(no bandwidth phase; accelerate only if transformers and accelerate import).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PHASES = ("bandwidth", "speedloader", "accelerate")
PROMPT_SEED = 0
WEIGHT_SEED = 0
# A tiny LLaMA for the dry run on the CPU: GQA, every op of the big one.
TINY = {"arch": "llama", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128,
        "vocab": 256, "rms_norm_eps": 1e-6}


def log(*what):
    print(*what, flush=True)


def sh(cmd):
    return " ".join(shlex.quote(str(c)) for c in cmd)


def check_call(cmd, **kw):
    log("+", sh(cmd))
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)
    if proc.returncode != 0:
        sys.exit(f"failed (exit {proc.returncode}): {sh(cmd)}\n{proc.stdout[-4000:]}")
    return proc.stdout


# --- prepare (here) -----------------------------------------------------------------------------

def prepare(args):
    sys.path.insert(0, str(ROOT / "python"))
    from speedloader.export import export_weightless, data_file_of
    from speedloader.models import get_arch, get_preset

    positions = args.prompt_len + args.new_tokens
    if args.tiny:
        fields = dict(TINY, max_positions=positions)
        arch = fields.pop("arch")
        config = get_arch(arch).config_cls(**fields)
        name = "tiny"
    else:
        arch, config = get_preset(args.preset, max_positions=positions)
        name = args.preset
    out = Path(args.out)
    carry = out / "carry"
    carry.mkdir(parents=True, exist_ok=True)
    model = out / "model" / "model.onnx"
    start = time.time()
    w = export_weightless(arch, config, model)
    export_seconds = time.time() - start
    log(f"exported {model} ({w.parameters} weights, {w.parameter_bytes / 1e9:.2f} GB of f32, "
        f"sparse {data_file_of(model)}) in {export_seconds:.0f} s")

    options = [f"batch={args.batch}", f"max-prompt-len={args.prompt_len}",
               f"max-new-tokens={args.new_tokens}"]
    if args.sub_batches:
        options.append(f"num-sub-batches={args.sub_batches}")
    if args.device_memory:
        options.append(f"device-memory={args.device_memory}")
    if args.precision != "f32":  # f32 is sl-opt's default, and older builds know no precision=
        options.append(f"precision={args.precision}")
    options += args.sl_opt_option
    schedule = carry / "generate.slsched"
    compile_cmd = [args.sl_opt, model, f"--sl-generate={' '.join(options)}", "-o", schedule]
    start = time.time()
    check_call(compile_cmd)
    compile_seconds = time.time() - start
    bench = {
        "model": name, "arch": arch, "config": {k: v for k, v in vars(config).items()},
        "parameters": w.parameters,
        "parameter_elements": w.parameter_bytes // 4,
        "batch": args.batch, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
        "precision": args.precision, "sl_generate": " ".join(options),
        "schedule": schedule.name, "schedule_bytes": schedule.stat().st_size,
        "commands": {"prepare": sh([sys.executable, *sys.argv]), "compile": sh(compile_cmd)},
        "export_seconds": export_seconds, "compile_seconds": compile_seconds,
        "commit": _commit(), "prepared": datetime.datetime.now().isoformat(timespec="seconds"),
        "prepared_on": platform.node(),
    }
    (carry / "bench.json").write_text(json.dumps(bench, indent=1) + "\n")
    log(f"wrote {schedule} ({bench['schedule_bytes'] / 1e6:.2f} MB) and {carry / 'bench.json'}")
    return carry


def _commit():
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"]).returncode
        return head.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


# --- run (GPU machine, or the CPU here) ---------------------------------------------------------

def prompts_of(bench):
    """Random token ids, `batch` prompts of exactly prompt_len tokens (the same on every run)."""
    import numpy as np

    rng = np.random.default_rng(PROMPT_SEED)
    return rng.integers(0, bench["config"]["vocab"],
                        size=(bench["batch"], bench["prompt_len"])).tolist()


def phase_bandwidth(args, bench):
    import torch

    if not torch.cuda.is_available():
        return {"skipped": "no CUDA device visible to PyTorch"}
    size = args.copy_mib << 20

    def timed(dst, src):
        for _ in range(2):  # warm-up
            dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        seconds = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src, non_blocking=True)
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        return {"gb_per_s_median": size / statistics.median(seconds) / 1e9,
                "gb_per_s_best": size / min(seconds) / 1e9, "repeats": len(seconds)}

    pinned = torch.randint(0, 255, (size,), dtype=torch.uint8).pin_memory()
    pageable = torch.randint(0, 255, (size,), dtype=torch.uint8)
    device = torch.empty(size, dtype=torch.uint8, device="cuda")
    result = {"bytes_per_copy": size,
              "h2d_pinned": timed(device, pinned),
              "d2h_pinned": timed(pinned, device),
              "h2d_pageable": timed(device, pageable)}
    del pinned, pageable, device
    torch.cuda.empty_cache()
    return result


def _find_sl_run(args, work):
    if args.sl_run:
        return Path(args.sl_run), {}
    bundle = Path(args.bundle or Path(args.carry) / "speedloader-runtime.tar.gz")
    if bundle.is_file():
        with tarfile.open(bundle) as tar:
            tar.extractall(work)
        bundle = work / "speedloader-runtime"
    sl_run = bundle / "bin" / "sl-run"
    if not sl_run.is_file():
        sys.exit(f"no sl-run in {bundle}: give --bundle (pack-runtime.sh's tarball or its "
                 f"directory) or --sl-run")
    env = dict(os.environ)

    def missing():
        out = subprocess.run(["ldd", str(sl_run)], stdout=subprocess.PIPE, text=True,
                             env=env).stdout
        return [line.split()[0] for line in out.splitlines() if "not found" in line]

    # cuBLAS where the loader does not find it (as run-gpu-suite.sh does), then the bundle's
    # copies of the C++ runtime.
    for lib in [m for m in missing() if m.startswith("libcublas")]:
        roots = ["/usr/local/cuda", "/usr/local", "/opt", "/usr/lib"] + \
            [p for p in sys.path if p.endswith("-packages")]
        for root in roots:
            hits = glob.glob(f"{root}/**/{lib}", recursive=True) if os.path.isdir(root) else []
            if hits:
                env["LD_LIBRARY_PATH"] = os.path.dirname(hits[0]) + (
                    ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
                break
    if missing():
        env["LD_LIBRARY_PATH"] = env.get("LD_LIBRARY_PATH", "") + ":" + str(bundle / "lib")
    if missing():
        sys.exit(f"{sl_run} cannot load {', '.join(missing())}")
    return sl_run, {"LD_LIBRARY_PATH": env.get("LD_LIBRARY_PATH", "")}


def phase_speedloader(args, bench, work):
    sl_run, env_extra = _find_sl_run(args, work)
    prompts = prompts_of(bench)
    prompts_file = work / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps({"tokens": p}) + "\n" for p in prompts))
    report, tokens = work / "speedloader-report.json", work / "speedloader-tokens.jsonl"
    cmd = [sl_run, Path(args.carry) / bench["schedule"], "--backend", args.backend,
           "--random-weights", WEIGHT_SEED, "--prompts", prompts_file, "--output", tokens,
           "--report", report, "--temperature", "0"]
    if args.link_gbps:
        cmd += ["--link-gbps", args.link_gbps]
    log("+", sh(cmd))
    env = dict(os.environ, **env_extra)
    start = time.time()
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - start
    code = os.waitstatus_to_exitcode(status)
    log(output[-3000:])
    if code != 0:
        return {"error": f"sl-run exited {code}", "output": output[-4000:], "command": sh(cmd)}
    rep = json.loads(report.read_text())
    g = rep["generation"]
    lines = [json.loads(line) for line in tokens.read_text().splitlines() if line.strip()]
    generated = [len(line["tokens"]) for line in lines]
    if len(lines) != bench["batch"] or any(n != bench["new_tokens"] for n in generated):
        return {"error": f"expected {bench['batch']} sequences of {bench['new_tokens']} tokens, "
                         f"got {generated}", "command": sh(cmd)}
    steps = g["decode_runs"]
    return {
        "command": sh(cmd), "batch": bench["batch"],
        "sub_batches": g["schedule"]["num_sub_batches"],
        "weights_on_device": g["schedule"]["weights_on_device"],
        "kv_cache_on_device": g["schedule"]["kv_cache_on_device"],
        "prefill_tokens_per_second": g["prefill_tokens_per_second"],
        "decode_tokens_per_second": g["decode_tokens_per_second"],
        "prefill_seconds": g["prefill_seconds"], "decode_seconds": g["decode_seconds"],
        "decode_steps": steps,
        "bytes_to_device_per_decode_step": g["decode_bytes_host_to_device"] / steps if steps else 0,
        "bytes_to_host_per_decode_step": g["decode_bytes_device_to_host"] / steps if steps else 0,
        "parameter_bytes": g["schedule"]["parameter_bytes"],
        "kv_cache_bytes": g["schedule"]["kv_cache_bytes"],
        "device_peak_bytes": g["device_arena_peak_bytes"],
        "host_pool_peak_bytes": g["host_pool_peak_bytes"],
        "host_peak_rss_bytes": usage.ru_maxrss * 1024,
        "load_seconds": rep["load_seconds"], "wall_seconds": wall,
        "random_weights": rep["random_weights"], "backend": rep["backend"],
        "first_tokens": lines[0]["tokens"][:8],
    }


def phase_accelerate(args, bench):
    try:
        import torch
        import accelerate
        import transformers
        from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, \
            StoppingCriteriaList
    except ImportError as e:
        return {"skipped": f"transformers/accelerate not importable here ({e})"}
    import resource

    c = bench["config"]
    if args.backend == "cuda" and not torch.cuda.is_available():
        return {"skipped": "no CUDA device visible to PyTorch"}
    device = torch.device("cuda:0" if args.backend == "cuda" else "cpu")
    batch = args.accelerate_batch or bench["batch"]
    dtype = torch.bfloat16 if bench["precision"] == "bf16" else torch.float32
    hf = transformers.LlamaConfig(
        vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["ffn"],
        num_hidden_layers=c["layers"], num_attention_heads=c["heads"],
        num_key_value_heads=c["kv_heads"], max_position_embeddings=c["max_positions"],
        rms_norm_eps=c["rms_norm_eps"], rope_theta=c["rope_theta"], tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=0)
    start = time.time()
    with accelerate.init_empty_weights():  # parameters on meta, buffers (rotary) real
        model = transformers.LlamaForCausalLM(hf)
    model.eval()
    # Random weights without drawing 32e9 values one at a time (minutes in PyTorch): one block of
    # normal(0, 0.02) values, tiled over every parameter. GEMM speed does not depend on values.
    gen = torch.Generator().manual_seed(WEIGHT_SEED)
    block = (torch.randn(1 << 26, generator=gen) * 0.02).to(dtype)
    parameter_bytes = 0
    for name, p in list(model.named_parameters()):
        n = p.numel()
        data = block.repeat(-(-n // block.numel()))[:n].view(p.shape).clone()
        accelerate.utils.set_module_tensor_to_device(model, name, "cpu", value=data)
        parameter_bytes += n * data.element_size()
    del block
    build_seconds = time.time() - start
    # Every block on the CPU, run on the GPU: the hooks copy a block's weights in at its forward.
    device_map = {"model.embed_tokens": "cpu", "model.layers": "cpu", "model.norm": "cpu",
                  "model.rotary_emb": device.index if device.type == "cuda" else "cpu",
                  "lm_head": "cpu"}
    if device.type == "cuda":
        model = accelerate.dispatch_model(model, device_map=device_map, main_device=device.index)

    prompts = torch.tensor(prompts_of(dict(bench, batch=batch)), dtype=torch.long, device=device)
    times = []

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    class Clock(LogitsProcessor):  # called once per generated token, after its forward
        def __call__(self, input_ids, scores):
            sync()
            times.append(time.time())
            return scores

    class Deadline(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            done = time.time() - t0 > args.accelerate_seconds
            return torch.full((input_ids.shape[0],), done, dtype=torch.bool,
                              device=input_ids.device)

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sync()
    t0 = time.time()
    with torch.no_grad():
        out = model.generate(prompts, attention_mask=torch.ones_like(prompts),
                             max_new_tokens=bench["new_tokens"], min_new_tokens=0,
                             do_sample=False, use_cache=True, pad_token_id=0,
                             logits_processor=LogitsProcessorList([Clock()]),
                             stopping_criteria=StoppingCriteriaList([Deadline()]))
    sync()
    generated = out.shape[1] - prompts.shape[1]
    steps = len(times) - 1  # forwards after the prefill
    result = {
        "batch": batch, "versions": {"torch": torch.__version__,
                                     "transformers": transformers.__version__,
                                     "accelerate": accelerate.__version__},
        "placement": device_map, "dtype": str(dtype),
        "weights": "normal(0, 0.02) values, one 64M-element block tiled over every parameter",
        "prefill_seconds": times[0] - t0,
        "prefill_tokens_per_second": batch * bench["prompt_len"] / (times[0] - t0),
        "decode_steps": steps, "new_tokens": generated,
        "decode_seconds": times[-1] - times[0] if steps else 0.0,
        "decode_tokens_per_second": batch * steps / (times[-1] - times[0]) if steps else 0.0,
        "stopped_by_deadline": generated < bench["new_tokens"],
        "bytes_to_device_per_decode_step": parameter_bytes,
        "parameter_bytes": parameter_bytes,
        "device_peak_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else 0,
        "host_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "build_seconds": build_seconds,
        "first_tokens": out[0, prompts.shape[1]:prompts.shape[1] + 8].tolist(),
    }
    return result


def machine(args):
    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpus": os.cpu_count()}
    try:
        with open("/proc/meminfo") as f:
            info["memory_bytes"] = int(f.readline().split()[1]) * 1024
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                            "pcie.link.gen.max,pcie.link.width.max", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        info["gpu"] = q.stdout.strip()
    return info


def run(args):
    out = Path(args.out or os.environ.get("OUT") or "generation-offload-out")
    out.mkdir(parents=True, exist_ok=True)
    bench = json.loads((Path(args.carry) / "bench.json").read_text())
    phases = args.phases.split(",")
    for p in phases:
        if p not in PHASES:
            sys.exit(f"unknown phase {p!r}; phases: {', '.join(PHASES)}")
    info = machine(args)
    (out / "machine.json").write_text(json.dumps(info, indent=1) + "\n")
    command = sh([sys.executable, *sys.argv])
    with tempfile.TemporaryDirectory(prefix="sl-gen-offload-") as d:
        work = Path(d)
        for p in PHASES:  # this order: the peer runs after sl-run has exited
            if p not in phases:
                continue
            if p == "bandwidth" and args.backend != "cuda":
                result = {"skipped": "the CPU backend has no link to measure"}
            else:
                log(f"=== {p} ===")
                start = time.time()
                result = {"bandwidth": lambda: phase_bandwidth(args, bench),
                          "speedloader": lambda: phase_speedloader(args, bench, work),
                          "accelerate": lambda: phase_accelerate(args, bench)}[p]()
                result["phase_seconds"] = time.time() - start
            result.update(phase=p, machine=info, command=result.get("command", command),
                          driver_command=command, bench=bench)
            (out / f"{p}.json").write_text(json.dumps(result, indent=1) + "\n")
            log(json.dumps({k: v for k, v in result.items()
                            if k not in ("machine", "bench", "output")}))
    text = table([out / f"{p}.json" for p in phases], link_gbps=args.link_gbps)
    (out / "generation-offload.md").write_text(text)
    print(text)
    failed = [p for p in phases
              if "error" in json.loads((out / f"{p}.json").read_text())]
    return 1 if failed else 0


# --- the table ----------------------------------------------------------------------------------

def _gb(v):
    return f"{v / 1e9:.2f}" if isinstance(v, (int, float)) else "n/a"


def _num(v):
    return f"{v:.3g}" if isinstance(v, (int, float)) else "n/a"


def table(files, link_gbps=0.0):
    results = {}
    for f in files:
        r = json.loads(Path(f).read_text())
        results[r["phase"]] = r
    if not results:
        sys.exit("no results to tabulate")
    any_r = next(iter(results.values()))
    bench, info = any_r["bench"], any_r["machine"]
    c = bench["config"]
    bw = results.get("bandwidth", {})
    h2d = bw.get("h2d_pinned", {}).get("gb_per_s_median")
    source = "pinned H2D, measured"
    if h2d is None and link_gbps:
        h2d, source = link_gbps, "the paced link (sl-run --link-gbps)"
    lines = [
        f"# Generation with weights in host memory: {bench['model']} "
        f"({c['layers']} layers, hidden {c['hidden']}, ffn {c['ffn']}, {c['heads']} heads, "
        f"{c['kv_heads']} kv heads, vocab {c['vocab']}; {bench['parameter_elements'] / 1e9:.2f}e9 "
        f"parameters, random weights, {bench['precision']})",
        "",
        f"- date {info.get('date')}, machine {info.get('host')}, {info.get('cpus')} CPUs, "
        f"{_gb(info.get('memory_bytes'))} GB RAM; GPU (name, driver, memory, PCIe gen, width): "
        f"{info.get('gpu', 'none')}",
        f"- {bench['batch']} prompts of {bench['prompt_len']} random tokens, "
        f"{bench['new_tokens']} new tokens, greedy; sl-opt --sl-generate=\"{bench['sl_generate']}\" "
        f"(schedule {bench['schedule_bytes'] / 1e6:.2f} MB, commit {bench['commit']})",
    ]
    if bw and "skipped" not in bw:
        lines.append(
            f"- link, GB/s (median of {bw['h2d_pinned']['repeats']} copies of "
            f"{bw['bytes_per_copy'] >> 20} MiB): host-to-device pinned "
            f"{bw['h2d_pinned']['gb_per_s_median']:.1f}, device-to-host pinned "
            f"{bw['d2h_pinned']['gb_per_s_median']:.1f}, host-to-device pageable "
            f"{bw['h2d_pageable']['gb_per_s_median']:.1f}")
    elif bw:
        lines.append(f"- bandwidth: {bw['skipped']}")
    cols = ["system", "batch", "prefill tok/s", "decode tok/s", "decode vs accelerate",
            "GB to device per decode step", f"link bound decode tok/s ({source})",
            "of link bound", "peak device GB", "peak host GB (RSS)", "wall s"]
    lines += ["", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    acc = results.get("accelerate", {})
    acc_rate = acc.get("decode_tokens_per_second") if "error" not in acc else None
    notes = []
    for name in ("speedloader", "accelerate"):
        r = results.get(name)
        if r is None:
            continue
        if "skipped" in r or "error" in r:
            notes.append(f"- {name}: {r.get('skipped') or r.get('error')}")
            continue
        per_step = r["bytes_to_device_per_decode_step"]
        bound = r["batch"] / (per_step / (h2d * 1e9)) if h2d and per_step else None
        rate = r["decode_tokens_per_second"]
        cells = [name, r["batch"], _num(r["prefill_tokens_per_second"]), _num(rate),
                 _num(rate / acc_rate) + "x" if acc_rate else "n/a", _gb(per_step), _num(bound),
                 _num(rate / bound) if bound else "n/a", _gb(r["device_peak_bytes"]),
                 _gb(r["host_peak_rss_bytes"]),
                 _num(r.get("wall_seconds", r.get("phase_seconds")))]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += [""] + notes
    sl = results.get("speedloader", {})
    if "decode_steps" in sl:
        lines.append(
            f"- speedloader: {sl['sub_batches']} sub-batches, weights on device "
            f"{sl['weights_on_device']}, KV cache on device {sl['kv_cache_on_device']}; host pool "
            f"peak {_gb(sl['host_pool_peak_bytes'])} GB; weights {_gb(sl['parameter_bytes'])} GB, "
            f"KV caches {_gb(sl['kv_cache_bytes'])} GB; {sl['decode_steps']} decoding steps; "
            f"load (pool allocation, random fill) {sl['load_seconds']:.1f} s; "
            f"weights {sl['random_weights']}")
    if "decode_steps" in acc:
        lines.append(
            f"- accelerate: {acc['versions']}, {acc['dtype']}, device_map {acc['placement']}; "
            f"{acc['decode_steps']} decoding steps measured"
            + (" (stopped by --accelerate-seconds)" if acc["stopped_by_deadline"] else "")
            + f"; model built in {acc['build_seconds']:.0f} s; weights: {acc['weights']}")
    lines += ["", "Commands:", "", "```"]
    lines.append(bench["commands"]["prepare"])
    lines.append(bench["commands"]["compile"])
    seen = set()
    for r in results.values():
        for key in ("driver_command", "command"):
            if r.get(key) and r[key] not in seen:
                seen.add(r[key])
                lines.append(r[key])
    lines += ["```", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="export and compile (here)")
    p.add_argument("--preset", default="llama-30b")
    p.add_argument("--tiny", action="store_true", help="a tiny LLaMA instead of --preset")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--sub-batches", type=int, default=None)
    p.add_argument("--device-memory", default=None,
                   help="sl-opt's device-memory= budget: the planner picks the sub-batch size "
                        "and what stays on the device")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--precision", default="bf16", choices=("bf16", "f32"))
    p.add_argument("--sl-opt", default=str(ROOT / "build" / "bin" / "sl-opt"))
    p.add_argument("--sl-opt-option", action="append", default=[],
                   help="another KEY=VALUE for --sl-generate (repeatable)")
    p.add_argument("--out", required=True)

    r = sub.add_parser("run", help="measure (on the GPU machine)")
    r.add_argument("--carry", required=True, help="prepare's carry folder (bench.json, schedule)")
    r.add_argument("--bundle", help="pack-runtime.sh's tarball or directory (default: "
                                    "CARRY/speedloader-runtime.tar.gz)")
    r.add_argument("--sl-run", help="an sl-run to use instead of the bundle's")
    r.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    r.add_argument("--phases", default=",".join(PHASES))
    r.add_argument("--out", help="default $OUT")
    r.add_argument("--repeats", type=int, default=10)
    r.add_argument("--copy-mib", type=int, default=1024)
    r.add_argument("--link-gbps", type=float, default=0.0,
                   help="CPU backend: pace sl-run's copies (and take this as the link bound)")
    r.add_argument("--accelerate-batch", type=int, default=None, help="default: the schedule's")
    r.add_argument("--accelerate-seconds", type=float, default=300,
                   help="stop accelerate's generation after this long; decode tokens/s is then "
                        "over the steps done")

    t = sub.add_parser("table", help="one table from the PHASE.json files of several runs")
    t.add_argument("files", nargs="+")
    t.add_argument("--out")
    t.add_argument("--link-gbps", type=float, default=0.0,
                   help="the link bound's bandwidth when no bandwidth.json is given")
    args = ap.parse_args(argv)
    if args.command == "prepare":
        prepare(args)
        return 0
    if args.command == "run":
        return run(args)
    text = table(args.files, link_gbps=args.link_gbps)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
