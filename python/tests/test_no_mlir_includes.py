"""scripts/check_no_mlir_includes.py: the runtime and ir/ never include MLIR or LLVM headers."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "check_no_mlir_includes.py"


def _check(*dirs):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, dirs)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def test_repository_runtime_and_ir_are_clean():
    for d in ("runtime", "ir"):
        assert (REPO_ROOT / d).is_dir(), d
    p = _check()  # defaults: runtime/ and ir/ of the repository
    assert p.returncode == 0, p.stdout + p.stderr
    p = _check(REPO_ROOT / "runtime", REPO_ROOT / "ir")
    assert p.returncode == 0, p.stdout + p.stderr


def test_check_catches_forbidden_includes(tmp_path):
    src = tmp_path / "src"
    (src / "deep" / "er").mkdir(parents=True)
    (src / "ok.cpp").write_text(
        '#include <vector>\n'
        '#include "slrt/schedule.h"\n'
        '// #include <mlir/IR/Builders.h> is only mentioned in a comment\n'
        '#include "mymlir/thing.h"\n'
        'include "mlir/IR/OpBase.td"\n')
    (src / "bad.cpp").write_text(
        '#include <vector>\n'
        '#include <mlir/IR/Builders.h>\n')
    (src / "deep" / "er" / "bad.h").write_text(
        '#pragma once\n'
        '\n'
        '  #  include   "llvm/Support/raw_ostream.h"\n'
        '#include<llvm-c/Core.h>\n'
        '#include "mlir-c/IR.h"\n')
    (src / "kernel.cu").write_text('#include "mlir/Dialect/GPU/IR/GPUDialect.h"\n')
    (src / "notes.md").write_text('#include <mlir/IR/Builders.h>\n')  # not a source file

    p = _check(src)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert sorted(lines) == sorted([
        f"{src / 'bad.cpp'}:2: #include <mlir/IR/Builders.h>",
        f"{src / 'deep' / 'er' / 'bad.h'}:3: #  include   \"llvm/Support/raw_ostream.h\"",
        f"{src / 'deep' / 'er' / 'bad.h'}:4: #include<llvm-c/Core.h>",
        f"{src / 'deep' / 'er' / 'bad.h'}:5: #include \"mlir-c/IR.h\"",
        f"{src / 'kernel.cu'}:1: #include \"mlir/Dialect/GPU/IR/GPUDialect.h\"",
    ]), p.stdout
    assert "forbidden" in p.stderr

    # A clean tree passes; one bad file among clean ones fails and is named.
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "a.cc").write_text("#include <cstdio>\n")
    assert _check(clean).returncode == 0
    p = _check(clean, src / "deep")
    assert p.returncode == 1 and "bad.h:3:" in p.stdout and "a.cc" not in p.stdout


def test_check_rejects_missing_directory(tmp_path):
    p = _check(tmp_path / "nope")
    assert p.returncode == 2 and "is not a directory" in p.stderr
