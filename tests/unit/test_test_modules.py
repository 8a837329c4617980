"""The suite's test modules are imported by their base names (the test folders are not packages): two modules of
one name in different folders make pytest refuse to collect the second one. Every base name is unique."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_base_name() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)
    assert [name for name, count in names.items() if count > 1] == []
