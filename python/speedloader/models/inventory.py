"""What torch.onnx.export writes for the decoder architectures: the generator of EXPORTS.md.

    PYTHONPATH=python /usr/bin/python3 -m speedloader.models.inventory \\
        --out python/speedloader/models/EXPORTS.md

exports every variant in `VARIANTS` at opsets 14 and 17, with and without constant folding, into
a temporary directory and writes the inventory: op multisets, layer-0 initializers, Constant nodes,
and the exact node sequences of one layer (and of the code around the layers) in a compact SSA
notation described in the document itself. The prose between the listings is in this file
(`_PROSE`); the listings are generated, so rerun this after changing a model or the torch version.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .gpt2 import GPT2Config, OPTConfig
from .llama import LlamaConfig

OPSETS = (14, 17)
SIZES = dict(layers=2, hidden=64, heads=4, vocab=256, max_positions=128)


@dataclass(frozen=True)
class Variant:
    name: str
    arch: str
    config: Any
    what: str


VARIANTS: Tuple[Variant, ...] = (
    Variant("llama-mha", "llama", LlamaConfig(ffn=128, **SIZES),
            "llama, heads 4 = kv_heads 4, rope half, untied head"),
    Variant("llama-gqa", "llama", LlamaConfig(ffn=128, kv_heads=2, **SIZES),
            "llama-mha with kv_heads 2 (grouped-query attention)"),
    Variant("llama-interleaved", "llama", LlamaConfig(ffn=128, rope="interleaved", **SIZES),
            "llama-mha with rope interleaved"),
    Variant("llama-tied", "llama", LlamaConfig(ffn=128, tie_embeddings=True, **SIZES),
            "llama-mha with lm_head tied to embed_tokens"),
    Variant("gpt2-tanh", "gpt2", GPT2Config(**SIZES),
            "gpt2 defaults: gelu-tanh, fused c_attn, tied head, ffn 256"),
    Variant("gpt2-erf", "gpt2", GPT2Config(activation="gelu", **SIZES),
            "gpt2-tanh with exact (erf) gelu"),
    Variant("gpt2-separate-qkv", "gpt2", GPT2Config(fused_qkv=False, **SIZES),
            "gpt2-tanh with separate q/k/v Conv1Ds"),
    Variant("opt-relu", "opt", OPTConfig(**SIZES),
            "opt defaults: relu, separate q/k/v, tied head, ffn 256"),
    Variant("opt-fused-qkv", "opt", OPTConfig(fused_qkv=True, **SIZES),
            "opt-relu with one qkv_proj and Split"),
)

# The name scope of layer 0 and of the code outside the layers, per arch.
LAYER0 = {"llama": "/model/layers.0/", "gpt2": "/transformer/h.0/",
          "opt": "/model/decoder/layers.0/"}
LAYER_RE = re.compile(r"/(?:model/layers|transformer/h|model/decoder/layers)\.(\d+)/")


# --- rendering ------------------------------------------------------------------------------------

def _fmt_float(v: float) -> str:
    """The shortest text that reads back as the same float32."""
    return str(np.float32(v))


def _fmt_value(arr: np.ndarray) -> str:
    """A Constant's value: 0 or [0, 1] (small int64), 2.0f (float32 scalar), else dtype[shape]."""
    if arr.dtype == np.int64 and arr.size <= 8:
        return str(arr.tolist()) if arr.ndim else str(int(arr))
    if arr.dtype == np.float32 and arr.size == 1:
        v = _fmt_float(arr.reshape(-1)[0])
        return (v + "f") if arr.ndim == 0 else f"[{v}f]" if arr.ndim == 1 else \
            f"f32{list(arr.shape)}:{v}"
    kind = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool",
            np.dtype(np.uint8): "u8"}.get(arr.dtype, str(arr.dtype))
    if arr.size <= 4:
        return f"{kind}{list(arr.shape)}:{arr.reshape(-1).tolist()}"
    return f"{kind}{list(arr.shape)}"


def _dtype_name(t: int) -> str:
    import onnx

    return onnx.TensorProto.DataType.Name(t)


class Renderer:
    """Renders nodes as `%out = Op(%in, @initializer, literal) attr=value`.

    Constant nodes used by exactly one consumer are shown inline as literals at the use; other
    Constant nodes get a line of their own. Names lose the scope prefix `strip` and the
    `_output_0` suffix."""

    def __init__(self, model, strip: str = "") -> None:
        from onnx import numpy_helper

        self.g = model.graph
        self.strip = strip
        self.inits = {i.name for i in self.g.initializer}
        self.consts: Dict[str, np.ndarray] = {}
        uses: Dict[str, int] = collections.Counter()
        for n in self._all_nodes(self.g):
            for i in n.input:
                uses[i] += 1
        for n in self._all_nodes(self.g):
            if n.op_type == "Constant":
                a = {x.name: x for x in n.attribute}
                if "value" in a:
                    self.consts[n.output[0]] = numpy_helper.to_array(a["value"].t)
        self.inline = {k for k in self.consts if uses[k] == 1}

    @staticmethod
    def _all_nodes(g):
        from onnx import helper

        for n in g.node:
            yield n
            for a in n.attribute:
                if a.type == a.GRAPH:
                    yield from Renderer._all_nodes(helper.get_attribute_value(a))

    def name(self, s: str) -> str:
        if s == "":
            return "_"
        if s in self.inits:
            return "@" + s
        if s in self.inline:
            return _fmt_value(self.consts[s])
        if s.endswith("_output_0"):
            s = s[: -len("_output_0")]
        s = re.sub(r"_output_(\d+)$", r"#\1", s)
        if self.strip and s.startswith(self.strip):
            s = s[len(self.strip):]
        return "%" + s

    def attrs(self, n) -> str:
        from onnx import helper, numpy_helper

        out = []
        for a in n.attribute:
            v = helper.get_attribute_value(a)
            if a.type == a.GRAPH:
                continue
            if a.type == a.TENSOR:
                v = _fmt_value(numpy_helper.to_array(v))
            elif isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, float):
                v = _fmt_float(v)
            elif a.name == "to":
                v = f"{v}({_dtype_name(v)})"
            out.append(f"{a.name}={v}")
        return (" " + " ".join(out)) if out else ""

    def line(self, n) -> List[str]:
        from onnx import helper

        if n.op_type == "Constant" and n.output[0] in self.inline:
            return []
        outs = ", ".join(self.name(o) for o in n.output)
        ins = ", ".join(self.name(i) for i in n.input)
        text = [f"{outs} = {n.op_type}({ins}){self.attrs(n)}"]
        for a in n.attribute:
            if a.type == a.GRAPH:
                sub = helper.get_attribute_value(a)
                body = "; ".join(
                    f"{', '.join(self.name(o) for o in s.output)} = "
                    f"{s.op_type}({', '.join(self.name(i) for i in s.input)}){self.attrs(s)}"
                    for s in sub.node
                    if not (s.op_type == "Constant" and s.output[0] in self.inline))
                ret = ", ".join(self.name(o.name) for o in sub.output)
                text.append(f"    {a.name}: {{ {body}; return {ret} }}")
        return text

    def lines(self, nodes) -> List[str]:
        out: List[str] = []
        for n in nodes:
            out += self.line(n)
        return out


# --- collecting -----------------------------------------------------------------------------------

@dataclass
class Export:
    variant: Variant
    opset: int
    fold: bool
    model: Any  # onnx.ModelProto

    @property
    def key(self) -> str:
        return f"{self.variant.name} opset {self.opset} {'fold' if self.fold else 'nofold'}"


def export_all(tmp: Path, variants: Sequence[Variant] = VARIANTS) -> Dict[Tuple[str, int, bool],
                                                                           Export]:
    import onnx

    from ..export import export_model

    out = {}
    for v in variants:
        for opset in OPSETS:
            for fold in (True, False):
                path = tmp / f"{v.name}-{opset}-{int(fold)}.onnx"
                export_model(v.arch, v.config, path, seed=0, opset=opset, constant_folding=fold,
                             batch=2, seq=5)
                out[(v.name, opset, fold)] = Export(v, opset, fold, onnx.load(str(path)))
    return out


def _layers(model) -> List[Optional[int]]:
    """The layer of each node (None: outside the layers), from its name scope. The exporter
    hoists some Constant nodes out of every scope (names like `Constant_126`); such a Constant
    belongs to the layer of its consumers when they are all in one layer."""
    own = []
    for n in model.graph.node:
        m = LAYER_RE.search(n.name)
        own.append(int(m.group(1)) if m else None)
    consumers: Dict[str, set] = collections.defaultdict(set)
    for n, layer in zip(model.graph.node, own):
        for i in n.input:
            consumers[i].add(layer)
    out = []
    for n, layer in zip(model.graph.node, own):
        if layer is None and n.op_type == "Constant" and "/" not in n.name:
            users = consumers.get(n.output[0], set())
            if len(users) == 1:
                layer = next(iter(users))
        out.append(layer)
    return out


def layer_nodes(model, layer: int = 0):
    return [n for n, lay in zip(model.graph.node, _layers(model)) if lay == layer]


def outer_nodes(model):
    """Nodes outside every layer scope: embedding, positions, mask, final norm, head, and the
    scope-less Constants that several layers share."""
    return [n for n, lay in zip(model.graph.node, _layers(model)) if lay is None]


def op_multiset(model) -> str:
    c = collections.Counter(n.op_type for n in model.graph.node)
    return " ".join(f"{op}×{c[op]}" for op in sorted(c))


def layer0_initializers(model, arch: str) -> List[str]:
    """Initializers used by layer-0 nodes or named after layer 0."""
    import onnx

    used = set()
    for n in layer_nodes(model, 0):
        used.update(n.input)
    prefix = {"llama": "model.layers.0.", "gpt2": "transformer.h.0.",
              "opt": "model.decoder.layers.0."}[arch]
    out = []
    for i in model.graph.initializer:
        if i.name in used or i.name.startswith(prefix):
            out.append(f"`{i.name}` {onnx.TensorProto.DataType.Name(i.data_type)}{list(i.dims)}")
    return out


def outer_initializers(model) -> List[str]:
    import onnx

    used = set()
    for n in outer_nodes(model):
        used.update(n.input)
    return [f"`{i.name}` {onnx.TensorProto.DataType.Name(i.data_type)}{list(i.dims)}"
            for i in model.graph.initializer if i.name in used]


def constant_summary(model) -> str:
    """Constant nodes: int64 shape/index literals counted, the others grouped by value, with the
    modules they sit in (`hoisted`: no scope; the exporter moved them out of every module)."""
    from onnx import numpy_helper

    small_int = 0
    total = 0
    groups: Dict[str, List[str]] = collections.defaultdict(list)
    for n in Renderer._all_nodes(model.graph):
        if n.op_type != "Constant":
            continue
        total += 1
        arr = numpy_helper.to_array(n.attribute[0].t)
        if arr.dtype == np.int64 and arr.size <= 8:
            small_int += 1
            continue
        what = _fmt_value(arr)
        if arr.ndim == 4 and arr.shape[:2] == (1, 1):
            what += " (rope " + ("cos" if np.isclose(arr.reshape(-1)[0], 1.0) else "sin") + ")"
        parts = n.name.strip("/").split("/")
        scope = parts[-2] if len(parts) > 1 else "hoisted"
        groups[what].append(scope)
    out = [f"{total} Constant nodes; {small_int} are int64 literals of at most 8 elements"]
    for what in sorted(groups):
        scopes = collections.Counter(groups[what])
        where = ", ".join(f"{k}×{c}" if c > 1 else k for k, c in sorted(scopes.items()))
        out.append(f"`{what}` ×{len(groups[what])} ({where})")
    return "; ".join(out)


def _normalize(lines: List[str]) -> List[str]:
    """Exporter-numbered names (onnx::MatMul_543) lose their number, for diffs."""
    return [re.sub(r"(onnx::\w+?)_\d+\b", r"\1_#", x) for x in lines]


def _diff(a: List[str], b: List[str], a_name: str, b_name: str) -> List[str]:
    d = list(difflib.unified_diff(_normalize(a), _normalize(b), a_name, b_name, n=1,
                                  lineterm=""))
    return d or ["(identical)"]


def _block(lines: List[str], lang: str = "") -> str:
    return "```" + lang + "\n" + "\n".join(lines) + "\n```\n"


# --- the document ---------------------------------------------------------------------------------

def _listing(ex: Export, which: str) -> List[str]:
    arch = ex.variant.arch
    if which == "layer":
        r = Renderer(ex.model, strip=LAYER0[arch])
        return r.lines(layer_nodes(ex.model, 0))
    r = Renderer(ex.model)
    return r.lines(outer_nodes(ex.model))


def render(exports: Dict[Tuple[str, int, bool], Export], prose: Dict[str, str]) -> str:
    import onnx
    import torch

    E = lambda name, opset=14, fold=True: exports[(name, opset, fold)]  # noqa: E731
    parts: List[str] = []
    add = parts.append
    add(prose["title"].format(torch=torch.__version__, onnx=onnx.__version__,
                              sizes=", ".join(f"{k} {v}" for k, v in SIZES.items())))
    add(prose["conventions"])
    add(prose["findings"])

    # 1. op multisets
    add("## 1. Op multisets (whole graph)\n\n"
        "Every variant at opsets 14 and 17, with (`fold`) and without (`nofold`) constant "
        "folding; node counts include Constant nodes.\n\n")
    add("| variant | what |\n| --- | --- |\n")
    for v in VARIANTS:
        add(f"| `{v.name}` | {v.what} |\n")
    add("\n")
    for v in VARIANTS:
        seen: Dict[str, List[str]] = {}
        for fold in (True, False):
            for opset in OPSETS:
                m = E(v.name, opset, fold).model
                key = f"({len(m.graph.node)} nodes): {op_multiset(m)}"
                seen.setdefault(key, []).append(f"{opset} {'fold' if fold else 'nofold'}")
        for key, tags in seen.items():
            add(f"- `{v.name}` {' = '.join(tags)} {key}\n")
    add("\n")

    # 2. initializers
    add("## 2. Initializers\n\n" + prose["initializers"])
    for v in VARIANTS:
        per = {}
        for opset in OPSETS:
            for fold in (True, False):
                m = E(v.name, opset, fold).model
                per[(opset, fold)] = (layer0_initializers(m, v.arch), outer_initializers(m))
        for fold in (True, False):
            l0, outer = per[(14, fold)]
            same = all(_normalize(a) == _normalize(b) for a, b in zip(per[(14, fold)],
                                                                      per[(17, fold)]))
            tag = "fold" if fold else "nofold"
            add(f"- `{v.name}` {tag}, opset 14{' (17: the same' if same else ' (17: differs'}"
                f"{', up to onnx:: numbering)' if same and fold else ')'}\n"
                f"  - layer 0: {', '.join(l0)}\n  - outside the layers: {', '.join(outer)}\n")
    add("\n")

    # 3. constants
    add("## 3. Constant nodes\n\n" + prose["constants"])
    for v in VARIANTS:
        seen: Dict[str, List[str]] = {}
        for fold in (True, False):
            for opset in OPSETS:
                key = constant_summary(E(v.name, opset, fold).model)
                seen.setdefault(key, []).append(f"{opset} {'fold' if fold else 'nofold'}")
        for key, tags in seen.items():
            add(f"- `{v.name}` {' = '.join(tags)}: {key}\n")
    add("\n")

    # 4-6. listings
    for fam, base, diffs in (
            ("llama", "llama-mha", [("llama-gqa", "layer"), ("llama-interleaved", "layer"),
                                    ("llama-tied", "outer")]),
            ("gpt2", "gpt2-tanh", [("gpt2-erf", "layer"), ("gpt2-separate-qkv", "layer")]),
            ("opt", "opt-relu", [("opt-fused-qkv", "layer")])):
        add(prose[f"{fam}_listing"])
        b = E(base)
        add(f"### `{base}`, opset 14, fold: outside the layers\n\n")
        add(_block(_listing(b, "outer")))
        add(f"### `{base}`, opset 14, fold: layer 0 (names relative to `{LAYER0[fam]}`)\n\n")
        add(_block(_listing(b, "layer")))
        for other, which in diffs:
            o = E(other)
            add(f"### `{other}` against `{base}` (opset 14, fold, "
                f"{'layer 0' if which == 'layer' else 'outside the layers'})\n\n")
            add(_block(_diff(_listing(b, which), _listing(o, which), base, other), "diff"))
        for which in ("outer", "layer"):
            where = "layer 0" if which == "layer" else "outside the layers"
            add(f"### `{base}` opset 17 against opset 14 (fold, {where})\n\n")
            add(_block(_diff(_listing(b, which), _listing(E(base, 17), which),
                             "opset 14", "opset 17"), "diff"))
            add(f"### `{base}` nofold against fold (opset 14, {where})\n\n")
            add(_block(_diff(_listing(b, which), _listing(E(base, 14, False), which),
                             "fold", "nofold"), "diff"))
    return "".join(parts)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m speedloader.models.inventory",
                                description="Regenerate EXPORTS.md (the decoder export inventory).")
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("EXPORTS.md"),
                   help="where to write (default: EXPORTS.md next to this file)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        exports = export_all(Path(tmp))
        text = render(exports, PROSE)
    args.out.write_text(text)
    print(f"wrote {args.out} ({len(text.splitlines())} lines)")
    return 0


PROSE: Dict[str, str] = {
    "title": """\
# What torch.onnx.export writes for llama, gpt2 and opt

Generated by `PYTHONPATH=python /usr/bin/python3 -m speedloader.models.inventory` (torch {torch},
onnx {onnx}); do not edit by hand: the prose lives in `python/speedloader/models/inventory.py`,
the listings are regenerated from the exports. Models: `llama.py` and `gpt2.py` in this
directory, at {sizes}
(head_dim 16; ffn 128 for llama, 256 = 4 x hidden for gpt2/opt), exported by
`speedloader.export.export_model` (traced at batch 2, seq 5; `input_ids` and `logits` have
symbolic axes `batch` and `seq`). Opsets 14 and 17, with (`fold`, torch's default) and without
(`nofold`, `--no-constant-folding`) constant folding.

""",
    "conventions": """\
## Notation

One line per node, in file order: `%out = Op(inputs) attr=value`.

- `%name` is a node output (the exporter's name without `_output_0`; `#k` is output k > 0). In a
  layer listing names are relative to the layer's scope (`/model/layers.0/`, `/transformer/h.0/`,
  `/model/decoder/layers.0/`); `%/model/...` names come from outside the layer.
- `@name` is an initializer; `input_ids` and `logits` are the graph's input and output.
- Literals: a Constant node with exactly one consumer is shown at its use instead of on a line of
  its own: `0` (int64 scalar), `[0]` (int64 1-D), `2.0f` (float32 scalar), `[-3.4028235e+38f]`
  (float32 1-D of one element, `ConstantOfShape`'s `value`), `f32[1, 1, 128, 16]` (a bigger
  tensor). Each literal is one `Constant` node (attribute `value`) that precedes its consumer
  in the file. Constants with several consumers get their own line `%x = Constant() value=...`.
  Floats are printed as the shortest text that reads back as the same float32 (`1e-06f` is
  the float32 nearest 1e-6). `9223372036854775807` is INT64_MAX (Slice "to the end").
- `to=1(FLOAT)`: Cast's target type. ReduceMean has `keepdims` 1 unless written.
- If branches are shown indented under the `If`: `then_branch: { ...; return %x }`.
- Diffs are unified diffs with one line of context; in them the exporter's numbered names
  (`onnx::MatMul_543`, `onnx::Max_277`) read `onnx::MatMul_#`, since the numbers differ from
  export to export.

""",
    "findings": """\
## 0. Summary for the importer and the fusion pass

**Everywhere.**

- Shape arithmetic surrounds every pattern: each `view`/`reshape`/`expand` gets its target shape
  from `Shape` -> `Gather(i)` (or `Slice` + `Squeeze`) -> `Unsqueeze([0])` -> `Concat` with int64
  literals; sizes computed in Python (`x.shape[-1] // 2`, `value.size(-1) ** 0.5`) become graph
  arithmetic (`Div` on int64, `Cast`, `Pow`). Ops used only on shapes: Shape, Gather, Slice,
  Squeeze, Unsqueeze, Concat, Cast, Div, Mul, Add, Sub, Range, ConstantOfShape, Equal, Where,
  Reshape, and in llama `If`. Once `batch` and `seq` are bound all of it is constant: the
  patterns below are clean chains only after `sl-bind-shapes` has folded it (including int64
  `Div` truncating toward zero, `Range`, `ConstantOfShape`, `Equal`/`Where` on shape vectors, and
  `If` on a constant condition).
- `nofold` differs from `fold` in three ways only: weights keep their PyTorch names and are
  transposed in the graph (`Transpose(@W) perm=[1, 0]` -> `MatMul`), the Python ints of shape
  computations stay scalar Constants, often shared by several nodes (even across layers, e.g.
  `%/model/Constant_4 = 4`), and are `Unsqueeze`d (sometimes `Cast`) in the graph instead of
  being folded into 1-D literals, and a tied head stays tied (below).
- opset 17 differs from 14 only by `LayerNormalization` replacing the decomposed LayerNorm
  (gpt2, opt). llama is identical at 14 and 17 (RMSNorm is written out by hand).
- Linear layers on 3-D activations (llama, opt's attention): `MatMul(x, @onnx::MatMul_N)` with
  the weight pre-transposed to [in, out] and renamed (fold) or `MatMul(x, Transpose(@W))`
  (nofold); with a bias, `Add(@bias, MatMul(...))`: **the bias is the first operand**. On 2-D
  activations (opt's fc1/fc2 run on `reshape(-1, hidden)`): `Gemm(x, @W, @b) transB=1`, PyTorch
  names in both modes. GPT-2's `Conv1D`: `Reshape(x, [-1, in])` -> `Gemm(., @W[in, out], @b)` (no
  transB) -> `Reshape(., [B, S, out])`, PyTorch names in both modes.
- Tied embeddings: with fold the head gets an untied, transposed copy `@onnx::MatMul_N`
  [hidden, vocab] (the embedding `Gather` keeps `@model.embed_tokens.weight`); with nofold the
  head is `Transpose(@<embedding>) perm=[1, 0]` -> `MatMul`: one initializer used twice.
- Casts to the type a tensor already has (`Cast(to=FLOAT)` on float32): 2 per RMSNorm, 1 per
  rotary cache slice, 2 after llama's softmax, 1 after gpt2's, llama's `logits`. They are
  identities and must not block matching (nor must the int64 -> int64 Casts of shape
  arithmetic, e.g. `Cast(Cast(Div(...)))` in rotate_half). llama's residual stream reads such a
  Cast (`%Add = Add(%input_layernorm/Cast, ...)`): the residual is the norm's no-op Cast of x.
- Every model has one float constant `-3.4028235e+38f` (finfo(float32).min), a scope-less
  Constant shared by all layers (`Max` clamp in llama/opt, `Where` fill in gpt2).

**llama** (section 4; all of it identical for fold/nofold up to weights, and for 14/17).

- RMSNorm (`input_layernorm`, `post_attention_layernorm`, `norm`), x -> y:
  `c = Cast(x, FLOAT)`; `p = Pow(c, 2.0f)`; `m = ReduceMean(p) axes=[-1] keepdims=1`;
  `a = Add(m, 1e-06f)`; `s = Sqrt(a)`; `r = Div(1.0f, s)` (rsqrt is Sqrt + Div, no Reciprocal);
  `n = Mul(c, r)`; `n2 = Cast(n, FLOAT)`; `y = Mul(@weight, n2)` (weight first).
- Positions (once, outside the layers): `position_ids = Reshape(Unsqueeze(Range(0, Cast(S), 1),
  [0]), Concat([-1], S))` = [1, S].
- Causal mask (once, outside the layers; the same code in opt): `full = ConstantOfShape([S, S])
  value=[-3.4028235e+38f]`; `r = Range(0, S', 1)` with S' read back from `Shape(full)`;
  `cond = Cast(Less(r, Reshape(Add(r, 1), [S, 1])), BOOL)` (true where column <= row);
  `m2 = Cast(Where(cond, 0.0f, full), FLOAT)`; `mask = Expand(Unsqueeze(Unsqueeze(m2, [0]), [1]),
  [B, 1, S, S])`, where Expand's shape goes through torch's `Where(Equal(shape, -1), 1, shape)`.
- Rotary caches: two scope-less Constant nodes `f32[1, 1, max_positions, head_dim]` (cos, sin),
  shared by all layers, never initializers (the buffers are non-persistent), with fold and
  without. Half: `emb = [f_0 .. f_(d/2-1), f_0 .. f_(d/2-1)] * pos`; interleaved: `[f_0, f_0, f_1,
  f_1, ...] * pos`; `f_i = 10000^(-2i/d)`.
- Rotary, per layer, once for cos and once for sin: `c = Cast(Slice(cache, [0], Unsqueeze(S_k,
  [0]), [2], [1]), FLOAT)` with `S_k = Gather(Shape(k), 2)`; `If(Equal(Gather(Shape(c), [1]),
  [1]))` then `Squeeze(c, [1])` else `Identity(c)` (torch cannot prove that dim 1 is 1); then
  `Squeeze(., [0])` -> `Gather(., position_ids) axis=0` -> `Unsqueeze(., [1])` = [1, 1, S, d].
  Applied to q then k (x = the [B, H, S, d] Transpose output): `Add(Mul(x, cos), Mul(rot(x),
  sin))`. Half (HF `rotate_half`): `h = Cast(Cast(Div(Gather(Shape(x), 3), 2)))`;
  `x1 = Slice(x, [0], Unsqueeze(h, [0]), [3], [1])`; `x2 = Slice(x, Unsqueeze(h, [0]), [INT64_MAX],
  [3], [1])`; `rot = Concat(Neg(x2), x1) axis=-1`. Interleaved (`rotate_every_two`):
  `x1 = Slice(x, [0], [INT64_MAX], [3], [2])`; `x2 = Slice(x, [1], [INT64_MAX], [3], [2])`;
  `st = Concat(Unsqueeze(Neg(x2), [-1]), Unsqueeze(x1, [-1])) axis=-1`;
  `rot = Reshape(st, Concat(Slice(Shape(st), [0], [-2], [0]), [-1]))`.
- Attention: q/k/v = `MatMul` -> `Reshape([B, S, heads or kv_heads, d])` -> `Transpose
  perm=[0, 2, 1, 3]`; rotary on q and k; GQA only (kv_heads < heads), for k and for v
  (`repeat_kv`): `Unsqueeze(x, [2])` -> `Expand(., [B, kv, n_rep, S, d])` -> `Reshape(., [B, kv *
  n_rep, S, d])` (the `kv * n_rep` is `Mul(Gather(Shape(x), 1), n_rep)`); then
  `s = Div(MatMul(q, Transpose(k) perm=[0, 1, 3, 2]), 4.0f)` (sqrt(d) folded by Python);
  `s = Add(s, mask)`; `s = Max(s, -3.4028235e+38f)`; `p = Cast(Cast(Softmax(s) axis=-1, FLOAT),
  FLOAT)`; `o = MatMul(p, v)` -> `Transpose perm=[0, 2, 1, 3]` -> `Reshape([B, S, hidden])` ->
  o_proj `MatMul`.
- SwiGLU: `g = MatMul(x, Wg)`; `a = Mul(g, Sigmoid(g))`; `u = MatMul(x, Wu)`;
  `y = MatMul(Mul(a, u), Wd)` (silu is `Sigmoid` + `Mul`, as the importer already knows it).
- Head: `MatMul(norm, W)` then `logits = Cast(., FLOAT)` (HF's `logits.float()`).

**gpt2** (section 5).

- LayerNorm, opset 14 (`ln_1`, `ln_2`, `ln_f`; opt's too): `m = ReduceMean(x) axes=[-1]`;
  `d = Sub(x, m)`; `v = ReduceMean(Pow(d, 2.0f)) axes=[-1]`; `y = Add(Mul(Div(d, Sqrt(Add(v,
  1e-05f))), @weight), @bias)`. Opset 17: `LayerNormalization(x, @weight, @bias) axis=-1
  epsilon=1e-05` (one output).
- gelu-tanh (gelu_new): `h = Mul(x, 0.5f)`; `t = Tanh(Mul(Add(x, Mul(Pow(x, 3.0f), 0.044715f)),
  0.7978846f))`; `y = Mul(h, Add(t, 1.0f))`. Exact gelu (erf):
  `y = Mul(Mul(x, Add(Erf(Div(x, 1.4142135f)), 1.0f)), 0.5f)`. relu: `Relu`.
- Embeddings: `Gather(@wte, Reshape(input_ids, [-1, S]))` + `Gather(@wpe, position_ids)`.
- Attention, fused (`c_attn`): `qkv = Reshape(Gemm(Reshape(x, [-1, 64]), @c_attn.weight,
  @c_attn.bias), [B, S, 192])`; `q, k, v = Split(qkv, [64, 64, 64]) axis=2`; q and v:
  `Transpose(Reshape(., [B, S, H, d])) perm=[0, 2, 1, 3]`; k: the same Reshape feeds both a
  `perm=[0, 2, 1, 3]` Transpose (used only for its Shape) and the score's
  `Transpose perm=[0, 2, 3, 1]`. Separate q/k/v: three Conv1D Gemms on one shared
  `Reshape(x, [-1, 64])`, no Split. Scores: `s = Div(MatMul(q, kT), Cast(Pow(Cast(d, FLOAT),
  0.5f), FLOAT))` with `d = Squeeze(Slice(Shape(v), [-1], [INT64_MAX], [0]), [0])` (sqrt(d)
  computed in the graph). Mask: `Cast(Slice(Slice(@transformer.h.<i>.attn.bias, Unsqueeze(Sub(K,
  Q)), Unsqueeze(K), [2], [1]), [0], Unsqueeze(K), [3], [1]), BOOL)` with Q, K the query and
  key lengths (`Squeeze(Slice(Shape(.), [-2], [-1], [0]))`), the buffer a `UINT8[1, 1, max, max]`
  lower-triangular initializer; `s = Where(mask, s, -3.4028235e+38f)`;
  `p = Cast(Softmax(s) axis=-1, FLOAT)`; `o = MatMul(p, v)` -> `Transpose perm=[0, 2, 1, 3]` ->
  `Reshape([B, S, 64])` -> c_proj (Reshape, Gemm, Reshape).
- The mask buffers are equal in every layer, and the exporter deduplicates equal initializers:
  only `@transformer.h.0.attn.bias` is stored and layer i > 0 reads
  `%transformer.h.<i>.attn.bias = Identity(@transformer.h.0.attn.bias)`, a node output named
  like a PyTorch buffer (first node of the graph), in both modes.

**opt** (section 6).

- Embeddings: `Gather(@embed_tokens, Reshape(input_ids, [-1, S]))` +
  `Gather(@embed_positions [max_positions + 2, hidden], Add(Unsqueeze(Range(0, S, 1), [0]), 2))`.
- Mask: as llama's (outside the layers).
- Attention: `q = Mul(Add(@q_proj.bias, MatMul(x, Wq)), 0.25f)` (scaling d^-0.5 on q, before the
  product); k, v = `Add(@bias, MatMul)`; each -> `Reshape([B, -1 or S, H, d])` ->
  `Transpose perm=[0, 2, 1, 3]` -> `Reshape([B * H, -1, d])`; `s = MatMul(q3, Transpose(k3)
  perm=[0, 2, 1])` -> `Reshape([B, H, S, S])` -> `Add(., mask)` -> `Max(., -3.4028235e+38f)` ->
  `Reshape([B * H, S, S])` -> `Softmax axis=-1` (no Cast); `o = MatMul(p, v3)` ->
  `Reshape([B, H, S, d])` -> `Transpose perm=[0, 2, 1, 3]` -> `Reshape([B, S, 64])` -> out_proj
  (`MatMul`, `Add(@bias, .)`). Fused (`--fused-qkv`): `Split(Add(@qkv_proj.bias, MatMul(x, W)),
  [64, 64, 64]) axis=-1`.
- MLP on the flattened residual: `r = Reshape(h, [-1, 64])`; LayerNorm(r);
  `Gemm(., @fc1.weight, @fc1.bias) transB=1` -> act -> `Gemm(., @fc2.weight, @fc2.bias) transB=1`;
  `Add(r, .)` -> `Reshape([B, S, 64])` (the next layer reads the 3-D tensor).
- Head: `logits = MatMul(final_layer_norm, W)` directly (no Cast).

""",
    "initializers": """\
Per variant: the initializers layer 0 uses (or that carry its name), and those used outside the
layers, as `name` TYPE[dims]. With fold the 3-D linear weights are pre-transposed copies named
`onnx::MatMul_N`; the numbering differs between exports (and between opsets).

""",
    "constants": """\
Per variant: the number of Constant nodes (including those inside If branches), how many are
int64 literals of at most 8 elements (shape and index arithmetic), and every other one by value,
with the modules it appears in (`hoisted`: a scope-less Constant).

""",
    "llama_listing": """\
## 4. llama listings

The layer listing holds, in order: `input_layernorm` (RMSNorm), q/k/v projections and head split,
`rotary_emb` (cache slices) and the rotary application with its two `If`s, the scores, mask add,
clamp, softmax, context, o_proj, the residual `Add`, `post_attention_layernorm`, the SwiGLU `mlp`
and the second residual `Add_1`. Outside the layers: positions, token embedding, the causal mask,
the shared Constants (rope caches, finfo.min), the final `norm` and `lm_head`.

""",
    "gpt2_listing": """\
## 5. gpt2 listings

The layer listing holds `ln_1`, `attn/c_attn` (Conv1D: Reshape, Gemm, Reshape), the Split, the
head split, scores with the computed sqrt(d), the mask buffer slices and `Where`, softmax,
context, `attn/c_proj`, the residual `Add`, `ln_2`, `mlp/c_fc`, `mlp/act` (gelu-tanh), `mlp/c_proj`
and the second residual.

""",
    "opt_listing": """\
## 6. opt listings

The layer listing holds `self_attn_layer_norm`, the q/k/v projections (MatMul + bias Add), the
q scaling `Mul`, the [B * H, S, d] reshapes, scores, mask add, clamp, softmax, context, `out_proj`,
the residual, the flattening Reshape, `final_layer_norm`, `fc1` (Gemm), `activation_fn` (Relu),
`fc2` (Gemm), the residual and the Reshape back to 3-D.

""",
}

if __name__ == "__main__":
    sys.exit(main())
