"""SpeedLoader's Python side: model builders, ONNX export and reference implementations for tests.

The compiler (``sl-opt``) consumes the ``.onnx`` files written by :mod:`speedloader.export`; the
runtime (``sl-run``) executes the schedule it produces. Nothing in this package needs either binary.
"""

__version__ = "0.1.0"
