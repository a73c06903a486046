"""The shape a topic's first run decided is kept in the lake: a later run holding only stray objects
on that topic quarantines them instead of publishing them as rows of a table named after the topic;
a re-run of the first run decides the same again."""
from __future__ import annotations

import json

from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake
from tests.support.decoders import raw_frame
from tests.support.pipeline_runs import jobs_run
from tests.support.topic_shapes import TOPIC, envelope


def test_a_later_run_keeps_the_topics_shape(spark, tmp_path):
    lake = tmp_path / "lake"

    def run(run_id: str, values: list[str]) -> dict:
        raw = tmp_path / f"raw-{run_id}"
        if not raw.exists():
            raw_frame(spark, values, keys=[json.dumps({"id": i}) for i in range(len(values))], topic=TOPIC) \
                .write.parquet(str(raw))
        assert jobs_run("debezium", raw, lake, "shop", run_id) == 0
        return json.loads((lake / f"reports/shop/run={run_id}/decode.json").read_text())

    first = run("r1", [envelope(1), envelope(2)])
    assert first["topic_shapes"] == {TOPIC: "envelope"}
    second = run("r2", ['{"unexpected": true}'])
    assert second["total"]["quarantined"] == 1 and second["balanced"]
    assert "decided by an earlier run" in next(iter(second["quarantine_reasons"]))
    assert run("r1", [])["topic_shapes"] == {TOPIC: "envelope"}  # the re-run decides alike
    catalog = open_catalog(Lake.at(str(lake)))
    assert [name for _, name in catalog.list_tables("shop")] == ["shop__public__customers"]
