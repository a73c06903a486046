"""``python -m jobs attach``: the pyiceberg entry of a lake's embedded catalog, as a ``.pyiceberg.yaml`` holds it,
opens the catalog the pipeline publishes to (the same name, database and warehouse), so that a reader's
``load_catalog("cdc")`` finds its tables; a lake whose tables are in a catalog of its own says so instead."""
from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.utils.config import Config

from jobs import cli
from jobs.iceberg.attach import CATALOG_NAME, AttachError, attach, catalog_properties, catalog_yaml
from jobs.iceberg.catalog import open_catalog
from jobs.lake.layout import Lake
from tests.support.paths import REPO


def _published(root: Path) -> Lake:
    """A lake whose embedded catalog holds one table of pipeline p, made with pyiceberg alone."""
    lake = Lake.at(str(root))
    catalog = open_catalog(lake)
    catalog.create_namespace("p")
    catalog.create_table(("p", "t"), schema=pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
    return lake


def test_the_entry_is_the_catalog_the_pipeline_opens(tmp_path):
    lake = Lake.at(str(tmp_path / "a lake"))  # a blank in the path: quoted by the YAML, encoded in the URI
    own = open_catalog(lake)
    entry = catalog_properties(lake)
    assert own.name == CATALOG_NAME == "cdc"
    assert entry == {"type": "sql", "uri": own.properties["uri"], "warehouse": own.properties["warehouse"]}
    assert entry == {"type": "sql", "uri": f"sqlite:///{tmp_path}/a lake/warehouse/catalog.db",
                     "warehouse": (tmp_path / "a lake" / "warehouse").as_uri()}
    assert yaml.safe_load(catalog_yaml(lake)) == {"catalog": {"cdc": entry}}


def test_the_written_entry_is_what_pyiceberg_reads_and_opens_the_tables_with(tmp_path, monkeypatch):
    lake = _published(tmp_path / "lake")
    text, path = attach(lake, write=True)
    assert path == f"{lake.root}/.pyiceberg.yaml" and Path(path).read_text() == text
    # what pyiceberg makes of $PYICEBERG_HOME/.pyiceberg.yaml (read once, when it is imported: read afresh here)
    monkeypatch.setenv("PYICEBERG_HOME", lake.root)
    entry = Config().get_catalog_config(CATALOG_NAME)
    assert entry == catalog_properties(lake)
    table = load_catalog(CATALOG_NAME, **entry).load_table("p.t")
    assert table.scan().to_arrow()["id"].to_pylist() == [1, 2]
    # under another name, the SQL catalog finds none of the lake's tables (they are filed under "cdc")
    with pytest.raises(NoSuchTableError):
        load_catalog("lake", **entry).load_table("p.t")


def test_a_lake_without_a_catalog_yet_is_refused(tmp_path):
    with pytest.raises(AttachError, match="nothing is published there yet"):
        attach(Lake.at(str(tmp_path / "typo")))
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize(("lake", "says"), [
    (Lake.at("/data/lake", "prod"), "its tables are in the pyiceberg catalog 'prod'"),
    (Lake.at("s3://bucket/lake"), "an S3 lake has no embedded catalog"),
])
def test_a_lake_whose_tables_are_in_another_catalog_says_so(lake, says):
    with pytest.raises(AttachError, match=says):
        catalog_properties(lake)


def test_the_command_prints_the_entry_and_writes_it_when_asked(tmp_path, capsys):
    lake = _published(tmp_path / "lake")
    assert cli.main(["attach", "--lake", lake.root]) == 0
    assert capsys.readouterr().out == catalog_yaml(lake)
    assert not Path(lake.join(".pyiceberg.yaml")).exists()
    assert cli.main(["attach", "--lake", lake.root, "--write"]) == 0
    printed = capsys.readouterr()
    assert printed.out == Path(lake.join(".pyiceberg.yaml")).read_text() == catalog_yaml(lake)
    assert f"PYICEBERG_HOME={lake.root}" in printed.err


def test_the_command_says_when_the_lake_names_its_own_catalog(tmp_path, monkeypatch, capsys):
    lake = _published(tmp_path / "lake")
    monkeypatch.setenv("CDC_ICEBERG_CATALOG", "prod")
    assert cli.main(["attach", "--lake", lake.root, "--write"]) == 2
    printed = capsys.readouterr()
    assert printed.out == "" and "its tables are in the pyiceberg catalog 'prod'" in printed.err
    assert not Path(lake.join(".pyiceberg.yaml")).exists()
    monkeypatch.delenv("CDC_ICEBERG_CATALOG")
    assert cli.main(["attach", "--lake", str(tmp_path / "elsewhere")]) == 2
    assert "no catalog at" in capsys.readouterr().err


def test_the_page_shows_the_entry_attach_prints():
    page = (REPO / "docs" / "operations" / "reading-the-lake.md").read_text(encoding="utf-8")
    shown = re.search(r"^```yaml\n(catalog:.*?)^```", page, re.S | re.M).group(1)
    assert shown == catalog_yaml(Lake.at("/data/lake"))
