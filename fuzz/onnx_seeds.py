"""Writes the ONNX importer's seed corpora: every ONNX text model of the lit suite (test/Import)
as it is into OUT/onnxtxt/, and as a binary model into OUT/onnx/, once with typed fields and once
with raw_data as exporters write it. Usage: onnx_seeds.py SOURCE_ROOT OUT."""
import pathlib
import shutil
import sys

import onnx
import onnx.numpy_helper
import onnx.parser

root, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(out / "onnxtxt").mkdir(parents=True, exist_ok=True)
(out / "onnx").mkdir(parents=True, exist_ok=True)
for source in sorted((root / "test" / "Import").rglob("*.onnxtxt")):
    shutil.copy(source, out / "onnxtxt" / source.name)
    try:
        model = onnx.parser.parse_model(source.read_text())
    except Exception:  # the lit suite's syntax-error inputs
        continue
    (out / "onnx" / (source.stem + ".onnx")).write_bytes(model.SerializeToString())
    for tensor in model.graph.initializer:
        tensor.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor), tensor.name))
    (out / "onnx" / (source.stem + ".raw.onnx")).write_bytes(model.SerializeToString())
