"""OpenLineage events checked against the spec's JSON schemas, vendored with their version
(tests/resources/openlineage/README.md): the event against ``RunEvent``, and every facet whose ``_schemaURL``
names a vendored schema against that schema's definition."""
from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.support.paths import REPO

SPEC = REPO / "tests/resources/openlineage/spec"
CORE = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


@cache
def _registry() -> Registry:
    resources = []
    for path in [SPEC / "OpenLineage.json", *sorted((SPEC / "facets").glob("*.json"))]:
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def _validator(url: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": url}, registry=_registry(),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def vendored(schema_url: str) -> bool:
    """Whether a ``_schemaURL`` (or an event's ``schemaURL``) names a vendored schema."""
    try:
        _registry().get_or_retrieve(schema_url.split("#")[0])
    except Exception:  # noqa: BLE001 - referencing's NoSuchResource / Unretrievable
        return False
    return True


def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, key, facet) of every facet of an event: the run's, the job's, each dataset's."""
    for where, facets in (("run", event["run"].get("facets")), ("job", event["job"].get("facets"))):
        yield from ((where, k, f) for k, f in (facets or {}).items())
    for kind, field in (("inputs", "inputFacets"), ("outputs", "outputFacets")):
        for dataset in event.get(kind) or []:
            where = f"{kind}:{dataset['namespace']}/{dataset['name']}"
            for facets in (dataset.get("facets"), dataset.get(field)):
                yield from ((where, k, f) for k, f in (facets or {}).items())


def schema_errors(event: dict[str, Any]) -> list[str]:
    """What the vendored schemas (and the formats they name: uuid, date-time) find wrong with an event: none
    for a valid one."""
    errors = [f"event: {e.message}" for e in _validator(f"{CORE}#/$defs/RunEvent").iter_errors(event)]
    for where, key, facet in facets_of(event):
        url = facet.get("_schemaURL", "")
        if vendored(url):
            errors += [f"{where} {key}: {e.message}" for e in _validator(url).iter_errors(facet)]
    return errors


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events a file transport wrote (one JSON document per line)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
