"""Names taken from messages never escape the lake prefix and stay valid identifiers."""
import pytest
from pyspark.sql import functions as F

from jobs.lake.layout import Lake, LakeError, check_name
from jobs.model.record import iceberg_table_name, make_table_id, table_id_col
from jobs.spark.sql import sql_ident, sql_str

HOSTILE = ["../../etc", "a/b", "x\x00y", "..", "", None, "t\nname", "we'ird`", "ü-table", "販売 表", "L" * 300,
           "表" * 100]


@pytest.mark.parametrize("part", HOSTILE)
def test_table_id_parts_are_path_and_identifier_safe(part):
    table_id = make_table_id(part, part, part)
    assert "/" not in table_id and "\\" not in table_id and ".." not in table_id
    assert len(table_id.split(".")) == 3
    assert all(c.isalnum() or c in "._$-" for c in table_id)
    assert "." not in iceberg_table_name(table_id)
    # one folder name of the change records (table=<id>), and the history table's name, fit 255 bytes
    assert len(f"table={table_id}".encode()) <= 255
    assert len(iceberg_table_name(f"{table_id}.history").encode()) <= 255


def test_spark_and_python_table_ids_agree(spark):
    rows = [(p, p, p) for p in HOSTILE]
    df = spark.createDataFrame(rows, "a string, b string, c string")
    got = [r[0] for r in df.select(table_id_col(F.col("a"), F.col("b"), F.col("c"))).collect()]
    assert got == [make_table_id(*r) for r in rows]


def test_names_made_safe_stay_apart_and_safe_names_stay_as_they_are():
    # the safe forms alone would be one table each: "__" / "Order_Details"
    assert make_table_id("販売", None, "顧客") != make_table_id("販売", None, "注文")
    assert make_table_id("s", "dbo", "Order Details") != make_table_id("s", "dbo", "Order_Details")
    assert make_table_id("inventory", "public", "Order_Details-2$") == "inventory.public.Order_Details-2$"
    assert make_table_id(None, "", "t") == "_._.t"
    # ids too long for a folder name are cut, and keep apart by their hash; shorter ones keep their names
    assert make_table_id("d", "s", "L" * 300) != make_table_id("d", "s", "L" * 301)
    assert make_table_id("d", "s", "L" * 200) == "d.s." + "L" * 200


def test_iceberg_table_names_are_one_to_one():
    """Joined by ``__``, ``a__b.c.d`` and ``a.b__c.d`` would be one table, and a source table
    ``orders__history`` would be the history table of ``orders``: such ids carry their hash. Ids of
    clean parts keep the joined name tables were published under."""
    ids = ["shop.public__x.t", "shop__public.x.t", "shop.public.x__t", "shop.public.orders__history",
           "shop.public.orders.history", "a_.b.c", "a._b.c", "_._.t", "_.__a.t", "x.___.t", "x._.t"]
    names = [iceberg_table_name(i) for i in ids]
    assert len(set(names)) == len(names), names
    assert iceberg_table_name("shop.public.orders") == "shop__public__orders"
    assert iceberg_table_name("shop.public.orders.history") == "shop__public__orders__history"
    assert iceberg_table_name("_._.t") == "______t"


def test_lake_paths_never_leave_the_root(tmp_path):
    lake = Lake.at(str(tmp_path))
    for bad in ("../x", "a/../../b", "/abs/../.."):
        with pytest.raises(LakeError):
            lake.join(bad)
    for bad in ("../p", "a/b", "", ".hidden", "x..y"):
        with pytest.raises(LakeError):
            check_name("pipeline", bad)
    assert lake.join(Lake.changes_dir("p", "2026-11-01")).startswith(str(tmp_path) + "/")


def test_lake_uris(tmp_path):
    assert Lake.at("s3a://bucket/some/lake/").root == "s3://bucket/some/lake"
    assert Lake.at("s3://bucket/l").spark_path("raw") == "s3a://bucket/l/raw"
    assert Lake.at(f"file://{tmp_path}").root == str(tmp_path)
    with pytest.raises(LakeError):
        Lake.at("ftp://host/x")


def test_sql_quoting():
    assert sql_str("it's \\ here") == "'it\\'s \\\\ here'"
    assert sql_ident("a`b") == "`a``b`"


