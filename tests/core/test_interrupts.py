"""Interrupts with real processes: nothing a run started outlives it.

A parent that is killed with ``kill -9`` takes its hung benchmark program and its ninja build
(every compile included) with it; SIGINT during a build returns within a couple of seconds, kills
the compiles and caches no failure for the configs that were interrupted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux")


def _with_marker(marker: str) -> list[int]:
    """PIDs whose command line contains ``marker`` (the processes a test planted)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = (
                    Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in cmd and state != "Z":
                pids.append(int(entry))
    return pids


def _gone(marker: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not _with_marker(marker):
            return True
        time.sleep(0.05)
    return not _with_marker(marker)


def _parent(code: str, tmp: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_for(path: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_kill_9_of_the_parent_kills_a_hung_benchmark_program(tmp_path):
    marker = f"kp-test-bench-{os.getpid()}"
    code = (
        "import sys, time\nfrom kernelpilot.proc import spawn\n"
        f"spawn([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        f"open({str(tmp_path / 'ready')!r}, 'w').close()\ntime.sleep(300)\n"
    )
    parent = _parent(code, tmp_path)
    _wait_for(tmp_path / "ready")
    assert _with_marker(marker)
    parent.kill()
    parent.wait()
    assert _gone(marker, 3), "the benchmark program outlived its killed parent"


HANG_BUILD = r"""
import sys, time
from pathlib import Path
from kernelpilot.proc import install_interrupt_handlers
from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
from tests.support.tuner_doubles import ToyConfig, ToyKernel

tmp = Path(sys.argv[1])
kernel = ToyKernel()
kernel.compiler = sys.argv[2]
recipe = kernel.build_recipe("toy", {})
problem = {"M": 10, "N": 10, "K": 1, "dtype": "bf16", "layout": "rr"}
items = [BuildItem.create(kernel.render(ToyConfig(tile=(t, 32)), problem, "toy"), recipe, "toy-1")
         for t in (16, 32, 64)]
install_interrupt_handlers()
try:
    build_batch(items, recipe, BuildCache(tmp / "cache"), tmp / "work", jobs=3)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _hanging_compiler(tmp: Path, marker: str) -> Path:
    """Compiles of the toy sources hang (CMake's own compiler probes pass through to c++)."""
    wrapper = tmp / "hangcxx"
    wrapper.write_text(
        '#!/bin/sh\ncase "$*" in *toy.cpp*) touch ' + str(tmp / "compiling")
        + f"; exec {sys.executable} -c 'import time; time.sleep(300)' {marker};; esac\nexec c++ \"$@\"\n"
    )  # fmt: skip
    wrapper.chmod(0o755)
    return wrapper


needs_build_tools = pytest.mark.skipif(
    not (shutil.which("c++") and shutil.which("cmake") and shutil.which("ninja")),
    reason="needs c++, cmake and ninja",
)


@needs_build_tools
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "kill -9"])
def test_an_interrupted_build_leaves_no_compile_running_and_caches_no_failure(how, tmp_path):
    marker = f"kp-test-cc-{os.getpid()}-{how.replace(' ', '')}"
    wrapper = _hanging_compiler(tmp_path, marker)
    parent = subprocess.Popen(
        [sys.executable, "-c", HANG_BUILD, str(tmp_path), str(wrapper)], cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_for(tmp_path / "compiling", 120)
    deadline = time.monotonic() + 10
    while len(_with_marker(marker)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _with_marker(marker), "the hanging compiles never started"
    t0 = time.monotonic()
    parent.send_signal({"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "kill -9": signal.SIGKILL}[how])
    parent.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    if how != "kill -9":
        assert parent.returncode == 130 and elapsed < 2.5, (parent.returncode, elapsed)
    assert _gone(marker, 3), f"compiles outlived the build after {how}"
    cache = tmp_path / "cache"
    assert not [p for p in cache.iterdir() if not p.name.startswith(".")], "an interrupted config was cached"


@pytest.mark.parametrize("how", ["SIGINT", "kill -9"])
def test_interrupting_optimize_leaves_no_worker_and_no_job_folder(how, tmp_path, monkeypatch):
    pytest.importorskip("triton")
    work = tmp_path / "run"
    work.mkdir()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(REPO / "examples" / "softmax" / name, work / name)
    parent = subprocess.Popen(
        [sys.executable, "-m", "kernelpilot", "optimize", "-i", "softmax.py", "-s", "softmax.yaml", "--variant", "ci",
         "--device", "cpu", "--engine", "rules", "-o", "out.py", "-q"],
        cwd=work, env={**os.environ, "TMPDIR": str(tmpdir)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    marker = str(tmpdir)  # the worker's job file lives under it: its command line names it
    deadline = time.monotonic() + 180
    while not [p for p in _with_marker(marker) if p != parent.pid]:
        assert parent.poll() is None and time.monotonic() < deadline, "no worker started"
        time.sleep(0.1)
    t0 = time.monotonic()
    parent.send_signal(signal.SIGINT if how == "SIGINT" else signal.SIGKILL)
    parent.communicate(timeout=60)
    if how == "SIGINT":
        assert parent.returncode == 130 and time.monotonic() - t0 < 2.5, (
            parent.returncode,
            time.monotonic() - t0,
        )
        assert not list(tmpdir.glob("kp_job_*")), "the job folder was left behind"
    assert _gone(marker, 3), "the worker outlived optimize"
    if how == "kill -9":  # the next run sweeps the folder of the killed one
        import tempfile

        from kernelpilot.execution.job_executor import _sweep_stale_workdirs

        assert list(tmpdir.glob("kp_job_*")), "kill -9 leaves the folder; the sweep has work to do"
        monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
        _sweep_stale_workdirs()
        assert not list(tmpdir.glob("kp_job_*"))
