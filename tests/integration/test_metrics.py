"""A whole ``jobs run`` sends its metrics to a StatsD server (a UDP socket on 127.0.0.1 here): by name and value,
the rows published equal the published state's, the messages balance, and a checkpoint's verdict is counted."""
from __future__ import annotations

import json

from jobs.iceberg.catalog import state_summary
from jobs.lake.layout import Lake
from tests.support.pipeline_runs import jobs_run
from tests.support.statsd import received_lines, statsd_socket
from tests.support.topic_shapes import TOPIC, envelope


def _received(server) -> dict[tuple[str, str], float]:
    """(name, tags) -> value of every DogStatsD datagram waiting on the socket."""
    out = {}
    for line in received_lines(server, quiet_s=2):
        name_value, kind, *tags = line.split("|")
        name, value = name_value.rsplit(":", 1)
        out[(name, tags[0][1:] if tags else "")] = float(value)
        assert kind in ("c", "g")
    return out


def test_a_run_sends_its_metrics_to_a_statsd_server(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "messages.jsonl").write_text("\n".join([envelope(1), envelope(2), "{not json", envelope(3, "b")]) + "\n")
    counts = tmp_path / "counts.json"
    counts.write_text(json.dumps({TOPIC: 3}))
    with statsd_socket() as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
        assert jobs_run("debezium", raw, tmp_path / "lake", "shop", "r1", "--statsd-host", address,
                        "--source-counts", str(counts)) == 0
        got = _received(server)
    table = f"pipeline:shop,table:{TOPIC}"
    state_rows = state_summary(Lake.at(str(tmp_path / "lake")), "shop")[TOPIC]["state_rows"]
    assert got[("cdc.rows.published", table)] == state_rows == 3
    reconciliation = json.loads(next((tmp_path / "lake").glob("reports/shop/run=r1/reconciliation.json")).read_text())
    [row] = reconciliation["tables"]
    [verdict] = [c["verdict"] for c in row["checkpoints"] + row["pending"]]  # behind: the count is the file's time
    assert got[("cdc.checkpoints", f"{table},verdict:{verdict}")] == 1
    landed = sum(v for (name, _tags), v in got.items() if name == "cdc.messages.landed")
    assert landed == 4 == sum(v for (name, _tags), v in got.items()
                              if name in ("cdc.messages.decoded", "cdc.messages.quarantined", "cdc.messages.ignored"))
    assert {tags for name, tags in got if name == "cdc.stage.seconds"} >= {
        f"pipeline:shop,stage:{s}" for s in ("decode", "fold_publish", "validate", "reconcile", "alert")}
