"""The generation benchmark's driver (bench/gpu/generation_offload.py), dry run on the CPU: a tiny
LLaMA exported weightless, compiled, generated with --random-weights on the CPU backend (the
accelerate phase skips itself where transformers is not installed), the report parsed into the
table."""

import json
import subprocess
import sys

from conftest import REPO_ROOT

DRIVER = REPO_ROOT / "bench" / "gpu" / "generation_offload.py"


def test_dry_run_on_cpu(sl_tools, tmp_path):
    def driver(*args):
        proc = subprocess.run([sys.executable, str(DRIVER), *map(str, args)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stdout
        return proc.stdout

    driver("prepare", "--tiny", "--batch", 4, "--sub-batches", 2, "--prompt-len", 12,
           "--new-tokens", 4, "--precision", "f32", "--sl-opt", sl_tools.sl_opt, "--out", tmp_path)
    bench = json.loads((tmp_path / "carry" / "bench.json").read_text())
    assert bench["batch"] == 4 and bench["prompt_len"] == 12 and bench["config"]["layers"] == 2
    out = tmp_path / "out"
    text = driver("run", "--carry", tmp_path / "carry", "--sl-run", sl_tools.sl_run,
                  "--backend", "cpu", "--link-gbps", 1, "--out", out)
    sl = json.loads((out / "speedloader.json").read_text())
    assert sl["batch"] == 4 and sl["decode_steps"] == 3  # the first token comes from prefill
    assert sl["random_weights"]["seed"] == 0 and sl["backend"] == "cpu"
    assert sl["decode_tokens_per_second"] > 0 and sl["prefill_tokens_per_second"] > 0
    # Weights once per step (all of them: the tiny model's weights are not kept on the device).
    assert sl["bytes_to_device_per_decode_step"] >= sl["parameter_bytes"] > 0
    assert json.loads((out / "bandwidth.json").read_text())["skipped"]
    table = (out / "generation-offload.md").read_text()
    assert table in text
    row = next(line for line in table.splitlines() if line.startswith("| speedloader |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    bound = 4 / (sl["bytes_to_device_per_decode_step"] / 1e9)  # the paced 1 GB/s link
    assert float(cells[6]) == float(f"{bound:.3g}")
    assert 0 < float(cells[7]) <= 1.05  # paced: under the bound
    assert "sl-run" in table and "--random-weights 0" in table

    # The table subcommand makes the same table from the files.
    again = driver("table", out / "bandwidth.json", out / "speedloader.json",
                   out / "accelerate.json", "--link-gbps", 1)
    assert row in again
