"""The docs hold together: every relative link of README.md, dags/README.md and docs/ names a file of the
repository (and, with ``#anchor``, one of its headings as the rendered page names it), none leads outside
the repository, and the pages stay short enough to read in one sitting."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO

PAGES = sorted([REPO / "README.md", REPO / "dags" / "README.md", *(REPO / "docs").rglob("*.md")])
README_LINES = 150  # the README: what it is, the two commands, a tour, links into docs/
PAGE_LINES = 200  # a page of docs/: one sitting

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")  # [text](target "title")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)  # [label]: target
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, file: ...
_BARE_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\w", re.I)


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (which may show a URL or brackets as text)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _links(page: Path) -> list[str]:
    prose = _prose(page.read_text(encoding="utf-8"))
    return _LINK.findall(prose) + _REFERENCE.findall(prose) + re.findall(r"<([a-z][a-z0-9+.-]*:[^>\s]+)>", prose)


def _anchor(heading: str) -> str:
    """A heading's anchor as the repository's Markdown renderer makes it: its text (code marks and link
    targets dropped), lower case, punctuation removed, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor of a page's headings; a repeated heading's anchor gets -1, -2 ... as rendered."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _FENCE.sub("", page.read_text(encoding="utf-8")),
                              re.M):
        anchor, n = _anchor(heading), 0
        while (anchor if n == 0 else f"{anchor}-{n}") in found:
            n += 1
        found.add(anchor if n == 0 else f"{anchor}-{n}")
    return found


def test_a_heading_anchor_is_the_rendered_one():
    assert _anchor("Alerts (SMTP)") == "alerts-smtp"
    assert _anchor("`pipeline`: the DAG") == "pipeline-the-dag"
    assert _anchor("The run's note, the source's connection, the JIT") == "the-runs-note-the-sources-connection-the-jit"
    assert _anchor("merge: fold and publish") == "merge-fold-and-publish"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves_inside_the_repository(page: Path):
    broken = []
    for target in _links(page):
        if _SCHEME.match(target):
            broken.append(f"{target}: a link outside the repository (name it in plain text)")
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if REPO.resolve() not in (file, *file.parents):
            broken.append(f"{target}: leads outside the repository")
        elif not file.exists():
            broken.append(f"{target}: no such file or folder")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{target}: no heading with that anchor in {file.relative_to(REPO.resolve())}")
    assert broken == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_names_an_address_outside_the_repository(page: Path):
    assert _BARE_URL.findall(_prose(page.read_text(encoding="utf-8"))) == []


def test_the_readme_and_each_page_read_in_one_sitting():
    lines = {page.relative_to(REPO).as_posix(): len(page.read_text(encoding="utf-8").splitlines()) for page in PAGES}
    too_long = {name: n for name, n in lines.items() if n > (README_LINES if name == "README.md" else PAGE_LINES)}
    assert too_long == {}


def test_the_docs_index_lists_every_page():
    index = REPO / "docs" / "README.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for target in _links(index)}
    pages = {p.resolve() for p in (REPO / "docs").rglob("*.md") if p.parent.name != "formats" and p != index}
    assert pages - linked == set()
