"""Where other tools find a lake's tables: the pyiceberg catalog entry of the lake's embedded SQL catalog, as a
``.pyiceberg.yaml`` holds it (``python -m jobs attach``; docs/operations/reading-the-lake.md). No Spark.

The entry is named ``cdc``, as the pipeline's own catalog is (jobs.iceberg.catalog.open_catalog): pyiceberg's
SQL catalog keeps the tables of every catalog name in one database, each row under its name, so an entry of
another name finds none of them. A lake whose tables are in a catalog of its own (``Lake.catalog``: a pipeline's
``sink.catalog`` or ``CDC_ICEBERG_CATALOG``) has no entry here: readers load that catalog by its name.
"""
from __future__ import annotations

import yaml

from jobs.iceberg.catalog import embedded_catalog_file
from jobs.lake import storage
from jobs.lake.layout import Lake

# the name open_catalog gives the embedded catalog's SqlCatalog (tests/unit/iceberg/test_attach.py holds them equal)
CATALOG_NAME = "cdc"


# the file pyiceberg reads its catalogs from, in $PYICEBERG_HOME (else the home folder)
CONFIG_FILE = ".pyiceberg.yaml"


class AttachError(ValueError):
    """The lake has no embedded catalog to attach: it names another, or holds none yet."""


def catalog_properties(lake: Lake) -> dict[str, str]:
    """The properties pyiceberg opens the lake's embedded catalog with: the ones open_catalog gives it."""
    if lake.catalog:
        raise AttachError(
            f"lake {lake.root}: its tables are in the pyiceberg catalog {lake.catalog!r} (sink.catalog or "
            f"CDC_ICEBERG_CATALOG), configured where pyiceberg reads it (~/.pyiceberg.yaml or "
            f"PYICEBERG_CATALOG__{lake.catalog.upper()}__* variables): readers load that catalog by its name; "
            "there is no embedded catalog to attach")
    file = embedded_catalog_file(lake)
    if file is None:
        raise AttachError(f"lake {lake.root}: an S3 lake has no embedded catalog (SQLite cannot live on S3); its "
                          "tables are in the catalog CDC_ICEBERG_CATALOG or the pipeline's sink.catalog names")
    return {"type": "sql", "uri": f"sqlite:///{file}", "warehouse": lake.uri(lake.warehouse)}


def catalog_yaml(lake: Lake) -> str:
    """The lake's catalog entry as ``.pyiceberg.yaml`` text: ``catalog: {cdc: {type, uri, warehouse}}``."""
    return yaml.safe_dump({"catalog": {CATALOG_NAME: catalog_properties(lake)}}, sort_keys=False)


def attach(lake: Lake, write: bool = False) -> tuple[str, str | None]:
    """The lake's catalog entry as ``.pyiceberg.yaml`` text and, with ``write``, the path of the
    ``<lake>/.pyiceberg.yaml`` it was written to (replacing one there), for ``PYICEBERG_HOME=<lake>``. Refused
    where the lake has no catalog yet: nothing published there (a mistyped ``--lake``, most likely)."""
    text = catalog_yaml(lake)
    file = embedded_catalog_file(lake)
    if not storage.exists(file):
        raise AttachError(f"lake {lake.root}: no catalog at {file}: nothing is published there yet")
    if not write:
        return text, None
    path = lake.join(CONFIG_FILE)
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return text, path
