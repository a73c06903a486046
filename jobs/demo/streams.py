"""A SourceSimulator's change stream in every non-Debezium format (``FORMAT_RECORDS``).

The simulator (``jobs/demo/simulator.py``, connector ``mysql``, so stream order is commit order)
applies every operation to SQLite and records the change stream; here that stream is rendered the way
each tool would send it, so a test can compare the pipeline's published state with the SQLite model:

- Qlik: one metadata message per table first (JSON or Avro envelope), then data messages; snapshot
  reads are REFRESH rows (no changeSequence), changes INSERT / UPDATE (with ``beforeData``) / DELETE
  ordered by ``changeSequence``; a primary-key change is one UPDATE whose ``beforeData`` holds the old
  key (Debezium's delete + create pair is merged back); transactionId, transactionEventCounter and
  transactionLastEvent from the simulator's transactions (as Maxwell's xid / commit and SharePlex's
  trans / idx n/size).
- DTS Avro: ``Record`` s encoded with fastavro; snapshot reads are INIT, changes INSERT / UPDATE
  (before and after images) / DELETE; a key change is one UPDATE; ``sourcePosition`` is
  ``<offset>@<binlog file index>`` and ``id`` DTS's serial number; ``pk_uk_info`` names the key.

- Canal (``data``/``old`` arrays, ``mysqlType``, INIT full load, ``es`` + ``id``), Maxwell
  (bootstrap-insert, ``data``/``old``, binlog ``position``), DataWorks (merged UPDATE_AFTER, six
  types with DATE as epoch ms, full sync with sequenceId -1), SharePlex (``upd`` carries the changed
  columns and the old ``key``), OGG (I/U/D with before/after, ``pos``): a key change is the update each
  tool sends.

Redeliveries are the same bytes again (new offset); garbage entries become malformed messages of the
format. Kafka partitions follow the key (murmur2), offsets are consecutive per partition.
"""
from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from jobs.demo.qlik import (
    QlikColumn,
    QlikTable,
    avro_data,
    avro_metadata,
    change_sequence,
    headers,
    json_data,
    json_metadata,
)
from jobs.demo.simulator import _EPOCH_MS, NEWKEY_HEADER, SourceSimulator, TableSpec, kafka_partition

_QLIK_TYPES = {"int": "INT4", "bigint": "INT8", "text": "STRING", "boolean": "BOOLEAN", "date": "DATE",
               "timestamp": "DATETIME", "double": "REAL8"}
_TS = "%Y-%m-%d %H:%M:%S.%f"


# ---- shared: the simulator's stream as logical changes --------------------------------------------
def logical_changes(sim: SourceSimulator) -> Iterator[tuple[int, Any, str | None, dict | None, dict | None]]:
    """(stream index, entry, op, before, after) per message a log-based tool would send: tombstones
    dropped, a key change's delete + create merged into one update (op 'u' with both images)."""
    stream = sim.events
    skip: set[int] = set()
    for i, e in enumerate(stream):
        if i in skip or e.kind in ("tombstone", "redelivery"):
            continue
        if e.kind == "change" and e.op == "d" and any(h == NEWKEY_HEADER for h, _ in e.headers):
            # the matching create is the next change of the same table
            j = next(k for k in range(i + 1, len(stream))
                     if stream[k].kind == "change" and stream[k].table == e.table and stream[k].op == "c")
            skip.add(j)
            yield i, e, "u", e.before, stream[j].after
            continue
        yield i, e, e.op, e.before, e.after


def transactions(sim: SourceSimulator) -> dict[int, tuple[str, int, int]]:
    """Stream index -> (transaction id, number of the change in it from 1, its size), over the
    logical changes of committed transactions (snapshot reads belong to none)."""
    members: dict[int, list[int]] = defaultdict(list)
    for index, e, *_ in logical_changes(sim):
        if e.kind == "change" and e.tx_seq is not None:
            members[e.tx_seq].append(index)
    return {index: (f"tx{seq}", n, len(indexes)) for seq, indexes in members.items()
            for n, index in enumerate(indexes, start=1)}


def _place(sim: SourceSimulator, items: Iterator[tuple]) -> Iterator[dict[str, Any]]:
    """(stream index, entry, key bytes, value bytes[, is a transaction marker]) -> Kafka records, in
    the order given; redeliveries repeat their original's row message (markers are not redelivered).
    Messages with a key go to its partition, the others (markers, garbage) to partition 0."""
    kept: dict[int, tuple[bytes | None, bytes, str]] = {}
    offsets: dict[tuple[str, int], int] = defaultdict(int)
    rendered: dict[int, list[tuple[bytes | None, bytes, bool]]] = defaultdict(list)
    for index, _entry, key, value, *marker in items:
        rendered[index].append((key, value, bool(marker and marker[0])))
    for index, entry in enumerate(sim.events):
        if entry.kind == "redelivery":
            if entry.original not in kept:
                continue  # a redelivered tombstone or merged half: the tool never sent it
            messages = [kept[entry.original]]
        elif index in rendered:
            topic = sim.topic(entry.table) if entry.table else "garbage"
            messages = [(key, value, topic) for key, value, _ in rendered[index]]
            first = next(((key, value, topic) for key, value, marker in rendered[index] if not marker), None)
            if first is not None:
                kept[index] = first
        else:
            continue
        for key, value, topic in messages:
            partition = kafka_partition(key, sim.n_partitions) if key else 0
            offset = offsets[(topic, partition)]
            offsets[(topic, partition)] = offset + 1
            yield {"key": key, "value": value, "topic": topic, "partition": partition, "offset": offset,
                   "timestamp": _EPOCH_MS + timedelta(milliseconds=entry.kafka_ts_ms), "timestampType": 0,
                   "headers": None}


def _key_bytes(spec: TableSpec, row: dict | None) -> bytes | None:
    if row is None:
        return None
    return json.dumps({k: _plain(row[k]) for k in spec.primary_key}, sort_keys=True).encode()


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, datetime):
        return v.strftime(_TS)
    if isinstance(v, date):
        return v.isoformat()
    return v


def _scaled(v: Any, spec: TableSpec, column: str) -> Any:
    t = spec.column_type(column)
    if v is not None and t.kind == "decimal":
        return f"{Decimal(v):.{t.scale}f}"
    return _plain(v)


# ---- Qlik ------------------------------------------------------------------------------------------
def qlik_table(spec: TableSpec) -> QlikTable:
    columns = []
    for name in spec.column_names:
        t = spec.column_type(name)
        pk = spec.primary_key.index(name) + 1 if name in spec.primary_key else 0
        if t.kind == "decimal":
            columns.append(QlikColumn(name, "NUMERIC", pk, precision=t.precision or 0, scale=t.scale or 0))
        else:
            columns.append(QlikColumn(name, _QLIK_TYPES[t.kind], pk))
    return QlikTable(spec.db, spec.name, columns)


_QLIK_GARBAGE = {"broken_json": b"{]", "empty_object": b"{}", "json_array": b'[{"magic":"atMSG"},1]'}


def _qlik_data(sim: SourceSimulator, tables: dict[str, QlikTable], avro: bool) -> list[dict[str, Any]]:
    marks = transactions(sim)

    def items() -> Iterator[tuple[int, Any, bytes | None, bytes]]:
        counter = 0
        for index, e, op, before, after in logical_changes(sim):
            spec = sim.tables[e.table]
            table = tables[e.table]
            if e.kind == "garbage":
                value = _QLIK_GARBAGE.get(e.garbage_kind or "")
                if value is None:  # unknown_op / update_without_after: a data message of an unknown operation
                    row = {c: _scaled(v, spec, c) for c, v in (e.after or e.before or {}).items()}
                    value = json_data(table, row, headers("MERGE", change_sequence("2026110100000000", 0))).encode()
                yield index, e, None, value
                continue
            counter += 1
            row_after = {c: _scaled(v, spec, c) for c, v in (after or {}).items()}
            row_before = {c: _scaled(v, spec, c) for c, v in before.items()} if before else None
            source = e.source or {}
            if op == "r":
                hdrs = headers("REFRESH")
            else:
                when = datetime.fromtimestamp(_ms(e) / 1000, UTC)
                _, number, size = marks.get(index, (None, None, None))
                hdrs = headers({"c": "INSERT", "u": "UPDATE", "d": "DELETE"}[op],
                               change_sequence(when.strftime("%Y%m%d%H%M%S00"), counter),
                               timestamp=when.strftime(_TS), tx=str(source.get("gtid") or ""),
                               tx_counter=number, tx_last=None if size is None else number == size,
                               stream_position=f"{source.get('file')}:{source.get('pos')}")
            data = row_before if op == "d" else row_after
            before_data = row_before if op == "u" else None
            value = avro_data(table, data, hdrs, before_data) if avro else json_data(table, data, hdrs,
                                                                                      before_data).encode()
            yield index, e, _key_bytes(spec, after or before), value

    return list(_place(sim, items()))


def qlik_records(sim: SourceSimulator, *, avro: bool = False) -> list[dict[str, Any]]:
    """One metadata message per table first (offset 0 of partition 0 of its topic), then the data."""
    tables = {name: qlik_table(spec) for name, spec in sim.tables.items()}
    first = sim.events[0].kafka_ts_ms if sim.events else 0
    meta = [{"key": None, "value": avro_metadata(t) if avro else json_metadata(t).encode(), "topic": sim.topic(name),
             "partition": 0, "offset": 0, "timestamp": _EPOCH_MS + timedelta(milliseconds=first), "timestampType": 0,
             "headers": None} for name, t in tables.items()]
    data = _qlik_data(sim, tables, avro)
    for r in data:
        if r["partition"] == 0 and r["topic"] in {m["topic"] for m in meta}:
            r["offset"] += 1
    return meta + data


# ---- DTS Avro ----------------------------------------------------------------------------------------
def _dts_value(spec: TableSpec, column: str, v: Any) -> Any:
    ns = "com.alibaba.dts.formats.avro."
    if v is None:
        return None
    t = spec.column_type(column)
    if t.kind in ("int", "bigint"):
        return (ns + "Integer", {"precision": 64 if t.kind == "bigint" else 32, "value": str(v)})
    if t.kind == "boolean":
        return (ns + "Integer", {"precision": 1, "value": "1" if v else "0"})
    if t.kind == "decimal":
        return (ns + "Decimal", {"value": f"{Decimal(v):.{t.scale}f}", "precision": t.precision, "scale": t.scale})
    if t.kind == "double":
        return (ns + "Float", {"value": float(v), "precision": 0, "scale": 0})
    if t.kind == "timestamp":
        return (ns + "DateTime", {"year": v.year, "month": v.month, "day": v.day, "hour": v.hour,
                                  "minute": v.minute, "second": v.second, "millis": v.microsecond})
    if t.kind == "date":
        return (ns + "DateTime", {"year": v.year, "month": v.month, "day": v.day, "hour": None, "minute": None,
                                  "second": None, "millis": None})
    return (ns + "Character", {"charset": "utf8mb4", "value": str(v).encode("utf-8")})


def dts_avro_records(sim: SourceSimulator, *, markers: bool = False) -> list[dict[str, Any]]:
    """``markers``: each transaction's BEGIN before its first record and COMMIT after its last, each on
    the partition of a key of its own (the rows follow theirs), naming it by ``sourceTxid`` (the GTID) in odd
    transactions and by ``safeSourcePosition`` (its BEGIN's position, with sourceTxid "0" as MySQL
    sources send it) in even ones."""
    import fastavro

    from jobs.formats.dts_avro.decoder import record_schema

    schema = record_schema()
    marks = transactions(sim) if markers else {}
    # record ids leave room for the markers around a transaction's records
    step = 10 if markers else 1

    def encode(record: dict[str, Any]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, record)
        return buf.getvalue()

    def items() -> Iterator[tuple[int, Any, bytes | None, bytes]]:
        for serial, (index, e, op, before, after) in enumerate(logical_changes(sim), start=1):
            spec = sim.tables[e.table]
            if e.kind == "garbage" and e.garbage_kind in ("broken_json", "empty_object", "json_array"):
                yield index, e, None, {"broken_json": b"\x02\xff\xff", "empty_object": b"{}",
                                       "json_array": b"[1]"}[e.garbage_kind]
                continue
            source = e.source or {}
            binlog = int(str(source.get("file", "mysql-bin.000001")).rsplit(".", 1)[-1])
            operation = {"r": "INIT", "c": "INSERT", "u": "UPDATE", "d": "DELETE"}.get(op or "", "NOOP")
            if e.kind == "garbage":  # unknown_op / update_without_after: an UPDATE without afterImages
                operation, after = "UPDATE", None
            names = list(spec.column_names)
            position = "" if op == "r" else f"{source.get('pos', 0)}@{binlog}"
            tx_id, number, size = marks.get(index, (None, 0, 0))
            txid, safe = str(source.get("gtid") or ""), ""
            if tx_id is not None and int(tx_id[2:]) % 2 == 0:
                txid, safe = "0", _tx_begin_position(sim, marks, tx_id, binlog)
            record = {
                "version": 1, "id": serial * step, "sourceTimestamp": _ms(e) // 1000,
                "sourcePosition": position,
                "safeSourcePosition": safe, "sourceTxid": txid,
                "source": {"sourceType": "MySQL", "version": "8.0.36"}, "operation": operation,
                "objectName": f"{spec.db}.{spec.name}", "processTimestamps": None,
                "tags": {"pk_uk_info": json.dumps({"PRIMARY": list(spec.primary_key)})},
                "fields": [{"name": n, "dataTypeNumber": 0} for n in names],
                "beforeImages": [_dts_value(spec, n, before.get(n)) for n in names] if before else None,
                "afterImages": [_dts_value(spec, n, after.get(n)) for n in names] if after else None,
                "bornTimestamp": e.kafka_ts_ms,
            }
            control = {**record, "objectName": None, "tags": {}, "fields": None, "beforeImages": None,
                       "afterImages": None}
            if number == 1:
                yield (index, e, _marker_key(tx_id, "BEGIN"),
                       encode({**control, "operation": "BEGIN", "id": serial * step - 1}), True)
            yield index, e, _key_bytes(spec, after or before), encode(record)
            if tx_id is not None and number == size:
                yield (index, e, _marker_key(tx_id, "COMMIT"),
                       encode({**control, "operation": "COMMIT", "id": serial * step + 1}), True)

    return list(_place(sim, items()))


def _tx_begin_position(sim: SourceSimulator, marks: dict[int, tuple[str, int, int]], tx_id: str, binlog: int) -> str:
    """The sourcePosition of a transaction's first record: where its BEGIN is."""
    first = min(i for i, (t, _, _) in marks.items() if t == tx_id)
    return f"{(sim.events[first].source or {}).get('pos', 0)}@{binlog}"


# ---- JSON formats: Canal, Maxwell, DataWorks, SharePlex, OGG ---------------------------------------
_MYSQL_TYPES = {"int": "int(11)", "bigint": "bigint(20)", "text": "varchar(255)", "boolean": "tinyint(1)",
                "date": "date", "timestamp": "datetime(6)", "double": "double"}
_DATAWORKS_TYPES = {"int": "LONG", "bigint": "LONG", "text": "STRING", "boolean": "BOOLEAN", "date": "DATE",
                    "timestamp": "DATE", "double": "DOUBLE", "decimal": "STRING"}
_JSON_GARBAGE = {"broken_json": b"{]", "empty_object": b"{}", "json_array": b'[{"type":"INSERT"},1]'}


def _mysql_type(spec: TableSpec, column: str) -> str:
    t = spec.column_type(column)
    return f"decimal({t.precision},{t.scale})" if t.kind == "decimal" else _MYSQL_TYPES[t.kind]


def _json_value(spec: TableSpec, column: str, v: Any, *, booleans: str = "int") -> Any:
    """A value as a JSON-writing tool sends it: numbers as numbers, decimals, dates and times as text."""
    if isinstance(v, bool):
        return (1 if v else 0) if booleans == "int" else v
    return _scaled(v, spec, column)


def _text(spec: TableSpec, column: str, v: Any) -> str | None:
    """Canal: every value as text (tinyint(1) as 1/0)."""
    v = _json_value(spec, column, v)
    return None if v is None else str(v)


def _changed(before: dict, after: dict) -> list[str]:
    return [c for c in after if before.get(c) != after.get(c)]


def _ms(e: Any) -> int:
    """A change's source time as these tools carry it: the commit's binlog time (the simulator's
    ``source.ts_ms``, whole seconds for MySQL); a message without one, its Kafka time."""
    source = getattr(e, "source", None) or {}
    return source["ts_ms"] if source.get("ts_ms") is not None else e.kafka_ts_ms


def canal_message(spec: TableSpec, op: str, before: dict | None, after: dict | None, e: Any, serial: int) -> Any:
    row = after if op != "d" else before
    message = {
        "data": [{c: _text(spec, c, row.get(c)) for c in spec.column_names}],
        "old": [{c: _text(spec, c, before[c]) for c in _changed(before, after)}] if op == "u" else None,
        "database": spec.db, "table": spec.name, "type": {"r": "INIT", "c": "INSERT", "u": "UPDATE", "d": "DELETE"}[op],
        "isDdl": False, "pkNames": list(spec.primary_key), "sql": "",
        "mysqlType": {c: _mysql_type(spec, c) for c in spec.column_names},
        "es": _ms(e), "ts": _ms(e) + 5, "id": serial,
    }
    return message


def maxwell_message(spec: TableSpec, op: str, before: dict | None, after: dict | None, e: Any, serial: int,
                    tx: tuple[str, int, int] | None = None) -> Any:
    row = after if op != "d" else before
    message = {
        "database": spec.db, "table": spec.name,
        "type": {"r": "bootstrap-insert", "c": "insert", "u": "update", "d": "delete"}[op],
        "ts": _ms(e) // 1000, "xid": serial, "commit": True, "position": f"mysql-bin.000001:{serial * 100}",
        "primary_key_columns": list(spec.primary_key),
        "data": {c: _json_value(spec, c, row.get(c)) for c in spec.column_names},
    }
    if tx is not None:
        # one xid per transaction; its rows count in xoffset but for the last, which says ``commit``
        tx_id, number, size = tx
        message["xid"] = int(tx_id[2:])
        if number < size:
            message["xoffset"] = number - 1
            del message["commit"]
    if op == "u":
        message["old"] = {c: _json_value(spec, c, before[c]) for c in _changed(before, after)}
    return message


def dataworks_message(spec: TableSpec, op: str, before: dict | None, after: dict | None, e: Any,
                      serial: int) -> Any:
    def value(c: str, v: Any) -> Any:
        kind = spec.column_type(c).kind
        if v is None:
            return None
        if kind in ("date", "timestamp"):  # DATE: epoch milliseconds
            moment = datetime(v.year, v.month, v.day) if kind == "date" else v.replace(tzinfo=None)
            return int((moment - datetime(1970, 1, 1)).total_seconds() * 1000)
        if kind == "decimal":
            return _scaled(v, spec, c)
        return v

    def image(row: dict | None) -> Any:
        return {"dataColumn": {c: value(c, row.get(c)) for c in spec.column_names}} if row else None

    return {
        "schema": {"dataColumn": [{"name": c, "type": _DATAWORKS_TYPES[spec.column_type(c).kind]}
                                  for c in spec.column_names],
                   "primaryKey": list(spec.primary_key),
                   "source": {"dbType": "MySQL", "dbVersion": "8.0", "dbName": spec.db, "schemaName": None,
                              "tableName": spec.name}},
        "payload": {"before": image(before) if op in ("u", "d") else None,
                    "after": image(after) if op != "d" else None,
                    "sequenceId": "-1" if op == "r" else str(serial), "scn": "0",
                    "op": {"r": "INSERT", "c": "INSERT", "u": "UPDATE_AFTER", "d": "DELETE"}[op],
                    "timestamp": {"eventTime": _ms(e), "systemTime": _ms(e) + 5, "checkpointTime": _ms(e)}},
        "version": "1.0",
    }


def shareplex_message(spec: TableSpec, op: str, before: dict | None, after: dict | None, e: Any,
                      serial: int, tx: tuple[str, int, int] | None = None) -> Any:
    tx_id, number, size = tx or (f"tx{serial}", 1, 1)
    meta = {"time": datetime.fromtimestamp(_ms(e) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "userid": 1, "op": {"r": "ins", "c": "ins", "u": "upd", "d": "del"}[op], "scn": str(serial),
            "rowid": f"AAAA{serial:012d}", "trans": tx_id, "seq": number, "size": size,
            "table": f"{spec.db.upper()}.{spec.name.upper()}", "idx": f"{number}/{size}", "posttime": ""}
    key_of = (lambda row: {c: _json_value(spec, c, row[c]) for c in spec.primary_key})  # noqa: E731
    if op == "u":
        data = {c: _json_value(spec, c, after[c]) for c in _changed(before, after)}
        return {"meta": meta, "data": data, "key": key_of(before)}
    if op == "d":
        return {"meta": meta, "data": {c: _json_value(spec, c, before.get(c)) for c in spec.column_names},
                "key": key_of(before)}
    return {"meta": meta, "data": {c: _json_value(spec, c, after.get(c)) for c in spec.column_names}}


def ogg_message(spec: TableSpec, op: str, before: dict | None, after: dict | None, e: Any, serial: int) -> Any:
    when = datetime.fromtimestamp(_ms(e) / 1000, UTC).strftime(_TS)
    message = {"table": f"{spec.db.upper()}.{spec.name.upper()}", "op_type": {"r": "I", "c": "I", "u": "U",
                                                                             "d": "D"}[op],
               "op_ts": when, "current_ts": when, "pos": f"{serial:020d}", "primary_keys": list(spec.primary_key)}
    if before is not None and op in ("u", "d"):
        message["before"] = {c: _json_value(spec, c, before.get(c)) for c in spec.column_names}
    if op != "d":
        message["after"] = {c: _json_value(spec, c, after.get(c)) for c in spec.column_names}
    return message


# formats whose messages say which transaction they belong to and which one ends it
_TRANSACTIONAL = ("maxwell", "shareplex")
_JSON_MESSAGES = {"canal": canal_message, "maxwell": maxwell_message, "dataworks": dataworks_message,
                  "shareplex": shareplex_message, "ogg": ogg_message}
# an operation none of the formats knows, in each format's own field
_UNKNOWN_OP = {"canal": ("type", "XX"), "maxwell": ("type", "xx"), "dataworks": ("payload.op", "XX"),
               "shareplex": ("meta.op", "xx"), "ogg": ("op_type", "X")}


def json_format_records(sim: SourceSimulator, fmt: str, *, markers: bool = False) -> list[dict[str, Any]]:
    """The stream as ``fmt`` messages (canal, maxwell, dataworks, shareplex, ogg). ``markers`` (DataWorks):
    each transaction's TRANSACTION_BEGIN before its first row and TRANSACTION_END after its last, each on
    the partition of a key of its own (the rows follow theirs), with sequenceIds around the rows'."""
    render = _JSON_MESSAGES[fmt]
    marks = transactions(sim) if fmt in _TRANSACTIONAL or markers else {}

    def items() -> Iterator[tuple[int, Any, bytes | None, bytes]]:
        for serial, (index, e, op, before, after) in enumerate(logical_changes(sim), start=1):
            spec = sim.tables[e.table]
            if e.kind == "garbage":
                value = _JSON_GARBAGE.get(e.garbage_kind or "")
                if value is None:  # unknown_op / update_without_after: a well-formed message of an unknown op
                    row = e.after or e.before
                    message = render(spec, "c", None, row, e, serial)
                    field, bad = _UNKNOWN_OP[fmt]
                    target = message
                    *path, last = field.split(".")
                    for part in path:
                        target = target[part]
                    target[last] = bad
                    value = json.dumps(message).encode()
                yield index, e, None, value
                continue
            if markers:
                tx_id, number, size = marks.get(index, (None, 0, 0))
                message = render(spec, op, before, after, e, serial * 10)
                if number == 1:
                    yield (index, e, _marker_key(tx_id, "BEGIN"),
                           _dataworks_marker(message, "TRANSACTION_BEGIN", serial * 10 - 1), True)
                yield index, e, _key_bytes(spec, after or before), json.dumps(message).encode()
                if number and number == size:
                    yield (index, e, _marker_key(tx_id, "END"),
                           _dataworks_marker(message, "TRANSACTION_END", serial * 10 + 1), True)
                continue
            message = render(spec, op, before, after, e, serial, marks[index]) if index in marks else \
                render(spec, op, before, after, e, serial)
            yield index, e, _key_bytes(spec, after or before), json.dumps(message).encode()

    return list(_place(sim, items()))


def _marker_key(tx_id: str, marker: str) -> bytes:
    """A transaction marker's Kafka key: a transaction's BEGIN and END hash to partitions of their own,
    as on a topic that the producer partitions by a hash of each record."""
    return json.dumps({"transaction": tx_id, "marker": marker}).encode()


def _dataworks_marker(row_message: dict, op: str, sequence_id: int) -> bytes:
    payload = {**row_message["payload"], "before": None, "after": None, "op": op, "sequenceId": str(sequence_id)}
    return json.dumps({**row_message, "payload": payload}).encode()


def debezium_transaction_records(sim: SourceSimulator, with_schema: bool = False) -> list[dict[str, Any]]:
    """The simulator's Debezium stream with transaction metadata: each committed transaction's events
    carry ``transaction.id`` / ``total_order``, and its BEGIN and END (with ``event_count``) go to the
    ``<prefix>.transaction`` topic, one partition, around its events (redeliveries stay as sent)."""
    records = sim.to_kafka_records(with_schema)
    members: dict[int, list[int]] = defaultdict(list)
    for i, e in enumerate(sim.events):
        if e.kind == "change" and e.tx_seq is not None and e.op != "r" and records[i]["value"]:
            members[e.tx_seq].append(i)
    order = {i: (seq, n) for seq, indexes in members.items() for n, i in enumerate(indexes, start=1)}
    topic = next((sim.topic(t) for t in sim.tables), "server").split(".")[0] + ".transaction"
    out: list[dict[str, Any]] = []

    def marker(status: str, seq: int, record: dict) -> dict:
        meta = {"status": status, "id": f"tx{seq}", "ts_ms": 0,
                "event_count": len(members[seq]) if status == "END" else None, "data_collections": None}
        offset = sum(1 for r in out if r["topic"] == topic)
        return {**record, "key": None, "value": json.dumps(meta).encode(), "topic": topic, "partition": 0,
                "offset": offset, "headers": None}

    for i, record in enumerate(records):
        if i not in order:
            out.append(record)
            continue
        seq, n = order[i]
        if n == 1:
            out.append(marker("BEGIN", seq, record))
        message = json.loads(record["value"])
        envelope = message["payload"] if with_schema else message
        envelope["transaction"] = {"id": f"tx{seq}", "total_order": n, "data_collection_order": n}
        out.append({**record, "value": json.dumps(message).encode()})
        if n == len(members[seq]):
            out.append(marker("END", seq, record))
    return out


FORMAT_RECORDS = {
    "qlik": lambda sim: qlik_records(sim, avro=False),
    "qlik_avro": lambda sim: qlik_records(sim, avro=True),
    "dts_avro": dts_avro_records,
    **{fmt: (lambda sim, fmt=fmt: json_format_records(sim, fmt)) for fmt in _JSON_MESSAGES},
}
