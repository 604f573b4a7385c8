"""A trial tree persisted in SQLite, one tree per (kernel, spec, variant, dsl, device).

Why SQLite: every write is a transaction, so a crash (or a killed worker) never leaves a half-written
tree, and several processes (the pipeline and ``kernelpilot skill trial ...`` run by an agent) can
read and write the same tree with the database's own locking.  Candidate sources are also written as
plain files (``t<N>.<ext>``) so people and agents can open them; the file is written atomically
*before* its node row is committed.

A tree remembers the SHA-256 of the kernel and spec it was created for.  Opening it for a different
kernel raises :class:`~kernelpilot.errors.InputError` instead of silently mixing two kernels' trials
(Xe-Forge's ``trial init`` reused stale trees).  ``fresh=True`` moves the old tree aside (never
deletes it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.secrets import redact, redact_obj

SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    seq INTEGER PRIMARY KEY,
    id TEXT UNIQUE NOT NULL,
    parent TEXT,
    stage TEXT NOT NULL,
    engine TEXT NOT NULL DEFAULT '',
    attempt INTEGER NOT NULL DEFAULT 0,
    code_file TEXT NOT NULL,
    code_sha TEXT NOT NULL,
    status TEXT NOT NULL,          -- pending | evaluated
    verdict TEXT,                  -- correct | incorrect | compile_error | runtime_error | timeout | invalid
    message TEXT NOT NULL DEFAULT '',
    seed INTEGER,
    median_ms REAL, min_ms REAL, max_ms REAL,
    interpreter INTEGER NOT NULL DEFAULT 0,
    speedup REAL,                  -- vs the baseline (t0)
    speedup_vs_parent REAL,
    accepted INTEGER NOT NULL DEFAULT 0,
    reused_from TEXT,
    created_at REAL NOT NULL,
    evaluated_at REAL,
    extra TEXT NOT NULL DEFAULT '{}'
);
"""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TreeIdentity:
    """What a tree belongs to; any difference means the stored timings and verdicts do not apply."""

    kernel_sha: str
    spec_sha: str
    variant: str
    dsl: str
    device: str
    kernel_path: str = ""  # informational only (the same kernel may move)
    tolerances: str = ""  # e.g. "rtol=0.01,atol=1e-05": verdicts stored under other tolerances do not apply

    def key_fields(self) -> dict[str, str]:
        fields = {
            "kernel_sha": self.kernel_sha,
            "spec_sha": self.spec_sha,
            "variant": self.variant,
            "dsl": self.dsl,
            "device": self.device,
        }
        if self.tolerances:
            fields["tolerances"] = self.tolerances
        return fields


def tolerance_key(rtol: float, atol: float) -> str:
    return f"rtol={float(rtol)!r},atol={float(atol)!r}"


@dataclass
class TrialNode:
    """One attempt.  ``speedup`` is relative to the baseline node ``t0``."""

    id: str
    seq: int
    parent: str | None
    stage: str
    engine: str
    attempt: int
    code_file: str
    code_sha: str
    status: str
    verdict: str | None = None
    message: str = ""
    seed: int | None = None
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    interpreter: bool = False
    speedup: float | None = None
    speedup_vs_parent: float | None = None
    accepted: bool = False
    reused_from: str | None = None
    created_at: float = 0.0
    evaluated_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.verdict == "correct"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class TrialStore:
    """Open (or create) the tree in ``root/name``.  Use :meth:`open`."""

    DB_NAME = "trials.sqlite"

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.db_path = directory / self.DB_NAME
        self._conn = sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.executescript(_SCHEMA)

    # ----------------------------------------------------------------------------------- opening
    @classmethod
    def open(
        cls,
        root: Path,
        name: str,
        identity: TreeIdentity,
        *,
        fresh: bool = False,
        extension: str = ".py",
    ) -> TrialStore:
        """Open the tree for ``identity``; refuse a tree that belongs to another kernel/spec/variant."""
        directory = Path(root) / name
        if fresh and directory.exists():
            stale = directory.with_name(f"{name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
            shutil.move(str(directory), str(stale))
        directory.mkdir(parents=True, exist_ok=True)
        store = cls(directory)
        with store._tx():
            meta = store.meta()
            if not meta:
                rows = {**identity.key_fields(), "kernel_path": identity.kernel_path}
                rows.update(
                    schema=SCHEMA_VERSION, name=name, extension=extension, created_at=str(time.time())
                )
                store._conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", sorted(rows.items()))
                return store
        mismatched = {
            key: (meta.get(key), value)
            for key, value in identity.key_fields().items()
            if meta.get(key) != value
        }
        if mismatched:
            store.close()
            details = "; ".join(
                f"{key}: tree has {old!r}, this run has {new!r}" for key, (old, new) in mismatched.items()
            )
            raise InputError(
                f"trial tree {directory} belongs to another kernel/spec/variant ({details}); "
                "pass another --name (-n), or --fresh-trials to move the old tree aside",
                file=str(directory / cls.DB_NAME),
                field="trial tree identity",
            )
        return store

    @classmethod
    def open_existing(cls, directory: Path) -> TrialStore:
        """Open a tree for reading (skill CLI); the directory must hold a tree."""
        if not (Path(directory) / cls.DB_NAME).is_file():
            raise InputError(
                f"no trial tree in {directory} (expected {cls.DB_NAME}); run `kernelpilot optimize` "
                "or `kernelpilot skill trial init` first",
                file=str(directory),
            )
        return cls(Path(directory))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> TrialStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def meta(self) -> dict[str, str]:
        return {row["key"]: row["value"] for row in self._conn.execute("SELECT key, value FROM meta")}

    def set_meta(self, key: str, value: str) -> None:
        with self._tx():
            self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # ----------------------------------------------------------------------------------- writing
    def add_node(
        self,
        code: str,
        *,
        parent: str | None,
        stage: str,
        engine: str = "",
        attempt: int = 0,
        extra: dict[str, Any] | None = None,
    ) -> TrialNode:
        """Persist a candidate before it is evaluated (status ``pending``) and return its node."""
        if parent is not None and self.get(parent) is None:
            raise InputError(f"parent trial {parent!r} does not exist in {self.dir}", field="parent")
        extension = self.meta().get("extension", ".py")
        with self._tx():
            seq = self._conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM nodes").fetchone()[0]
            node_id = f"t{seq}"
            code_file = f"{node_id}{extension}"
            _atomic_write(self.dir / code_file, code)
            self._conn.execute(
                "INSERT INTO nodes(seq, id, parent, stage, engine, attempt, code_file, code_sha, status,"
                " created_at, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (
                    seq,
                    node_id,
                    parent,
                    stage,
                    engine,
                    attempt,
                    code_file,
                    sha256_text(code),
                    time.time(),
                    json.dumps(redact_obj(extra or {})),
                ),
            )
        node = self.get(node_id)
        assert node is not None
        return node

    def record_result(
        self,
        node_id: str,
        *,
        verdict: str,
        message: str = "",
        seed: int | None = None,
        median_ms: float | None = None,
        min_ms: float | None = None,
        max_ms: float | None = None,
        interpreter: bool = False,
        reused_from: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> TrialNode:
        """Store the evaluation of a node; speedups are derived from the stored times, not passed in."""
        node = self.get(node_id)
        if node is None:
            raise InputError(f"no trial {node_id!r} in {self.dir}", field="trial id")
        baseline = self.get("t0")
        parent = self.get(node.parent) if node.parent else None
        speedup = _ratio(baseline.median_ms if baseline else None, median_ms, verdict)
        if node_id == "t0":
            speedup = 1.0 if verdict == "correct" and median_ms else None
        speedup_vs_parent = _ratio(parent.median_ms if parent else None, median_ms, verdict)
        merged_extra = {**node.extra, **(extra or {})}
        with self._tx():
            self._conn.execute(
                "UPDATE nodes SET status='evaluated', verdict=?, message=?, seed=?, median_ms=?, min_ms=?,"
                " max_ms=?, interpreter=?, speedup=?, speedup_vs_parent=?, reused_from=?, evaluated_at=?,"
                " extra=? WHERE id=?",
                (
                    verdict,
                    redact(message[:20000]),
                    seed,
                    median_ms,
                    min_ms,
                    max_ms,
                    int(interpreter),
                    speedup,
                    speedup_vs_parent,
                    reused_from,
                    time.time(),
                    json.dumps(redact_obj(merged_extra)),
                    node_id,
                ),
            )
        result = self.get(node_id)
        assert result is not None
        return result

    def update_extra(self, node_id: str, values: dict[str, Any]) -> None:
        """Merge ``values`` into a node's ``extra`` (e.g. a side-by-side confirmation)."""
        with self._tx():
            row = self._conn.execute("SELECT extra FROM nodes WHERE id=?", (node_id,)).fetchone()
            if row is None:
                raise InputError(f"no trial {node_id!r} in {self.dir}", field="trial id")
            merged = {**json.loads(row["extra"] or "{}"), **values}
            self._conn.execute(
                "UPDATE nodes SET extra=? WHERE id=?", (json.dumps(redact_obj(merged)), node_id)
            )

    def mark_accepted(self, node_id: str, accepted: bool = True) -> None:
        with self._tx():
            self._conn.execute("UPDATE nodes SET accepted=? WHERE id=?", (int(accepted), node_id))

    # ----------------------------------------------------------------------------------- reading
    def get(self, node_id: str) -> TrialNode | None:
        row = self._conn.execute("SELECT * FROM nodes WHERE id=?", (node_id,)).fetchone()
        return _row_to_node(row) if row else None

    def nodes(self) -> list[TrialNode]:
        return [_row_to_node(r) for r in self._conn.execute("SELECT * FROM nodes ORDER BY seq")]

    def code(self, node_id: str) -> str:
        node = self.get(node_id)
        if node is None:
            raise InputError(f"no trial {node_id!r} in {self.dir}", field="trial id")
        return (self.dir / node.code_file).read_text(encoding="utf-8")

    def find_evaluated(self, code_sha: str) -> TrialNode | None:
        """An earlier evaluated node with identical code (lets an interrupted run resume cheaply)."""
        row = self._conn.execute(
            "SELECT * FROM nodes WHERE code_sha=? AND status='evaluated' AND reused_from IS NULL "
            "ORDER BY seq LIMIT 1",
            (code_sha,),
        ).fetchone()
        return _row_to_node(row) if row else None

    def ranked(self) -> list[TrialNode]:
        """Correct, timed nodes, fastest first (interpreter timings rank after real ones)."""
        nodes = [n for n in self.nodes() if n.correct and n.median_ms is not None]
        return sorted(nodes, key=lambda n: (n.interpreter, n.median_ms))

    def best(self) -> TrialNode | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def finalize(self, out_path: Path, node_id: str | None = None) -> TrialNode:
        """Copy the best (or the named) correct trial to ``out_path``; refuse an incorrect one."""
        node = self.get(node_id) if node_id else self.best()
        if node is None:
            raise InputError(
                f"no correct, timed trial in {self.dir} to finalize"
                if not node_id
                else f"no trial {node_id!r}",
                field="trial id",
            )
        if not node.correct:
            raise InputError(
                f"trial {node.id} has verdict {node.verdict!r}; only a correct trial can be finalized",
                field="trial id",
            )
        _atomic_write(Path(out_path), self.code(node.id))
        self.set_meta("finalized", json.dumps({"node": node.id, "path": str(out_path), "at": time.time()}))
        return node

    def render(self) -> str:
        """ASCII view of the tree, one line per node, children indented under their parent."""
        nodes = self.nodes()
        children: dict[str | None, list[TrialNode]] = {}
        for node in nodes:
            children.setdefault(node.parent, []).append(node)
        best = self.best()
        lines: list[str] = []

        def walk(parent: str | None, depth: int) -> None:
            for node in children.get(parent, []):
                lines.append("  " * depth + _describe(node, best))
                walk(node.id, depth + 1)

        walk(None, 0)
        return "\n".join(lines) if lines else "(empty tree)"


def _describe(node: TrialNode, best: TrialNode | None) -> str:
    mark = {"correct": "+", None: "?"}.get(node.verdict, "x")
    text = f"[{mark}] {node.id} {node.stage}"
    if node.status == "pending":
        text += " pending (not evaluated; interrupted?)"
    else:
        text += f" {node.verdict}"
    if node.median_ms is not None:
        text += f" {node.median_ms:.4g} ms" + (" (interpreter)" if node.interpreter else "")
    if node.speedup is not None:
        text += f" {node.speedup:.3f}x"
    if node.accepted:
        text += " accepted"
    if node.reused_from:
        text += f" (reused {node.reused_from})"
    if best is not None and node.id == best.id:
        text += "  <<< BEST"
    if node.verdict not in (None, "correct") and node.message:
        text += f" -- {node.message.splitlines()[0][:100]}"
    return text


def _ratio(reference_ms: float | None, ms: float | None, verdict: str) -> float | None:
    if verdict != "correct" or not reference_ms or not ms:
        return None
    return reference_ms / ms


def _row_to_node(row: sqlite3.Row) -> TrialNode:
    data = dict(row)
    data["interpreter"] = bool(data["interpreter"])
    data["accepted"] = bool(data["accepted"])
    data["extra"] = json.loads(data["extra"] or "{}")
    return TrialNode(**data)


def _atomic_write(path: Path, text: str) -> None:
    """Write via a temporary file + rename so a crash never leaves a truncated file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
