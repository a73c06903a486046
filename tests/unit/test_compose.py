"""docker-compose.yml, checked without Docker: against the compose specification (its JSON schema, vendored
in tests/resources/compose/, see its README.md) and against the code it runs: the services its
connections and dependencies name, its published ports, bind mounts and images, the pipeline files it
mounts (jobs.config), the Spark cluster the pipelines submit to, the init services' scripts and
their flags, and the commands its header comment tells users to run.

The file is read as compose reads it on a fresh clone: YAML anchors and merge keys resolved (PyYAML's
safe_load), then ``${VAR:-default}`` interpolated with no ``.env`` and no variable set.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shlex
import sys
import tomllib
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from jobs.config import PipelineConfig, dag_stub, load_pipeline
from tests.support.packaging import pinned, requirement_files

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
SCHEMA = REPO / "tests" / "resources" / "compose" / "compose-spec.json"
# bind-mounted host paths the stack creates itself (git-ignored output), besides those in the repository
CREATED_BY_STACK = (REPO / "demo" / "out",)
# the options of Spark's standalone daemons (org.apache.spark.deploy.master.MasterArguments and
# deploy.worker.WorkerArguments); a worker takes the master URL as its one positional argument
SPARK_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
SPARK_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
SPARK_DAEMON_OPTIONS = {
    SPARK_MASTER_CLASS: {"--host", "-h", "--port", "-p", "--webui-port", "--properties-file"},
    SPARK_WORKER_CLASS: {"--host", "-h", "--port", "-p", "--cores", "-c", "--memory", "-m", "--work-dir", "-d",
                         "--webui-port", "--properties-file"},
}
SPARK_MASTER_DEFAULT_PORT = 7077


# ---- reading the file as compose does -----------------------------------------------------------
_INTERPOLATION = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)"
                            r"(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<named>[A-Za-z_][A-Za-z0-9_]*))")


class UnsetVariable(KeyError):
    pass


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's interpolation of every string value: ``$$``, ``${VAR}``, ``${VAR:-default}``,
    ``${VAR-default}``, ``${VAR:?error}``, ``${VAR:+replacement}``, ``$VAR``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match) -> str:
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("named")
        op, arg = m.group("op"), m.group("arg") or ""
        current = env.get(name)
        if op in (":-", "-"):
            return arg if current is None or (op == ":-" and current == "") else current
        if op in (":+", "+"):
            return arg if current is not None and (op == "+" or current != "") else ""
        if current is None or (op == ":?" and current == ""):
            raise UnsetVariable(f"${{{name}}} is not set and has no default ({arg or 'no message'})")
        return current
    return _INTERPOLATION.sub(one, value)


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))  # anchors and `<<:` merge keys resolved
    assert isinstance(document, dict), "docker-compose.yml is not a mapping"
    return document


@pytest.fixture(scope="module")
def compose(raw) -> dict[str, Any]:
    return interpolate(raw, {})  # a fresh clone: no .env, nothing exported


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict[str, Any]]:
    return compose["services"]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) if "=" in item else (item, None) for item in environment)
    return {str(k): _env_text(v) for k, v in environment.items() if v is not None}


def _env_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


def shell_words(service: dict[str, Any]) -> list[str]:
    """The command's words, a ``bash -c`` / ``sh -c`` script split into words too (``exec`` dropped)."""
    command = command_of(service)
    if len(command) >= 3 and command[0] in ("bash", "sh") and command[1] == "-c":
        command = shlex.split(command[2])
    return command[1:] if command[:1] == ["exec"] else command


def mounts(service: dict[str, Any]) -> list[dict[str, Any]]:
    """Every volume of a service as ``{type, source, target, read_only}`` (short and long syntax)."""
    out = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            parts = volume.split(":")
            source, target = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
            mode = parts[2] if len(parts) > 2 else ""
            kind = "bind" if source and source.startswith((".", "/", "~")) else "volume"
            out.append({"type": kind, "source": source, "target": target, "read_only": "ro" in mode.split(",")})
        else:
            out.append({"type": volume.get("type", "volume"), "source": volume.get("source"),
                        "target": volume["target"], "read_only": bool(volume.get("read_only"))})
    return out


def host_path(source: str) -> Path:
    return (REPO / source).resolve() if not source.startswith("/") else Path(source)


def bind_for(service: dict[str, Any], container_path: str) -> tuple[dict[str, Any], Path] | None:
    """The bind mount holding ``container_path`` in a service (the deepest one) and the host path."""
    path = PurePosixPath(container_path)
    found = None
    for mount in mounts(service):
        target = PurePosixPath(mount["target"])
        if mount["type"] == "bind" and (path == target or target in path.parents):
            if found is None or len(target.parts) > len(PurePosixPath(found["target"]).parts):
                found = mount
    if found is None:
        return None
    return found, host_path(found["source"]) / path.relative_to(found["target"])


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def connections(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The Airflow connections a service's environment defines (``AIRFLOW_CONN_<ID>``, JSON or URI)."""
    found = {}
    for key, value in env_of(service).items():
        if not key.startswith("AIRFLOW_CONN_"):
            continue
        conn_id = key[len("AIRFLOW_CONN_"):].lower()
        if value.lstrip().startswith("{"):
            found[conn_id] = json.loads(value)
        else:
            parts = urlsplit(value)
            found[conn_id] = {"conn_type": parts.scheme, "host": parts.hostname, "port": parts.port,
                              "login": parts.username, "password": parts.password, "schema": parts.path.lstrip("/")}
    return found


def extra_of(conn: dict[str, Any]) -> dict[str, Any]:
    extra = conn.get("extra") or {}
    return json.loads(extra) if isinstance(extra, str) else extra


def conn_endpoints(conn: dict[str, Any]) -> list[tuple[str, int | None]]:
    """(host, port) of every server a connection names: its host (a URL's host for Spark's
    ``spark://host``), and a Kafka connection's ``bootstrap.servers``."""
    found = []
    host = conn.get("host")
    if host:
        found.append((urlsplit(host).hostname, conn.get("port")) if "://" in host else (host, conn.get("port")))
    for server in str(extra_of(conn).get("bootstrap.servers") or "").split(","):
        if server.strip():
            name, _, port = server.strip().rpartition(":")
            found.append((name, int(port)))
    return found


def spark_master_url(conn: dict[str, Any]) -> str:
    """The master spark-submit gets from a ``spark`` connection, as the apache-spark provider's
    SparkSubmitHook._resolve_connection builds it from a connection of type spark."""
    host = conn.get("host") or ""
    master = host if "://" in host or not conn.get("port") else f"{conn['conn_type']}://{host}"
    return f"{master}:{conn['port']}" if conn.get("port") else master


def airflow_service(services) -> tuple[str, dict[str, Any]]:
    found = [(n, s) for n, s in services.items() if command_of(s)[:1] in (["standalone"], ["airflow", "standalone"])
             or "AIRFLOW__CORE__DAGS_FOLDER" in env_of(s)]
    assert len(found) == 1, f"expected one Airflow service, found {[n for n, _ in found]}"
    return found[0]


def spark_daemons(services, main_class: str) -> dict[str, list[str]]:
    """Services that run a Spark daemon: their arguments after ``spark-class <class>``."""
    found = {}
    for name, service in services.items():
        words = shell_words(service)
        if len(words) >= 2 and Path(words[0]).name == "spark-class" and words[1] == main_class:
            found[name] = words[2:]
    return found


def option(args: list[str], *names: str) -> str | None:
    for i, arg in enumerate(args[:-1]):
        if arg in names:
            return args[i + 1]
    return None


def positional(args: list[str], main_class: str) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in SPARK_DAEMON_OPTIONS[main_class]:
            skip = True
        else:
            out.append(arg)
    return out


@pytest.fixture(scope="module")
def airflow(services) -> dict[str, Any]:
    return airflow_service(services)[1]


@pytest.fixture(scope="module")
def pipelines(airflow) -> dict[Path, PipelineConfig]:
    """Every pipeline file the Airflow service makes a DAG of (one with its DAG stub in the DAGs folder),
    loaded with its environment (CDC_HOME included)."""
    env = env_of(airflow)
    folder = env.get("AIRFLOW__CORE__DAGS_FOLDER")
    assert folder, "the Airflow service sets no DAGs folder: it would read the image's"
    mounted = bind_for(airflow, folder)
    assert mounted, f"the DAGs folder {folder} is not in a bind mount of the Airflow service"
    host_folder = mounted[1]
    assert host_folder.is_dir(), f"{host_folder} (the DAGs folder {folder}) does not exist in the repository"
    files = sorted(p for p in host_folder.iterdir() if p.suffix in (".yaml", ".yml") and dag_stub(p).is_file())
    assert files, f"no pipeline file with its DAG stub in {host_folder}"
    return {path: load_pipeline(path, env=env) for path in files}


# ---- the compose specification -------------------------------------------------------------------
def test_the_vendored_schema_is_a_draft7_schema():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$schema"].rstrip("#").endswith("draft-07/schema")
    jsonschema.Draft7Validator.check_schema(schema)
    assert (SCHEMA.parent / "README.md").read_text().count("compose-spec/compose-spec") >= 1


def _schema_errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))]


def test_the_file_follows_the_compose_specification(compose):
    assert _schema_errors(compose) == []


def test_the_schema_check_catches_a_mistake(compose):
    broken = json.loads(json.dumps(compose))
    broken["services"]["airflow"]["dependson"] = ["postgres"]
    broken["services"]["source-init"]["depends_on"]["source-db"]["condition"] = "service_ready"
    errors = _schema_errors(broken)
    assert any("dependson" in e for e in errors), errors
    assert any(e.startswith("services/source-init/depends_on") for e in errors), errors


def test_every_variable_has_a_default_for_a_fresh_clone(raw):
    interpolate(raw, {})  # raises UnsetVariable naming the variable
    assert interpolate("${AIRFLOW_UID:-50000}:0", {"AIRFLOW_UID": "1000"}) == "1000:0"
    assert interpolate("$$(x)", {}) == "$(x)"
    with pytest.raises(UnsetVariable):
        interpolate("${NOT_SET}", {})


# ---- services, dependencies, ports, mounts, images -----------------------------------------------
def test_dependencies_name_services_and_fit_their_condition(services):
    for name, service in services.items():
        for target, condition in depends_on(service).items():
            assert target in services, f"{name} depends on {target}, which is not a service"
            dependency = services[target]
            if condition == "service_healthy":
                check = dependency.get("healthcheck") or {}
                assert check.get("test") and not check.get("disable"), \
                    f"{name} waits for {target} to be healthy, but {target} has no healthcheck"
            elif condition == "service_completed_successfully":
                assert dependency.get("restart") in (None, "no", "on-failure"), \
                    f"{name} waits for {target} to complete, but {target} restarts (a one-shot must not)"
                assert not dependency.get("healthcheck"), f"{target} is a one-shot: a healthcheck makes no sense"
            else:
                assert condition == "service_started", f"{name} -> {target}: unknown condition {condition}"


def test_dependencies_have_no_cycle(services):
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"dependency cycle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for target in depends_on(services[name]):
            visit(target, (*path, name))
        done.add(name)

    for name in services:
        visit(name, ())


def test_connections_name_services(services):
    found = 0
    for name, service in services.items():
        for conn_id, conn in connections(service).items():
            for host, _port in conn_endpoints(conn):
                found += 1
                assert host in services, f"{name}: connection {conn_id} names host {host!r}, which is not a service"
    assert found, "no AIRFLOW_CONN_* connection found"


def test_kafka_bootstrap_is_an_advertised_listener(services, airflow):
    for conn_id, conn in connections(airflow).items():
        if conn.get("conn_type") != "kafka":
            continue
        servers = extra_of(conn).get("bootstrap.servers")
        assert servers, f"Kafka connection {conn_id} has no bootstrap.servers in its extra"
        for host, port in conn_endpoints(conn):
            advertised = env_of(services[host]).get("KAFKA_ADVERTISED_LISTENERS", "")
            assert f"//{host}:{port}" in advertised, \
                f"{conn_id}: {host}:{port} is not among {host}'s KAFKA_ADVERTISED_LISTENERS {advertised!r}"


def _published(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host port, protocol) of every published port (short and long syntax)."""
    out = []
    for port in service.get("ports") or []:
        if isinstance(port, dict):
            if port.get("published") is not None:
                out.append((str(port["published"]), port.get("protocol", "tcp")))
            continue
        text, _, protocol = str(port).partition("/")
        parts = text.rsplit(":", 2)
        if len(parts) >= 2:
            out.append((parts[-2], protocol or "tcp"))
    return out


def test_published_ports_are_unique(services):
    seen: dict[tuple[str, str], str] = {}
    for name, service in services.items():
        for published in _published(service):
            assert published not in seen, f"{name} and {seen[published]} both publish port {published[0]}"
            seen[published] = name
    assert ("8080", "tcp") in seen, "Airflow's UI is not published"


def test_bind_mounted_paths_exist_or_are_made_by_the_stack(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for mount in mounts(service):
            if mount["type"] == "bind":
                path = host_path(mount["source"])
                made = any(path == p or p in path.parents for p in CREATED_BY_STACK)
                assert path.exists() or made, f"{name} mounts {mount['source']}, which is not in the repository"
            elif mount["type"] == "volume" and mount["source"]:
                assert mount["source"] in declared, f"{name} uses volume {mount['source']}, not declared in volumes:"
        build = service.get("build")
        if build:
            context = build if isinstance(build, str) else build.get("context", ".")
            assert host_path(context).is_dir(), f"{name}: build context {context} does not exist"
            if isinstance(build, dict) and build.get("dockerfile"):
                assert (host_path(context) / build["dockerfile"]).is_file(), f"{name}: no {build['dockerfile']}"


def _tag(image: str) -> str | None:
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _exact(tag: str | None) -> bool:
    """A tag naming one release (``16.10``, ``v1.30.5``, ``RELEASE.2025-...``), not a moving one (``16``)."""
    return bool(tag) and tag != "latest" and bool(re.search(r"\d+\.\d+|RELEASE\.\d{4}-", tag))


def test_images_are_pinned_and_airflow_matches_requirements(services):
    bases = []
    for name, service in services.items():
        image, build = service.get("image"), service.get("build")
        assert image or build, f"{name} has neither image nor build"
        if image and not build:  # a built service's image names what it builds, not what it pulls
            tag = _tag(image)
            assert _exact(tag), f"{name}: image {image} is not pinned to one release"
        inline = (build or {}).get("dockerfile_inline") if isinstance(build, dict) else None
        if inline:
            for line in inline.splitlines():
                if line.strip().upper().startswith("FROM "):
                    base = line.split()[1]
                    tag = _tag(base)
                    assert _exact(tag), f"{name}: base image {base} is not pinned to one release"
                    bases.append(base)
    airflow_bases = [b for b in bases if b.split(":", 1)[0] == "apache/airflow"]
    assert airflow_bases, "no service builds FROM apache/airflow"
    airflow = pinned("apache-airflow", "airflow")
    for base in airflow_bases:
        assert _tag(base).split("-", 1)[0] == airflow, \
            f"{base} does not match the [airflow] extra's apache-airflow=={airflow}"
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert all(_tag(b).endswith(f"-python{python}") for b in airflow_bases), \
        f"the Airflow images' Python is not this project's {python}: {airflow_bases}"


# ---- the image: the package installed, its pins, its jar ------------------------------------------
def dockerfile(services) -> list[tuple[str, str]]:
    """The instructions of the one inline Dockerfile, (INSTRUCTION, arguments), continuation lines joined."""
    inline = {s["build"]["dockerfile_inline"] for s in services.values() if isinstance(s.get("build"), dict)}
    assert len(inline) == 1, "expected one image built by the file (x-cdc-image)"
    text = re.sub(r"\\\n", " ", inline.pop())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def _copies(steps: list[tuple[str, str]]) -> list[tuple[list[str], PurePosixPath]]:
    """Every COPY's (sources, destination)."""
    out = []
    for instruction, args in steps:
        if instruction == "COPY":
            *sources, dest = [w for w in shlex.split(args) if not w.startswith("--")]
            out.append((sources, PurePosixPath(dest)))
    return out


def _dockerignored(path: Path) -> bool:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    parts = path.relative_to(REPO).parts
    return any(PurePosixPath(*parts[:i]).match(p) for p in patterns for i in range(1, len(parts) + 1))


def test_the_image_installs_the_pins_then_the_package_with_its_jar(services):
    steps = dockerfile(services)
    runs = [args for instruction, args in steps if instruction == "RUN"]
    # the pins: the package's dependencies and its [airflow] extra, the files pyproject.toml reads them from
    pins = next(shlex.split(r) for r in runs if " -r " in f" {r} ")
    installed = [PurePosixPath(pins[i + 1]).name for i, word in enumerate(pins) if word == "-r"]
    assert installed == [f.name for f in requirement_files()[None] + requirement_files()["airflow"]]
    # the package: the jar built into it, then installed from its sources with no dependency left to pip
    package = next(r for r in runs if "--no-deps" in r)
    order = [package.find(step) for step in ("jvm/build.sh", "test -f jobs/spark/jars/cdc-jvm.jar", "pip install")]
    assert -1 not in order and order == sorted(order), f"the jar is not built into the package before its install: {package}"
    folder = PurePosixPath(shlex.split(package.split("pip install", 1)[1].split("&&", 1)[0])[-1])
    copied = {match.relative_to(REPO).parts[0] for sources, dest in _copies(steps) if folder in (dest, *dest.parents)
              for src in sources for match in REPO.glob(src)}
    readme = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["readme"]
    needed = {"pyproject.toml", readme, "jobs", "jvm", *(f.name for files in requirement_files().values() for f in files)}
    assert needed <= copied, f"the image builds the package in {folder} without {sorted(needed - copied)}"
    for sources, _ in _copies(steps):
        for src in sources:
            matched = list(REPO.glob(src))
            assert matched and not [m for m in matched if _dockerignored(m)], f"the image copies {src}: not in the build context"
    assert _dockerignored(REPO / "jobs/spark/jars/cdc-jvm.jar"), "the image would take the checkout's jar, not build its own"


def test_no_service_finds_the_package_through_pythonpath_or_a_mount(services):
    for name, service in services.items():
        assert "PYTHONPATH" not in env_of(service), f"{name} sets PYTHONPATH: the image's installed package is the one"
        for mount in mounts(service):
            if mount["type"] == "bind":
                assert host_path(mount["source"]) != REPO / "jobs", f"{name} mounts ./jobs over the installed package"
    assert "CDC_JVM_JAR" not in env_of(airflow_service(services)[1]), "the installed package holds the jar"


# ---- the pipelines the stack runs ----------------------------------------------------------------
def test_mounted_pipeline_files_validate(pipelines, airflow):
    env = env_of(airflow)
    names = [cfg.name for cfg in pipelines.values()]
    assert len(names) == len(set(names)), f"two pipeline files share a name: {names}"
    home = env.get("CDC_HOME")
    assert home, "the Airflow service sets no CDC_HOME (relative paths would resolve against the image's)"
    # CDC_HOME stands for the repository: every folder mounted below it is the repository's of that name
    below = [m for m in mounts(airflow) if m["type"] == "bind" and PurePosixPath(home) in PurePosixPath(m["target"]).parents]
    assert below, f"nothing of the repository is mounted below CDC_HOME {home}"
    for mount in below:
        assert host_path(mount["source"]) == REPO / PurePosixPath(mount["target"]).relative_to(home), mount
    for path, cfg in pipelines.items():
        assert cfg.sink.lake.startswith(home), f"{path}: the lake {cfg.sink.lake} is outside CDC_HOME {home}"


def test_pipeline_connections_are_defined(pipelines, airflow, services):
    defined = connections(airflow)
    for path, cfg in pipelines.items():
        wanted = {"spark": cfg.spark.connection}
        if cfg.source.kafka is not None:
            wanted["source.kafka"] = cfg.source.kafka.connection
        if cfg.reconcile.connection:
            wanted["reconcile"] = cfg.reconcile.connection
        if cfg.alert.to:
            wanted["alert"] = cfg.alert.smtp_connection
        for field, conn_id in wanted.items():
            assert conn_id.lower() in defined, \
                f"{path.name}: {field} names connection {conn_id}, but the Airflow service has no AIRFLOW_CONN_{conn_id.upper()}"
        if cfg.source.kafka is not None:
            assert defined[cfg.source.kafka.connection.lower()]["conn_type"] == "kafka"
        if cfg.reconcile.connection:
            conn = defined[cfg.reconcile.connection.lower()]
            assert conn["host"] in services and conn.get("schema"), f"{path.name}: reconcile source {conn}"
        if cfg.alert.to:
            smtp = defined[cfg.alert.smtp_connection.lower()]
            if smtp["host"] == "mailpit":  # a local sink without TLS: the smtp provider turns TLS on otherwise
                assert extra_of(smtp).get("disable_tls") is True and extra_of(smtp).get("disable_ssl") is True


def test_pipeline_paths_are_mounted_where_spark_runs(pipelines, airflow, services):
    workers = spark_daemons(services, SPARK_WORKER_CLASS)
    for path, cfg in pipelines.items():
        local = {"sink.lake": cfg.sink.lake, "source.files": cfg.source.files,
                 "reconcile.counts": cfg.reconcile.counts}
        for field, value in local.items():
            if value is None or "://" in value:
                continue
            mounted = bind_for(airflow, value)
            assert mounted, f"{path.name}: {field} {value} is not in a bind mount of the Airflow service"
            if field == "sink.lake":
                assert not mounted[0]["read_only"], f"{path.name}: the lake {value} is mounted read-only"
                master = spark_master_url(connections(airflow)[cfg.spark.connection.lower()])
                if master.startswith("spark://"):
                    assert workers, "a standalone master but no Spark worker service"
                    for worker in workers:
                        there = bind_for(services[worker], value)
                        assert there and there[1] == mounted[1] and not there[0]["read_only"], \
                            f"{worker} does not mount the lake {value} where the Airflow service does"
                        assert services[worker].get("user") == airflow.get("user"), \
                            f"{worker} writes the lake as another user than the Airflow service"


def test_the_spark_connection_points_at_the_master(pipelines, airflow, services):
    masters = spark_daemons(services, SPARK_MASTER_CLASS)
    workers = spark_daemons(services, SPARK_WORKER_CLASS)
    assert len(masters) == 1 and workers, f"Spark master {list(masters)}, workers {list(workers)}"
    (master_name, master_args), = masters.items()
    master_port = int(option(master_args, "--port", "-p") or SPARK_MASTER_DEFAULT_PORT)
    master_host = option(master_args, "--host", "-h") or master_name
    assert master_host in (master_name, services[master_name].get("hostname")), master_host
    for cfg in pipelines.values():
        url = spark_master_url(connections(airflow)[cfg.spark.connection.lower()])
        parts = urlsplit(url)
        assert parts.scheme == "spark" and parts.hostname == master_name and parts.port == master_port, \
            f"connection {cfg.spark.connection} submits to {url}, not to spark://{master_name}:{master_port}"
        # executors on another machine (container): the package and jar go with the job, and their Python
        assert cfg.spark.ship_package, "a standalone cluster needs spark.ship_package: true"
        assert cfg.spark.executor_python, "a standalone cluster needs spark.executor_python"
        driver_host = cfg.spark.conf.get("spark.driver.host")
        if driver_host is not None:
            assert driver_host in ("airflow", airflow.get("hostname")) and driver_host in services, driver_host
        for worker, args in workers.items():
            assert positional(args, SPARK_WORKER_CLASS) == [url], f"{worker} registers with {args}, not {url}"
            assert depends_on(services[worker]).get(master_name) == "service_healthy"


def test_the_spark_services_run_spark_daemons_with_their_options(services):
    jars = Path(__import__("pyspark").__file__).parent / "jars"
    core = next(jars.glob("spark-core_*.jar"))
    with zipfile.ZipFile(core) as archive:
        classes = set(archive.namelist())
    assert (Path(__import__("pyspark").__file__).parent / "bin" / "spark-class").is_file()
    for main_class in (SPARK_MASTER_CLASS, SPARK_WORKER_CLASS):
        assert main_class.replace(".", "/") + ".class" in classes, f"{main_class} is not in {core.name}"
        for name, args in spark_daemons(services, main_class).items():
            flags = [a for a in args if a.startswith("-")]
            unknown = sorted(set(flags) - SPARK_DAEMON_OPTIONS[main_class])
            assert not unknown, f"{name}: {main_class} has no options {unknown}"
            assert len(positional(args, main_class)) == (1 if main_class == SPARK_WORKER_CLASS else 0), args


# ---- the init services: their scripts and flags --------------------------------------------------
def _load_script(path: Path):
    spec = importlib.util.spec_from_file_location(f"_compose_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Captured(Exception):
    pass


def parser_of(module) -> argparse.ArgumentParser:
    """The script's argparse parser: ``build_parser()``, else the one its ``main`` builds (caught when
    main parses, so nothing runs)."""
    if hasattr(module, "build_parser"):
        return module.build_parser()
    caught = {}

    def capture(self, args=None, namespace=None):
        caught["parser"] = self
        raise _Captured

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture), pytest.raises(_Captured):
        module.main([])
    return caught["parser"]


def python_scripts(services) -> dict[str, tuple[Path, list[str], dict[str, Any]]]:
    """Services whose command is ``python <script> args...`` (or ``python -m <module of jobs> args...``): the
    script's host path and the args."""
    found = {}
    for name, service in services.items():
        command = command_of(service)
        if command[:2] == ["python", "-m"] and command[2].startswith("jobs."):
            found[name] = (REPO / (command[2].replace(".", "/") + ".py"), command[3:], service)
        elif command[:1] == ["python"] and len(command) > 1 and command[1].endswith(".py"):
            mounted = bind_for(service, command[1])
            assert mounted, f"{name} runs {command[1]}, which is in no bind mount of the service"
            found[name] = (mounted[1], command[2:], service)
    return found


def test_init_scripts_exist_and_take_their_flags(services):
    scripts = python_scripts(services)
    assert {"demo-init", "kafka-init", "source-init"} <= set(scripts), sorted(scripts)
    for name, (path, args, _service) in scripts.items():
        assert path.is_file(), f"{name} runs {path}, which does not exist"
        parser = parser_of(_load_script(path))
        try:
            parser.parse_args(args)
        except SystemExit:
            pytest.fail(f"{name}: {path.name} does not take {args} (see the error above)")


def _parsed(services, name: str) -> argparse.Namespace:
    path, args, _ = python_scripts(services)[name]
    return parser_of(_load_script(path)).parse_args(args)


def test_the_init_services_read_what_demo_init_generates(services):
    demo = _parsed(services, "demo-init")
    kafka, source = _parsed(services, "kafka-init"), _parsed(services, "source-init")
    assert str(kafka.topics) == str(demo.out), "kafka-init reads other topics than demo-init writes"
    assert str(source.source_db) == str(demo.source_db), "source-init reads another database than demo-init writes"
    for name in ("kafka-init", "source-init"):
        assert depends_on(services[name]).get("demo-init") == "service_completed_successfully", name
    # each sees the generated files at the same host path, which the stack creates (nothing of a checkout)
    for path in (str(demo.out), str(demo.source_db), str(PurePosixPath(str(demo.source_db)).with_name("source_counts.json"))):
        writer = bind_for(services["demo-init"], path)
        assert writer and not writer[0]["read_only"], f"demo-init cannot write {path}"
        assert any(writer[1] == p or p in writer[1].parents for p in CREATED_BY_STACK), writer[1]
    for name, path in (("kafka-init", str(kafka.topics)), ("source-init", str(source.source_db))):
        assert bind_for(services[name], path)[1] == bind_for(services["demo-init"], path)[1], name
    kafka_bootstrap = kafka.bootstrap.rpartition(":")[0]
    assert kafka_bootstrap in services and depends_on(services["kafka-init"]).get(kafka_bootstrap) == "service_healthy"
    target = urlsplit(source.url).hostname
    assert target in services and depends_on(services["source-init"]).get(target) == "service_healthy"


def test_kafka_pipelines_read_the_generated_topics(pipelines):
    from jobs.demo.generate import DEMO_SERVER, DEMO_TABLES

    generated = {f"{DEMO_SERVER}.{spec.schema}.{spec.name}" for spec in DEMO_TABLES}  # Debezium's PostgreSQL names
    for path, cfg in pipelines.items():
        if cfg.source.kafka is not None:
            assert set(cfg.source.kafka.topics) <= generated, \
                f"{path.name} lands topics {sorted(set(cfg.source.kafka.topics) - generated)} nobody produces"


def test_the_airflow_service_waits_for_the_stack(airflow, services):
    waits = depends_on(airflow)
    one_shots = [n for n, s in services.items() if n.endswith("-init")]
    for name in one_shots:
        reached = set()
        frontier = [n for n in waits]
        while frontier:  # transitively: Airflow waits for every one-shot, directly or through another
            current = frontier.pop()
            if current not in reached:
                reached.add(current)
                frontier += list(depends_on(services[current]))
        assert name in reached, f"Airflow does not wait for {name}"


def test_copy_source_db_copies_every_table(tmp_path):
    import sqlite3

    module = _load_script(REPO / "deploy" / "compose" / "init_demo.py")
    source = tmp_path / "source.db"
    with sqlite3.connect(source) as db:
        db.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
        db.executemany("INSERT INTO customers VALUES (?, ?)", [(1, "a"), (2, "b")])
        db.execute("CREATE TABLE orders (id INTEGER)")
    copied = module.copy_source_db(source, f"sqlite:///{tmp_path / 'target.db'}")
    assert copied == {"customers": 2, "orders": 0}
    with sqlite3.connect(tmp_path / "target.db") as db:
        assert db.execute("SELECT count(*) FROM customers").fetchone() == (2,)


# ---- the header comment --------------------------------------------------------------------------
def _header() -> str:
    lines = []
    for line in COMPOSE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#"))
    return "\n".join(lines)


def test_the_header_tells_what_the_file_does(services, pipelines):
    header = _header()
    published = {port for s in services.values() for port, _ in _published(s)}
    for port in re.findall(r"localhost:(\d+)", header) + re.findall(r"console :(\d+)", header):
        assert port in published, f"the header names localhost:{port}, which no service publishes"
    for service in re.findall(r"docker compose exec (\S+)", header):
        assert service in services, f"the header runs a command in {service}, which is not a service"
    dag_ids = {cfg.dag_id for cfg in pipelines.values()}
    named = set(re.findall(r"(?:dags [a-z-]+|DAG) (cdc_[a-z0-9_]+)\b", header))
    assert named and named <= dag_ids, f"the header names DAGs {sorted(named - dag_ids)}; the stack has {sorted(dag_ids)}"
    assert "docker compose up" in header and "AIRFLOW_UID" in header
    for cfg in pipelines.values():  # where the header says the lake is
        host_lake = bind_for(airflow_service(services)[1], cfg.sink.lake)[1]
        assert f"./{host_lake.relative_to(REPO)}" in header, f"the header does not say the lake is at {host_lake}"
    for mentioned in re.findall(r"\b((?:deploy|scripts|dags|docs)/[\w./-]+\.(?:py|yaml|md))\b", header):
        assert (REPO / mentioned).is_file(), f"the header names {mentioned}, which does not exist"
