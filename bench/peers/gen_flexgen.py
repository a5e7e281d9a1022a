"""FlexGen (the `flexgen` package, 0.1.8 on PyPI; the repository later renamed it flexllmgen)
generating with OPT weights in host memory: the second generation peer.

FlexGen runs OPT shapes only (flexgen.opt_config); opt-6.7b is the one nearest llama2-7b
(hidden 4096, 32 layers), and --layers takes a slice of it as the other drivers do. Weights are
FlexGen's own dummy weights (`--path _DUMMY_`: every weight 1.0, fp16, never read from disk),
the prompts are common.prompt_ids (FlexGen's own benchmark tokenizes a fixed sentence with
facebook/opt-30b's tokenizer, which needs the hub), greedy, --new-tokens each. As FlexGen's
flex_opt.py does, one warm-up generate (prompt 32, one token) runs first, then the timed one;
prefill is its first cost, decode the sum of the rest.

The policy (GPU batch size, number of GPU batches, the six placement percentages) is FlexGen's
own: `--search-policy FILE` runs its cost model's LP (experimental/cost_model.py, needs pulp;
no GPU) for the generation batch, with the weights held on the host (wg 0, wc 100) and the
hardware constants given (defaults: the H200's measured link and GEMM rates,
bench/results/gpu-h200-2026-11-26.md), over every GPU batch size dividing the batch, and writes
the best policy to FILE (of equally rated ones, the largest GPU batch); prepare.sh does this
here, so that pulp need not travel.
`--policy-file FILE` runs it; --gpu-batch-size/--num-gpu-batches/--percent give one by hand.

    python3 bench/peers/gen_flexgen.py --search-policy policy.json --layers 4 --batch 32
    python3 bench/peers/gen_flexgen.py --policy-file policy.json --layers 4 --batch 32
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

GB = 1 << 30


def flexgen_name(s) -> str:
    if s["name"] == "opt-6.7b":
        return "opt-6.7b"
    if s["name"] == "tiny-opt":
        return "opt-125m"
    raise SystemExit(f"FlexGen runs OPT shapes; {s['name']} is not one")


def opt_config(s):
    from flexgen.opt_config import get_opt_config

    if s["name"] == "tiny-opt":
        return get_opt_config("opt-125m", num_hidden_layers=s["layers"], hidden_size=s["hidden"],
                              input_dim=s["hidden"], n_head=s["heads"],
                              ffn_embed_dim=s["ffn"], vocab_size=s["vocab"])
    return get_opt_config(flexgen_name(s), num_hidden_layers=s["layers"])


def search_policy(args, s) -> dict:
    """FlexGen's cost-model LP for a batch of args.batch prompts, weights on the host."""
    try:
        import pulp  # noqa: F401
        from experimental import cost_model as cm
    except ImportError as e:
        raise SystemExit(f"the policy search needs flexgen's experimental.cost_model and pulp: "
                         f"{e}")
    c = cm.CostModelConfig()
    o = opt_config(s)
    c.l, c.h1, c.h2, c.nh = o.num_hidden_layers, o.hidden_size, o.ffn_embed_dim, o.n_head
    c.s, c.n = args.prompt_len, args.new_tokens
    c.gmem, c.cmem, c.nmem = int(args.gpu_mem * GB), int(args.cpu_mem * GB), 0
    link = args.link_gbps * 1e9
    c.ctog_bdw = c.gtoc_bdw_cache = c.gtoc_bdw_hidden = link
    c.mm_flops_p = c.mm_flops_g = args.gemm_tflops * 1e12
    c.bmm_flops_p = c.bmm_flops_g = args.bmm_tflops * 1e12
    percent = [0, 100, None, None, None, None]  # weights on the host, the rest searched
    best = None
    # Largest GPU batch first, and a later one only if strictly better: the LP often rates
    # several splits alike (it does not see that small GPU batches waste the GPU), and FlexGen's
    # own solve() keeps the first of equals while trying the smallest first.
    for gbs in [g for g in range(args.batch, 0, -1) if args.batch % g == 0]:
        status, policy, (throughput, _, _), _ = cm.solve_lp(
            c, args.batch, gbs, verbose=0, debug=True, percent=percent)
        if status == 1 and policy is not None and (best is None or throughput > best[1]):
            best = (policy, throughput)
    if best is None:
        raise SystemExit(f"FlexGen's cost model found no policy for batch {args.batch} within "
                         f"{args.gpu_mem} GB of GPU and {args.cpu_mem} GB of CPU memory")
    p, throughput = best
    pct = [round(100 * x) for x in (p.w_gpu_percent, p.w_cpu_percent, p.cache_gpu_percent,
                                    p.cache_cpu_percent, p.act_gpu_percent, p.act_cpu_percent)]
    return {"gpu_batch_size": p.gpu_batch_size, "num_gpu_batches": p.num_gpu_batches,
            # The cost model always answers cpu_cache_compute; it matters only for a cache
            # (partly) on the host.
            "percent": pct, "cpu_cache_compute": bool(p.cpu_cache_compute) and pct[3] > 0,
            "predicted_tokens_per_second": throughput,
            "search": {"model": s["name"], "layers": s["layers"], "batch": args.batch,
                       "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
                       "gpu_mem_gb": args.gpu_mem, "cpu_mem_gb": args.cpu_mem,
                       "link_gbps": args.link_gbps, "gemm_tflops": args.gemm_tflops,
                       "bmm_tflops": args.bmm_tflops, "fixed": "wg 0, wc 100",
                       "cost_model": "flexgen experimental/cost_model.py solve_lp"}}


def policy_of(args) -> dict:
    if args.policy_file:
        p = json.loads(Path(args.policy_file).read_text())
    else:
        p = {"gpu_batch_size": args.gpu_batch_size, "num_gpu_batches": args.num_gpu_batches,
             "percent": args.percent, "cpu_cache_compute": args.cpu_cache_compute}
    if p["gpu_batch_size"] * p["num_gpu_batches"] != args.batch:
        raise SystemExit(f"the policy's gpu batch size {p['gpu_batch_size']} x "
                         f"{p['num_gpu_batches']} GPU batches is not --batch {args.batch}")
    if len(p["percent"]) != 6 or p["percent"][0] + p["percent"][1] > 100:
        raise SystemExit(f"percent must be six numbers wg wc cg cc hg hc, got {p['percent']}")
    return p


def measure(args, s, p):
    try:
        import torch
    except ImportError as e:
        raise common.Skip(f"PyTorch is not importable: {e}")
    if not torch.cuda.is_available():
        raise common.Skip("FlexGen runs on a CUDA device; none is visible")
    try:
        from flexgen.compression import CompressionConfig
        from flexgen.flex_opt import OptLM, Policy
        from flexgen.timer import timers
        from flexgen.utils import ExecutionEnv
    except ImportError as e:
        raise common.Skip(f"flexgen is not importable: {e} (run-peers.sh installs the wheels)")
    import numpy as np

    config = opt_config(s)
    pct = p["percent"]
    policy = Policy(p["gpu_batch_size"], p["num_gpu_batches"], pct[0], pct[1], pct[2], pct[3],
                    pct[4], pct[5], overlap=True, sep_layer=True, pin_weight=True,
                    cpu_cache_compute=p.get("cpu_cache_compute", False), attn_sparsity=1.0,
                    compress_weight=False,
                    comp_weight_config=CompressionConfig(num_bits=4, group_size=64, group_dim=0,
                                                         symmetric=False),
                    compress_cache=False,
                    comp_cache_config=CompressionConfig(num_bits=4, group_size=64, group_dim=2,
                                                        symmetric=False))
    prompts = common.prompt_ids(args.batch, args.prompt_len, s["vocab"])
    warm = common.prompt_ids(args.batch, 32, s["vocab"], seed=1)
    with tempfile.TemporaryDirectory(prefix="flexgen-") as offload:
        env = ExecutionEnv.create(offload)
        try:
            torch.cuda.reset_peak_memory_stats()
            # The path must contain _DUMMY_: OptLM then fills every weight with ones.
            model = OptLM(config, env, os.path.join(offload, "_DUMMY_"), policy)
            model.generate(tuple(warm.tolist()), max_new_tokens=1)
            timers("generate").reset()
            out = model.generate(tuple(prompts.tolist()), max_new_tokens=args.new_tokens)
            costs = list(timers("generate").costs)
        finally:
            env.close_copy_threads()
    prefill, decode = costs[0], sum(costs[1:])
    weight_bytes = config.model_bytes()
    cache_bytes = config.cache_bytes(args.batch, args.prompt_len + args.new_tokens)
    # Host-to-device bytes of a decoding step (an estimate from the policy: the host's share of
    # the weights, and the host's share of the cache at its mean length unless the CPU computes
    # attention over it in place).
    mean_len = args.prompt_len + args.new_tokens / 2
    cache_step = config.cache_bytes(args.batch, mean_len) * pct[3] / 100
    to_device = weight_bytes * pct[1] / 100 + (0 if p.get("cpu_cache_compute") else cache_step)
    return {
        "batch": args.batch, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
        "sub_batches": p["num_gpu_batches"], "gpu_batch_size": p["gpu_batch_size"],
        "policy": p, "prefill_seconds": prefill,
        "prefill_tokens_per_second": args.batch * args.prompt_len / prefill,
        "decode_steps": len(costs) - 1, "decode_seconds": decode,
        "decode_tokens_per_second": args.batch * (args.new_tokens - 1) / max(decode, 1e-10),
        "bytes_to_device_per_decode_step": to_device,
        "bytes_to_device_per_decode_step_is": "estimated from the policy",
        "weight_bytes": weight_bytes, "kv_cache_bytes": cache_bytes,
        "weights_on_device": pct[0] == 100, "kv_cache_on_device": pct[2] == 100,
        "device_peak_bytes": torch.cuda.max_memory_allocated(),
        "first_tokens": np.asarray(out)[0, args.prompt_len:args.prompt_len + 8].tolist(),
        "weights": "FlexGen's _DUMMY_ weights (all ones), fp16",
        "dtype": "float16 (FlexGen's OPT)",
        "versions": common.versions("torch", "flexgen", "transformers"),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.common_arguments(ap, "generate")
    ap.add_argument("--search-policy", metavar="FILE",
                    help="run FlexGen's policy search (no GPU) and write the policy to FILE")
    ap.add_argument("--gpu-mem", type=float, default=70, help="search: GPU memory, GB")
    ap.add_argument("--cpu-mem", type=float, default=100, help="search: CPU memory, GB")
    ap.add_argument("--link-gbps", type=float, default=55.0,
                    help="search: host<->device GB/s (default: the H200's pinned H2D)")
    ap.add_argument("--gemm-tflops", type=float, default=770.0,
                    help="search: GEMM TFLOP/s (default: the H200's bf16 GEMMs)")
    ap.add_argument("--bmm-tflops", type=float, default=300.0,
                    help="search: batched attention products, TFLOP/s")
    ap.add_argument("--policy-file", help="a policy written by --search-policy")
    ap.add_argument("--gpu-batch-size", type=int, default=None)
    ap.add_argument("--num-gpu-batches", type=int, default=1)
    ap.add_argument("--percent", type=int, nargs=6, default=[0, 100, 100, 0, 100, 0],
                    metavar=("WG", "WC", "CG", "CC", "HG", "HC"),
                    help="weights, cache and activations on GPU / CPU, in percent (default: "
                         "weights on the host, cache and activations on the GPU)")
    ap.add_argument("--cpu-cache-compute", action="store_true")
    args = ap.parse_args(argv)
    if args.tiny:
        args.model = "tiny-opt"
        args.batch, args.prompt_len, args.new_tokens = 4, 16, 4
    s = common.shape(args.model or "opt-6.7b", args.layers)
    flexgen_name(s)
    if args.search_policy:
        p = search_policy(args, s)
        Path(args.search_policy).write_text(json.dumps(p, indent=1) + "\n")
        print(json.dumps(p))
        return 0
    if args.gpu_batch_size is None and not args.policy_file:
        args.gpu_batch_size = args.batch // args.num_gpu_batches
    p = policy_of(args)
    run_config = {"framework": "flexgen", "flexgen_model": flexgen_name(s), "batch": args.batch,
                  "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
                  "policy": p, "policy_file": args.policy_file, "path": "_DUMMY_",
                  "overlap": True, "sep_layer": True, "pin_weight": True, "decoding": "greedy",
                  "warmup": "one generate of prompt 32, 1 new token"}
    return common.run_driver("flexgen", "generate", s, run_config, args.jsonl,
                             lambda: measure(args, s, p),
                             modules=("torch", "flexgen", "transformers"))


if __name__ == "__main__":
    sys.exit(main())
