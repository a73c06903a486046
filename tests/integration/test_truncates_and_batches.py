"""Order inside one position, truncates seen twice, and a key learnt in a later run.

Canal gives every message of a batch one ``id`` (and ``es`` has whole seconds): the messages of a
batch share a position, and the offset orders them, the rows of an earlier message included. A
TRUNCATE in such a batch empties what precedes it in the log, not what follows. A TRUNCATE that an
earlier run applied, redelivered in a later one, empties nothing. A table first keyed by its whole
row (its messages carried no key) takes the narrower key a later run's deletes and updates name, as
the same messages in one run would. Expected states are the vendors'
(the SeaTunnel sample's final table, tests/resources/canal/SOURCE.md) or written out by hand."""
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


def test_a_table_keyed_by_its_whole_row_takes_the_key_a_later_run_names(spark, tmp_path):
    """Debezium text dumps without message keys (seed 002's examples): the inserts of the first run key
    the table by its whole row; the second run's delete names only the primary key (REPLICA IDENTITY
    DEFAULT) and its update's before image only the key too. Cut into two runs or not, the state is the
    same."""
    source = {"connector": "postgresql", "db": "postgres", "schema": "public", "table": "customers"}

    def msg(op: str, lsn: int, before: dict | None, after: dict | None) -> str:
        return json.dumps({"op": op, "before": before, "after": after, "ts_ms": 1559033904863,
                           "source": {**source, "lsn": lsn, "txId": lsn}})

    inserts = [msg("c", 100, None, {"id": 1, "first_name": "Anne", "email": "annek@noanswer.org"}),
               msg("c", 200, None, {"id": 2, "first_name": "Bob", "email": "b@x.org"}),
               msg("c", 300, None, {"id": 3, "first_name": "Cy", "email": "c@x.org"})]
    changes = [msg("u", 400, {"id": 1}, {"id": 1, "first_name": "Anne Marie", "email": "annek@noanswer.org"}),
               msg("d", 500, {"id": 2}, None)]
    expected = {"1": "Anne Marie", "3": "Cy"}
    for cut in (None, len(inserts)):
        stream = inserts + changes
        parts = [stream] if cut is None else [stream[:cut], stream[cut:]]
        lake = tmp_path / f"lake-{cut}"
        for i, part in enumerate(parts):
            raw = tmp_path / f"cut{cut}-{i}.jsonl"
            raw.write_text("\n".join(part) + "\n")
            run(lake, f"r{i}", "debezium", raw)
        assert state(lake, "customers", "first_name") == expected, cut
        merge = json.loads((lake / f"reports/p/run=r{len(parts) - 1}/merge.json").read_text())
        (report,) = merge["tables"].values()
        assert report["key_columns"] == ["id"]
        assert report.get("rekeyed_from") == (["id", "first_name", "email"] if cut else None)
