"""--weightless export: the graph of the normal (--no-constant-folding) export, every initializer
external data in one sparse file of zeros of the right size, compiled by sl-opt like the real one;
--external-data; the named presets."""

import os
import re

import numpy as np
import onnx
from onnx import numpy_helper
import pytest
import torch

from sl_helpers import check_ok
from speedloader.export import (EXTERNAL_DATA_ALIGNMENT, data_file_of, export_model,
                                export_weightless, main as export_main)
from speedloader.models import get_preset, preset_fields
from speedloader.models.gpt2 import GPT2Config
from speedloader.models.llama import LlamaConfig

CONFIGS = {
    "llama-gqa": ("llama", LlamaConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn=48, vocab=64,
                                       max_positions=16)),
    "llama-tied": ("llama", LlamaConfig(layers=2, hidden=32, heads=4, ffn=48, vocab=64,
                                        max_positions=16, tie_embeddings=True)),
    "gpt2-tied": ("gpt2", GPT2Config(layers=2, hidden=32, heads=4, vocab=64, max_positions=16)),
}


def _nodes(graph):
    # Shape inference names the symbolic dims of If branches' outputs by the node it met first,
    # which differs between the two exports; the names mean nothing else.
    return [re.sub(r'dim_param: "[^"]*"', "dim_param: ?", str(n)) for n in graph.node]


def light_buffers(arch, config):
    from speedloader.export import build_weightless

    model = build_weightless(arch, config)
    names = {n for n, _ in model.named_parameters()}
    return [(k, v) for k, v in model.state_dict().items() if k not in names]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_weightless_graph_is_the_normal_one(tmp_path, name):
    arch, config = CONFIGS[name]
    export_model(arch, config, tmp_path / "normal.onnx", constant_folding=False)
    w = export_weightless(arch, config, tmp_path / "w" / "model.onnx")
    normal = onnx.load(str(tmp_path / "normal.onnx")).graph
    light = onnx.load(str(w.onnx_path), load_external_data=False).graph
    # Same nodes (inputs, outputs, attributes: the Constant nodes' rotary tables and masks too;
    # the names of symbolic dims aside),
    # same graph inputs and outputs, same initializers in the same order with the same shapes.
    assert _nodes(light) == _nodes(normal)
    assert [i.SerializeToString() for i in light.input] == \
        [i.SerializeToString() for i in normal.input]
    assert [o.SerializeToString() for o in light.output] == \
        [o.SerializeToString() for o in normal.output]
    assert [(t.name, list(t.dims), t.data_type) for t in light.initializer] == \
        [(t.name, list(t.dims), t.data_type) for t in normal.initializer]

    # Each initializer is a non-overlapping, aligned slice of the one data file, which is sparse
    # zeros of exactly the size the slices need.
    data = data_file_of(w.onnx_path)
    end, total = 0, 0
    real = {t.name: t for t in normal.initializer}
    for t in light.initializer:
        if t.name in dict(light_buffers(arch, config)):
            # A persistent buffer (GPT-2's mask) is inline, with its real values.
            assert t.SerializeToString() == real[t.name].SerializeToString()
            continue
        assert t.data_location == onnx.TensorProto.EXTERNAL and not t.raw_data
        ext = {e.key: e.value for e in t.external_data}
        assert ext["location"] == data.name
        offset, length = int(ext["offset"]), int(ext["length"])
        assert length == 4 * int(np.prod(t.dims))
        assert offset % EXTERNAL_DATA_ALIGNMENT == 0 and offset >= end
        end = offset + length
        total += length
    assert w.parameter_bytes == total
    size = data.stat().st_size
    assert end <= size < end + EXTERNAL_DATA_ALIGNMENT
    assert data.stat().st_blocks == 0  # no disk block: nothing was written
    with open(data, "rb") as f:
        assert f.read() == bytes(size)
    # The checker accepts it (external data files found, sizes right).
    onnx.checker.check_model(str(w.onnx_path))


def test_weightless_compiles_like_the_normal_export(sl_tools, tmp_path):
    arch, config = CONFIGS["llama-gqa"]
    export_model(arch, config, tmp_path / "n" / "model.onnx", constant_folding=False)
    export_weightless(arch, config, tmp_path / "w" / "model.onnx")
    options = "--sl-generate=batch=4 num-sub-batches=2 max-prompt-len=6 max-new-tokens=3"
    sizes = {}
    for which in ("n", "w"):
        sched = tmp_path / which / "gen.slsched"
        check_ok(sl_tools._run([sl_tools.sl_opt, tmp_path / which / "model.onnx", options, "-o",
                                sched]))
        sizes[which] = sched.stat().st_size
    # The same schedule but for where each parameter's bytes are (file offsets).
    assert abs(sizes["n"] - sizes["w"]) < 200


def test_weightless_needs_no_memory_for_weights():
    """A model of 0.45e9 parameters (1.8 GB of f32) is built without allocating them."""
    import resource

    from speedloader.export import build_weightless

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = build_weightless("llama", LlamaConfig(layers=1, hidden=4096, heads=32, ffn=11008,
                                                  vocab=32000, max_positions=8))
    params = list(model.parameters())
    assert sum(p.numel() for p in params) > 0.4e9
    # Reading every weight in a product, as tracing does, must not bring it into memory either
    # (a stride-0 placeholder was copied into a contiguous matrix by each product: 0.5 GB for
    # the head).
    x = torch.ones((2, 11008))
    for p in params:
        if p.dim() == 2:
            torch.nn.functional.linear(x[:, :p.shape[1]], p)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 200e6
    # Each placeholder differs from the others (the exporter merges equal initializers).
    assert len({float(p.reshape(-1)[0]) for p in params}) == len(params)


def test_external_data_export(tmp_path):
    arch, config = CONFIGS["llama-gqa"]
    res = export_model(arch, config, tmp_path / "model.onnx", constant_folding=False,
                       external_data=True)
    inline = export_model(arch, config, tmp_path / "inline.onnx", constant_folding=False)
    m = onnx.load(str(tmp_path / "model.onnx"))  # reads the external data back
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in
               onnx.load(str(tmp_path / "model.onnx"), load_external_data=False).graph.initializer)
    assert data_file_of(res.onnx_path).stat().st_size > 0
    want = {t.name: numpy_helper.to_array(t) for t in
            onnx.load(str(inline.onnx_path)).graph.initializer}
    got = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    assert want.keys() == got.keys()
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    assert sorted(os.listdir(tmp_path)) == ["inline.onnx", "model.onnx", "model.onnx.data"]


def test_presets():
    arch, c = get_preset("llama-30b", max_positions=544)
    assert arch == "llama" and (c.layers, c.hidden, c.heads, c.kv_heads, c.ffn, c.vocab) == \
        (60, 6656, 52, 52, 17920, 32000) and c.max_positions == 544
    params = 2 * c.vocab * c.hidden + c.hidden + c.layers * (
        4 * c.hidden ** 2 + 3 * c.hidden * c.ffn + 2 * c.hidden)
    assert 32.4e9 < params < 32.6e9  # "LLaMA-30B" has 32.5e9
    arch, c = get_preset("llama2-7b")
    assert (c.layers, c.hidden, c.heads, c.ffn, c.vocab, c.rms_norm_eps) == \
        (32, 4096, 32, 11008, 32000, 1e-5)
    assert preset_fields("llama2-7b")["max_positions"] == 4096
    with pytest.raises(KeyError, match="unknown preset"):
        get_preset("llama-3000b")


def test_cli_preset_weightless(tmp_path, capsys):
    out = tmp_path / "m.onnx"
    # A preset's sizes, some replaced: small enough to export here.
    assert export_main(["--preset", "llama2-7b", "--layers", "1", "--hidden", "64", "--heads",
                        "4", "--ffn", "96", "--vocab", "128", "--max-positions", "16",
                        "--weightless", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sparse" in text and "m.onnx.data" in text
    g = onnx.load(str(out), load_external_data=False).graph
    dims = {t.name: list(t.dims) for t in g.initializer}
    assert dims["model.layers.0.mlp.up_proj.weight"] == [96, 64]
    assert "model.layers.1.mlp.up_proj.weight" not in dims


@pytest.mark.parametrize("args,message", [
    (["--preset", "llama-30b", "--arch", "gpt2"], "is a llama model"),
    (["--arch", "mlp", "--in-features", "4", "--out-features", "2", "--weightless"],
     "--weightless applies to the transformers"),
    (["--preset", "llama-30b", "--weightless", "--external-data"], "does not go with it"),
    (["--out-features", "2"], "give --arch or --preset"),
])
def test_cli_errors(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        export_main(args + ["--out", str(tmp_path / "x.onnx")])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_weightless_summary_reads_no_weights(tmp_path):
    """The export's summary reads the graph without its external data (onnx.load of a weightless
    llama2-7b read all 27 GB of its zeros and was OOM-killed): a one-layer llama2-7b, 1.8 GB of
    weights, exports in far less memory than that (about 0.75 GB, most of it torch itself)."""
    import subprocess
    import sys

    out = tmp_path / "m.onnx"
    code = ("import resource, sys\n"
            "from speedloader.export import main\n"
            "rc = main(sys.argv[1:])\n"
            "print('peak_rss_bytes', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code, "--preset", "llama2-7b", "--layers", "1",
                           "--max-positions", "64", "--weightless", "--out", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = data_file_of(out).stat().st_size
    assert data > 1.8e9
    peak = int(re.search(r"peak_rss_bytes (\d+)", proc.stdout).group(1))
    assert peak < 0.75 * data, f"peak RSS {peak / 1e9:.2f} GB for {data / 1e9:.2f} GB of weights"
