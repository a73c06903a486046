"""A run's metrics (jobs.metrics): what the demo's real reports give, each metric's datagram, and a real UDP
socket receiving them."""
from __future__ import annotations

import json
import socket

from jobs.metrics import COUNT, GAUGE, Metric, UdpStatsd, dogstatsd_line, land_metrics, run_metrics, send_safely
from jobs.model.reports import DecodeReport, ReconciliationReport, RunReport, RunReports
from tests.support.paths import REPO


def _read(kind, run: str):
    return kind.from_json(json.loads((REPO / "tests/resources/reports" / run / kind.FILE).read_text()))


def _demo() -> list[Metric]:
    reports = RunReports(decode=_read(DecodeReport, "demo-first"),
                         reconciliation=_read(ReconciliationReport, "demo-rerun"))
    return run_metrics("demo", reports, _read(RunReport, "demo-rerun").timings_s)


def test_the_demos_reports_give_each_tables_messages_rows_verdicts_and_lag():
    found = {(m.name, tuple(sorted(m.tags.items()))): (m.value, m.kind) for m in _demo()}

    def at(name, **tags):
        return found[(name, tuple(sorted({"pipeline": "demo", **tags}.items())))]

    assert at("messages.landed", table="shop.public.orders") == (846, COUNT)
    assert at("messages.quarantined", table="shop.public.orders") == (2, COUNT)
    assert at("messages.ignored", table="_unattributed") == (314, COUNT)
    assert at("rows.published", table="shop.public.customers") == (292, GAUGE)
    assert at("checkpoints", table="shop.public.customers", verdict="mismatch") == (1, COUNT)
    assert at("checkpoints", table="shop.public.orders", verdict="behind") == (1, COUNT)
    assert at("checkpoint.lag_seconds", table="shop.public.orders") == (135596.167, GAUGE)
    assert at("checkpoint.lag_seconds", table="shop.public.customers") == (0.0, GAUGE)  # nothing pending
    assert at("stage.seconds", stage="fold_publish") == (20.343, GAUGE)
    # every landed message is counted once, by its outcome
    landed = sum(v for (name, _t), (v, _k) in found.items() if name == "messages.landed")
    outcomes = sum(v for (name, _t), (v, _k) in found.items()
                   if name in ("messages.decoded", "messages.quarantined", "messages.ignored"))
    assert landed == outcomes == 2991


def test_a_landing_gives_each_topics_messages_bytes_and_files():
    totals = ({"records": 7, "bytes": 900, "files": 2, "partitions": 3}, {"records": 0, "bytes": 0, "files": 0})
    got = {(m.name, m.tags["topic"]): (m.value, m.kind) for m in land_metrics("shop", ["a.orders", "b"], totals)}
    assert got == {("land.messages", "a.orders"): (7, COUNT), ("land.bytes", "a.orders"): (900, COUNT),
                   ("land.files", "a.orders"): (2, COUNT), ("land.messages", "b"): (0, COUNT),
                   ("land.bytes", "b"): (0, COUNT), ("land.files", "b"): (0, COUNT)}


def test_a_datagram_keeps_its_syntax_whatever_a_table_is_called():
    metric = Metric("rows.published", 41.0, GAUGE, {"pipeline": "p", "table": "shop.pub|lic.a,b:c#d e"})
    assert dogstatsd_line(metric) == "cdc.rows.published:41|g|#pipeline:p,table:shop.pub_lic.a_b_c_d_e"
    assert dogstatsd_line(Metric("stage.seconds", 1.25, GAUGE), prefix="x") == "x.stage.seconds:1.25|g"


def test_the_metrics_reach_a_statsd_server_over_udp_and_an_unreachable_one_fails_nothing():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(5)
        metrics = _demo()
        assert UdpStatsd(f"127.0.0.1:{server.getsockname()[1]}").send(metrics) == len(metrics)
        received = [server.recv(65536).decode() for _ in metrics]
    assert received == [dogstatsd_line(m) for m in metrics]
    send_safely(UdpStatsd("no-such-host.invalid:8125"), metrics)  # logged, not raised
