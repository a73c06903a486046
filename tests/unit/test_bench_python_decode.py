"""bench.python_decode: times the DTS Avro decoder's Python side over a generated snapshot's first values."""
from __future__ import annotations

import re

from bench import python_decode
from bench.generate import write_snapshot


def test_prints_the_time_per_message_of_the_decode_and_of_fastavro(tmp_path, capsys):
    write_snapshot("dts_avro", 1_500, tmp_path, batch_rows=700, rows_per_file=1_000)
    assert python_decode.main(["--raw", str(tmp_path), "--messages", "1200", "--repeat", "1"]) == 0
    line = capsys.readouterr().out.strip()
    # the first 1,200 values come from both files (1,000 + 200)
    match = re.fullmatch(r"messages 1,200: decode_batches ([0-9.]+) us/message, "
                         r"of which fastavro schemaless_reader ([0-9.]+) us \((\d+)%\)", line)
    assert match, line
    assert float(match.group(1)) > 0 and float(match.group(2)) > 0  # figures only: nothing here is timed
