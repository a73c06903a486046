"""Every table property and snapshot summary key the pipeline keeps on its Iceberg tables (``cdc.*``), in one
place: what a table or a snapshot says about itself, read by the fold, the Iceberg room, reconcile and expire."""
from __future__ import annotations

# ---- on a table ------------------------------------------------------------------------------------
TABLE_ID_PROP = "cdc.table-id"  # the source table (table id) a state table holds
KEY_COLUMNS_PROP = "cdc.key-columns"  # JSON list of the key columns
BUCKETS_PROP = "cdc.buckets"  # a state table's number of key-hash buckets (fixed when the layout is made)
FULL_LOAD_POSITION_PROP = "cdc.full-load-position"
TRUNCATE_POSITION_PROP = "cdc.truncate-position"
PENDING_LOAD_PROP = "cdc.pending-load"  # a full load not yet known complete: {"start", "end"} positions
# where the table's tombstones (deleted keys and their positions) of this snapshot are: a Parquet
# folder written before the commit and named in the same commit, so it changes atomically with the state
TOMBSTONES_PROP = "cdc.tombstones"
HISTORY_OF_PROP = "cdc.history-of"  # on an SCD2 history table: the table_id whose history it is

# ---- in a snapshot's summary -------------------------------------------------------------------------
RUN_ID_PROP = "cdc.run-id"
ATTEMPT_PROP = "cdc.attempt"  # the attempt of the run that committed the snapshot (jobs.lake.lease)
REPORT_PROP = "cdc.report"  # the committing run's report of the table (JSON)
PIPELINE_PROP = "cdc.pipeline"
