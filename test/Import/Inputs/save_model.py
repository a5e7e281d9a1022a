"""Writes an ONNX text model as a binary .onnx. The text parser stores weights in typed fields
(float_data); --raw stores them as raw_data as exporters do, --external in a separate file."""
import argparse

import onnx
import onnx.numpy_helper
import onnx.parser

parser = argparse.ArgumentParser()
parser.add_argument("source")
parser.add_argument("out")
parser.add_argument("--raw", action="store_true", help="store initializers as raw_data")
parser.add_argument("--external", help="file name (beside OUT) for all initializer data")
args = parser.parse_args()

with open(args.source) as f:
    model = onnx.parser.parse_model(f.read())
if args.raw or args.external:
    for tensor in model.graph.initializer:
        tensor.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor), tensor.name))
if args.external:
    onnx.save_model(model, args.out, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=args.external, size_threshold=0)
else:
    onnx.save_model(model, args.out)
