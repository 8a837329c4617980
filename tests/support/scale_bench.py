"""bench/scale/scale.py loaded as a module, for unit tests of the benchmark's own logic."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Any

import pytest


def load_scale_bench(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The module (under the name scale_bench, which its dataclasses look up); sys.path restored after the test
    (it puts the operator's tree on the path)."""
    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "scale" / "scale.py"
    spec = importlib.util.spec_from_file_location("scale_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "scale_bench", module)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec.loader.exec_module(module)
    return module
