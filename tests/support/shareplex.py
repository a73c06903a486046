"""SharePlex JSON messages for the tests: the DTS seed document's examples (seed 004) and messages
written out by hand, and one ``jobs run`` of them."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.pipeline_runs import jobs_run


def seed_examples(shared_dir) -> dict[str, str]:
    """The insert / update / delete examples of the seed's SharePlex section, as printed."""
    text = (shared_dir / "seeds" / "004_a66593fb03e5fe66.txt").read_text(encoding="utf-8")
    section = text[text.index("Shareplex Json\nParameter"):text.index("Canal Json\nIf you enable")]
    out = {}
    for label in ("Insert data", "Update data", "Delete data"):
        start = section.index("{", section.index(label))
        depth = 0
        for end in range(start, len(section)):
            depth += {"{": 1, "}": -1}.get(section[end], 0)
            if depth == 0:
                break
        out[label.split()[0].lower()] = section[start:end + 1]
    return out


def message(table: str, op: str, scn: int, data: dict, key: dict | None = None) -> str:
    meta = {"time": "2017-06-16T14:24:34", "userid": 84, "op": op, "scn": str(scn), "rowid": "AAATGpAAIAAItcIAAA",
            "trans": f"7.0.{scn}", "seq": 1, "size": 1, "table": table, "idx": "1/1",
            "posttime": "2017-06-16T14:33:52"}
    return json.dumps({"meta": meta, "data": data, **({"key": key} if key is not None else {})})


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def run(lake: Path, run_id: str, raw: Path) -> None:
    assert jobs_run("shareplex", raw, lake, "p", run_id) == 0
