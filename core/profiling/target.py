"""The program a profiler runs: build one kernel's Model and inputs, warm up, then the measured calls.

``python -m kernelpilot.profiling.target JOB.json``.  The job names the candidate file, the original
file (whose ``get_example_inputs`` provides inputs when the spec lists none), the resolved spec
variant, the device, warm-up and measured iterations, and how to start/stop collection: for ncu
``torch.cuda.profiler.start/stop`` (run under ``--profile-from-start off``), for VTune
``vtune -command resume/pause`` on the paused collection.  Warm-up also pays Triton's compilation, so
the measured launches are the steady state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def make_inputs(torch: Any, job: dict[str, Any], device: str) -> list[Any]:
    """The same inputs a check gets: the spec variant's (seeded) or the original's example inputs."""
    from kernelpilot.worker_kit.model import job_inputs

    return job_inputs(torch, job, device)


def main(argv: list[str]) -> int:
    import torch

    from kernelpilot.worker_kit.model import build_model, load_module

    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    device = job["device"]
    model = build_model(torch, load_module(job["kernel_path"], "kp_profile_target"), job["variant"], device)
    inputs = make_inputs(torch, job, device)
    sync = getattr(torch, device).synchronize if device in ("cuda", "xpu") else (lambda: None)
    with torch.no_grad():
        for _ in range(int(job["warmup"])):
            model(*inputs)
        sync()
        _collection(job, "start")
        for _ in range(int(job["iters"])):
            model(*inputs)
            sync()
        _collection(job, "stop")
    return 0


def _collection(job: dict[str, Any], what: str) -> None:
    if job["tool"] == "ncu":
        import torch

        (torch.cuda.profiler.start if what == "start" else torch.cuda.profiler.stop)()
    elif job["tool"] == "vtune":
        command = "resume" if what == "start" else "pause"
        subprocess.run(
            [job["vtune_bin"], "-command", command, "-r", job["result_dir"]],
            capture_output=True,
            timeout=60,
            check=False,
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
