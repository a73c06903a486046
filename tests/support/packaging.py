"""The package's declared requirements, read as setuptools reads them: pyproject.toml's dynamic dependencies
and extras, each from its requirements file; and which installed distributions a set of them brings."""
from __future__ import annotations

import importlib.metadata as md
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import REPO

RUNTIME = None  # the extra of the package's own dependencies: none


def requirement_files() -> dict[str | None, list[Path]]:
    """The files of each extra (``None``: the dependencies), from pyproject.toml's [tool.setuptools.dynamic]."""
    dynamic = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["dynamic"]
    files = {RUNTIME: dynamic["dependencies"]["file"]}
    files.update({extra: spec["file"] for extra, spec in dynamic["optional-dependencies"].items()})
    return {extra: [REPO / name for name in names] for extra, names in files.items()}


def requirements(extra: str | None = RUNTIME) -> list[Requirement]:
    """The requirements of one extra, as written (comments and blank lines are not requirements)."""
    lines = [line.split("#", 1)[0].strip() for path in requirement_files()[extra]
             for line in path.read_text(encoding="utf-8").splitlines()]
    return [Requirement(line) for line in lines if line]


def pinned(name: str, extra: str | None = RUNTIME) -> str:
    """The exact version one extra pins ``name`` to."""
    for req in requirements(extra):
        if canonicalize_name(req.name) == canonicalize_name(name):
            (spec,) = req.specifier
            assert spec.operator == "==", f"{req} is not an exact pin"
            return spec.version
    raise AssertionError(f"{requirement_files()[extra]} pins no {name}")


def installed_closure(reqs: list[Requirement]) -> set[str]:
    """The canonical names of the installed distributions ``reqs`` bring, their dependencies' too (each
    requirement's extras followed)."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(canonicalize_name(req.name), frozenset(req.extras)) for req in reqs]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for dep in [Requirement(text) for text in md.distribution(name).requires or []]:
            if not dep.marker or any(dep.marker.evaluate({"extra": e}) for e in extras or {""}):
                todo.append((canonicalize_name(dep.name), frozenset(dep.extras)))
    return {name for name, _ in seen}
