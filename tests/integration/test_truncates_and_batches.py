"""Order inside one position, and truncates seen twice.

Canal gives every message of a batch one ``id`` (and ``es`` has whole seconds): the messages of a
batch share a position, and the offset orders them, the rows of an earlier message included. A
TRUNCATE in such a batch empties what precedes it in the log, not what follows. A TRUNCATE that an
earlier run applied, redelivered in a later one, empties nothing. Expected states are the vendors'
(the SeaTunnel sample's final table, shared/samples/canal/SOURCE.md) or written out by hand."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs import cli
from tests.integration.test_workload_replay import published_rows

pytestmark = pytest.mark.integration


def run(lake: Path, run_id: str, fmt: str, raw: Path) -> None:
    assert cli.main(["run", "--format", fmt, "--raw", str(raw), "--lake", str(lake), "--pipeline", "p",
                     "--run-id", run_id]) == 0


def state(lake: Path, table: str, column: str) -> dict[str, object]:
    return {str(r["id"]): r[column] for r in published_rows(lake, "p", table)}


def test_a_canal_batch_is_ordered_by_offset_and_truncated_where_its_truncate_lies(spark, tmp_path, shared_dir):
    lake = tmp_path / "lake"
    run(lake, "r1", "canal", shared_dir / "samples/canal/seatunnel/canal_data.txt")
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


def test_a_redelivered_truncate_empties_nothing_in_a_later_run(spark, tmp_path):
    source = {"connector": "postgresql", "db": "d", "schema": "public", "table": "events"}

    def msg(op: str, lsn: int, row: dict | None = None) -> str:
        return json.dumps({"op": op, "before": None, "after": row, "ts_ms": 1730000000000 + lsn,
                           "source": {**source, "lsn": lsn, "sequence": json.dumps([None, str(lsn)])}})

    truncate = msg("t", 200)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("\n".join([msg("c", 100, {"id": 1}), truncate, msg("c", 300, {"id": 2}),
                                msg("c", 400, {"id": 3})]) + "\n")
    # the connector restarted from an older offset: the truncate comes again, then a new row
    second.write_text("\n".join([truncate, msg("c", 500, {"id": 4})]) + "\n")
    lake = tmp_path / "lake"
    run(lake, "r1", "debezium", first)
    assert sorted(state(lake, "events", "id")) == ["2", "3"]
    run(lake, "r2", "debezium", second)
    assert sorted(state(lake, "events", "id")) == ["2", "3", "4"]
    # a truncate past the last applied one still empties the table
    third = tmp_path / "third.jsonl"
    third.write_text("\n".join([msg("c", 600, {"id": 5}), msg("t", 700), msg("c", 800, {"id": 6})]) + "\n")
    run(lake, "r3", "debezium", third)
    assert sorted(state(lake, "events", "id")) == ["6"]
