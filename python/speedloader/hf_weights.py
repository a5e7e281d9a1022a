"""Reading a Hugging Face model directory's weights one tensor at a time.

`save_pretrained` writes safetensors (``model.safetensors``, or shards listed by
``model.safetensors.index.json``) or, older, PyTorch pickles (``pytorch_model.bin`` or its shards
and ``pytorch_model.bin.index.json``). `WeightFiles` finds them and reads any one tensor as a
float32 NumPy array without reading the others: a safetensors tensor is read at its offset (no
mmap, so no page of the file stays in the process), a pickle's tensor from its storage record in
the zip archive (the pickle itself is unpickled with a loader that builds no tensor). Peak memory
is then one tensor (and its float32 copy), whatever the model's size.

Nothing here imports torch or transformers.
"""

from __future__ import annotations

import collections
import json
import pickle
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # widened below
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
}
# torch storage class names in a pickle -> (NumPy dtype of the stored bytes, is bf16)
PICKLE_STORAGES = {
    "FloatStorage": (np.dtype("<f4"), False), "DoubleStorage": (np.dtype("<f8"), False),
    "HalfStorage": (np.dtype("<f2"), False), "BFloat16Storage": (np.dtype("<u2"), True),
    "LongStorage": (np.dtype("<i8"), False), "IntStorage": (np.dtype("<i4"), False),
    "ShortStorage": (np.dtype("<i2"), False), "CharStorage": (np.dtype("i1"), False),
    "ByteStorage": (np.dtype("u1"), False), "BoolStorage": (np.dtype("?"), False),
}
SAFETENSORS_FILES = ("model.safetensors.index.json", "model.safetensors")
PICKLE_FILES = ("pytorch_model.bin.index.json", "pytorch_model.bin")
# The safetensors header is JSON of at most this many bytes (the format's own limit).
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024


class WeightFileError(ValueError):
    pass


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    wide = raw.astype("<u4")
    wide <<= 16
    return wide.view("<f4")


@dataclass
class _Entry:
    file: Path
    shape: Tuple[int, ...]
    # safetensors: the dtype name and byte offset in the file; pickle: the storage record
    dtype: str
    offset: int = 0
    # pickle only
    record: str = ""
    storage_offset: int = 0
    stride: Tuple[int, ...] = ()
    storage_numel: int = 0


def _read_safetensors_header(path: Path) -> Dict[str, _Entry]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise WeightFileError(f"{path}: not a safetensors file (shorter than its header)")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_SAFETENSORS_HEADER:
            raise WeightFileError(f"{path}: safetensors header of {n} bytes is too large")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise WeightFileError(f"{path}: bad safetensors header: {e}") from None
    size = path.stat().st_size
    entries = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise WeightFileError(f"{path}: tensor {name!r} has dtype {info['dtype']}, which is "
                                  f"not read here")
        shape = tuple(int(d) for d in info["shape"])
        want = int(np.prod(shape, dtype=np.int64)) * SAFETENSORS_DTYPES[info["dtype"]].itemsize
        if end - begin != want or 8 + n + end > size:
            raise WeightFileError(f"{path}: tensor {name!r} does not fit the file")
        entries[name] = _Entry(path, shape, info["dtype"], offset=8 + n + begin)
    return entries


def read_safetensors_tensor(e: _Entry, name: str) -> np.ndarray:
    """Safetensors tensor `name` (entry `e` of _read_safetensors_header) as stored (bf16 as
    uint16), read from its file alone."""
    count = int(np.prod(e.shape, dtype=np.int64))
    with open(e.file, "rb") as f:
        f.seek(e.offset)
        raw = np.fromfile(f, dtype=SAFETENSORS_DTYPES[e.dtype], count=count)
    if raw.size != count:
        raise WeightFileError(f"{e.file}: tensor {name!r} is truncated")
    return raw.reshape(e.shape)


class _LazyPickle(pickle.Unpickler):
    """Unpickles a torch zip checkpoint's data.pkl into descriptions of its tensors."""

    def __init__(self, f, path: Path, prefix: str):
        super().__init__(f)
        self.path, self.prefix = path, prefix

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return self._tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda data, requires_grad, backward_hooks, *rest: data
        if module == "torch" and name in PICKLE_STORAGES:
            return name
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        raise WeightFileError(f"{self.path}: holds a {module}.{name}, which a weights file does "
                              f"not (only tensors are read from it)")

    def persistent_load(self, pid):
        # ('storage', storage class name, key, location, numel)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise WeightFileError(f"{self.path}: unexpected storage reference {pid!r}")
        return (pid[1], f"{self.prefix}/data/{pid[2]}", int(pid[4]))

    def _tensor(self, storage, storage_offset, size, stride, *rest):
        kind, record, numel = storage
        return _Entry(self.path, tuple(size), kind, record=record,
                      storage_offset=int(storage_offset), stride=tuple(stride),
                      storage_numel=numel)


def _read_pickle_index(path: Path) -> Dict[str, _Entry]:
    if not zipfile.is_zipfile(path):
        raise WeightFileError(f"{path}: a pickle in torch's legacy (pre-1.6, not zip) format; "
                              f"save the model again with save_pretrained (safetensors)")
    with zipfile.ZipFile(path) as z:
        pkls = [n for n in z.namelist() if n.endswith("/data.pkl")]
        if len(pkls) != 1:
            raise WeightFileError(f"{path}: no single data.pkl in the archive")
        prefix = pkls[0][:-len("/data.pkl")]
        with z.open(pkls[0]) as f:
            state = _LazyPickle(f, path, prefix).load()
    if not isinstance(state, dict):
        raise WeightFileError(f"{path}: holds a {type(state).__name__}, not a state dict")
    return {k: v for k, v in state.items() if isinstance(v, _Entry)}


class WeightFiles:
    """The weights of a save_pretrained directory, by state-dict name, read one at a time."""

    def __init__(self, directory: Path):
        """The weights save_pretrained wrote in `directory`."""
        directory = Path(directory)
        for name in SAFETENSORS_FILES + PICKLE_FILES:
            if (directory / name).is_file():
                self._read(directory / name)
                return
        raise WeightFileError(
            f"{directory}: no weights ({', '.join(SAFETENSORS_FILES + PICKLE_FILES)}); "
            f"export the graph alone with --weightless")

    @classmethod
    def of_file(cls, path: Path) -> "WeightFiles":
        """The weights in one file: safetensors, a torch zip pickle, or a shard index."""
        path = Path(path)
        if not path.is_file():
            raise WeightFileError(f"{path}: no such file")
        self = cls.__new__(cls)
        self._read(path)
        return self

    def _read(self, found: Path) -> None:
        self.directory = found.parent
        self.entries: Dict[str, _Entry] = {}
        self.files: List[Path] = []
        if found.name.endswith(".index.json"):
            try:
                weight_map = json.loads(found.read_text())["weight_map"]
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise WeightFileError(f"{found}: not a shard index ({e})") from None
            shards = list(dict.fromkeys(weight_map.values()))
            for shard in shards:
                p = self.directory / shard
                if Path(shard).is_absolute() or ".." in Path(shard).parts or not p.is_file():
                    raise WeightFileError(f"{found}: shard {shard!r} is not a file in "
                                          f"{self.directory}")
            paths = [self.directory / shard for shard in shards]
        else:
            paths = [found]
        for path in paths:
            with open(path, "rb") as f:
                zip_magic = f.read(4) == b"PK\x03\x04"
            read = _read_pickle_index if zip_magic or path.suffix == ".bin" \
                else _read_safetensors_header
            self.files.append(path)
            self.entries.update(read(path))

    def names(self) -> List[str]:
        return list(self.entries)

    def shape(self, name: str) -> Tuple[int, ...]:
        return self.entries[name].shape

    def read_f32(self, name: str) -> np.ndarray:
        """The tensor `name` as a C-contiguous float32 array, read from its file alone."""
        e = self.entries[name]
        if e.record:
            dtype, bf16 = PICKLE_STORAGES[e.dtype]
            with zipfile.ZipFile(e.file) as z, z.open(e.record) as f:
                raw = np.frombuffer(f.read(), dtype=dtype)
            if raw.size < e.storage_numel:
                raise WeightFileError(f"{e.file}: storage of {name!r} is truncated")
            span = e.storage_offset + sum((s - 1) * st for s, st in zip(e.shape, e.stride)) + 1
            if any(s == 0 for s in e.shape):
                span = 0
            if span > raw.size:
                raise WeightFileError(f"{e.file}: tensor {name!r} lies outside its storage")
            view = np.lib.stride_tricks.as_strided(
                raw[e.storage_offset:], shape=e.shape,
                strides=[st * raw.itemsize for st in e.stride])
            raw = np.ascontiguousarray(view)
        else:
            bf16 = e.dtype == "BF16"
            raw = read_safetensors_tensor(e, name)
        if bf16:
            return bf16_to_f32(raw)
        return np.ascontiguousarray(raw, dtype=np.float32)

    def find(self, aliases: List[str], prefix: Optional[str]) -> Optional[str]:
        """The stored name of a parameter known by `aliases` (a tied weight has several), also
        without the model's `prefix` (checkpoints of a base model lack it)."""
        for a in aliases:
            if a in self.entries:
                return a
        if prefix:
            for a in aliases:
                if a.startswith(prefix + ".") and a[len(prefix) + 1:] in self.entries:
                    return a[len(prefix) + 1:]
        return None
