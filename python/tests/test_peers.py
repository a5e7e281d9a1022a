"""The peer comparison's plumbing (bench/peers/, speedloader.peer_tables), without a GPU: the
shapes agree with speedloader's models, the tables compute the ratios, MFU and link-bound
fractions they claim from result lines, bad result files are refused by name, the GPU-only
drivers skip cleanly here, and SpeedLoader's side runs end to end on the CPU backend (tiny
schedules) into the tables."""

import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT

PEERS = REPO_ROOT / "bench" / "peers"
sys.path.insert(0, str(PEERS))
import common  # noqa: E402

from speedloader import peer_tables  # noqa: E402


def test_shapes_agree_with_speedloaders_models():
    import torch
    from speedloader.models import get_arch, get_preset

    arch, c = get_preset("llama2-7b")
    s = common.SHAPES["llama2-7b"]
    assert (arch, c.layers, c.hidden, c.heads, c.ffn, c.vocab, c.max_positions) == (
        s["arch"], s["layers"], s["hidden"], s["heads"], s["ffn"], s["vocab"], s["max_positions"])
    assert c.rms_norm_eps == s["rms_norm_eps"]
    # The parameter counts behind MFU and the link bound, against real (tiny) models.
    for name, extra in (("tiny-llama", {"kv_heads": 2}), ("tiny-opt", {})):
        s = dict(common.SHAPES[name], **extra, name=name)
        a = get_arch(s["arch"])
        fields = {k: s[k] for k in ("layers", "hidden", "heads", "ffn", "vocab", "max_positions")}
        if s["arch"] == "llama":
            fields["kv_heads"] = s["kv_heads"]
        torch.manual_seed(0)
        model = a.build(a.config_cls(**fields))
        assert common.parameter_count(s) == sum(p.numel() for p in model.parameters()), name
    assert common.shape("llama2-7b")["parameters"] == 6_738_415_616  # LLaMA-2-7B's count
    assert common.shape("llama2-7b", 2)["parameters"] == 666_914_816  # the probe's fingerprint


def line(system, task, **fields):
    base = {"system": system, "task": task, "status": "ok", "device": "NVIDIA H100 80GB HBM3",
            "model": {"name": "llama2-7b", "layers": 2}, "config": {},
            "command": f"python3 {system}.py", "versions": {"torch": "2.11.0"}}
    return dict(base, **fields)


def train(system, n, tps, **kw):
    return line(system, "train", sub_batches=n, micro_batch=4 // n, seq=2048,
                tokens_per_step=8192, tokens_per_second=tps, step_seconds_median=8192 / tps,
                model_flops_per_token=1e10, device_peak_bytes=3e9, host_peak_rss_bytes=2e10,
                **kw)


def generate(system, model, n, rate, per_step, **kw):
    return line(system, "generate", model={"name": model, "layers": 4}, sub_batches=n, batch=32,
                prompt_len=512, new_tokens=32, prefill_tokens_per_second=1e4,
                decode_tokens_per_second=rate, bytes_to_device_per_decode_step=per_step,
                device_peak_bytes=1e9, host_peak_rss_bytes=5e9, **kw)


RESULTS = [
    {"system": "machine", "task": "machine", "status": "ok", "device": "NVIDIA H100 80GB HBM3",
     "h2d_pinned_gbps": 50.0, "d2h_pinned_gbps": 50.0, "h2d_pageable_gbps": 20.0,
     "gemm_bf16_tflops": 780.0, "nvidia_smi": "NVIDIA H100 80GB HBM3, 580.1"},
    train("speedloader", 2, 30000.0), train("speedloader", 1, 20000.0),
    train("speedloader-canonical", 2, 15000.0),
    train("deepspeed", 2, 6000.0, config={"ds_config": {"zero_optimization": {
        "stage3_max_live_parameters": 1e9, "stage3_prefetch_bucket_size": 5e7}}}),
    train("deepspeed", 2, 12000.0, config={"ds_config": {"zero_optimization": {
        "stage3_max_live_parameters": 3e8, "stage3_prefetch_bucket_size": 5e7}}}),
    train("fsdp", 2, 8000.0),
    generate("speedloader", "llama2-7b", 1, 400.0, 3.2e9),
    generate("accelerate", "llama2-7b", 1, 50.0, 2.1e9),
    generate("speedloader", "opt-6.7b", 1, 300.0, 3e9),
    generate("flexgen", "opt-6.7b", 1, 200.0, 3e9),
    {"system": "fsdp", "task": "train", "status": "error", "error": "RuntimeError: boom",
     "model": {"name": "llama2-7b", "layers": 2}, "config": {"sub_batches": 4}},
    {"system": "deepspeed", "task": "train", "status": "skipped", "reason": "budget spent",
     "run": "ds-n4"},
]


def rows(text, header):
    """The table rows under the first '### header...' heading, as lists of cells."""
    section = text.split(f"### {header}", 1)[1].split("\n\n", 2)[1]
    return [[c.strip() for c in r.strip("|").split("|")] for r in section.splitlines()[2:]]


def test_tables_compute_what_they_claim(tmp_path):
    f = tmp_path / "r.jsonl"
    # A log with RESULT lines and other output reads like a JSON Lines file.
    f.write_text("noise\n" + "".join(common.RESULT_PREFIX + json.dumps(r) + "\n"
                                     for r in RESULTS))
    text = peer_tables.tables(peer_tables.read([str(f)]))
    train_rows = {(r[0], r[1]): r for r in rows(text, "llama2-7b, 2 layers, seq 2048")}
    # MFU = 1e10 FLOPs/token x 30000 tokens/s over the H100's 989.4 TFLOP/s.
    ours = train_rows[("speedloader", "N=2; micro 2")]
    assert ours[5] == f"{1e10 * 30000 / 989.4e12:.1%}" and ours[8] == "1.00x"
    ds_best = train_rows[("deepspeed (best)", "N=2; micro 2; live 3e8, prefetch 5e7")]
    assert ds_best[8] == "2.50x"  # 30000 / 12000
    assert train_rows[("deepspeed", "N=2; micro 2; live 1e9, prefetch 5e7")][8] == "5.00x"
    assert train_rows[("fsdp (best)", "N=2; micro 2")][8] == "3.75x"
    gen = rows(text, "llama2-7b, 4 layers, prompt 512")
    acc = next(r for r in gen if r[0] == "accelerate")
    # Link bound: 32 x 50 GB/s / 2.1 GB = 761.9 tokens/s; 50 of it is 7%.
    assert acc[6] == "761.9" and acc[7] == "7%" and acc[10] == "8.00x"
    flex = next(r for r in rows(text, "opt-6.7b, 4 layers") if r[0] == "flexgen")
    assert flex[10] == "1.50x"
    assert "= **2.50x**; target 3.0x: missed by 1.20x" in text
    assert "= **3.75x**; target 3.0x: met" in text
    assert "= **8.00x**; target 5.0x: met" in text
    assert "= **1.50x**; target 2.35x: missed by 1.57x" in text
    assert "fsdp train llama2-7b, 2 layers (N=4): error: RuntimeError: boom" in text
    assert "deepspeed train ds-n4: skipped: budget spent" in text


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "plot.png"
    assert peer_tables.plot(RESULTS, str(path)) == f"wrote {path}"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    s = peer_tables.series(RESULTS)
    assert s["train"]["deepspeed (llama2-7b, 2 layers)"] == [(2, 12000.0)]
    assert s["train"]["speedloader (llama2-7b, 2 layers)"] == [(1, 20000.0), (2, 30000.0)]


def test_bad_result_files_are_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"system": "fsdp", "task": "train", "status": "ok"}\n{"system": \n')
    with pytest.raises(SystemExit, match="bad.jsonl:2: not a JSON object"):
        peer_tables.read([str(bad)])
    bad.write_text('{"system": "fsdp", "status": "ok"}\n')
    with pytest.raises(SystemExit, match="bad.jsonl:1: a result line without 'task'"):
        peer_tables.read([str(bad)])
    bad.write_text("nothing here\n")
    with pytest.raises(SystemExit, match="no result lines"):
        peer_tables.read([str(bad)])


def driver(name, *args):
    return subprocess.run([sys.executable, str(PEERS / name), *map(str, args)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)


def test_gpu_drivers_skip_cleanly_here(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: these drivers would run, not skip")
    out = tmp_path / "r.jsonl"
    for name, args in (("train_deepspeed.py", ["--tiny"]), ("gen_flexgen.py", ["--tiny"])):
        proc = driver(name, *args, "--jsonl", out)
        assert proc.returncode == 0, proc.stdout
        r = json.loads(proc.stdout.splitlines()[-1][len(common.RESULT_PREFIX):])
        assert r["status"] == "skipped" and r["reason"], r
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["system"] for r in lines] == ["deepspeed", "flexgen"]
    assert lines[0]["config"]["ds_config"]["zero_optimization"]["offload_param"] == {
        "device": "cpu", "pin_memory": True}
    assert lines[0]["config"]["ds_config"]["gradient_accumulation_steps"] == 2
    # Bad splits and policies are refused before any work, naming the problem.
    proc = driver("train_deepspeed.py", "--batch", 3, "--sub-batches", 2)
    assert proc.returncode != 0 and "--batch 3 must be a positive multiple of --sub-batches 2" \
        in proc.stdout
    proc = driver("gen_flexgen.py", "--batch", 32, "--gpu-batch-size", 8, "--num-gpu-batches", 2)
    assert proc.returncode != 0 and "is not --batch 32" in proc.stdout


def test_speedloader_side_on_the_cpu_backend(sl_tools, tmp_path):
    carry = tmp_path / "carry"
    proc = subprocess.run(
        [str(a) for a in (sys.executable, PEERS / "prepare_speedloader.py", "--tiny", "--out",
                          carry, "--sl-opt", sl_tools.sl_opt, "--python", sys.executable,
                          "--train-sub-batches", 2, "--canonical-sub-batches", 2,
                          "--gen-models", "llama2-7b", "--gen-sub-batches", 2,
                          "--gen-kvdev-sub-batches", 2)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout
    manifest = json.loads((carry / "speedloader.json").read_text())
    names = [e["name"] for e in manifest["schedules"]]
    assert names == ["train-sl-n2", "train-canonical-n2", "gen-llama2-7b-n2",
                     "gen-llama2-7b-n2-kvdev"]
    kvdev_options = manifest["schedules"][-1]["sl_opt_options"]
    assert "weights-on-device=false kv-cache-on-device=true" in kvdev_options, kvdev_options
    out = tmp_path / "r.jsonl"
    for name in names:
        proc = driver("speedloader_run.py", "--carry", carry, "--schedule", name, "--sl-run",
                      sl_tools.sl_run, "--backend", "cpu", "--steps", 2, "--jsonl", out)
        assert proc.returncode == 0, proc.stdout
    results = peer_tables.read([str(out)])
    assert [r["status"] for r in results] == ["ok"] * 4, results
    sl, canonical, gen, kvdev = results
    assert sl["system"] == "speedloader" and canonical["system"] == "speedloader-canonical"
    assert sl["tokens_per_step"] == 4 * 32 and len(sl["step_seconds"]) == 2
    assert sl["tokens_per_second"] == pytest.approx(128 / common.median(sl["step_seconds"]))
    # The model comes in once per pass, not once per sub-batch.
    assert sl["bytes_host_to_device_per_step"] < canonical["bytes_host_to_device_per_step"]
    assert gen["decode_steps"] == 3 and gen["batch"] == 4 and gen["decode_tokens_per_second"] > 0
    # Timed on the second run of the batch; the first, untimed, is kept beside it.
    assert gen["warmup_batches"] == 1 and gen["first_batch"]["decode_runs"] == 3
    assert gen["prefill_seconds"] > 0 and gen["first_batch"]["prefill_seconds"] > 0
    # The KV caches stay on the device: each decoding step moves the weights, not the caches.
    assert (gen["kv_cache_on_device"], kvdev["kv_cache_on_device"]) == (False, True)
    assert kvdev["weights_on_device"] is False and kvdev["first_tokens"] == gen["first_tokens"]
    assert kvdev["bytes_to_device_per_decode_step"] == (
        gen["bytes_to_device_per_decode_step"] - gen["kv_cache_bytes"])
    text = peer_tables.tables(results)
    assert "| N=2; weights on device False, KV on device True |" in text
    assert "| speedloader-canonical (best) | N=2; micro 2 |" in text
