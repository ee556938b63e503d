"""The design notes live in docs/: nothing cites notes outside the repository, and every
pointer into docs/ (``docs/<file>.md#<section>`` in code, relative links between the notes)
names a file and a heading that exist."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".sh", ".json", ""}

# Spelled in pieces so that this file does not match itself.
OUTSIDE_CITATIONS = [
    re.compile("behaviour" + r"\.md"),
    re.compile("anchors" + r"\.md"),
    re.compile(r"\.\./" + "shared"),
    re.compile(r"/work/" + "shared"),
    re.compile(r"architecture\.md " + "\u00a7"),
    re.compile("\u00a7" + r"\s*\d"),  # bare section numbers of notes that are not here
    re.compile(r"\bK-" + r"[JSM]\b"),
    re.compile(r"\bchecklist" + r" (?:items? )?\d"),
]
DOCS_POINTER = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")
MARKDOWN_LINK = re.compile(r"\]\(([\w-]+\.md)(?:#([\w-]+))?\)|\]\(#([\w-]+)\)")


def _files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    paths = [REPO / name for name in listed]
    return [p for p in paths if p.is_file() and p.suffix in TEXT_SUFFIXES and p != Path(__file__).resolve()]


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return ""


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def _anchors(name: str) -> frozenset[str]:
    path = DOCS / name
    if not path.is_file():
        return frozenset()
    return frozenset(
        _slug(line.lstrip("#")) for line in path.read_text().splitlines() if line.startswith("#")
    )


def test_nothing_cites_notes_outside_the_repository() -> None:
    found = []
    for path in _files():
        if DOCS in path.parents:
            continue
        for number, line in enumerate(_text(path).splitlines(), 1):
            if any(pattern.search(line) for pattern in OUTSIDE_CITATIONS):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "citations of notes outside the repository:\n" + "\n".join(found)


def test_pointers_into_docs_name_existing_sections() -> None:
    broken = []
    for path in _files():
        text = _text(path)
        pointers = [(m.group(1), m.group(2)) for m in DOCS_POINTER.finditer(text)]
        if DOCS in path.parents:
            pointers.extend(
                (m.group(1), m.group(2)) if m.group(3) is None else (path.name, m.group(3))
                for m in MARKDOWN_LINK.finditer(text)
            )
        for name, anchor in pointers:
            if not (DOCS / name).is_file():
                broken.append(f"{path.relative_to(REPO)}: docs/{name} does not exist")
            elif anchor is not None and anchor not in _anchors(name):
                broken.append(f"{path.relative_to(REPO)}: docs/{name} has no section #{anchor}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Where Kafka's two coordinators differ", "where-kafkas-two-coordinators-differ"),
        ("Consumer groups (KIP-848)", "consumer-groups-kip-848"),
        ("The route table", "the-route-table"),
    ],
)
def test_slug(heading: str, slug: str) -> None:
    assert _slug(heading) == slug
