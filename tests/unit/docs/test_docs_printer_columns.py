"""`kubectl get sampledb` / `kubectl get sampledbbackup` as the docs show it has the CRDs' printer columns.

The columns are the generated CRDs' additionalPrinterColumns (manifests/crd/*.yaml, from model/crd.py): kubectl
prints NAME, then each column of priority 0 by its name in capitals; `-o wide` adds those of priority 1, and
`-A` puts NAMESPACE first. Every `kubectl get` of either kind in a code block of README.md or docs/*.md that is
followed by its output is checked against them, and so are the user guide's table of the columns and what the
docs say `-o wide` adds.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.unit.docs.markdown import DOCS, REPO, CodeBlock, code_blocks, doc_files, tables

CRD_DIR = REPO / "manifests" / "crd"
# flags of `kubectl get` that take a value as the next word
VALUE_FLAGS = {"-n", "--namespace", "-l", "--selector", "-o", "--output", "--context", "--kubeconfig",
               "--field-selector", "-L", "--label-columns", "--sort-by", "--chunk-size", "--template"}


@dataclass(frozen=True)
class Kind:
    kind: str
    names: frozenset[str]      # what `kubectl get` accepts: plural, singular, short names, each also with .group
    columns: tuple[tuple[str, int], ...]   # (name, priority)

    def headers(self, *, wide: bool, all_namespaces: bool) -> list[str]:
        shown = [name.upper() for name, priority in self.columns if priority == 0 or wide]
        return ["NAMESPACE", "NAME", *shown] if all_namespaces else ["NAME", *shown]


def _kinds() -> dict[str, Kind]:
    kinds = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd: dict[str, Any] = yaml.safe_load(path.read_text())
        if crd.get("kind") != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        names = {spec["names"]["plural"], spec["names"]["singular"], *spec["names"].get("shortNames", [])}
        (version,) = [v for v in spec["versions"] if v.get("served", True)]
        columns = tuple((c["name"], int(c.get("priority", 0))) for c in version.get("additionalPrinterColumns", []))
        kinds[spec["names"]["kind"]] = Kind(spec["names"]["kind"],
                                            frozenset(names | {f"{n}.{spec['group']}" for n in names}), columns)
    return kinds


KINDS = _kinds()


def test_the_generated_crds_have_both_kinds_with_columns() -> None:
    assert set(KINDS) == {"SampleDB", "SampleDBBackup"}
    assert all(k.columns for k in KINDS.values())


def test_the_generated_columns_are_the_models() -> None:
    from sampledb_operator.model import crd

    for info in crd.KINDS:
        assert KINDS[info.kind].columns == tuple((c.name, c.priority) for c in info.columns)


@dataclass(frozen=True)
class Shown:
    """A documented `kubectl get` of one of the kinds, and the header line of its output."""

    where: str
    command: str
    kind: Kind
    wide: bool
    all_namespaces: bool
    header: list[str]


def _words(command: str) -> list[str] | None:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return None


def _get_of_a_kind(command: str) -> tuple[Kind, bool, bool] | None:
    """(kind, wide, all namespaces) when `command` is a `kubectl get` of one of the kinds whose output is a
    table with the usual columns; None for anything else (another command, another output format, extra
    label columns, several kinds at once)."""
    words = _words(command)
    if not words or words[0] != "kubectl" or "get" not in words or "|" in words:
        return None
    rest = words[words.index("get") + 1:]
    resource, output, wide_ok, all_ns = None, None, True, False
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("-"):
            flag, _, value = word.partition("=")
            if flag.startswith("-o") and flag not in ("-o",) and not value:   # -owide
                flag, value = "-o", flag[2:]
            if flag in VALUE_FLAGS and not value and i + 1 < len(rest):
                value = rest[i + 1]
                i += 1
            if flag in ("-o", "--output"):
                output = value
            if flag in ("-L", "--label-columns", "--show-labels", "--no-headers", "--show-kind"):
                wide_ok = False
            if flag in ("-A", "--all-namespaces"):
                all_ns = True
        elif resource is None:
            resource = word
        i += 1
    if resource is None or not wide_ok or output not in (None, "wide"):
        return None
    types = resource.split("/", 1)[0].split(",")
    if len(types) != 1:
        return None
    kind = next((k for k in KINDS.values() if types[0].lower() in k.names), None)
    return None if kind is None else (kind, output == "wide", all_ns)


def _command_of(line: str) -> str | None:
    text = line.strip()
    text = text[2:] if text.startswith("$ ") else text
    return text if text.startswith("kubectl ") else None


def _header_cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def _shown(block: CodeBlock) -> list[Shown]:
    found = []
    lines = block.lines
    for i, line in enumerate(lines):
        command = _command_of(line)
        got = _get_of_a_kind(command) if command else None
        if got is None:
            continue
        following = next((x for x in lines[i + 1:] if x.strip()), "")
        if not re.match(r"^(NAME|NAMESPACE)\s", following):
            continue   # the block shows the command only
        kind, wide, all_ns = got
        found.append(Shown(f"{block.where} (+{i + 1})", command or "", kind, wide, all_ns, _header_cells(following)))
    return found


def _all_shown() -> list[Shown]:
    return [s for path in doc_files() for block in code_blocks(path) for s in _shown(block)]


SHOWN = _all_shown()


def test_the_docs_show_the_output_of_both_kinds() -> None:
    assert {s.kind.kind for s in SHOWN} == set(KINDS), "no documented `kubectl get` output was found for a kind"


@pytest.mark.parametrize("shown", SHOWN, ids=lambda s: s.where)
def test_documented_output_has_the_crd_columns_in_order(shown: Shown) -> None:
    expected = shown.kind.headers(wide=shown.wide, all_namespaces=shown.all_namespaces)
    assert shown.header == expected, (
        f"{shown.where}: `{shown.command}` shows the columns {shown.header}, but the {shown.kind.kind} CRD's"
        f" additionalPrinterColumns give {expected} (model/crd.py; `make crd` regenerates manifests/crd)"
    )


def _looks_like_our_header(cells: list[str]) -> bool:
    """A header line of a `kubectl get` of one of the kinds, whatever command printed it."""
    return cells[:1] == ["NAME"] and (
        {"VERSION", "PHASE"} <= set(cells) or {"DATABASE", "REASON"} <= set(cells))


def test_every_documented_table_of_the_kinds_follows_a_kubectl_get_the_test_reads() -> None:
    """A column header of ours shown without a command this test understands would escape the check above."""
    checked = {(s.where.split(" ")[0], tuple(s.header)) for s in SHOWN}
    missed = []
    for path in doc_files():
        for block in code_blocks(path):
            for i, line in enumerate(block.lines):
                cells = _header_cells(line)
                if _looks_like_our_header(cells) and (block.where, tuple(cells)) not in checked:
                    missed.append(f"{block.where} (+{i + 1}): {line.strip()}")
    assert not missed, "column headers not preceded by a `kubectl get` of the kind:\n" + "\n".join(missed)


# ------------------------------------------------------------------------------ the user guide's column table


def _column_table(path: Path) -> list[str]:
    (table,) = [t for t in tables(path) if t.header[:2] == ("Column", "From")]
    return [row[0] for row in table.rows]


def test_the_user_guides_column_table_lists_the_sampledb_columns_in_order() -> None:
    documented = _column_table(DOCS / "user-guide.md")
    expected = [name.upper() + (" (wide)" if priority else "") for name, priority in KINDS["SampleDB"].columns]
    assert documented == expected, (
        "docs/user-guide.md's table of `kubectl get sdb` columns differs from the CRD's additionalPrinterColumns"
        " (a `(wide)` column is one of priority 1)"
    )


# ------------------------------------------------------------------------------ "-o wide adds ..."


def _wide_mentions() -> list[tuple[str, list[str]]]:
    """Each "-o wide ... adds A (...), B and C" of the docs (a command's comment or prose): the columns it names."""
    found = []
    for path in doc_files():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            m = re.search(r"-o wide`?\s*(?:#\s*)?adds (.*)", line)
            if m is None:
                continue
            text = re.sub(r"\([^)]*\)", "", m.group(1))   # explanations in parentheses
            text = re.split(r"[.;:]\s|\s\(|$", text)[0]
            names = [n.strip() for n in re.split(r",\s*|\s+and\s+", text) if n.strip()]
            found.append((f"{path.relative_to(REPO)}:{number}", names))
    return found


def test_what_the_docs_say_o_wide_adds_is_a_kinds_wide_columns() -> None:
    wide = {k.kind: [name.upper() for name, priority in k.columns if priority] for k in KINDS.values()}
    mentions = _wide_mentions()
    assert mentions, "no '-o wide adds ...' found in the docs: the parser is broken"
    for where, names in mentions:
        assert names in wide.values(), f"{where}: `-o wide` adds {names}, but the CRDs' wide columns are {wide}"
