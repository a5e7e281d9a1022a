"""Kernel counts of compiled schedules: how many TRANSPOSE kernels a schedule runs per MATMUL.

Reads each schedule with Python classes that protoc generates from ir/schedule/schedule.proto and
prints, per file, the number of kernels of each op kind that matters here (TRANSPOSE, MATMUL,
GEMM), the TRANSPOSE kernels by permutation, the MATMUL kernels by transpose flags, and the
ratio TRANSPOSE / MATMUL (issue 21 asks for at most 0.1).

    /usr/bin/python3 bench/kernel_counts.py train.slsched infer.slsched generate.slsched
"""

import argparse
import collections
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def schedule_module(workdir):
    subprocess.run(["protoc", f"-I{ROOT / 'ir' / 'schedule'}", f"--python_out={workdir}",
                    "schedule.proto"], check=True)
    spec = importlib.util.spec_from_file_location("schedule_pb2",
                                                  Path(workdir) / "schedule_pb2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counts(pb, path):
    schedule = pb.Schedule()
    schedule.ParseFromString(Path(path).read_bytes())
    ops = collections.Counter(pb.OpKind.Name(k.op) for k in schedule.kernels)
    perms = collections.Counter(str(list(k.transpose.perm)) for k in schedule.kernels
                                if k.op == pb.TRANSPOSE)
    flags = collections.Counter(
        ("trans_a " if k.matmul.trans_a else "") + ("trans_b" if k.matmul.trans_b else "")
        for k in schedule.kernels if k.op == pb.MATMUL)
    return schedule, ops, perms, flags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("schedules", nargs="+", help=".slsched files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        pb = schedule_module(workdir)
        for path in args.schedules:
            schedule, ops, perms, flags = counts(pb, path)
            matmuls = ops["MATMUL"]
            ratio = ops["TRANSPOSE"] / matmuls if matmuls else float("nan")
            print(f"{path}: version {schedule.version}, kind {schedule.kind}, "
                  f"{len(schedule.kernels)} kernels: TRANSPOSE {ops['TRANSPOSE']}, "
                  f"MATMUL {matmuls}, GEMM {ops['GEMM']}, TRANSPOSE/MATMUL {ratio:.3f}")
            print("  TRANSPOSE by perm: " + (", ".join(
                f"{perm} x{n}" for perm, n in sorted(perms.items())) or "none"))
            print("  MATMUL by flags: " + ", ".join(
                f"{flag.strip() or 'none'} x{n}" for flag, n in sorted(flags.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
