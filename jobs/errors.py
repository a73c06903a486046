"""A failed stage as one line: what failed, why, and what to check (the command line's exit 1); and
:func:`mask`, the one rule for what of a text may be shown.

Operational failures (a source database or an Iceberg catalog that cannot be reached, a lake that
cannot be written, a refused connection) are told by the exception's type and the stage it broke;
a SetupError (an installation missing a part, such as the JVM-side decoders' jar) says itself what
is missing and how to set it up. Every line shown (a failure, a refused argument, the pipeline
checker's output, a DAG's doc) goes through :func:`mask`. The traceback is for ``--debug``.
"""
from __future__ import annotations

import re
import sys
from urllib.parse import urlsplit

_SCHEME = r"\b[a-zA-Z][a-zA-Z0-9+.-]*://"
_SECRET_WORDS = r"password|passwd|pwd|secret|token|signature|credential|api[_-]?key|access[_-]?key|sig"
# (pattern, replacement) in order: what a text may quote that is a secret, whatever its context
_SECRETS = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\s\\]*(?:-----END [A-Z ]*PRIVATE KEY-----)?"),
     "***"),
    (re.compile(rf"({_SCHEME}[^:/@\s]*:)[^@\s]*@"), r"\1***@"),  # a URL's password; its user stays
    (re.compile(rf"({_SCHEME})[^:/@\s]+@"), r"\1***@"),  # user info alone: often a token
    (re.compile(rf"(?i)((?:^|[?&;,\s])[\w.-]*?(?:{_SECRET_WORDS})=)[^&;,\s'\"]+"), r"\1***"),
    (re.compile(rf"(?i)(\"[\w.-]*?(?:{_SECRET_WORDS})\"\s*:\s*\")[^\"]*\""), r'\1***"'),  # JSON
    (re.compile(r"(?i)\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 ***"),
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b"), "***"),  # AWS key ids
    (re.compile(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"), "***"),  # JSON web tokens
    (re.compile(r"\b(?:gh[opusr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|xox[abposr]-[A-Za-z0-9-]{10,}"
                r"|AIza[0-9A-Za-z_-]{35})"), "***"),  # GitHub, Slack, Google API tokens
]
# where the credentials a URI must not hold go instead (jobs.lake.layout.Lake.at, a pipeline file's locations)
CREDENTIALS_FIX = ("remove them from the URI: S3 credentials come from the environment (AWS_ACCESS_KEY_ID and "
                   "AWS_SECRET_ACCESS_KEY, a profile or an instance role) and a catalog's from its settings "
                   "(PYICEBERG_CATALOG__<NAME>__*), under Airflow from the workers' environment or a secrets "
                   "backend: a URI is shown in logs, reports and the DAG's doc")
_CONNECTION_WORDS = ("could not connect", "connection refused", "can't connect", "could not translate host",
                     "timed out", "name or service not known", "no route to host", "connection reset")


class SetupError(RuntimeError):
    """The installation lacks a part the run needs (jobs.spark.jvm.JvmDecoderMissing): a setup problem, not one
    of the data or of a service; its message, one line, names what is missing and how to set it up."""


def mask(text: str) -> str:
    """``text`` as it may be shown: URL passwords and user info alone, secret parameters
    (``password=``, ``X-Amz-Signature=``, ``"token": "..."``...), bearer tokens, AWS access key ids,
    JSON web tokens, private keys and other known token shapes replaced by ***."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def uri_credentials(uri: str) -> str | None:
    """What credentials ``uri`` holds ("user info", "a secret parameter or token"), or None."""
    if mask(uri) == uri:
        return None
    return "user info" if "@" in urlsplit(uri.strip()).netloc else "a secret parameter or token"


def _is_connection(exc: BaseException) -> bool:
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"OperationalError", "InterfaceError", "ConnectTimeout", "ConnectTimeoutError",
                "EndpointConnectionError", "NewConnectionError"}:
        return True
    return any(word in str(exc).lower() for word in _CONNECTION_WORDS)


def java_causes(exc: BaseException) -> list[tuple[str, str]]:
    """(class name, message) of the Java exception behind ``exc`` and of each of its causes, outermost
    first: py4j's Py4JJavaError (``java_exception``) or one of pyspark's captured exceptions
    (``_origin``: AnalysisException...); none for a Python exception, or when the JVM cannot say."""
    java = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    chain: list[tuple[str, str]] = []
    try:
        while java is not None and len(chain) < 50:  # a cause chain may loop
            chain.append((str(java.getClass().getName()), str(java.getMessage() or "")))
            java = java.getCause()
    except Exception:  # noqa: BLE001 - a JVM gone (py4j's own errors): the chain as far as it was read
        pass
    return chain


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def root_cause(exc: BaseException) -> tuple[str, str]:
    """The type and first line of what ``exc`` comes down to: for Spark's failures, the deepest cause of
    the Java exception chain that says something ("No space left on device", "file:... is not a
    Parquet file") rather than py4j's "An error occurred while calling o123.parquet"."""
    said = [(name, message) for name, message in java_causes(exc) if message.strip()]
    if said:
        name, message = said[-1]
        return name.rsplit(".", 1)[-1], _first_line(message)
    return type(exc).__name__, _first_line(str(exc))


# the stages that run Spark work: a connection lost there is the Spark JVM's
_SPARK_STAGES = ("decode", "fold_publish", "validate", "transform")
_JVM_GONE_WORDS = ("answer from java side is empty", "error while receiving", "error while sending",
                   "java gateway process exited")
_MEMORY_HINT = "the Spark driver's heap: give it more (a pipeline file's spark.conf spark.driver.memory, " \
               "CDC_SPARK_CONF='{\"spark.driver.memory\": \"8g\"}' for the command line; the default is a quarter " \
               "of the machine's memory), or find the OutOfMemoryError above for what filled it"


def jvm_gone(stage: str | None, exc: BaseException) -> bool:
    """Whether ``exc`` is Python losing the Spark JVM in the middle of a stage (the JVM exits on an
    OutOfMemoryError, or was killed): py4j then reports only a refused or broken connection. A refused
    connection while the JVM still runs is another service's (a REST catalog's)."""
    if stage not in _SPARK_STAGES:
        return False
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "Py4JNetworkError" in names or any(word in str(exc).lower() for word in _JVM_GONE_WORDS):
        return True
    lost = {"ConnectionRefusedError", "ConnectionResetError", "BrokenPipeError"}
    return bool(names & lost) and _spark_jvm_exited()


def _spark_jvm_exited() -> bool:
    """Whether this process started a Spark JVM that has since exited."""
    pyspark = sys.modules.get("pyspark")
    context = getattr(getattr(pyspark, "SparkContext", None), "_active_spark_context", None)
    process = getattr(getattr(context, "_gateway", None), "proc", None)
    return process is not None and process.poll() is not None


def what_to_check(stage: str | None, exc: BaseException, catalog_file: str | None = None) -> str | None:
    """The hint for a failure of ``stage`` (decode, fold_publish, validate, reconcile, alert, expire);
    ``catalog_file``: the embedded catalog's SQLite file, when the run uses it."""
    causes = java_causes(exc)
    said = " ".join([str(exc)[:2000], *(f"{name}: {message}" for name, message in causes)])
    if jvm_gone(stage, exc) or "OutOfMemoryError" in said or "GC overhead limit exceeded" in said:
        return _MEMORY_HINT
    if getattr(exc, "errno", None) in (28, 122) or "No space left on device" in said or "Disk quota exceeded" in said:
        return "free space where the run writes: the lake's file system, and Spark's local folders for its " \
               "shuffle and spill files (spark.local.dir, SPARK_LOCAL_DIRS; default /tmp)"
    if isinstance(exc, PermissionError) or getattr(exc, "errno", None) in (13, 30) \
            or any(name.endswith("AccessDeniedException") for name, _ in causes):
        return "that the lake's folders are writable by this user (owner, permissions, a read-only mount)"
    if "is not a Parquet file" in said or "CANNOT_READ_FILE_FOOTER" in said:
        return "that the file it names is whole and Parquet (a copy cut short, a file changed after it was " \
               "written): replace it from its source, e.g. land its interval again"
    if "database is locked" in said:  # SQLite's: a writer holds it (a SQL catalog over the network is never so)
        catalog = f"the embedded catalog {catalog_file}" if catalog_file else \
            "the catalog named by CDC_ICEBERG_CATALOG (an SQLite database)"
        return f"whether another run of this pipeline is active: {catalog} is locked; retry when it ends"
    if _is_connection(exc):
        return _unreachable(stage)
    if isinstance(exc, FileNotFoundError) or "[PATH_NOT_FOUND]" in said \
            or any(name.endswith("FileNotFoundException") for name, _ in causes):
        return "that the file or folder it names exists (and was not removed while the run read it)"
    return None


def _unreachable(stage: str | None) -> str:
    if stage == "reconcile":
        return "that the source database of --source-counts is up and reachable, and its URL's host, port, " \
               "database and credentials"
    if stage in ("fold_publish", "validate", "expire"):
        return "that the Iceberg catalog named by CDC_ICEBERG_CATALOG is up and reachable, and its " \
               "PYICEBERG_CATALOG__<NAME>__* settings (uri, credentials)"
    if stage == "alert":
        return "the SMTP connection (smtp_default or SMTP_*)"
    return "that the service it names is up and reachable from this machine"


def failure_line(command: str, stage: str | None, exc: BaseException, catalog_file: str | None = None) -> str:
    """One line: ``error: <command> failed[ in <stage>]: <Type>: <first line> — check <hint>``, the type
    and line of the root cause (:func:`root_cause`); for a SetupError ``error: <command> failed[ in
    <stage>]: setup problem: <its message>``."""
    where = f" in {stage}" if stage and stage != command else ""
    if isinstance(exc, SetupError):  # the message says what to do: no hint, no truncation of the fix
        return mask(f"error: {command} failed{where}: setup problem: {_first_line(str(exc))} "
                    "(--debug shows the traceback)")
    kind, first = root_cause(exc)
    if jvm_gone(stage, exc):  # what py4j says (a refused connection) is not what happened
        kind, first = "SparkJvmExited", "the Spark JVM stopped in the middle of the stage (an OutOfMemoryError " \
                                        "in the log above means its heap was too small)"
    hint = what_to_check(stage, exc, catalog_file)
    line = f"error: {command} failed{where}: {kind}: {first}"[:600]
    return mask(line + (f"; check {hint}" if hint else "") + " (--debug shows the traceback)")
