"""Schedules of two sl-opt builds, compared byte for byte: the check a refactoring of the compiler
should pass (issue 20's "schedules byte-identical or differ only where the change explains why").

Exports a set of small models once into --work (LLaMA with GQA, GPT-2 with tied embeddings, OPT,
a LLaMA exported without constant folding and with interleaved rotary, an MLP), compiles each
with both sl-opts through --sl-train, --sl-infer and --sl-generate in several configurations
(budgets, bf16, world 2 and 4, canonical, live-blocks, plan reports, --schedule-entry), and
compares what each wrote: the schedule, stdout and stderr byte for byte, and the printed IR
modulo SSA value names (a renamed result is not a change of meaning). Prints one line per
difference and a summary; exits 1 if anything differs.

    /usr/bin/python3 bench/schedule_identity.py --before OLD/bin/sl-opt --after build/bin/sl-opt \\
        --work /tmp/identity
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MODELS = {
    "llama": ["--arch", "llama", "--layers", "2", "--hidden", "64", "--heads", "4",
              "--kv-heads", "2", "--ffn", "128", "--vocab", "128", "--max-positions", "64"],
    "gpt2-tied": ["--arch", "gpt2", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab",
                  "128", "--max-positions", "64", "--tie-embeddings"],
    "opt": ["--arch", "opt", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab", "128",
            "--max-positions", "64"],
    "llama-nf": ["--arch", "llama", "--layers", "2", "--hidden", "64", "--heads", "4", "--vocab",
                 "128", "--max-positions", "64", "--no-constant-folding", "--rope", "interleaved"],
    "mlp": ["--arch", "mlp", "--hidden", "32,32", "--activation", "silu", "--in-features", "16",
            "--out-features", "8"],
}

TRAIN = ["batch=4 seq=16", "batch=4 seq=16 num-sub-batches=2",
         "batch=8 seq=16 num-sub-batches=4 live-blocks=2",
         "batch=4 seq=16 num-sub-batches=2 precision=bf16",
         "batch=4 seq=16 num-sub-batches=2 world=2",
         "batch=8 seq=16 num-sub-batches=2 mode=canonical",
         "seq=16 device-memory=2MB host-memory=64MB plan-report",
         "batch=4 seq=16 num-sub-batches=2 world=4 precision=bf16"]
INFER = ["batch=2 seq=16", "batch=4 seq=16 device-memory=1MB", "batch=2 seq=16 precision=bf16"]
GENERATE = ["batch=4 num-sub-batches=2 max-prompt-len=8 max-new-tokens=8",
            "batch=4 max-prompt-len=8 max-new-tokens=8 device-memory=4MB host-memory=64MB",
            "batch=2 max-prompt-len=8 max-new-tokens=4 precision=bf16"]


def compilations():
    """(name, model, sl-opt arguments) of every compilation."""
    runs = []
    for model in ("llama", "gpt2-tied", "opt", "llama-nf"):
        for options in TRAIN:
            runs.append((f"{model}-train-{options}", model, [f"--sl-train={options}"]))
    for model in ("llama", "gpt2-tied", "opt"):
        for options in INFER:
            runs.append((f"{model}-infer-{options}", model, [f"--sl-infer={options}"]))
        for options in GENERATE:
            runs.append((f"{model}-generate-{options}", model, [f"--sl-generate={options}"]))
    runs.append(("mlp-infer", "mlp", ["--sl-infer=batch=4"]))
    runs.append(("llama-block", "llama", ["--sl-train=batch=4 seq=16", "--schedule-entry=block"]))
    return runs


def export(work):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    for name, args in MODELS.items():
        out = work / f"{name}.onnx"
        if out.exists():
            continue
        subprocess.run([sys.executable, "-m", "speedloader.export", *args, "--out", str(out)],
                       check=True, capture_output=True, env=env)


def compile_all(sl_opt, work, label):
    """Writes every compilation's schedule, stdout, stderr and printed IR under work/label."""
    out = work / label
    out.mkdir(exist_ok=True)
    for name, model, args in compilations():
        stem = out / re.sub(r"[^A-Za-z0-9.-]+", "_", name)
        onnx = str(work / f"{model}.onnx")
        proc = subprocess.run([sl_opt, onnx, *args, "-o", f"{stem}.slsched"], capture_output=True,
                              text=True)
        Path(f"{stem}.out").write_text(proc.stdout)
        Path(f"{stem}.err").write_text(proc.stderr + f"exit {proc.returncode}\n")
        proc = subprocess.run([sl_opt, onnx, *args], capture_output=True, text=True)
        Path(f"{stem}.mlir").write_text(proc.stdout)
    return out


DEF = re.compile(r"^(\s*)((?:%[\w.]+(?::\d+)?(?:, )?)+) = ")
USE = re.compile(r"%[\w.]+(?:#\d+)?")


def without_value_names(text):
    """The IR with every SSA value renamed in order of definition (per function); results defined
    together (`%a, %b = ...` or `%0:2 = ...`) become `%vN:2` and their uses `%vN#i`."""
    lines, names, count = [], {}, 0
    for line in text.split("\n"):
        if line.strip().startswith("func.func"):
            names.clear()
        head, rest = "", line
        match = DEF.match(line)
        if match:
            count += 1
            value = f"%v{count}"
            defined = [n.strip() for n in match.group(2).split(",")]
            if len(defined) > 1:
                for i, n in enumerate(defined):
                    names[n] = f"{value}#{i}"
                head = f"{match.group(1)}{value}:{len(defined)} = "
            else:
                base, _, results = defined[0].partition(":")
                names[base] = value
                head = f"{match.group(1)}{value}{':' + results if results else ''} = "
            rest = line[match.end():]

        def rename(use):
            text = use.group(0)
            base = text.split("#")[0]
            return names[base] + text[len(base):] if base in names else text
        lines.append(head + USE.sub(rename, rest))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the reference sl-opt")
    parser.add_argument("--after", required=True, help="the sl-opt under test")
    parser.add_argument("--work", required=True, type=Path, help="exports and outputs")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    export(args.work)
    before = compile_all(args.before, args.work, "before")
    after = compile_all(args.after, args.work, "after")
    differing = 0
    files = sorted(p.name for p in before.iterdir())
    for name in files:
        a, b = before / name, after / name
        if not b.exists():
            print(f"missing after: {name}")
            differing += 1
            continue
        if a.read_bytes() == b.read_bytes():
            continue
        if name.endswith(".mlir") and without_value_names(a.read_text()) == \
                without_value_names(b.read_text()):
            print(f"value names only: {name}")
            continue
        print(f"DIFFERS: {name}")
        differing += 1
    print(f"{len(compilations())} compilations, {len(files)} files: {differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
