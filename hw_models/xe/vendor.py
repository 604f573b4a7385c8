"""Intel GPUs as the tuner sees them: listed by ``sycl-ls`` (Level Zero), pinned with
``ZE_AFFINITY_MASK`` + ``ONEAPI_DEVICE_SELECTOR``."""

from __future__ import annotations

import re
import shutil
import subprocess

from kernelpilot.hw_models.base import GpuVendor


class LevelZeroVendor(GpuVendor):
    name = "sycl"
    visible_devices_env = "ZE_AFFINITY_MASK"
    torch_device = "xpu"

    def pin_env(self, device: str) -> dict[str, str]:
        # the affinity mask hides every other Level Zero device; the one left is level_zero:0
        return {"ZE_AFFINITY_MASK": device, "ONEAPI_DEVICE_SELECTOR": "level_zero:0"}

    def probe_gpus(self) -> list[str]:
        tool = shutil.which("sycl-ls")
        if not tool:
            return []
        try:
            out = subprocess.run([tool], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        ids = re.findall(r"\[level_zero:gpu\]\[level_zero:(\d+)\]", out)
        return sorted(set(ids), key=int)


LEVEL_ZERO = LevelZeroVendor()
