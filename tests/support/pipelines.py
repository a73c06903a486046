"""Pipeline files for tests: the demo's blocks with overrides, written as YAML (jobs.config)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from jobs.config import PipelineConfig, dag_stub, load_pipeline

REPO = Path(__file__).resolve().parents[2]


def blocks(name: str = "demo", lake: str | Path = "/lake", **overrides: dict[str, Any] | list) -> dict[str, Any]:
    """A pipeline document: the bundled demo's, named ``name`` with lake ``lake``, each block in
    ``overrides`` merged over the demo's (a list, e.g. ``tables``, replaces)."""
    document = yaml.safe_load((REPO / "dags" / "pipelines" / "demo.yaml").read_text())
    document["pipeline"]["name"] = name
    document["sink"]["lake"] = str(lake)
    document["sink"]["catalog"] = None
    document["reconcile"]["counts"] = str(REPO / "demo" / "source_counts.json")
    document["source"]["files"] = str(REPO / "demo" / "topics")
    for block, value in overrides.items():
        if isinstance(value, dict) and isinstance(document.get(block), dict):
            document[block] = {**document[block], **copy.deepcopy(value)}
        else:
            document[block] = copy.deepcopy(value)
    return document


def write_pipeline(folder: Path, document: dict[str, Any], file_name: str | None = None) -> Path:
    """The pipeline file of ``document`` in ``folder``, with its DAG stub beside it (jobs.airflow.dags)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (file_name or f"{document['pipeline']['name']}.yaml")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    dag_stub(path).write_text((REPO / "dags" / "pipelines" / "demo.py").read_text())  # every stub is the same
    return path


def pipeline(tmp_path: Path, name: str = "demo", **overrides: Any) -> tuple[PipelineConfig, Path]:
    """A validated pipeline and its file under ``tmp_path/pipelines``."""
    path = write_pipeline(tmp_path / "pipelines", blocks(name, **overrides))
    return load_pipeline(path, env={}), path
