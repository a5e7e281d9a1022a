"""The two machine rates the peer tables divide by, measured with PyTorch on the GPU machine, as
one RESULT line (task "machine"): pinned and pageable host<->device copy GB/s
(generation_offload.phase_bandwidth: 1 GiB copies timed with CUDA events, median of --repeats)
and the bf16 GEMM rate (an 8192^3 product on random data, median of --repeats after warm-up),
with the GPU's name, driver and memory.

    python3 bench/peers/link.py [--jsonl FILE]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "gpu"))
import common  # noqa: E402


def measure(args):
    try:
        import torch
    except ImportError as e:
        raise common.Skip(f"PyTorch is not importable: {e}")
    if not torch.cuda.is_available():
        raise common.Skip("no CUDA device visible")
    import generation_offload

    bw = generation_offload.phase_bandwidth(
        argparse.Namespace(copy_mib=args.copy_mib, repeats=args.repeats), None)
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    ms = []
    for _ in range(args.repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                          "pcie.link.gen.max,pcie.link.width.max", "--format=csv,noheader"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return {"h2d_pinned_gbps": bw["h2d_pinned"]["gb_per_s_median"],
            "d2h_pinned_gbps": bw["d2h_pinned"]["gb_per_s_median"],
            "h2d_pageable_gbps": bw["h2d_pageable"]["gb_per_s_median"],
            "bandwidth": bw, "gemm_bf16_tflops": 2 * n ** 3 / (statistics.median(ms) / 1e3) / 1e12,
            "gemm_shape": f"{n}x{n}x{n} bf16, random", "nvidia_smi": smi.strip(),
            "versions": common.versions("torch")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--copy-mib", type=int, default=1024)
    ap.add_argument("--jsonl")
    args = ap.parse_args(argv)
    return common.run_driver("machine", "machine", {}, vars(args), args.jsonl,
                             lambda: measure(args), modules=("torch",))


if __name__ == "__main__":
    sys.exit(main())
