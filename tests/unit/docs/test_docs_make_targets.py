"""The make targets the docs name exist, the Makefile's targets are all named in the docs, and the README
opens with the two commands for a fresh machine: `make run` and `make test`."""

from __future__ import annotations

import re
import shlex

from tests.unit.docs.markdown import README, REPO, code_blocks, doc_files, inline_code, prose, rel

MAKEFILE = REPO / "Makefile"


def _makefile_targets() -> set[str]:
    targets = set()
    for line in MAKEFILE.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.-]*(?:\s+[A-Za-z0-9][A-Za-z0-9_.-]*)*)\s*:(?![=:])", line)
        if m and not line.startswith((".", "\t")):
            targets.update(m.group(1).split())
    return targets


def _make_targets(command: str) -> list[str]:
    """The targets of one `make ...` command line (variables and flags left out)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    if not words or words[0] != "make":
        return []
    out = []
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
            continue
        if word in ("-C", "-f", "-j", "--directory", "--file"):
            skip = True
        elif word.startswith("-") or "=" in word:
            continue
        else:
            out.append(word)
    return out


def _named() -> dict[str, list[str]]:
    """target -> where the docs name it, from inline code spans (`make crd`) and code block lines."""
    named: dict[str, list[str]] = {}
    for path in doc_files():
        for span in inline_code(prose(path)):
            for target in _make_targets(span):
                named.setdefault(target, []).append(rel(path))
        for block in code_blocks(path):
            for line in block.lines:
                text = line.strip().removeprefix("$ ")
                for target in _make_targets(text):
                    named.setdefault(target, []).append(block.where)
    return named


def test_the_makefile_has_the_targets_of_the_docs() -> None:
    assert {"run", "test"} <= _makefile_targets()


def test_every_make_target_the_docs_name_exists() -> None:
    targets = _makefile_targets()
    named = _named()
    assert named, "no `make <target>` found in the docs: the parser is broken"
    unknown = {t: where for t, where in named.items() if t not in targets}
    assert not unknown, f"make targets named in the docs but not in the Makefile: {unknown}"


def test_every_makefile_target_is_named_in_the_docs() -> None:
    missing = sorted(_makefile_targets() - set(_named()))
    assert not missing, f"Makefile targets no doc names (README.md's 'Other make targets' lists them): {missing}"


def test_the_readme_opens_with_make_run_and_make_test() -> None:
    first = code_blocks(README)[0]
    commands = [line.split("#", 1)[0].strip() for line in first.lines if line.split("#", 1)[0].strip()]
    assert commands == ["make run", "make test"], f"README.md's first code block ({first.where}) is {commands}"
    lines = README.read_text().splitlines()
    before = [line for line in lines[: first.line - 1] if line.strip()]
    # only the title, the one-paragraph description and the heading come before it
    assert len(before) <= 12, f"README.md's first code block starts at line {first.line}: keep it near the top"
    assert sum(line.startswith("## ") for line in before) == 1
