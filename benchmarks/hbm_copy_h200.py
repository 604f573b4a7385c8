"""Device-to-device copy bandwidth of the GPU, the yardstick for memory-bound decode attention.

Why: "decode at >= 90 % of the bandwidth a device-to-device copy reaches" needs that copy measured on
the same machine and in the same call as the decode runs.  Copies a 4 GiB buffer (far past the L2)
with ``Tensor.copy_`` 10 times after 3 warm-ups, timed by CUDA events; bytes = read + write.  Prints one
JSON line (and writes it to ``--out`` when given)::

    python3 benchmarks/hbm_copy_h200.py --out $OUT/hbm_copy.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=4.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import torch

    n = int(args.gib * (1 << 30))
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(args.reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    med = statistics.median(times)
    doc = {
        "what": "device-to-device copy bandwidth (read + write bytes / median time)",
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "bytes_moved": 2 * n,
        "median_s": med,
        "tbps": 2 * n / med / 1e12,
        "times_s": times,
    }
    line = json.dumps(doc)
    print(line)
    if args.out:
        Path(args.out).write_text(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
