"""Embedded SQLite results store: nothing measured is measured twice, nothing measured is lost.

Every measurement is one row keyed by everything that changes the result (target, device, toolchain
and library versions, template version, kernel kind, dtype, layout, problem and config).  Rows are
committed one at a time in WAL mode, so ``kill -9`` loses at most the measurement in flight and the
next run resumes by looking keys up.  The client process is the single writer (the Dask runner sends
results back to it); readers (``--replay``, reports) may open the file concurrently.

Entry points for other backends: :meth:`ResultsStore.lookup` / :meth:`ResultsStore.record` with a
:class:`MeasurementKey`; :meth:`ResultsStore.replay_lookup` for device-independent replay.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import StoreError

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS measurements (
    key TEXT PRIMARY KEY,
    target TEXT, device TEXT, toolchain TEXT, library TEXT, template_version TEXT,
    kernel TEXT, dtype TEXT, layout TEXT, problem TEXT, config_key TEXT,
    status TEXT NOT NULL, reason TEXT,
    time_ms REAL, time_min_ms REAL, time_max_ms REAL, tflops REAL,
    runtime TEXT, result TEXT,
    build_s REAL, run_s REAL, run_id TEXT, created REAL
);
CREATE INDEX IF NOT EXISTS m_replay ON measurements (target, kernel, dtype, layout, problem, config_key);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, started REAL, command TEXT, info TEXT);
"""


def canonical(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): the form hashed into keys."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def problem_key(problem: dict[str, Any]) -> str:
    """Shape part of a problem (dtype and layout are separate key columns)."""
    return canonical({k: v for k, v in problem.items() if k not in ("dtype", "layout")})


@dataclass(frozen=True)
class MeasurementKey:
    """Everything that changes a measurement."""

    target: str
    device: str
    toolchain: str
    library: str
    template_version: str
    kernel: str
    dtype: str
    layout: str
    problem: str  # problem_key(...)
    config_key: str  # canonical(config dict)

    def digest(self) -> str:
        return hashlib.sha256(canonical(asdict(self)).encode()).hexdigest()[:32]


@dataclass
class Measurement:
    """One stored measurement (a compile config on one problem; its best run-time variant)."""

    key: MeasurementKey
    status: str  # ok | wrong_result | cannot_run | build_failed | timeout | crashed
    reason: str = ""
    time_ms: float | None = None
    time_min_ms: float | None = None
    time_max_ms: float | None = None
    tflops: float | None = None
    runtime: dict[str, Any] | None = None
    result: dict[str, Any] | None = None  # the program's full JSON line (variants, stages, ...)
    build_s: float = 0.0
    run_s: float = 0.0
    run_id: str = ""
    created: float = 0.0

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.key.config_key)


_COLUMNS = [
    "key",
    "target",
    "device",
    "toolchain",
    "library",
    "template_version",
    "kernel",
    "dtype",
    "layout",
    "problem",
    "config_key",
    "status",
    "reason",
    "time_ms",
    "time_min_ms",
    "time_max_ms",
    "tflops",
    "runtime",
    "result",
    "build_s",
    "run_s",
    "run_id",
    "created",
]


def _check_schema(db: sqlite3.Connection, path: Path, field: str | None) -> None:
    """A store of this schema version, or an empty file; anything else is a :class:`StoreError`."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return
    if "meta" not in tables or "measurements" not in tables:
        raise StoreError(
            f"not a kernelpilot results store (tables: {', '.join(sorted(tables))})",
            file=str(path),
            field=field,
        )
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    version = row[0] if row else None
    if version != str(SCHEMA_VERSION):
        raise StoreError(
            f"results store schema version {version} is not the supported {SCHEMA_VERSION}; "
            "point at another store or move this one aside",
            file=str(path),
            field=field,
        )
    columns = [r[1] for r in db.execute("PRAGMA table_info(measurements)")]
    if columns != _COLUMNS:
        raise StoreError(
            "results store has unexpected columns in 'measurements' (another version?)",
            file=str(path),
            field=field,
        )


def check_store_file(path: Path, *, field: str | None = None) -> None:
    """Fail now, with a message naming the file, if ``path`` is not a readable store (creates nothing)."""
    from kernelpilot.fileio import check_input_file

    check_input_file(path, field=field, what="results store")
    ResultsStore(path, readonly=True, field=field).close()


class ResultsStore:
    """Thread-safe wrapper around one SQLite file."""

    def __init__(self, path: str | Path, *, readonly: bool = False, field: str | None = None) -> None:
        self.path = Path(path)
        try:
            if readonly:
                if not self.path.is_file():
                    raise StoreError("results store does not exist", file=str(self.path), field=field)
                uri = f"file:{self.path.resolve()}?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
                _check_schema(self._db, self.path, field)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(
                    str(self.path), check_same_thread=False, timeout=30, isolation_level=None
                )
                self._create_schema_once(field)
                self._enable_wal()
                self._db.isolation_level = ""
                self._db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"not a readable SQLite results store ({exc})", file=str(self.path), field=field
            ) from None
        self._lock = threading.Lock()

    def _create_schema_once(self, field: str | None) -> None:
        """Check and create the tables in one write transaction.

        Several processes may open a new store at the same moment (a shared home).  Creating the
        tables statement by statement would let another opener see ``meta`` without
        ``measurements`` and reject the file as foreign; ``BEGIN IMMEDIATE`` makes the second
        opener wait for the first one's complete schema instead.
        """
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            _check_schema(db, self.path, field)
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _enable_wal(self, wait_s: float = 30.0) -> None:
        """Switch to WAL (readers never block the writer), waiting out other openers.

        Changing the journal mode needs the file to itself and SQLite answers "database is locked"
        at once rather than calling the busy handler, so retry for as long as ``connect`` would wait.
        """
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- writing -------------------------------------------------------------------------------
    def record(self, m: Measurement) -> None:
        """Insert or replace one measurement and commit at once (crash safety)."""
        k = m.key
        row = (
            k.digest(), k.target, k.device, k.toolchain, k.library, k.template_version, k.kernel,
            k.dtype, k.layout, k.problem, k.config_key, m.status, m.reason, m.time_ms, m.time_min_ms,
            m.time_max_ms, m.tflops, canonical(m.runtime or {}), canonical(m.result or {}), m.build_s,
            m.run_s, m.run_id, m.created or time.time(),
        )  # fmt: skip
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                row,
            )
            self._db.commit()

    def record_run(self, run_id: str, command: str, info: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO runs VALUES (?,?,?,?)",
                (run_id, time.time(), command, canonical(info)),
            )
            self._db.commit()

    # ---- reading -------------------------------------------------------------------------------
    _COLS = (
        "target, device, toolchain, library, template_version, kernel, dtype, layout, problem, config_key,"
        " status, reason, time_ms, time_min_ms, time_max_ms, tflops, runtime, result, build_s, run_s,"
        " run_id, created"
    )

    def _row_to_measurement(self, row: tuple[Any, ...]) -> Measurement:
        key = MeasurementKey(*row[:10])
        return Measurement(
            key=key,
            status=row[10],
            reason=row[11] or "",
            time_ms=row[12],
            time_min_ms=row[13],
            time_max_ms=row[14],
            tflops=row[15],
            runtime=json.loads(row[16] or "{}"),
            result=json.loads(row[17] or "{}"),
            build_s=row[18] or 0.0,
            run_s=row[19] or 0.0,
            run_id=row[20] or "",
            created=row[21] or 0.0,
        )

    def lookup(self, key: MeasurementKey) -> Measurement | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLS} FROM measurements WHERE key = ?", (key.digest(),)
            ).fetchone()
        return self._row_to_measurement(row) if row else None

    def replay_lookup(
        self, target: str, kernel: str, dtype: str, layout: str, problem: str, config_key: str
    ) -> Measurement | None:
        """A recorded measurement of this config on this problem, whatever device/toolchain recorded it
        (newest first).  Used by ``--replay``."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._COLS} FROM measurements WHERE target=? AND kernel=? AND dtype=? AND layout=?"
                " AND problem=? AND config_key=? ORDER BY created DESC LIMIT 1",
                (target, kernel, dtype, layout, problem, config_key),
            ).fetchone()
        return self._row_to_measurement(row) if row else None

    def all(self, **where: str) -> list[Measurement]:
        clauses = " AND ".join(f"{k} = ?" for k in where)
        sql = (
            f"SELECT {self._COLS} FROM measurements"
            + (f" WHERE {clauses}" if clauses else "")
            + " ORDER BY created"
        )
        with self._lock:
            rows = self._db.execute(sql, tuple(where.values())).fetchall()
        return [self._row_to_measurement(r) for r in rows]

    def problems(self, target: str, kernel: str, dtype: str) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT problem FROM measurements WHERE target=? AND kernel=? AND dtype=?",
                (target, kernel, dtype),
            ).fetchall()
        return [r[0] for r in rows]

    def count(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])
