#!/usr/bin/env python3
"""Fail if any C/C++/CUDA source under the given directories includes an MLIR or LLVM header.

The runtime (and the IR contract it shares with the compiler) must build without MLIR/LLVM, so
`#include <mlir/...>`, `#include "llvm/..."` (and mlir-c/, llvm-c/, and `#  include` spellings) are
forbidden there. TableGen's `include "mlir/..."` (no '#') is not a C++ include and is not flagged.

Usage: check_no_mlir_includes.py [DIR ...]    (default: runtime/ and ir/ of this repository)
Prints one `path:line: text` per offending line; exits 1 if there is any, 2 on bad arguments,
else 0.
"""

import argparse
import os
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIRS = ("runtime", "ir")

SOURCE_SUFFIXES = {
    ".h", ".hh", ".hpp", ".hxx", ".h++", ".inc", ".def", ".ipp", ".tcc", ".inl",
    ".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".cuh", ".m", ".mm",
}
# Directories never scanned (build trees someone configured inside the source tree, VCS data).
SKIP_DIRS = {".git", "__pycache__"}
SKIP_DIR_PREFIXES = ("build",)

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]\s*(?:mlir|llvm)(?:-c)?/')


def is_source(path: Path) -> bool:
    name = path.name.lower()
    if name.endswith(".in"):  # configure_file templates such as config.h.in
        name = name[:-3]
    return Path(name).suffix in SOURCE_SUFFIXES


def scan_file(path: Path):
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if INCLUDE_RE.match(line):
                yield lineno, line.rstrip("\n")


def scan_dir(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not d.startswith(SKIP_DIR_PREFIXES))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and is_source(path):
                for lineno, text in scan_file(path):
                    yield path, lineno, text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description="Fail if C/C++/CUDA sources include mlir/ or llvm/ headers.")
    p.add_argument("dirs", nargs="*", type=Path,
                   help="directories to scan (default: runtime/ and ir/ of the repository, "
                        f"{REPO_ROOT})")
    args = p.parse_args(argv)
    dirs = args.dirs or [REPO_ROOT / d for d in DEFAULT_DIRS]
    for d in dirs:
        if not d.is_dir():
            p.error(f"{d} is not a directory")

    bad = 0
    try:
        for d in dirs:
            for path, lineno, text in scan_dir(d):
                print(f"{path}:{lineno}: {text.strip()}")
                bad += 1
    except OSError as e:
        print(f"error: cannot read {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    if bad:
        print(f"error: {bad} forbidden mlir/llvm include(s); the runtime and ir/ must build "
              f"without MLIR and LLVM", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
