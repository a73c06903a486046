"""Qlik Replicate messages the decoder and run tests share (built by jobs/demo/qlik.py):
sales.orders' CDC messages (tests/unit/formats/test_qlik.py, tests/integration/test_qlik_runs.py) and
bank.accounts' transactional changes (tests/unit/fold/test_transactions.py,
tests/integration/test_held_transactions_runs.py)."""
from __future__ import annotations

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

ORDERS = QlikTable("sales", "orders", [
    QlikColumn("id", "INT4", 1), QlikColumn("region", "STRING", 2, length=10),
    QlikColumn("amount", "NUMERIC", precision=10, scale=2), QlikColumn("note", "STRING"),
    QlikColumn("placed", "DATE"), QlikColumn("paid", "BOOLEAN"), QlikColumn("blob", "BYTES"),
])
ROW = {"id": 1, "region": "EU", "amount": "10.50", "note": "first", "placed": "2026-11-01", "paid": False,
       "blob": "00FF"}


def seq(n: int) -> str:
    """The n-th change sequence of the tests' day."""
    return change_sequence("2026110112000000", n)


def cdc_messages(avro: bool):
    """ORDERS' CDC messages (JSON or Avro): a transaction, a key change, a column mask, a delete; the
    metadata second."""
    md = avro_metadata(ORDERS) if avro else json_metadata(ORDERS)
    data = (lambda *a, **k: avro_data(ORDERS, *a, **k)) if avro else (lambda *a, **k: json_data(ORDERS, *a, **k))
    moved = {**ROW, "amount": "11.00", "region": "US"}
    return [
        data(ROW, headers("INSERT", seq(1), timestamp="2026-11-01 12:00:00.000000", tx="AA", tx_counter=1,
                          tx_last=False, column_mask=ORDERS.mask([c.name for c in ORDERS.columns]))),
        md,  # the metadata may come after its data messages (another partition)
        data({**ROW, "amount": "10.75"}, headers("UPDATE", seq(2), tx="AA", tx_counter=2, tx_last=True),
             before=ROW),
        # the key (id, region) changes: beforeData holds the old key
        data(moved, headers("UPDATE", seq(3), tx="BB"), before={**ROW, "amount": "10.75"}),
        # note was not replicated (columnMask bit clear): its null is no value
        data({**moved, "note": None, "amount": "12.00"},
             headers("UPDATE", seq(4), column_mask=ORDERS.mask(["id", "region", "amount", "placed", "paid", "blob"])),
             before=moved),
        data({"id": 1, "region": "US", "amount": None, "note": None, "placed": None, "paid": None, "blob": None},
             headers("DELETE", seq(5), change_mask=ORDERS.mask(["id", "region"]))),
    ]


ACCOUNTS = QlikTable("bank", "accounts", [QlikColumn("id", "INT4", 1), QlikColumn("balance", "INT8")])


def accounts_message(n: int, op: str, row: dict, tx: str, counter: int, last: bool | None) -> str:
    """A change of bank.accounts, the ``counter``-th of transaction ``tx`` (``last``: its last change)."""
    return json_data(ACCOUNTS, row, headers(op, change_sequence("2026110112000000", n), tx=tx, tx_counter=counter,
                                            tx_last=last))
