"""Regenerate the Kafka Connect S3 sink samples beside this file (deterministic; see README.md):

    .venv/bin/python tests/resources/kafka_connect_s3/generate.py
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDERS = "shop.public.orders"  # JsonFormat, store.kafka.keys=true, one gzip file (s3.compression.type=gzip)
RAW = "shop.raw"  # ByteArrayFormat, default separator (System.lineSeparator(): "\n" on Linux)


def change(op: str, before: dict | None, after: dict | None, ts_ms: int) -> dict:
    return {"before": before, "after": after, "source": {"db": "shop", "table": "orders"}, "op": op, "ts_ms": ts_ms}


# partition -> [(start offset, gzip, [(key, value)])]; a value None is a tombstone (written as null)
ORDERS_FILES = {
    0: [
        (0, False, [({"id": 1}, change("c", None, {"id": 1, "status": "new"}, 1767225600000)),
                    ({"id": 2}, change("c", None, {"id": 2, "status": "new", "note": "ü \"quoted\""}, 1767225601000)),
                    ({"id": 2}, change("d", {"id": 2, "status": "new"}, None, 1767225602000))]),
        (3, True, [({"id": 2}, None),
                   ({"id": 1}, change("u", {"id": 1, "status": "new"}, {"id": 1, "status": "paid"}, 1767225603000))]),
    ],
    1: [
        (0, False, [({"id": 3}, change("c", None, {"id": 3, "status": "new"}, 1767225604000)),
                    ({"id": 4}, change("c", None, {"id": 4, "status": "new"}, 1767225605000))]),
    ],
}
# partition -> [(start offset, gzip, [value bytes])]: binary values holding no "\n"
RAW_FILES = {0: [(0, False, [b"\x00\xff\x01raw-0", b"", b"plain text 2"]), (3, True, [b"\xde\xad\xbe\xef"])]}


def dumps(value) -> bytes:
    # Jackson's ObjectMapper as JsonFormat uses it: compact, UTF-8
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def write(path: Path, lines: list[bytes], compress: bool) -> None:
    data = b"".join(line + b"\n" for line in lines)  # every record followed by the separator
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)


def main() -> None:
    for p, files in ORDERS_FILES.items():
        folder = HERE / "topics" / ORDERS / f"partition={p}"
        for start, compress, records in files:
            gz = ".gz" if compress else ""
            write(folder / f"{ORDERS}+{p}+{start:010d}.json{gz}", [dumps(v) for _, v in records], compress)
            write(folder / f"{ORDERS}+{p}+{start:010d}.keys.json{gz}", [dumps(k) for k, _ in records], compress)
    for p, files in RAW_FILES.items():
        folder = HERE / "topics" / RAW / f"partition={p}"
        for start, compress, values in files:
            write(folder / f"{RAW}+{p}+{start:010d}.bin{'.gz' if compress else ''}", values, compress)


if __name__ == "__main__":
    main()
