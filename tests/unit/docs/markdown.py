"""Reading the docs for the tests that keep them true: fenced code blocks, tables, sections, inline code.

Deliberately small: README.md and docs/*.md are CommonMark as GitHub renders it, and these helpers read only
what the tests need (a fence may be indented, as inside a list item; a table cell may hold `\\|` or a `|` in
a code span).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"
DOCS = REPO / "docs"


def doc_files() -> list[Path]:
    """README.md and every page under docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


@dataclass(frozen=True)
class CodeBlock:
    path: Path
    line: int                  # 1-based line of the opening fence
    info: str                  # the fence's info string: sh, yaml, console, ...
    lines: tuple[str, ...]     # the content, the fence's indentation removed

    @property
    def where(self) -> str:
        return f"{rel(self.path)}:{self.line}"


_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def code_blocks(path: Path) -> list[CodeBlock]:
    """The fenced code blocks of a Markdown file, in order."""
    blocks: list[CodeBlock] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if closing is not None and closing["fence"].startswith(fence) and not closing["info"].strip():
                break
            text = lines[j]
            body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
            j += 1
        blocks.append(CodeBlock(path, i + 1, opening["info"].strip(), tuple(body)))
        i = j + 1
    return blocks


def prose(path: Path) -> str:
    """The file's text without its fenced code blocks (each replaced by an empty line)."""
    lines = path.read_text().splitlines()
    inside: set[int] = set()
    for block in code_blocks(path):
        inside.update(range(block.line - 1, block.line + len(block.lines) + 1))
    return "\n".join("" if i in inside else line for i, line in enumerate(lines))


def inline_code(text: str) -> list[str]:
    """The inline code spans of prose, whitespace (a span may break across lines) folded to one space."""
    return [" ".join(m.group(2).split()) for m in re.finditer(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", text, re.S)]


def split_row(line: str) -> list[str]:
    """The cells of one table row: split on `|` outside code spans and not escaped (`\\|`), stripped."""
    cells: list[str] = []
    cell: list[str] = []
    in_code = False
    i = 0
    text = line.strip()
    text = text.removeprefix("|")
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            cell.append("|")
            i += 2
            continue
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append("".join(cell).strip())
            cell = []
        else:
            cell.append(ch)
        i += 1
    cells.append("".join(cell).strip())
    return cells


@dataclass(frozen=True)
class Table:
    path: Path
    line: int                          # 1-based line of the header row
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @property
    def where(self) -> str:
        return f"{rel(self.path)}:{self.line}"


def tables(path: Path, text: str | None = None, first_line: int = 1) -> list[Table]:
    """The pipe tables of a Markdown file's prose (or of `text`, which starts at line `first_line`)."""
    lines = (prose(path) if text is None else text).splitlines()
    found: list[Table] = []
    i = 0
    while i + 1 < len(lines):
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", lines[i + 1]) \
                and "-" in lines[i + 1]:
            header = tuple(split_row(lines[i]))
            rows: list[tuple[str, ...]] = []
            j = i + 2
            while j < len(lines) and lines[j].lstrip().startswith("|"):
                rows.append(tuple(split_row(lines[j])))
                j += 1
            found.append(Table(path, first_line + i, header, tuple(rows)))
            i = j
        else:
            i += 1
    return found


def section(path: Path, heading: str) -> tuple[str, int]:
    """The prose of the section titled `heading` (up to the next heading of its level or above), and the
    1-based line of its heading. Raises LookupError when the file has no such heading."""
    lines = prose(path).splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m and m.group(2) == heading:
            level = len(m.group(1))
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"^(#+)\s", lines[j])) and len(h.group(1)) <= level), len(lines))
            return "\n".join(lines[i:end]), i + 1
    raise LookupError(f"{rel(path)} has no heading {heading!r}")
