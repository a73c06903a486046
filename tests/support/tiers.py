"""The long tier: the breadth of a scenario's matrix beyond the cases CI runs.

A matrix of whole runs (every format, every kill point) costs a run per case. CI (`make test-scenarios`)
runs the cases that stand for the property; `make test-long` runs the rest (marker ``long``), and
`make test-all` runs everything."""
from __future__ import annotations

from collections.abc import Iterable

import pytest


def breadth(cases: Iterable, in_ci: Iterable) -> list:
    """``cases`` as parameters, those not in ``in_ci`` marked ``long``; every name of ``in_ci`` must be a case."""
    cases, in_ci = list(cases), set(in_ci)
    unknown = in_ci - set(cases)
    if unknown:
        raise ValueError(f"CI cases {sorted(unknown)} are not among {cases}")
    return [case if case in in_ci else pytest.param(case, marks=pytest.mark.long) for case in cases]
