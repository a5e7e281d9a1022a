# lit configuration for the SpeedLoader compiler tests: dialect round-trips and verifier errors,
# importer tests on ONNX text, one file per pass, and end-to-end compile-and-run checks.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "SpeedLoader"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "unit", "python", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.sl_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%sl_src_root", config.sl_src_root))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PYTHONPATH", os.path.join(config.sl_src_root, "python"),
                             append_path=True)
llvm_config.add_tool_substitutions(["sl-opt", "sl-run"], [config.sl_tools_dir])
