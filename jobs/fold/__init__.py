"""The fold: a run's change records over each table's published state (format-agnostic).

- ``stage``: the run, table by table (held transactions -> describe -> per table: read, fold, stage -> one
  commit of every table);
- ``held``: records of transactions still open at the end of a run wait under held/ (``transactions``
  finds them);
- ``describe``: what the run brings per table (columns, types, keys, phase positions) and its reach;
- ``plan``: what each table needs, decided before any Spark work (a pure TablePlan);
- ``table``: ``fold_one_table``, one table's describe -> plan -> fold, with no catalog or lake access;
- ``core``: ``fold_table``, prior state + a table's events -> new state (semantics in its docstring);
- ``events``, ``key_moves``, ``history``, ``buckets``, ``types``, ``values``: the parts it is made of.
"""
