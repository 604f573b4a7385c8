"""NVIDIA GPUs as the tuner sees them: named and listed by ``nvidia-smi``, pinned with
``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

import shutil
import subprocess

from kernelpilot.hw_models.base import GpuVendor


class NvidiaVendor(GpuVendor):
    name = "cuda"
    visible_devices_env = "CUDA_VISIBLE_DEVICES"
    torch_device = "cuda"

    def probe_gpus(self) -> list[str]:
        smi = shutil.which("nvidia-smi")
        if not smi:
            return []
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [str(i) for i, _ in enumerate(ln for ln in out.splitlines() if ln.strip().startswith("GPU "))]

    def device_name(self) -> str | None:
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                out = subprocess.run(
                    [smi, "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=20,
                )
                name = out.stdout.strip().splitlines()[0].strip() if out.stdout.strip() else ""
                if name:
                    return name
            except (OSError, subprocess.TimeoutExpired):
                pass
        return None


NVIDIA = NvidiaVendor()
