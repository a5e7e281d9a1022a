"""sl-run --random-weights end to end: the model's files are never opened, the same seed gives
the same tokens, another seed other tokens; train schedules measure with it but keep nothing; the
report says so."""

import json
import math
import os

from sl_helpers import check_ok
from speedloader.export import data_file_of, export_model, export_weightless
from speedloader.models.llama import LlamaConfig

CONFIG = LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64, max_positions=16)
GENERATE = "--sl-generate=batch=4 num-sub-batches=2 max-prompt-len=6 max-new-tokens=5"


def _generate(sl_tools, sched, tmp, seed, tag):
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"tokens": [i % 64, (7 * i) % 64, 3]}) + "\n"
                               for i in range(4)))
    out, report = tmp / f"out-{tag}.jsonl", tmp / f"report-{tag}.json"
    proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", prompts, "--output", out,
                          "--report", report, "--random-weights", seed])
    check_ok(proc)
    assert "the weights are random (--random-weights" in proc.stderr
    tokens = [json.loads(line)["tokens"] for line in out.read_text().splitlines()]
    return tokens, json.loads(report.read_text())


def test_random_weights_without_the_model_files(sl_tools, tmp_path):
    w = export_weightless("llama", CONFIG, tmp_path / "model.onnx")
    sched = tmp_path / "gen.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, w.onnx_path, GENERATE, "-o", sched]))
    os.remove(data_file_of(w.onnx_path))
    os.remove(w.onnx_path)
    # Without the flag the missing file is an error, named.
    proc = sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp_path / "none.jsonl"])
    assert proc.returncode == 1 and "model.onnx.data' does not exist" in proc.stderr

    a, report = _generate(sl_tools, sched, tmp_path, 1, "a")
    b, _ = _generate(sl_tools, sched, tmp_path, 1, "b")
    c, _ = _generate(sl_tools, sched, tmp_path, 2, "c")
    assert a == b
    assert a != c
    assert all(len(t) == 5 for t in a + c)
    assert report["random_weights"] == {"seed": 1, "std": report["random_weights"]["std"]}
    assert abs(report["random_weights"]["std"] - 0.02) < 1e-9
    assert report["parameter_bytes_read"] == 0
    g = report["generation"]
    # Every decoding step brings the weights (and the cache chunks) to the device.
    assert g["decode_bytes_host_to_device"] >= g["decode_runs"] * g["schedule"]["parameter_bytes"]
    assert g["decode_bytes_host_to_device"] < g["bytes_host_to_device"]


def test_random_weights_are_not_the_files(sl_tools, tmp_path):
    """With real weights, the flag replaces them: other tokens than the file's, and a report
    without random_weights when the flag is absent."""
    export_model("llama", CONFIG, tmp_path / "model.onnx", seed=5, constant_folding=False)
    sched = tmp_path / "gen.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx", GENERATE, "-o", sched]))
    random_tokens, _ = _generate(sl_tools, sched, tmp_path, 5, "r")
    report = tmp_path / "file.json"
    check_ok(sl_tools._run([sl_tools.sl_run, sched, "--prompts", tmp_path / "prompts.jsonl",
                            "--output", tmp_path / "file.jsonl", "--report", report]))
    file_tokens = [json.loads(line)["tokens"]
                   for line in (tmp_path / "file.jsonl").read_text().splitlines()]
    assert file_tokens != random_tokens
    assert json.loads(report.read_text())["random_weights"] is None


def test_train_schedule_measures_with_random_weights_but_keeps_nothing(sl_tools, tmp_path):
    """A train schedule runs steps from random weights (to measure a model whose weights are not
    at hand): the model file is never opened, the report says the weights were random, and the
    same seed gives the same losses. Nothing trained from them may be kept: --save, --export-onnx
    and --resume are refused before anything runs."""
    export_model("llama", CONFIG, tmp_path / "model.onnx", seed=0, constant_folding=False)
    sched = tmp_path / "train.slsched"
    check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / "model.onnx",
                            "--sl-train=batch=2 seq=4", "-o", sched]))
    (tmp_path / "tokens.bin").write_bytes(bytes(b for i in range(128) for b in (i % 64, 0)))
    losses = []
    for i in range(2):
        report = tmp_path / f"report{i}.json"
        proc = sl_tools._run([sl_tools.sl_run, sched, "--data", tmp_path / "tokens.bin",
                              "--steps", "2", "--random-weights", "3", "--report", report])
        check_ok(proc)
        r = json.loads(report.read_text())
        assert r["random_weights"]["seed"] == 3
        losses.append(r["train"]["losses"])
    assert losses[0] == losses[1] and all(math.isfinite(x) for x in losses[0])
    for flag in ("--save", "--export-onnx"):
        proc = sl_tools._run([sl_tools.sl_run, sched, "--data", tmp_path / "tokens.bin",
                              "--steps", "1", "--random-weights", "3", flag,
                              tmp_path / "out.file"])
        assert proc.returncode == 1
        assert "--save, --export-onnx and --resume are refused with it" in proc.stderr
        assert not (tmp_path / "out.file").exists()
