"""Hugging Face accelerate's offloaded generate(): the generation peer for LLaMA shapes.

Runs bench/gpu/generation_offload.py's accelerate phase (every block's weights in CPU memory,
dispatch_model copying each block to the GPU at its forward; random bf16 weights; greedy
generate() with a clock per token) on the shape given here, on the prompts every peer driver
uses (common.prompt_ids), and prints one RESULT line (common.py).

    python3 bench/peers/gen_accelerate.py --model llama2-7b [--layers 32] [--batch 32]
    python3 bench/peers/gen_accelerate.py --tiny          # on the CPU where accelerate imports
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "gpu"))
import common  # noqa: E402


def bench_of(args, s) -> dict:
    """The `bench` dictionary generation_offload.phase_accelerate reads."""
    config = {k: s[k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                                "rms_norm_eps")}
    config.update(max_positions=max(s["max_positions"], args.prompt_len + args.new_tokens),
                  rope_theta=10000.0)
    return {"model": s["name"], "config": config, "batch": args.batch,
            "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
            "precision": "bf16"}


def measure(args, s):
    try:
        import accelerate  # noqa: F401
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        raise common.Skip(f"accelerate/transformers/torch not importable: {e}")
    import generation_offload

    backend = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    if backend == "cpu" and not args.tiny:
        raise common.Skip("no CUDA device visible (only --tiny runs on the CPU)")
    bench = bench_of(args, s)
    # generation_offload draws its prompts from the same seed and generator as
    # common.prompt_ids: check, so that every system generates from the same token ids.
    expect = common.prompt_ids(args.batch, args.prompt_len, s["vocab"]).tolist()
    if generation_offload.prompts_of(bench) != expect:
        raise RuntimeError("generation_offload.prompts_of and common.prompt_ids disagree")
    ns = argparse.Namespace(backend=backend, accelerate_batch=None,
                            accelerate_seconds=args.seconds)
    r = generation_offload.phase_accelerate(ns, bench)
    if "skipped" in r:
        raise common.Skip(r["skipped"])
    steps = r["decode_steps"]
    return {
        "batch": r["batch"], "prompt_len": args.prompt_len, "new_tokens": r["new_tokens"],
        "new_tokens_asked": args.new_tokens, "sub_batches": 1,
        "prefill_seconds": r["prefill_seconds"],
        "prefill_tokens_per_second": r["prefill_tokens_per_second"],
        "decode_steps": steps, "decode_seconds": r["decode_seconds"],
        "decode_tokens_per_second": r["decode_tokens_per_second"],
        "stopped_by_deadline": r["stopped_by_deadline"],
        "bytes_to_device_per_decode_step": r["bytes_to_device_per_decode_step"],
        "weight_bytes": r["parameter_bytes"], "weights_on_device": False,
        "kv_cache_on_device": backend == "cuda",
        "device_peak_bytes": r["device_peak_bytes"],
        "host_peak_rss_bytes": r["host_peak_rss_bytes"],
        "build_seconds": r["build_seconds"], "placement": r["placement"],
        "weights": r["weights"], "dtype": r["dtype"], "first_tokens": r["first_tokens"],
        "backend": backend, "versions": dict(common.versions("torch"), **r["versions"]),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.common_arguments(ap, "generate")
    ap.add_argument("--seconds", type=float, default=300,
                    help="stop generate() after this long (decode tokens/s is then over the "
                         "steps done, and the line says stopped_by_deadline)")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU even where CUDA is "
                                                       "visible (with --tiny)")
    args = ap.parse_args(argv)
    if args.tiny:
        args.model = "tiny-llama"
        args.batch, args.prompt_len, args.new_tokens = 4, 16, 4
    s = common.shape(args.model or "llama2-7b", args.layers)
    if s["arch"] != "llama":
        raise SystemExit(f"gen_accelerate.py runs LLaMA shapes; {s['name']} is {s['arch']}")
    run_config = {"framework": "hf accelerate dispatch_model + generate()", "batch": args.batch,
                  "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
                  "dtype": "bf16", "decoding": "greedy", "seconds_limit": args.seconds,
                  "placement": "every block, the embedding and the head in CPU memory "
                               "(device_map cpu), copied to the GPU at each forward"}
    return common.run_driver("accelerate", "generate", s, run_config, args.jsonl,
                             lambda: measure(args, s),
                             modules=("torch", "transformers", "accelerate"))


if __name__ == "__main__":
    sys.exit(main())
