"""communicate_or_kill: a timeout stops the child's whole process group, not just the child."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kernelpilot.proc import communicate_or_kill


def _popen(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def test_finished_child_returns_its_output() -> None:
    out, err, timed_out = communicate_or_kill(
        _popen("import sys; print('hi'); print('e', file=sys.stderr)"), 30
    )
    assert (out, err.strip(), timed_out) == ("hi\n", "e", False)


def test_timeout_kills_the_grandchild_too() -> None:
    # the child starts a grandchild that would outlive it, prints its pid, then hangs
    code = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(g.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    out, _, timed_out = communicate_or_kill(_popen(code), 2)
    assert timed_out and time.monotonic() - start < 30
    grandchild = int(out.split()[0])
    for _ in range(50):  # gone, or a zombie waiting for init to reap it: either way it stopped
        if not _running(grandchild):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"grandchild {grandchild} still alive after the group was killed")
