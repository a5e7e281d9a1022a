"""Shared fixtures: the package on sys.path, and the sl-opt / sl-run binaries from the environment.

ctest sets PYTHONPATH, SL_RUN and (when the compiler is built) SL_OPT; see test/python/CMakeLists.txt.
Tests that need a binary whose variable is unset skip with the reason; a variable that is set but
does not name an executable file is a failure, not a skip, since it means the build is broken.
"""

import os
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PYTHON_DIR.parent
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

from sl_helpers import SLTools  # noqa: E402  (this directory is on sys.path under pytest)


def _tool(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        tool = var.lower().replace("_", "-")
        pytest.skip(f"{var} is not set: point it at the built {tool} binary "
                    f"(ctest does) to run this end-to-end test")
    if not (os.path.isfile(value) and os.access(value, os.X_OK)):
        pytest.fail(f"{var}={value!r} is not an executable file")
    return value


@pytest.fixture
def sl_tools() -> SLTools:
    # Both are needed: a schedule comes only from sl-opt, and only sl-run executes one.
    sl_opt = _tool("SL_OPT")
    sl_run = _tool("SL_RUN")
    return SLTools(sl_opt, sl_run)
