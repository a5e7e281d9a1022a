"""Exporting a Hugging Face model directory (what `save_pretrained` writes) to ONNX for sl-opt.

    python3 -m speedloader.export --hf DIR --out model.onnx [--train] [--weightless]
        [--weights CHECKPOINT.safetensors]

The model is built from DIR/config.json by `transformers` (its causal-LM class for the config's
`model_type`) with every weight on the meta device, then replaced by a placeholder that takes no memory, and
traced by torch.onnx.export as the user guide says Hugging Face models are to be exported:
input `input_ids` (int64 [batch, seq]), output `logits`, both axes symbolic (`batch`, `seq`),
opset 17, `do_constant_folding=False` (every initializer keeps its PyTorch name, a tied weight is
one initializer), `use_cache=False`; in eval mode, or with `--train` in train mode with
`training=TrainingMode.PRESERVE` and every dropout probability of the config set to 0 (for
`sl-opt --sl-train`). The weights are then written one tensor at a time, as float32, into one
external data file FILE.onnx.data beside the model (each at a multiple of 4096 bytes), read from
DIR's safetensors or pytorch_model.bin files (hf_weights.py), or from `--weights`, a safetensors
file such as sl-run's `--save` checkpoint (its Adam moments are ignored). No weight is ever held
twice: peak memory is the largest tensor plus the traced graph. `--weightless` reads no weight
file at all and leaves the data file sparse (zeros; for `sl-run --random-weights`).

Nothing is downloaded: the directory must hold config.json, and its model_type must be one
transformers (4.41.2) has a causal-LM class for. transformers is imported only here.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch

from .export import (_EmptyOnMeta, _NoCopiesOf, _check, _shape_inference_without_values,
                     attach_external_data, data_file_of, make_weightless)
from .hf_weights import WeightFileError, WeightFiles

HF_OPSET = 17
# The traced example: any ids do; batch and seq above 1 so that no exporter branch specialises
# on a dimension of one.
TRACE_BATCH, TRACE_SEQ = 2, 5
# sl-run's checkpoints hold each parameter's Adam moments beside it.
CHECKPOINT_STATE_SUFFIXES = (".adam_m", ".adam_v")


class HFDirectoryError(ValueError):
    """A model directory that cannot be exported; the message says why."""


@dataclass
class HFExport:
    onnx_path: Path
    data_path: Path
    model_type: str
    parameters: int
    parameter_bytes: int
    weightless: bool
    # Tensors of the weight files that no parameter of the model reads (old checkpoints' saved
    # buffers, a checkpoint's Adam moments aside).
    unused: List[str] = field(default_factory=list)


def import_transformers():
    # A model directory is all there is: never reach for the hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers
    except ImportError:
        raise HFDirectoryError(
            "--hf needs the transformers package (4.41.2); run with the venv "
            "scripts/install-deps.sh makes (.venv/bin/python)") from None
    return transformers


def load_config(directory: os.PathLike):
    """DIR/config.json as a transformers config, checked to name a causal LM."""
    d = Path(directory)
    if not d.exists():
        raise HFDirectoryError(f"{d}: no such directory (--hf takes a local save_pretrained "
                               f"directory; nothing is downloaded)")
    if not d.is_dir():
        raise HFDirectoryError(f"{d}: not a directory (--hf takes a save_pretrained directory)")
    config_file = d / "config.json"
    if not config_file.is_file():
        raise HFDirectoryError(f"{d}: no config.json (not a save_pretrained directory)")
    try:
        raw = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HFDirectoryError(f"{config_file}: cannot read it: {e}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise HFDirectoryError(f"{config_file}: has no model_type")
    transformers = import_transformers()
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = raw["model_type"]
    if model_type not in CONFIG_MAPPING_NAMES:
        raise HFDirectoryError(
            f"{config_file}: unknown model_type {model_type!r} (transformers "
            f"{transformers.__version__} does not know it; models with their own code, "
            f"trust_remote_code, are not imported)")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise HFDirectoryError(f"{config_file}: model_type {model_type!r} has no causal-LM class "
                               f"in transformers {transformers.__version__}")
    try:
        return transformers.AutoConfig.from_pretrained(str(d), local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise HFDirectoryError(f"{config_file}: transformers cannot read it: {e}") from None


def zero_dropouts(config) -> List[str]:
    """Sets every dropout probability of `config` to 0 (sl-opt takes training-mode Dropout only
    at ratio 0); returns the names it changed."""
    changed = []
    for key, value in config.to_dict().items():
        if ("dropout" in key or "pdrop" in key) and isinstance(value, float) and value != 0.0:
            setattr(config, key, 0.0)
            changed.append(key)
    return changed


def build_weightless(config) -> torch.nn.Module:
    """The causal LM of `config` with placeholder weights (make_weightless): no memory for them."""
    transformers = import_transformers()
    config.use_cache = False  # the graph's only output is the logits
    with _EmptyOnMeta():
        model = transformers.AutoModelForCausalLM.from_config(config)
    for name, b in model.named_buffers():
        if b.is_meta:
            raise HFDirectoryError(f"{config.model_type}: buffer {name} has no value (it was "
                                   f"made with torch.empty); this architecture cannot be traced "
                                   f"without its weights")
    return make_weightless(model)


def export_hf(directory: os.PathLike, out: os.PathLike, *, train: bool = False,
              weightless: bool = False, weights: Optional[os.PathLike] = None,
              opset: int = HF_OPSET, log=None) -> HFExport:
    """Exports the model of save_pretrained directory `directory` to `out` (see the module's
    docstring); the weights come from `weights` (a safetensors file) when given."""
    directory, out = Path(directory), Path(out)
    config = load_config(directory)
    files = None
    if not weightless:  # find the weights (and any fault in them) before the long trace
        try:
            files = WeightFiles(directory) if weights is None else WeightFiles.of_file(weights)
        except WeightFileError as e:
            raise HFDirectoryError(str(e)) from None
    if train:
        changed = zero_dropouts(config)
        if changed and log:
            log(f"--train: dropout set to 0 ({', '.join(changed)}): sl-opt --sl-train takes "
                f"training-mode Dropout only at ratio 0")
    model = build_weightless(config)
    model.train(train)
    out.parent.mkdir(parents=True, exist_ok=True)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    used = set()

    def write(name: str, aliases: List[str], f) -> None:
        stored = files.find(aliases, getattr(model, "base_model_prefix", None))
        if stored is None:
            raise HFDirectoryError(
                f"{weights or directory}: no weight {name!r}"
                + (f" (nor {', '.join(a for a in aliases if a != name)})"
                   if len(aliases) > 1 else "")
                + f" for this {config.model_type} model"
                + ("; its tensors named onnx::MatMul_N are weights an exporter folded: rename "
                   "them with `python3 -m speedloader.pytorch_names MODEL.onnx --checkpoint "
                   "CKPT --out RENAMED` (MODEL.onnx: the graph it was trained from)"
                   if any(n.startswith("onnx::MatMul_") for n in files.names()) else ""))
        if tuple(files.shape(stored)) != shapes[name]:
            raise HFDirectoryError(f"{weights or directory}: weight {stored!r} is "
                                   f"{list(files.shape(stored))}; config.json makes it "
                                   f"{list(shapes[name])}")
        try:
            a = files.read_f32(stored)
        except WeightFileError as e:
            raise HFDirectoryError(str(e)) from None
        if not np.isfinite(a).all():
            raise HFDirectoryError(f"{weights or directory}: weight {stored!r} holds NaN or "
                                   f"infinite values")
        f.write(memoryview(a).cast("B"))
        used.add(stored)
        used.update(aliases)

    # torch writes the graph to a temporary: `out` (and its data) are replaced only once the
    # whole export has worked.
    graph = out.with_name(out.name + ".graph.tmp")
    ids = torch.zeros((TRACE_BATCH, TRACE_SEQ), dtype=torch.int64)
    try:
        _trace(model, ids, graph, opset, train)
        total, count = attach_external_data(out, model, None if weightless else write, graph)
    finally:
        graph.unlink(missing_ok=True)
    _check(out)
    unused = [] if files is None else [
        n for n in files.names() if n not in used and not n.endswith(CHECKPOINT_STATE_SUFFIXES)]
    return HFExport(onnx_path=out, data_path=data_file_of(out), model_type=config.model_type,
                    parameters=count, parameter_bytes=total, weightless=weightless,
                    unused=unused)


def _trace(model, ids, graph: Path, opset: int, train: bool) -> None:
    axes = {0: "batch", 1: "seq"}
    with warnings.catch_warnings(), _NoCopiesOf(model.parameters()), \
            _shape_inference_without_values():
        # Tracing HF code warns about every Python branch on a shape and every traced constant;
        # sl-opt binds the shapes and the tests check the results.
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", UserWarning)
        torch.onnx.export(
            model, (ids,), str(graph), input_names=["input_ids"], output_names=["logits"],
            dynamic_axes={"input_ids": axes, "logits": axes}, opset_version=opset,
            do_constant_folding=False, export_params=False,
            training=torch.onnx.TrainingMode.PRESERVE if train else torch.onnx.TrainingMode.EVAL)

