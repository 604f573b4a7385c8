"""Child processes that run in their own process group and never outlive the run that started them.

A benchmark program, a worker or ninja may itself start compilers or GPU runtimes; killing only the
direct child would leave those running (holding a GPU or CPU cores).  :func:`spawn` starts a child
in its own session (so a timeout or an interrupt can stop its whole group), asks the kernel to
signal it when this process dies, even by ``kill -9`` (``prctl(PR_SET_PDEATHSIG)`` on Linux), and
registers its group so :func:`stop_all` -- called on Ctrl-C and SIGTERM by the CLI -- kills every
group at once instead of waiting for a build round or a benchmark to end.  Wait through
:func:`communicate_or_kill`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

PR_SET_PDEATHSIG = 1
_live: set[int] = set()  # process-group ids of children started by spawn() and not yet reaped
_live_lock = threading.Lock()


def _death_signal(sig: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``sig`` when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), sig)

    return preexec


def spawn(argv: list[str], *, guard: bool = False, **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` in a new session, killed with this process and by :func:`stop_all`.

    The child gets SIGKILL when this process dies.  ``guard=True`` (for ninja) runs ``argv`` under a
    small guard process instead: the guard leads the session and, when this process dies, kills the
    whole session -- every compile ninja started, including those ``timeout`` moved into process
    groups of their own, which a signal to ninja alone would leave running."""
    if guard:
        argv = [sys.executable, "-m", "kernelpilot.proc", "--", *argv]
    kwargs.setdefault("start_new_session", True)
    preexec = _death_signal(signal.SIGTERM if guard else signal.SIGKILL)
    if preexec is not None:
        kwargs["preexec_fn"] = preexec
    proc = subprocess.Popen(argv, **kwargs)
    with _live_lock:
        _live.add(proc.pid)
    return proc


def _forget(proc: subprocess.Popen) -> None:
    with _live_lock:
        _live.discard(proc.pid)


def _session_members(sid: int) -> list[int]:
    """Processes of session ``sid`` (ninja puts each compile in its own process group, but they all
    stay in ninja's session, so the session is what holds the whole tree)."""
    members = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(entry))
    return members


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Kill the session (and process group) led by ``pid``: the child and everything it started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    for member in _session_members(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, sig)


_stopping = threading.Event()


def stopping() -> bool:
    """True once :func:`stop_all` ran: a child that died now was killed by us, not by its own fault
    (callers must not record it as a crash of the config or candidate)."""
    return _stopping.is_set()


def stop_all(sig: int = signal.SIGKILL) -> int:
    """Kill every child tree started by :func:`spawn` that is still registered; returns how many."""
    _stopping.set()
    with _live_lock:
        groups = list(_live)
    for pid in groups:
        kill_tree(pid, sig)
    return len(groups)


def communicate_or_kill(proc: subprocess.Popen, timeout_s: float | None) -> tuple[str, str, bool]:
    """(stdout, stderr, timed_out): on a timeout SIGKILL the child's whole process group, then reap it
    and return what it wrote before it was stopped.  A missing pipe reads as ""."""
    try:
        try:
            out, err = proc.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:  # Ctrl-C while waiting: the child's tree goes with us
            kill_tree(proc.pid)
            raise
    finally:
        if proc.returncode is not None:
            _forget(proc)
    return out or "", err or "", timed_out


def install_interrupt_handlers() -> Callable[[], None]:
    """SIGINT and SIGTERM: kill every child tree now, then unwind as ``KeyboardInterrupt`` (so
    ``finally`` blocks remove temp folders and close stores).  The CLI calls this at start; the
    returned function puts the previous handlers back."""

    def handler(signum: int, frame: Any) -> None:
        stop_all()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    _stopping.clear()
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore


def _guard(argv: list[str]) -> int:
    """Run ``argv`` in this session; on SIGTERM/SIGINT/SIGHUP (or the parent's death, delivered as
    SIGTERM) kill every other process of the session, then exit."""
    me = os.getpid()

    def finish(signum: int, frame: Any) -> None:
        for member in _session_members(os.getsid(0)):
            if member != me:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(member, signal.SIGKILL)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, finish)
    child = subprocess.Popen(argv)
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":  # the guard: python -m kernelpilot.proc -- ARGV...
    sys.exit(_guard(sys.argv[2:] if sys.argv[1:2] == ["--"] else sys.argv[1:]))
