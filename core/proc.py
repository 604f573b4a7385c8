"""Child processes that run in their own process group, so a timeout stops them and all they started.

A benchmark program, a worker or ninja may itself start compilers or GPU runtimes; killing only the
direct child would leave those running (holding a GPU or CPU cores).  Callers start the child with
``start_new_session=True`` and wait through :func:`communicate_or_kill`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def communicate_or_kill(proc: subprocess.Popen, timeout_s: float | None) -> tuple[str, str, bool]:
    """(stdout, stderr, timed_out): on a timeout SIGKILL the child's whole process group, then reap it
    and return what it wrote before it was stopped.  A missing pipe reads as ""."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    return out or "", err or "", timed_out
