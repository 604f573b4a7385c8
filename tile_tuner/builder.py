"""Build benchmark programs: one CMake + ninja project per batch, parallel, cached by content.

Why this shape: a CUTLASS sm90 build costs ~100 s and ~3.4 GB on one core, an icpx sycl-tla build
30-100 s, so the builder (1) never builds the same thing twice -- the cache key hashes the rendered
sources, flags, include-tree version, compiler version and template version, and the binary lives in
``cache/<key>/`` -- (2) builds every uncached program of a batch in ONE ninja invocation with
``--jobs`` sized from cores and memory, (3) keeps going when a config fails (``ninja -k 0``) and keeps
each config's compiler output in its own log, (4) kills a single compile after a per-config timeout
(the compile launcher wraps every command in ``timeout``).

Entry points (also used by the SYCL backend and the Dask runner):
``BuildItem.create(...)``, ``BuildCache``, ``render_project(...)`` (dry runs), ``build_batch(...)``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import ToolMissingError
from kernelpilot.proc import communicate_or_kill, spawn, stopping
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram

LAUNCHER = """#!/bin/sh
# kernelpilot compile launcher: per-config log, per-config timeout, timing line.
log="$1"; shift; limit="$1"; shift
start=$(date +%s.%N)
echo "+ $*" >>"$log"
timeout -k 10 "$limit" "$@" >>"$log" 2>&1
rc=$?
end=$(date +%s.%N)
echo "kernelpilot: step exited $rc after $(echo "$end - $start" | bc 2>/dev/null || echo '?') s" >>"$log"
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "kernelpilot: TIMEOUT after ${limit} s" >>"$log"; fi
exit $rc
"""


def recipe_fingerprint(recipe: BuildRecipe) -> str:
    """The parts of a recipe that change the binary (not the paths where headers happen to live)."""
    parts = [
        recipe.language,
        Path(recipe.compiler).name,
        " ".join(recipe.flags),
        " ".join(recipe.link_flags),
        " ".join(f"{k}={v}" for k, v in recipe.env),
        recipe.toolchain_version,
        recipe.library_version,
    ]
    return "\n".join(parts)


@dataclass(frozen=True)
class BuildItem:
    """One program to build: its cache key, CMake target name and sources."""

    cache_key: str
    program: RenderedProgram
    label: str = ""

    @property
    def target(self) -> str:
        return f"kp_{self.cache_key[:16]}"

    @classmethod
    def create(
        cls, program: RenderedProgram, recipe: BuildRecipe, template_version: str, label: str = ""
    ) -> BuildItem:
        h = hashlib.sha256()
        h.update(template_version.encode())
        h.update(recipe_fingerprint(recipe).encode())
        for name in sorted(program.sources):
            h.update(name.encode())
            h.update(program.sources[name].encode())
        for k in sorted(program.compile_definitions):
            h.update(f"{k}={program.compile_definitions[k]}".encode())
        return cls(cache_key=h.hexdigest()[:40], program=program, label=label)


@dataclass
class BuildOutcome:
    """Result of building one item."""

    cache_key: str
    status: str  # built | cached | build_failed | timeout
    binary: Path | None
    log: Path | None
    seconds: float = 0.0
    message: str = ""


FAILED_TTL_S = 7 * 24 * 3600.0  # a cached build failure is retried after a week (toolchains change)
MANIFEST = "MANIFEST.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class BuildCache:
    """Content-addressed, write-once entries: ``root/<key>/program`` (+ ``build.log``), or
    ``root/<key>/FAILED``, each with a ``MANIFEST.json`` (checksum and size of the program; status,
    compile timeout and time of a failure).

    Why write-once: several processes may share the cache.  An entry is assembled in a private temp
    folder and published with one ``os.rename``; if another process published the same key first,
    the rename fails and this copy is discarded, so a published entry is never replaced or deleted
    under a reader.  Entries that cannot be used (a truncated or zeroed program, a stale failure)
    are unpublished by renaming them aside under the key's lock (:meth:`evict`), then rebuilt.
    """

    def __init__(self, root: str | Path) -> None:
        from kernelpilot.locks import KeyLocks

        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.locks = KeyLocks(self.root / ".locks")

    def binary(self, key: str) -> Path | None:
        path = self.root / key / "program"
        return path if path.exists() else None

    def failure(self, key: str) -> str | None:
        marker = self.root / key / "FAILED"
        return marker.read_text() if marker.exists() else None

    def log(self, key: str) -> Path | None:
        path = self.root / key / "build.log"
        return path if path.exists() else None

    def manifest(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.root / key / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def entries(self) -> list[str]:
        """Published entries (not temp folders, evicted leftovers or locks)."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def verify(self, key: str) -> str | None:
        """Why the published entry ``key`` cannot be used, or ``None`` (also ``None`` if absent)."""
        entry = self.root / key
        if not entry.is_dir():
            return None
        info = self.manifest(key)
        program = entry / "program"
        if info is None:
            # an entry published before manifests existed: usable if it has a non-empty program
            # (no checksum to check it against), else rebuilt
            if program.is_file() and program.stat().st_size > 0 or (entry / "FAILED").is_file():
                return None
            return "no readable MANIFEST.json and no program"
        if info.get("status") == "built":
            if not program.is_file():
                return "program missing"
            size = program.stat().st_size
            if size != info.get("size"):
                return f"program is {size} bytes, the manifest says {info.get('size')} (truncated?)"
            if _sha256(program) != info.get("sha256"):
                return "program checksum differs from the manifest (corrupted)"
            if not os.access(program, os.X_OK):
                return "program is not executable"
            return None
        if not (entry / "FAILED").is_file():
            return "failure entry without its FAILED marker"
        return None

    def store(
        self,
        key: str,
        binary: Path | None,
        log: Path | None,
        failure: str | None,
        timeout_s: float | None = None,
    ) -> Path | None:
        """Publish an entry once; if another process published ``key`` first, keep theirs."""
        tmp = self.root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        tmp.mkdir(parents=True)
        try:
            if log is not None and log.exists():
                shutil.copy2(log, tmp / "build.log")
            info: dict[str, Any] = {"key": key, "created": time.time(), "timeout_s": timeout_s}
            if binary is not None:
                shutil.copy2(binary, tmp / "program")
                info.update(
                    status="built", size=(tmp / "program").stat().st_size, sha256=_sha256(tmp / "program")
                )
            if failure is not None:
                (tmp / "FAILED").write_text(failure)
                info.update(status="timeout" if "TIMEOUT" in failure else "build_failed")
            (tmp / MANIFEST).write_text(json.dumps(info, indent=1))
            try:
                os.rename(tmp, self.root / key)  # atomic publication; fails if the key exists
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # the loser's copy (or a half-written one)
        return self.binary(key)

    def evict(self, key: str) -> bool:
        """Unpublish ``key`` (rename aside, then delete).  Callers hold the key's lock."""
        aside = self.root / f".evicted.{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        try:
            os.rename(self.root / key, aside)
        except FileNotFoundError:
            return False
        shutil.rmtree(aside, ignore_errors=True)
        return True

    def usable(self, key: str, *, timeout_s: float | None, retry_failures: bool) -> str | None:
        """``None`` if the published entry may be used as is; else why it must be rebuilt."""
        problem = self.verify(key)
        if problem is not None:
            return problem
        info = self.manifest(key) or {}
        if info.get("status") in ("build_failed", "timeout"):
            if retry_failures:
                return "cached build failure retried (--remeasure)"
            if time.time() - float(info.get("created") or 0) > FAILED_TTL_S:
                return "cached build failure is older than a week"
            recorded = info.get("timeout_s")
            if info.get("status") == "timeout" and timeout_s and (recorded is None or timeout_s > recorded):
                return f"timed out at {recorded} s; this run allows {timeout_s} s"
        return None


def default_jobs(memory_gb_per_job: float) -> int:
    """Parallel compile jobs from cores and physical memory (one job per ``memory_gb_per_job``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError):
        mem_gb = 8.0
    return max(1, min(cores, int(mem_gb * 0.9 // max(memory_gb_per_job, 0.5))))


def _cmake_list(items: list[str]) -> str:
    return " ".join('"' + i.replace("\\", "/").replace('"', '\\"') + '"' for i in items)


def _option_groups(flags: tuple[str, ...]) -> list[str]:
    """Pair ``-gencode X`` style options into ``SHELL:`` groups so CMake does not de-duplicate them."""
    out: list[str] = []
    i = 0
    while i < len(flags):
        f = flags[i]
        if f in ("-gencode", "-Xcompiler", "-Xptxas", "-Xlinker", "-include") and i + 1 < len(flags):
            out.append(f"SHELL:{f} {flags[i + 1]}")
            i += 2
        else:
            out.append(f)
            i += 1
    return out


def render_project(items: list[BuildItem], recipe: BuildRecipe, project_dir: Path, timeout_s: float) -> Path:
    """Write the CMake project (sources, CMakeLists.txt, launcher) for ``items``; build nothing.

    Paths written into the project are absolute: ninja runs the launcher from the build folder, where a
    path relative to the caller's working directory (``--out runs/x``, ``--work w``) does not exist."""
    project_dir = Path(project_dir).resolve()
    project_dir.mkdir(parents=True, exist_ok=True)
    (project_dir / "logs").mkdir(exist_ok=True)
    launcher = project_dir / "kp_launch.sh"
    launcher.write_text(LAUNCHER)
    launcher.chmod(0o755)
    lang = recipe.language
    lines = [
        "# Generated by kernelpilot: one executable per tile config.",
        "cmake_minimum_required(VERSION 3.20)",
        f"project(kernelpilot_batch LANGUAGES {lang})",
    ]
    if lang == "CUDA":
        lines += ["set(CMAKE_CUDA_ARCHITECTURES OFF)", "set(CMAKE_CUDA_RUNTIME_LIBRARY Static)"]
    lines.append(f"set(KP_FLAGS {_cmake_list(_option_groups(recipe.flags))})")
    lines.append(f"set(KP_INCLUDES {_cmake_list([str(p) for p in recipe.include_dirs])})")
    lines.append(f"set(KP_LINK_FLAGS {_cmake_list(list(recipe.link_flags))})")
    ext_lang = {"CUDA": (".cu",), "CXX": (".cpp", ".cc", ".cxx")}[lang]
    for item in items:
        sub = project_dir / item.target
        sub.mkdir(exist_ok=True)
        srcs = []
        for name, text in item.program.sources.items():
            (sub / name).write_text(text)
            if name.endswith(ext_lang):
                srcs.append(f"{item.target}/{name}")
        log = (project_dir / "logs" / f"{item.target}.log").as_posix()
        launch = f"{launcher.as_posix()} {log} {int(timeout_s)}"
        lines += [
            "",
            f"# {item.label} (cache key {item.cache_key})",
            f"add_executable({item.target} {' '.join(srcs)})",
            f"target_compile_options({item.target} PRIVATE ${{KP_FLAGS}})",
            f"target_include_directories({item.target} PRIVATE ${{KP_INCLUDES}} {item.target})",
            f"target_link_options({item.target} PRIVATE ${{KP_LINK_FLAGS}})",
            f'set_target_properties({item.target} PROPERTIES RULE_LAUNCH_COMPILE "{launch}"'
            f' RULE_LAUNCH_LINK "{launch}" OUTPUT_NAME program RUNTIME_OUTPUT_DIRECTORY'
            f" ${{CMAKE_BINARY_DIR}}/bin/{item.target})",
        ]
        if item.program.compile_definitions:
            defs = " ".join(f"{k}={v}" for k, v in item.program.compile_definitions.items())
            lines.append(f"target_compile_definitions({item.target} PRIVATE {defs})")
    (project_dir / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    return project_dir


@contextmanager
def _optional_lock(path: str | None):
    """Serialize builds across processes on a shared machine (``KERNELPILOT_BUILD_LOCK``)."""
    if not path:
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_batch(
    items: list[BuildItem],
    recipe: BuildRecipe,
    cache: BuildCache,
    work_dir: Path,
    *,
    jobs: int | None = None,
    timeout_s: float | None = None,
    deadline: float | None = None,
    retry_failures: bool = False,
) -> dict[str, BuildOutcome]:
    """Build every uncached item in one CMake + ninja project; return an outcome per cache key.

    Several processes may share ``cache``: each config is built by the one that takes its lock
    first; the others wait for that lock and then use the published entry (building it themselves
    only if the holder died without publishing).  ``retry_failures`` (``--remeasure``) rebuilds
    configs whose failure is cached."""
    timeout_s = timeout_s or recipe.timeout_s
    outcomes: dict[str, BuildOutcome] = {}
    unique = list({item.cache_key: item for item in items}.values())

    def use_published(item: BuildItem) -> bool:
        key = item.cache_key
        if not (cache.root / key).is_dir() or cache.usable(
            key, timeout_s=timeout_s, retry_failures=retry_failures
        ):
            return False
        binary = cache.binary(key)
        if binary is not None:
            outcomes[key] = BuildOutcome(key, "cached", binary, cache.log(key))
        else:
            failure = cache.failure(key) or "build_failed"
            status = "timeout" if "TIMEOUT" in failure else "build_failed"
            outcomes[key] = BuildOutcome(key, status, None, cache.log(key), message=failure)
        return True

    def claim(item: BuildItem, lock: Any) -> bool:
        """Under the key's lock: use what was published meanwhile, or clear the way to build it."""
        if use_published(item):
            lock.release()
            return False
        cache.evict(item.cache_key)  # an unusable entry (corrupt program, stale failure), if any
        return True

    mine: list[tuple[BuildItem, Any]] = []
    theirs: list[BuildItem] = []
    for item in unique:
        if use_published(item):
            continue
        lock = cache.locks.try_acquire(item.cache_key)
        if lock is None:
            theirs.append(item)  # another process is building it: wait below instead of redoing it
        elif claim(item, lock):
            mine.append((item, lock))
    for batch in (mine, None):
        if batch is None:  # second pass: wait for the configs other processes were building
            batch = []
            for item in theirs:
                wait = None if deadline is None else max(0.0, deadline - time.time())
                lock = cache.locks.acquire(item.cache_key, timeout_s=wait)
                if lock is None:
                    outcomes[item.cache_key] = BuildOutcome(
                        item.cache_key, "not_built", None, None, 0.0, "time budget"
                    )
                elif claim(item, lock):
                    batch.append((item, lock))  # its builder died before publishing: build it here
        try:
            if batch:
                outcomes.update(
                    _build_now([i for i, _ in batch], recipe, cache, work_dir, jobs, timeout_s, deadline)
                )
        finally:
            for _, held in batch:
                held.release()
    return outcomes


def _build_now(
    todo: list[BuildItem],
    recipe: BuildRecipe,
    cache: BuildCache,
    work_dir: Path,
    jobs: int | None,
    timeout_s: float,
    deadline: float | None,
) -> dict[str, BuildOutcome]:
    """One CMake + ninja project for ``todo`` (whose key locks the caller holds); publish each."""
    from kernelpilot import toolchain

    outcomes: dict[str, BuildOutcome] = {}
    cmake, ninja = toolchain.cmake_path(), toolchain.ninja_path()
    if cmake is None or ninja is None:
        raise ToolMissingError("cmake and ninja are needed to build (pip install cmake ninja)")
    jobs = jobs or default_jobs(recipe.memory_gb_per_job)
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{todo[0].cache_key[:8]}"
    project = render_project(todo, recipe, work_dir / f"project-{stamp}", timeout_s)
    build_dir = project / "build"
    env = dict(os.environ)
    env.update(dict(recipe.env))
    compiler_var = "CMAKE_CUDA_COMPILER" if recipe.language == "CUDA" else "CMAKE_CXX_COMPILER"
    configure = [
        cmake, "-S", str(project), "-B", str(build_dir), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
        f"-D{compiler_var}={shutil.which(recipe.compiler) or recipe.compiler}", "-DCMAKE_BUILD_TYPE=",
    ]  # fmt: skip
    t0 = time.time()
    with _optional_lock(os.environ.get("KERNELPILOT_BUILD_LOCK")):
        cfg = subprocess.run(configure, capture_output=True, text=True, env=env)
        (project / "logs" / "cmake-configure.log").write_text(cfg.stdout + cfg.stderr)
        if cfg.returncode != 0:
            msg = (
                f"cmake configure failed (log {project / 'logs' / 'cmake-configure.log'}): "
                + (cfg.stderr.strip().splitlines() or ["?"])[-1]
            )
            raise ToolMissingError(msg)
        # ninja -k 0: one failing config never stops the others
        proc = spawn(
            # niced: compiles must not steal the CPU from a benchmark running on the GPU meanwhile
            [
                *(["nice", "-n", "10"] if shutil.which("nice") else []),
                ninja,
                "-C",
                str(build_dir),
                "-k",
                "0",
                "-j",
                str(jobs),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            guard=True,  # if this process dies, the guard kills ninja and every compile it started
        )
        ninja_out, _, stopped = communicate_or_kill(
            proc, None if deadline is None else max(1.0, deadline - time.time())
        )
        if stopped:
            ninja_out += "\nkernelpilot: build stopped at the run's time budget\n"
        elif stopping() or (proc.returncode is not None and proc.returncode < 0):
            # killed by a signal (Ctrl-C, SIGTERM): the configs did not fail, nothing is cached
            stopped = True
            ninja_out += f"\nkernelpilot: build interrupted (signal {-proc.returncode})\n"
    (project / "logs" / "ninja.log").write_text(ninja_out)
    wall = time.time() - t0
    for item in todo:
        log = project / "logs" / f"{item.target}.log"
        binary = build_dir / "bin" / item.target / "program"
        text = log.read_text(errors="replace") if log.exists() else ""
        if binary.exists():
            stored = cache.store(item.cache_key, binary, log, None, timeout_s)
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, "built", stored, cache.log(item.cache_key), wall
            )
        elif stopped:
            # not a failure of the config: the run ran out of time; nothing is cached, a rerun builds it
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, "not_built", None, None, wall, "time budget or interrupted"
            )
        else:
            timed_out = "TIMEOUT" in text
            status = "timeout" if timed_out else "build_failed"
            first_error = next((ln for ln in text.splitlines() if "error" in ln.lower()), "")
            message = f"{status}: {first_error.strip()[:400]}" if first_error else f"{status}: see log"
            if not text:
                # the compile command never ran (the launcher or the toolchain failed before it): not a
                # property of the config, so nothing is cached and the next run builds it again
                message = f"{status}: no compile log (ninja said: {ninja_out[-300:]})"
                outcomes[item.cache_key] = BuildOutcome(
                    item.cache_key, status, None, None, wall, message=message
                )
                continue
            cache.store(item.cache_key, None, log, message + ("\nTIMEOUT" if timed_out else ""), timeout_s)
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, status, None, cache.log(item.cache_key), wall, message=message
            )
    return outcomes


def expand_shell_groups(flags: tuple[str, ...] | list[str]) -> list[str]:
    """The argv CMake makes of a flag list: a ``SHELL:`` group is split as a POSIX shell would split it,
    any other item stays one argument."""
    out: list[str] = []
    for flag in flags:
        out += shlex.split(flag[len("SHELL:") :]) if flag.startswith("SHELL:") else [flag]
    return out


def describe_commands(project_dir: Path, recipe: BuildRecipe, jobs: int) -> str:
    """The exact commands a dry run would have executed (printed and written to BUILD.txt): the build
    environment, if the recipe has one, on the ninja line, and the link options every program gets, so
    that a hand build is the tuner's build."""
    compiler_var = "CMAKE_CUDA_COMPILER" if recipe.language == "CUDA" else "CMAKE_CXX_COMPILER"
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in recipe.env)
    lines = [
        f"cmake -S {shlex.quote(str(project_dir))} -B {shlex.quote(str(project_dir / 'build'))} -G Ninja "
        f"-D{compiler_var}={recipe.compiler}",
        f"{env}ninja -C {shlex.quote(str(project_dir / 'build'))} -k 0 -j {jobs}",
    ]
    if recipe.link_flags:
        lines.append(
            "# link options of every program (KP_LINK_FLAGS in CMakeLists.txt): "
            + shlex.join(expand_shell_groups(recipe.link_flags))
        )
    return "\n".join(lines) + "\n"


def summarize(outcomes: dict[str, BuildOutcome]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for o in outcomes.values():
        counts[o.status] = counts.get(o.status, 0) + 1
    return counts


@dataclass
class BuildStats:
    """Accumulated build accounting for reports."""

    built: int = 0
    cached: int = 0
    failed: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
