"""The fold: a run's change records over each table's published state (format-agnostic).

- ``describe``: what the run brings per table (columns, types, keys, phase positions);
- ``plan``: what each table needs, decided before any Spark work (a pure TablePlan);
- ``transactions``: records of transactions still open at the end of the run are held;
- ``core``: ``fold_table``, prior state + a table's events -> new state (semantics in its docstring);
- ``events``, ``key_moves``, ``history``, ``buckets``, ``types``: the parts it is made of.
"""
