"""Order inside one position, on the vendor's own sample.

Canal gives every message of a batch one ``id`` (and ``es`` has whole seconds): the messages of a
batch share a position, and the offset orders them, the rows of an earlier message included. A
TRUNCATE in such a batch empties what precedes it in the log, not what follows. The expected state is
the vendor's (the SeaTunnel sample's final table, tests/resources/canal/SOURCE.md). A truncate seen
again in a later run, and a table keyed by its whole row that a later run re-keys, are the fold's
cases (tests/unit/fold/test_fold_semantics.py)."""
from __future__ import annotations

import json
from pathlib import Path

from tests.support.pipeline_runs import jobs_run
from tests.support.replay import published_rows


def run(lake: Path, run_id: str, fmt: str, raw: Path) -> None:
    assert jobs_run(fmt, raw, lake, "p", run_id) == 0


def state(lake: Path, table: str, column: str) -> dict[str, object]:
    return {str(r["id"]): r[column] for r in published_rows(lake, "p", table)}


def test_a_canal_batch_is_ordered_by_offset_and_truncated_where_its_truncate_lies(spark, tmp_path, shared_dir):
    lake = tmp_path / "lake"
    run(lake, "r1", "canal", shared_dir / "canal/seatunnel/canal_data.txt")
    # SeaTunnel's KafkaFormatIT: 1101 and 1107 updated after the insert of the batch, 1109 deleted
    assert state(lake, "products", "weight") == {
        "1101": "4.56", "1102": "8.1", "1103": "0.8", "1104": "0.75", "1105": "0.875", "1106": "1.0",
        "1107": "7.88", "1108": "0.1"}

    def msg(type_: str, rows: list[dict] | None, **extra) -> str:
        return json.dumps({"data": rows, "old": None, "database": "db", "table": "b", "es": 1697788899000, "id": 7,
                           "isDdl": False, "pkNames": ["id"], "mysqlType": {"id": "int", "v": "varchar(8)"},
                           "sqlType": None, "sql": "", "ts": 1697788900000, "type": type_, **extra})

    batch = tmp_path / "batch.jsonl"
    batch.write_text("\n".join([
        msg("INSERT", [{"id": "1", "v": "x"}, {"id": "2", "v": "y"}]),
        msg("TRUNCATE", None, isDdl=True, sql="TRUNCATE TABLE b"),
        msg("INSERT", [{"id": "9", "v": "z"}]),
        msg("UPDATE", [{"id": "9", "v": "z2"}], old=[{"v": "z"}]),
    ]) + "\n")
    run(lake, "r2", "canal", batch)
    assert state(lake, "b", "v") == {"9": "z2"}
