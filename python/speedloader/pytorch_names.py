"""PyTorch parameter names for the weights an exporter folded, and checkpoints renamed to them.

    python3 -m speedloader.pytorch_names MODEL.onnx                  # print the mapping
    python3 -m speedloader.pytorch_names MODEL.onnx --checkpoint CKPT.safetensors --out OUT.safetensors

torch.onnx.export with constant folding (its default, and Hugging Face Optimum's) writes a linear
layer on a 3-D input as `MatMul(x, W^T)` with the transposed weight stored as a new initializer,
`onnx::MatMul_<N>`: the PyTorch name is gone from the graph, so sl-run's checkpoints name that
weight `onnx::MatMul_<N>` too. The graph still says where it came from: the MatMul node that reads
it is named after the module (`/model/layers.0/self_attn/q_proj/MatMul`), and the module's weight
is `model.layers.0.self_attn.q_proj.weight`, of the transposed shape.

`folded_weights(graph)` finds every such initializer: named `onnx::...` (an exporter-made name),
2-D, read only as the second input of MatMul nodes of one module scope, with a PyTorch name that
no other initializer has and that no other folded weight claims. Anything else keeps its name and
is listed with the reason. `rename_checkpoint` writes a safetensors checkpoint (sl-run's `--save`,
Adam moments included) under the PyTorch names, the folded weights transposed back to PyTorch's
[out, in] layout, so that `speedloader.export --hf DIR --weights OUT` and `load_state_dict` read
it. A tied head that the exporter folded is an untied copy (`lm_head.weight`): it was trained
apart from the embedding.

Exporting with `do_constant_folding=False` avoids all this: every initializer keeps its name.
Nothing here imports torch or onnx's external data: the graph is read alone.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from .hf_weights import (SAFETENSORS_DTYPES, WeightFileError, _read_safetensors_header,
                         read_safetensors_tensor)

# sl-run's checkpoints hold each parameter's Adam moments beside it under these suffixes.
STATE_SUFFIXES = (".adam_m", ".adam_v")
_SCOPED_MATMUL = re.compile(r"^/((?:[^/]+/)*[^/]+)/MatMul(?:_\d+)?$")


@dataclass(frozen=True)
class FoldedWeight:
    onnx_name: str
    pytorch_name: str
    onnx_shape: Tuple[int, ...]  # [in, out]; the PyTorch weight is its transpose


def folded_weights(graph) -> Tuple[Dict[str, FoldedWeight], Dict[str, str]]:
    """(mapped, unmapped) for an onnx GraphProto: the exporter-named initializers that are a
    module's transposed weight, by ONNX name; and those that are not, with the reason."""
    inits = {t.name: tuple(int(d) for d in t.dims) for t in graph.initializer}
    readers: Dict[str, List[Tuple[str, str, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in inits:
                readers.setdefault(name, []).append((node.op_type, node.name, index))
    mapped: Dict[str, FoldedWeight] = {}
    unmapped: Dict[str, str] = {}
    for name, shape in inits.items():
        if not name.startswith("onnx::"):
            continue
        uses = readers.get(name, [])
        if len(shape) != 2:
            unmapped[name] = f"{len(shape)}-D, not a linear layer's weight"
            continue
        if not uses or any(op != "MatMul" or index != 1 for op, _, index in uses):
            unmapped[name] = "not read only as the weight of MatMul nodes"
            continue
        scopes = set()
        for _, node_name, _ in uses:
            m = _SCOPED_MATMUL.match(node_name)
            scopes.add(m.group(1).replace("/", ".") if m else None)
        if None in scopes or len(scopes) != 1:
            unmapped[name] = ("read by MatMul nodes of " + (
                "no module scope" if None in scopes else f"{len(scopes)} module scopes"))
            continue
        pytorch = scopes.pop() + ".weight"
        if pytorch in inits:
            unmapped[name] = f"{pytorch} is already an initializer of the graph"
            continue
        mapped[name] = FoldedWeight(name, pytorch, shape)
    claims: Dict[str, List[str]] = {}
    for w in mapped.values():
        claims.setdefault(w.pytorch_name, []).append(w.onnx_name)
    for pytorch, names in claims.items():
        if len(names) > 1:
            for n in names:
                del mapped[n]
                unmapped[n] = f"{pytorch} is claimed by {len(names)} folded weights"
    return mapped, unmapped


def _read_graph(model: Path):
    import onnx
    try:
        return onnx.load(str(model), load_external_data=False).graph
    except Exception as e:  # onnx raises DecodeError, OSError, ...
        raise WeightFileError(f"{model}: not an ONNX model ({e})") from None


def rename_checkpoint(model: Path, checkpoint: Path, out: Path) -> Dict[str, str]:
    """Writes `checkpoint` (one safetensors file) to `out` with the folded weights of `model`
    (and their Adam moments) under their PyTorch names, transposed to PyTorch's layout; every
    other tensor as it is. Reads and writes one tensor at a time. Returns {old: new} for the
    renamed tensors."""
    mapped, _ = folded_weights(_read_graph(model))
    entries = _read_safetensors_header(Path(checkpoint))
    plan = []  # (stored name, new name, entry, transposed)
    renamed: Dict[str, str] = {}
    for name, entry in entries.items():
        base, suffix = name, ""
        for s in STATE_SUFFIXES:
            if name.endswith(s):
                base, suffix = name[:-len(s)], s
        w = mapped.get(base)
        if w is None:
            plan.append((name, name, entry, False))
            continue
        if entry.shape != w.onnx_shape:
            raise WeightFileError(f"{checkpoint}: tensor {name!r} is {list(entry.shape)}; the "
                                  f"graph's {base} is {list(w.onnx_shape)}")
        renamed[name] = w.pytorch_name + suffix
        plan.append((name, renamed[name], entry, True))
    names = [p[1] for p in plan]
    if len(set(names)) != len(names):
        clash = sorted({n for n in names if names.count(n) > 1})
        raise WeightFileError(f"{checkpoint}: renaming would write {', '.join(clash)} twice")
    header, offset = {}, 0
    for _, new, entry, transposed in plan:
        size = int(np.prod(entry.shape, dtype=np.int64)) * SAFETENSORS_DTYPES[entry.dtype].itemsize
        shape = list(entry.shape[::-1]) if transposed else list(entry.shape)
        header[new] = {"dtype": entry.dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    out = Path(out)
    tmp = out.with_name(out.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for old, _, entry, transposed in plan:
                a = read_safetensors_tensor(entry, old)
                f.write(np.ascontiguousarray(a.T if transposed else a).tobytes())
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return renamed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m speedloader.pytorch_names",
        description="Maps the weights torch.onnx.export folded into transposed `onnx::MatMul_N` "
                    "initializers back to their PyTorch names (from the MatMul nodes' module "
                    "scopes); prints the mapping, or renames a checkpoint.")
    p.add_argument("model", type=Path, help="the ONNX model the checkpoint was trained from")
    p.add_argument("--checkpoint", type=Path,
                   help="a safetensors checkpoint of that model (sl-run --save, one file)")
    p.add_argument("--out", type=Path, help="where to write the renamed checkpoint")
    args = p.parse_args(argv)
    if (args.checkpoint is None) != (args.out is None):
        p.error("--checkpoint and --out go together")
    if args.checkpoint is not None and args.checkpoint.resolve() == args.out.resolve():
        p.error("--out must differ from --checkpoint")
    try:
        if args.checkpoint is None:
            mapped, unmapped = folded_weights(_read_graph(args.model))
            for w in mapped.values():
                print(f"{w.onnx_name} -> {w.pytorch_name} (transposed)")
            for name, why in unmapped.items():
                print(f"{name}: kept ({why})")
            if not mapped and not unmapped:
                print(f"{args.model}: no folded weights; every initializer has its own name")
            return 0
        renamed = rename_checkpoint(args.model, args.checkpoint, args.out)
    except (WeightFileError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{args.out}: {len(renamed)} tensors renamed to PyTorch names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
