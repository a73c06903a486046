"""SharePlex JSON messages for the tests: the DTS seed document's examples (seed 004), messages written
out by hand, the product stream that replays Flink's SharePlexJsonSerDerTest rows, their decode, and one
``jobs run`` of them (tests/unit/formats/test_shareplex.py, tests/integration/test_shareplex_runs.py and
the runs that name awkward tables or key blocks)."""
from __future__ import annotations

import json
from pathlib import Path

from jobs.formats import DecodeOptions
from tests.support.decoders import decoded_rows, raw_frame
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


def decode(spark, values, options=DecodeOptions()):
    """(change records, quarantined rows, decode counts) of ``values`` decoded as SharePlex."""
    return decoded_rows(raw_frame(spark, values), "shareplex", options)[:3]


def sp_message(op, table="test.product", data=None, key=None, scn=None, seq=1, size=1, trans="1.0.1", time=None):
    """One SharePlex message; a meta field given as None is left out."""
    meta = {"time": time or "2017-06-16T14:24:34", "userid": 84, "op": op, "scn": scn, "rowid": "AAATGpAAIAAItcIAAA",
            "trans": trans, "seq": seq, "size": size, "table": table, "idx": f"{seq}/{size}",
            "posttime": "2017-06-16T14:33:52"}
    msg = {"meta": {k: v for k, v in meta.items() if v is not None}}
    if data is not None:
        msg["data"] = data
    if key is not None:
        msg["key"] = key
    return json.dumps(msg)


# The 26 row changes Flink's SharePlexJsonSerDerTest expects (SOURCE.md), as SharePlex writes them:
# inserts carry the row, updates only the changed columns (+ the key's old values), deletes the row.
ROWS = {
    101: ("scooter", "Small 2-wheel scooter", 3.14), 102: ("car battery", "12V car battery", 8.1),
    103: ("12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
    104: ("hammer", "12oz carpenter's hammer", 0.75), 105: ("hammer", "14oz carpenter's hammer", 0.875),
    106: ("hammer", "16oz carpenter's hammer", 1.0), 107: ("rocks", "box of assorted rocks", 5.3),
    108: ("jacket", "water resistent black wind breaker", 0.1), 109: ("spare tire", "24 inch spare tire", 22.2),
    110: ("jacket", "water resistent white wind breaker", 0.2), 111: ("scooter", "Big 2-wheel scooter ", 5.18),
}
STEPS = (
    [("ins", i) for i in range(101, 110)]
    + [("upd", 106, {"description": "18oz carpenter hammer"}), ("upd", 107, {"weight": 5.1}),
       ("ins", 110), ("ins", 111),
       ("upd", 110, {"description": "new water resistent white wind breaker", "weight": 0.5}),
       ("upd", 111, {"weight": 5.17}), ("del", 111), ("upd", 101, {"weight": 5.17}),
       ("upd", 102, {"weight": 5.17}), ("del", 102), ("del", 103)]
)


def product_stream() -> list[str]:
    """STEPS as SharePlex writes them, one message each."""
    rows = {i: dict(zip(("name", "description", "weight"), v)) for i, v in ROWS.items()}
    out = []
    for n, (op, ident, *change) in enumerate(STEPS, start=1):
        scn = str(14589063118700 + n)
        if op == "ins":
            out.append(sp_message("ins", data={"id": ident, **rows[ident]}, scn=scn))
        elif op == "upd":
            rows[ident].update(change[0])
            out.append(sp_message("upd", data=change[0], key={"id": ident}, scn=scn))
        else:
            out.append(sp_message("del", data={"id": ident, **rows.pop(ident)}, scn=scn))
    return out
