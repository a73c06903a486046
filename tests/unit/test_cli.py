"""jobs.cli: what ``run`` prints at its end, from the run's reports."""
from __future__ import annotations

from jobs.cli import _print_summary
from jobs.lake.layout import Lake
from jobs.model.reports import AlertReport, FoldReport, ReconciliationReport
from jobs.stages import RunContext


def test_the_summary_lists_a_table_not_published_with_why(tmp_path, capsys):
    ctx = RunContext(Lake.at(str(tmp_path)), "shop", "r1")
    why = "key column(s) id in none of the table's rows (its columns: order_id, line_no)"
    ctx.write_report(FoldReport.from_json({"tables": {"db.orders": {"state_rows": 3},
                                                      "db.lines": {"error": why, "records": 2}}}))
    ctx.write_report(ReconciliationReport.from_json({"tables": [{"table": "db.orders", "state_rows": 3,
                                                                 "status": "unknown"}]}))
    _print_summary(ctx, AlertReport(reasons=("db.lines: not published",)))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[2:4]] == ["db.orders", "db.lines"]
    assert lines[3].endswith(f"-           -  not published: {why}")
    assert lines[-1] == "alert email sent: no (1 problem)"
