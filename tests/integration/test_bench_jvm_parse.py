"""bench.jvm_parse: the Java UDF parses every Debezium value into the envelope from_json gives."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.generate import write_snapshot

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not shutil.which("javac"), reason="needs a JDK's javac (the bench compiles its UDF)")
def test_the_java_parse_gives_from_jsons_envelope_for_every_message(tmp_path):
    write_snapshot("debezium", 1_000, tmp_path, batch_rows=500, rows_per_file=1_000)
    # beside the generated messages, the shapes a parser may treat differently: malformed and empty
    # values, a null image, a nested value inside an image, unknown fields, no op
    first = next(tmp_path.rglob("*.parquet"))
    generated = pq.read_table(first)
    odd = [b"{not json", b"", b'{"op":"d","before":{"id":"1"},"after":null,"ts_ms":5}',
           b'{"op":"u","after":{"id":"2","doc":{"k":[1,{"x":null}]},"n":null},"extra":[1,2],"source":{"lsn":7}}',
           b'{"after":{"id":"3"}}', b"[1,2]"]
    rows = generated.slice(0, len(odd)).to_pylist()
    for row, value in zip(rows, odd):
        row["value"] = value
    pq.write_table(pa.Table.from_pylist(rows, schema=generated.schema), first.parent / "odd.parquet")

    proc = subprocess.run([sys.executable, "-m", "bench.jvm_parse", "--raw", str(tmp_path), "--passes", "1"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "messages 1,006;" in proc.stdout
    assert "same envelope for every message: yes" in proc.stdout
    assert re.search(r"java_udf +[0-9.]+ s +[0-9,]+ msg/s", proc.stdout), proc.stdout
