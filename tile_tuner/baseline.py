"""The vendor baseline: what a user would call instead of the tuned kernel, measured like the programs.

Why: a tuning run that only compares configs with each other cannot say whether the winner beats the
library the user already has.  The baseline is target-specific, so the tuner never knows cuBLAS or
oneDNN: a tile kernel may implement the optional method

    ``vendor_baseline(problem, target, bench_args) -> VendorPlan``

returning either a command to run (a worker process that prints the same one-line JSON result as the
benchmark programs: ``status``, ``time_ms``, plus ``backend``, ``versions`` and ``candidates``) or a
plain reason why no baseline can run here.  A kernel without the method gets a plan whose reason says
so.  The worker is a separate process for the same reason the programs are: each confirmation round
is a fresh process, so a warm allocator or a lucky clock state in one run cannot leak into the next.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.tile_tuner.kernel_api import parse_result_line
from kernelpilot.tile_tuner.runner import run_program

MeasureResult = tuple[str, str, "dict[str, Any] | None", float]


@dataclass(frozen=True)
class VendorPlan:
    """How to measure the vendor path for one problem, or why it cannot be measured."""

    name: str  # what the user would call, e.g. "cuBLAS via torch.matmul"
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    reason: str = ""  # non-empty: no baseline can run (argv is then empty)
    # optional server form: ``serve_argv`` starts a worker that answers one result line per request
    # line on stdin; ``request`` is this plan's line.  Plans with the same serve_argv share the worker,
    # so torch starts once per run instead of once per round (see VendorPool)
    serve_argv: tuple[str, ...] = ()
    request: str = ""

    @property
    def runnable(self) -> bool:
        return bool(self.argv) and not self.reason


def plan_for(kernel: Any, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> VendorPlan:
    """The kernel's vendor plan; a kernel that supplies none, or whose planner fails, gets a reason."""
    none = VendorPlan(
        name="none",
        reason=f"the {getattr(kernel, 'backend', '?')} backend supplies no vendor baseline for "
        f"{getattr(kernel, 'kind', '?')} on {target}",
    )
    try:
        plan = kernel.vendor_baseline(problem, target, dict(bench_args))
    except Exception as exc:  # noqa: BLE001 - a broken planner must not kill the run; say why
        return VendorPlan(name="none", reason=f"vendor baseline planner failed: {type(exc).__name__}: {exc}")
    return plan if isinstance(plan, VendorPlan) else none  # a no-op default (None) means: none here


class VendorServer:
    """One long-lived baseline worker (``plan.serve_argv``): each :meth:`ask` sends one request line
    and waits for one result line, so the interpreter and the libraries start once per run, not once
    per round.  Inputs are allocated and timed anew for every request.  A request that outlives
    ``timeout_s`` kills the worker (the next request starts a new one)."""

    def __init__(self, argv: tuple[str, ...], env: dict[str, str], timeout_s: float) -> None:
        self.argv = argv
        self.env = env
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []

    def ask(self, request: str) -> MeasureResult:
        t0 = time.time()
        try:
            if self._proc is None:
                self._start()
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(request.strip() + "\n")
            self._proc.stdin.flush()
        except OSError as exc:
            self._kill()
            return "crashed", f"baseline worker: {exc}: {self._stderr_tail()}", None, time.time() - t0
        try:
            line = self._lines.get(timeout=self.timeout_s)
        except queue.Empty:
            self._kill()
            return "timeout", f"killed after {self.timeout_s:.0f} s", None, time.time() - t0
        seconds = time.time() - t0
        if line is None:
            tail = self._stderr_tail()
            self._kill()
            return "crashed", f"baseline worker exited: {tail}", None, seconds
        try:
            raw = parse_result_line(line).model_dump()
        except Exception as exc:  # noqa: BLE001 - a malformed line is a crash of the worker
            return "crashed", f"unparsable baseline line: {exc}", None, seconds
        return raw["status"], raw.get("message", ""), raw, seconds

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _start(self) -> None:
        self._proc = subprocess.Popen(
            list(self.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, **self.env}, start_new_session=True,
        )  # fmt: skip
        self._err = []
        self._lines = queue.Queue()  # per process: a killed one's end-of-output must not reach the next
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        threading.Thread(target=self._pump, args=(self._proc.stderr, None), daemon=True).start()

    def _pump(self, stream: Any, lines: queue.Queue[str | None] | None) -> None:
        for line in stream:
            if lines is None:
                self._err.append(line)
                del self._err[:-40]
            elif line.strip().startswith("{"):
                lines.put(line)
        if lines is not None:
            lines.put(None)

    def _stderr_tail(self) -> str:
        return "".join(self._err)[-400:].strip()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)

    def close(self) -> None:
        """Ask the worker to quit; kill its process group if it does not within 10 s."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.write("quit\n")
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


class VendorPool:
    """Measures plans: through one shared :class:`VendorServer` per ``serve_argv`` (every workload of a
    run asks the same worker), else with a fresh process per call.  ``close()`` ends the servers."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.servers: dict[tuple[Any, ...], VendorServer] = {}

    def measure(self, plan: VendorPlan) -> MeasureResult:
        if not plan.runnable or not plan.serve_argv:
            return run_plan(plan, self.timeout_s)
        key = (plan.serve_argv, tuple(sorted(plan.env.items())))
        if key not in self.servers:
            self.servers[key] = VendorServer(plan.serve_argv, plan.env, self.timeout_s)
        return self.servers[key].ask(plan.request)

    def close(self) -> None:
        for server in self.servers.values():
            server.close()
        self.servers.clear()


def run_plan(plan: VendorPlan, timeout_s: float) -> MeasureResult:
    """One fresh run of the baseline worker: ``(status, reason, raw JSON, seconds)`` like a program."""
    if not plan.runnable:
        return "cannot_run", plan.reason or "no command", None, 0.0
    run = run_program(list(plan.argv), plan.env, timeout_s)
    return run.status, run.message, run.raw or None, run.seconds
