"""Shared by the moec Python tests. Run them with the module on PYTHONPATH:

    PYTHONPATH=build/python /usr/bin/python3 -m pytest python/tests

Every run gets an empty kernel cache of its own (MOEC_CACHE_DIR), made before moec creates a runtime, and
removed at the end; HOME and XDG_CACHE_HOME point into it too, so no test touches the user's cache.
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

_root = os.environ.get("MOEC_TEST_CACHE_ROOT")
if _root:
    os.makedirs(_root, exist_ok=True)
_cache = tempfile.mkdtemp(prefix="moec-pytest-", dir=_root or None)
os.environ["MOEC_CACHE_DIR"] = os.path.join(_cache, "kernels")
os.environ["HOME"] = os.path.join(_cache, "home")
os.environ["XDG_CACHE_HOME"] = os.path.join(_cache, "home", ".cache")

SOURCE_DIR = Path(os.environ.get("MOEC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = Path(os.environ.get("MOEC_BINARY_DIR", SOURCE_DIR / "build"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # reference.py

import moec  # noqa: E402  (after MOEC_CACHE_DIR is set)


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_cache, ignore_errors=True)


@pytest.fixture
def rng(request):
    """Fresh random data every run; the seed is in the test's report when it fails."""
    seed = int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed}")
    return np.random.default_rng(seed)
