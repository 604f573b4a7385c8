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

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import ToolMissingError
from kernelpilot.proc import communicate_or_kill
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


class BuildCache:
    """Content-addressed binaries: ``root/<key>/program`` (+ ``build.log``), or ``root/<key>/FAILED``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def binary(self, key: str) -> Path | None:
        path = self.root / key / "program"
        return path if path.exists() else None

    def failure(self, key: str) -> str | None:
        marker = self.root / key / "FAILED"
        return marker.read_text() if marker.exists() else None

    def log(self, key: str) -> Path | None:
        path = self.root / key / "build.log"
        return path if path.exists() else None

    def store(self, key: str, binary: Path | None, log: Path | None, failure: str | None) -> Path | None:
        final = self.root / key
        tmp = self.root / f".{key}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if log is not None and log.exists():
            shutil.copy2(log, tmp / "build.log")
        if binary is not None:
            shutil.copy2(binary, tmp / "program")
        if failure is not None:
            (tmp / "FAILED").write_text(failure)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)  # atomic: a killed build never leaves a half-written cache entry
        return self.binary(key)


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
    """Write the CMake project (sources, CMakeLists.txt, launcher) for ``items``; build nothing."""
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
) -> dict[str, BuildOutcome]:
    """Build every uncached item in one CMake + ninja project; return an outcome per cache key."""
    from kernelpilot import toolchain

    outcomes: dict[str, BuildOutcome] = {}
    todo: list[BuildItem] = []
    seen: set[str] = set()
    for item in items:
        if item.cache_key in seen:
            continue
        seen.add(item.cache_key)
        binary = cache.binary(item.cache_key)
        failure = cache.failure(item.cache_key)
        if binary is not None:
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, "cached", binary, cache.log(item.cache_key)
            )
        elif failure is not None:
            status = "timeout" if "TIMEOUT" in failure else "build_failed"
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, status, None, cache.log(item.cache_key), message=failure
            )
        else:
            todo.append(item)
    if not todo:
        return outcomes
    cmake, ninja = toolchain.cmake_path(), toolchain.ninja_path()
    if cmake is None or ninja is None:
        raise ToolMissingError("cmake and ninja are needed to build (pip install cmake ninja)")
    timeout_s = timeout_s or recipe.timeout_s
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
        proc = subprocess.Popen(
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
            start_new_session=True,  # so a deadline can stop ninja and every compiler it started
        )
        ninja_out, _, stopped = communicate_or_kill(
            proc, None if deadline is None else max(1.0, deadline - time.time())
        )
        if stopped:
            ninja_out += "\nkernelpilot: build stopped at the run's time budget\n"
    (project / "logs" / "ninja.log").write_text(ninja_out)
    wall = time.time() - t0
    for item in todo:
        log = project / "logs" / f"{item.target}.log"
        binary = build_dir / "bin" / item.target / "program"
        text = log.read_text(errors="replace") if log.exists() else ""
        if binary.exists():
            stored = cache.store(item.cache_key, binary, log, None)
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, "built", stored, cache.log(item.cache_key), wall
            )
        elif stopped:
            # not a failure of the config: the run ran out of time; nothing is cached, a rerun builds it
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, "not_built", None, None, wall, "time budget"
            )
        else:
            timed_out = "TIMEOUT" in text
            status = "timeout" if timed_out else "build_failed"
            first_error = next((ln for ln in text.splitlines() if "error" in ln.lower()), "")
            message = f"{status}: {first_error.strip()[:400]}" if first_error else f"{status}: see log"
            if not text:
                message = f"{status}: no compile log (ninja said: {ninja_out[-300:]})"
            cache.store(item.cache_key, None, log, message + ("\nTIMEOUT" if timed_out else ""))
            outcomes[item.cache_key] = BuildOutcome(
                item.cache_key, status, None, cache.log(item.cache_key), wall, message=message
            )
    return outcomes


def describe_commands(project_dir: Path, recipe: BuildRecipe, jobs: int) -> str:
    """The exact commands a dry run would have executed (printed and written to BUILD.txt)."""
    compiler_var = "CMAKE_CUDA_COMPILER" if recipe.language == "CUDA" else "CMAKE_CXX_COMPILER"
    lines = [
        f"cmake -S {shlex.quote(str(project_dir))} -B {shlex.quote(str(project_dir / 'build'))} -G Ninja "
        f"-D{compiler_var}={recipe.compiler}",
        f"ninja -C {shlex.quote(str(project_dir / 'build'))} -k 0 -j {jobs}",
    ]
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
