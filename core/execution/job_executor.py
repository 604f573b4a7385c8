"""The subprocess job executor every DSL plugin builds on: check and time sources in a worker process.

The parent never imports candidate code (nor torch): it writes the candidate to a file, hands the
worker a JSON job (variant, seed, tolerances, oracle path) and waits with a timeout.  A hang is
killed with its whole process group; a crash (segfault, ``os._exit``) leaves no result file and is
reported as ``runtime_error`` with the tail of stderr.

One oracle per run: ``<kernel>_pytorch.py`` beside the original kernel if it exists, else the
original kernel itself (a subclass may insist on the reference).  On ``cpu`` the worker runs with
``TRITON_INTERPRET=1`` (harmless for workers that do not use Triton): correctness only, timings are
marked ``interpreter``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.pipeline.contracts import Evaluation, ExecutorBase, Timing, Verdict
from kernelpilot.proc import communicate_or_kill, kill_tree, spawn
from kernelpilot.secrets import scrubbed_environ
from kernelpilot.spec import KernelSpec, ResolvedVariant, load_spec

DEVICES = ("cuda", "xpu", "cpu")
DEFAULT_TIMEOUT_S = {"cuda": 300.0, "xpu": 300.0, "cpu": 600.0}
# torch dtype name -> the catalogue's short names (hw_models/catalogue.yaml peak_tflops keys)
CATALOGUE_DTYPE = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "s8",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
}


def _sweep_stale_workdirs() -> None:
    """Remove ``kp_job_<pid>_*`` work folders of processes that no longer exist (a run killed with
    ``kill -9`` cannot clean up after itself; the next one does)."""
    import shutil

    for folder in Path(tempfile.gettempdir()).glob("kp_job_*_*"):
        pid = folder.name.split("_")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            pass


def reference_path(kernel_path: Path) -> Path | None:
    """``foo.py`` -> ``foo_pytorch.py`` beside it (the convention users follow), if it exists."""
    candidate = kernel_path.with_name(f"{kernel_path.stem}_pytorch.py")
    return candidate if candidate.is_file() else None


def classify_bound(
    arithmetic_intensity: float | None, device_name: str | None, dtype: str | None
) -> dict[str, Any]:
    """Compute- or memory-bound from the device catalogue's ridge point (peak FLOP/s / bandwidth)."""
    if arithmetic_intensity is None or not device_name:
        return {}
    try:
        from kernelpilot.hw_models.catalogue import match_device_name
    except ImportError:  # catalogue not installed: say so instead of guessing
        return {"bound": "unknown", "bound_reason": "device catalogue not available"}
    device = match_device_name(device_name)
    if device is None:
        return {"bound": "unknown", "bound_reason": f"{device_name!r} is not in the device catalogue"}
    try:
        peak = device.peak(CATALOGUE_DTYPE.get(dtype or "float32", "f32"))
    except KeyError:
        return {"bound": "unknown", "bound_reason": f"no peak for {dtype} on {device.key}"}
    ridge = peak * 1e12 / (device.bandwidth_gbs() * 1e9)
    return {
        "catalogue_device": device.key,
        "peak_tflops": peak,
        "mem_bandwidth_gbs": device.bandwidth_gbs(),
        "ridge_flop_per_byte": ridge,
        "bound": "compute" if arithmetic_intensity >= ridge else "memory",
    }


class JobExecutor(ExecutorBase):
    """:class:`~kernelpilot.pipeline.contracts.Executor` that runs each job in a worker process.

    A DSL plugin subclasses it and names its worker module (a ``python -m`` target built on
    :mod:`kernelpilot.worker_kit`), the candidate file suffix, its static checks (``validate``), which
    and, if its worker needs them, extra job fields and a longer timeout.
    """

    worker_module: str = ""  # the ``python -m`` worker; a subclass must set it
    # True for workers built on worker_kit.model_worker: the parent then judges correctness itself
    # from saved outputs on the check inputs and on final inputs the candidate has never seen
    verifies_outputs = False
    suffix = ".py"  # of the candidate files handed to the worker

    def __init__(
        self,
        dsl: str,
        device: str = "cuda",
        settings: Any = None,
        *,
        timeout_s: float | None = None,
        warmup_ms: int = 25,
        rep_ms: int = 100,
        python: str | None = None,
    ) -> None:
        if device not in DEVICES:
            raise InputError(f"unknown device {device!r}; allowed: {', '.join(DEVICES)}", field="device")
        self.dsl = dsl
        self.device = device
        self.settings = settings
        self.timeout_s = float(timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S[device])
        self.warmup_ms = warmup_ms
        self.rep_ms = rep_ms
        self.python = python or sys.executable
        self.kernel_path: Path | None = None
        self.spec: KernelSpec | None = None
        self.variant: ResolvedVariant | None = None
        self.oracle_path: Path | None = None
        self.oracle_kind = ""
        _sweep_stale_workdirs()
        self._workdir = Path(tempfile.mkdtemp(prefix=f"kp_job_{os.getpid()}_"))
        self._counter = 0
        self._counter_lock = threading.Lock()  # prebuild runs workers from several threads

    # -- tolerances: the pipeline hands us settings with CLI > spec > env > defaults applied --------
    @property
    def rtol(self) -> float:
        if self.settings is not None and getattr(self.settings, "correctness_rtol", None) is not None:
            return float(self.settings.correctness_rtol)
        return self.variant.rtol if self.variant and self.variant.rtol is not None else 1e-2

    @property
    def atol(self) -> float:
        if self.settings is not None and getattr(self.settings, "correctness_atol", None) is not None:
            return float(self.settings.correctness_atol)
        return self.variant.atol if self.variant and self.variant.atol is not None else 1e-5

    def prepare(self, kernel_path: Path, spec: Any, variant: str | None) -> None:
        """Load the spec variant and choose the oracle (the PyTorch reference if present)."""
        self.kernel_path = Path(kernel_path).resolve()
        if not self.kernel_path.is_file():
            raise InputError("kernel file not found", file=str(kernel_path))
        self.spec = spec if isinstance(spec, KernelSpec) else load_spec(spec)
        self.variant = self.spec.resolve(variant)
        if self.settings is None:
            # Used on its own (benchmarks, skills): apply the same priority the pipeline does, spec >
            # environment/.env > defaults (there is no CLI here).
            from kernelpilot.settings import load_settings

            self.settings = load_settings(
                spec=self.spec.tolerance_settings(self.variant.name + f"#{self.variant.index}")
            )
        if not self.variant.inputs and "def get_example_inputs" not in self.kernel_path.read_text(
            encoding="utf-8"
        ):
            raise InputError(
                f"variant {self.variant.name!r} lists no inputs and {self.kernel_path.name} defines no "
                "get_example_inputs() (a module function or a Model method); add 'inputs:' to the spec "
                "or the function to the kernel file",
                file=self.spec.path,
                field="inputs",
            )
        ref = reference_path(self.kernel_path)
        if ref is not None:
            self.oracle_path, self.oracle_kind = ref, f"pytorch reference {ref.name}"
        else:
            self.oracle_path = self._workdir / "kp_job_oracle_original.py"
            self.oracle_path.write_text(self.kernel_path.read_text(encoding="utf-8"), encoding="utf-8")
            self.oracle_kind = f"original kernel {self.kernel_path.name}"

    def timing_noise(self) -> float | None:
        return None if self.device == "cpu" else 0.02

    def validate(self, source: str) -> list[str]:
        """Static checks of ``source`` without running it; none by default (the worker still judges)."""
        return []

    def evaluate(self, source: str, *, seed: int, time_it: bool = True) -> Evaluation:
        """Run ``source`` in a worker against the oracle on inputs drawn from ``seed``; time it if correct."""
        if self.variant is None or self.kernel_path is None or self.oracle_path is None:
            raise RuntimeError("call prepare() before evaluate()")
        problems = self.validate(source)
        if problems:
            verdict: Verdict = "compile_error" if problems[0].startswith("syntax") else "invalid"
            return Evaluation(verdict=verdict, message="; ".join(problems))
        fields: dict[str, Any] = {"candidate_path": None, "seed": int(seed), "time_it": bool(time_it)}
        if self.verifies_outputs:
            # drawn now, known to no file before this job: the candidate cannot have prepared for it
            fields["final_seed"] = secrets.randbelow(2**31 - 1)
        data = self._run_worker(fields, [source])
        if self.verifies_outputs and data.get("verdict") == "correct":
            data = self._verify_in_parent(data, int(seed), fields["final_seed"])
        if "verdict" in data and "entries" not in data:
            return self._to_evaluation(data)
        return Evaluation(verdict="runtime_error", message="unexpected worker reply")

    def evaluate_side_by_side(self, sources: list[str], *, seed: int, rounds: int = 3) -> list[Evaluation]:
        """Check every source against the oracle and time them interleaved in ONE worker process.

        For final reports: the ratio of two kernels measured A B A B in one process is far less
        exposed to drift than two measurements taken minutes apart.
        """
        if self.variant is None:
            raise RuntimeError("call prepare() before evaluate_side_by_side()")
        data = self._run_worker({"mode": "side_by_side", "seed": int(seed), "rounds": rounds}, sources)
        if "entries" not in data:
            return [self._to_evaluation(data) for _ in sources]
        out = []
        for entry in data["entries"]:
            entry.setdefault("extra", {})["device_name"] = data.get("device_name")
            out.append(self._to_evaluation(entry))
        return out

    def _verify_in_parent(self, data: dict[str, Any], seed: int, final_seed: int) -> dict[str, Any]:
        """The verdict of record: the candidate's saved outputs on the check inputs and on the final
        inputs (never seen by it before), compared here with the oracle's, which a second worker
        computes without loading any candidate code.  Whatever the candidate's process claimed
        (a result file it wrote itself, a patched compare) does not count."""
        outputs = data.pop("_outputs_path", None)
        reference = self._run_worker({"mode": "reference", "seed": seed, "final_seed": final_seed}, [])
        ref_path = reference.pop("_reference_path", None)
        if reference.get("verdict") != "reference" or ref_path is None or not Path(ref_path).is_file():
            return {
                "verdict": "runtime_error",
                "message": f"the oracle could not be run for the final check: {reference.get('message', '')}",
                "extra": {},
            }
        import torch

        from kernelpilot.worker_kit.compare import compare

        try:
            got = torch.load(outputs, weights_only=True) if outputs else None
        except Exception as exc:  # noqa: BLE001 - a missing or forged file is the candidate's failure
            got = None
            data["message"] = f"{exc}"
        if not isinstance(got, dict) or not all(isinstance(got.get(k), list) for k in ("check", "final")):
            return {
                "verdict": "runtime_error",
                "message": "the worker reported success but saved no outputs for the final check "
                "(a result the candidate wrote itself is not accepted)",
                "extra": {},
            }
        want = torch.load(ref_path, weights_only=True)
        for name, what in (("check", f"seed {seed}"), ("final", "inputs it had not seen")):
            cmp = compare(torch, got[name], want[name], self.rtol, self.atol)
            if not cmp["ok"]:
                return {
                    "verdict": "incorrect",
                    "message": f"checked by kernelpilot on {what}: {cmp['message']}",
                    "max_abs_error": cmp.get("max_abs_error"),
                    "max_rel_error": cmp.get("max_rel_error"),
                    "extra": dict(data.get("extra") or {}),
                }
        data.setdefault("extra", {})["verified_by"] = "parent (check and unseen final inputs)"
        return data

    def _run_worker(self, fields: dict[str, Any], sources: list[str]) -> dict[str, Any]:
        """Write the job, start the worker in its own process group, enforce the timeout."""
        assert self.variant is not None and self.kernel_path is not None and self.oracle_path is not None
        with self._counter_lock:
            self._counter += 1
            job_dir = self._workdir / f"kp_job_{self._counter:04d}"
        job_dir.mkdir()
        paths = []
        for i, source in enumerate(sources):
            cand = job_dir / f"kp_job_candidate_{i}{self.suffix}"
            cand.write_text(source, encoding="utf-8")
            paths.append(str(cand))
        result_path = job_dir / "result.json"
        job = {
            "candidate_path": paths[0] if paths else None,
            "candidate_paths": paths,
            "oracle_path": str(self.oracle_path),
            "oracle_kind": self.oracle_kind,
            "kernel_dir": str(self.kernel_path.parent),
            "original_path": str(self.kernel_path),
            "variant": self.variant.as_dict(),
            "device": self.device,
            "rtol": self.rtol,
            "atol": self.atol,
            "warmup_ms": self.warmup_ms,
            "rep_ms": self.rep_ms,
            "result_path": str(result_path),
        }
        job.update(self._job_extra_fields())
        job.update({k: v for k, v in fields.items() if k != "candidate_path"})
        if fields.get("mode") == "reference":
            job["reference_path"] = str(job_dir / "reference.pt")
        elif fields.get("final_seed") is not None:
            job["outputs_path"] = str(job_dir / "candidate_outputs.pt")
        job_path = job_dir / "job.json"
        job_path.write_text(json.dumps(job), encoding="utf-8")
        if not self.worker_module:
            raise RuntimeError(f"{type(self).__name__} names no worker_module")
        # The worker kit times with triton.testing.do_bench and runs Python kernels under Triton's
        # interpreter on the CPU; its compile cache stays in this executor's work folder.
        # candidate code runs in the worker: it gets no API keys, tokens or other secrets
        env = scrubbed_environ()
        if self.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
        else:
            env.pop("TRITON_INTERPRET", None)
        env.setdefault("TRITON_CACHE_DIR", str(self._workdir / "triton_cache"))
        proc = spawn(  # own session, killed with this process (kill -9, Ctrl-C) and on a timeout
            [self.python, "-m", self.worker_module, str(job_path)],
            cwd=job_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        timeout = self._per_source_timeout_s() * (len(sources) if fields.get("mode") == "side_by_side" else 1)
        out, err, timed_out = communicate_or_kill(proc, timeout)
        kill_tree(proc.pid)  # whatever the candidate left running in the worker's session goes too
        if timed_out:
            return {"verdict": "timeout", "message": f"no result within {timeout:.0f} s (killed)"}
        if not result_path.is_file():
            tail = (err or out or "").strip()[-2000:]
            return {
                "verdict": "runtime_error",
                "message": f"worker crashed (exit code {proc.returncode}) without a result: {tail}",
            }
        data = json.loads(result_path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            return {"verdict": "runtime_error", "message": "worker result is not a JSON object"}
        for key in ("outputs_path", "reference_path"):
            if key in job:
                data[f"_{key}"] = job[key]
        return data

    def _job_extra_fields(self) -> dict[str, Any]:
        """Extra fields a subclass's worker needs in the job file (e.g. compiler settings)."""
        return {}

    def _per_source_timeout_s(self) -> float:
        """Seconds one candidate may take in the worker (subclasses add compile time)."""
        return self.timeout_s

    def _to_evaluation(self, data: dict[str, Any]) -> Evaluation:
        timing = None
        if data.get("timing"):
            t = data["timing"]
            timing = Timing(t["median_ms"], t["min_ms"], t["max_ms"], t["repetitions"], t["interpreter"])
        extra = dict(data.get("extra") or {})
        if timing is not None:
            extra["spread"] = (timing.max_ms - timing.min_ms) / timing.median_ms if timing.median_ms else None
        variant = self.variant
        if variant is not None and variant.flop:
            ai = extra.get("arithmetic_intensity")
            dtype = variant.dtype or (variant.inputs[0].dtype if variant.inputs else None)
            extra.update(classify_bound(ai, extra.get("device_name"), dtype))
        extra["rtol"], extra["atol"] = self.rtol, self.atol
        return Evaluation(
            verdict=data["verdict"],
            message=data.get("message", ""),
            timing=timing,
            max_abs_error=data.get("max_abs_error"),
            max_rel_error=data.get("max_rel_error"),
            tflops=data.get("tflops"),
            gbps=data.get("gbps"),
            extra=extra,
        )

    def close(self) -> None:
        import shutil

        shutil.rmtree(self._workdir, ignore_errors=True)
