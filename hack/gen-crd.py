#!/usr/bin/env python3
"""Regenerate manifests/crd/*.yaml, the Helm chart's copies of them (charts/sampledb-operator/crds) and
docs/reference.md from the models (--check: only compare)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))

from sampledb_operator.model.reference import generated_files  # noqa: E402


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for rel, content in generated_files().items():
        path = REPO / rel
        if path.exists() and path.read_text() == content:
            continue
        stale.append(rel)
        if not check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
    for rel in stale:
        print(f"{'stale' if check else 'wrote'}: {rel}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
