"""Prefill template 3 against template 5 on causal grouped-query problems, side by side on one GPU.

Template 3 ran a causal GQA problem with K and V copied per query head; template 5 shares each K/V head
among its G query heads by stride 0 (``--g``, ``docs/cuda_kinds.md``).  The two programs of one config
(built on a CPU with ``confirm_h200.py --build-only``, one from each template) run in alternating order,
every run with the program's own checks (a ragged problem in full and sampled rows of the timed one); the
record keeps each run's JSON line and the median over rounds per side.

    python3 benchmarks/fmha_gqa_ab.py --before T3_PROGRAM --after T5_PROGRAM --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from typing import Any

# (name, b, hq, hkv, seq): the causal GQA prefill rows of benchmarks/cuda_kinds_common.py at head dim 128
SHAPES = [
    ("qwen25_7b_prefill_4k", 4, 28, 4, 4096),
    ("llama3_8b_prefill_4k", 4, 32, 8, 4096),
    ("phi3_medium_prefill_4k", 4, 40, 10, 4096),
]


def run(program: str, args: list[str]) -> dict[str, Any]:
    out = subprocess.run([program, *args], capture_output=True, text=True, timeout=120)
    line = (out.stdout.strip().splitlines() or ["{}"])[-1]
    try:
        doc = json.loads(line)
    except json.JSONDecodeError:
        doc = {"status": "unparsed", "stdout": out.stdout[-400:]}
    doc["exit_code"] = out.returncode
    doc["stderr_tail"] = out.stderr[-400:]
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="template 3 program (K/V per query head)")
    ap.add_argument("--after", required=True, help="template 5 program of the same config (--g)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows: dict[str, Any] = {}
    for name, b, hq, hkv, seq in SHAPES:
        common = [f"--b={b}", f"--h={hq}", f"--q={seq}", f"--k={seq}"]
        sides: dict[str, list[dict[str, Any]]] = {"template3": [], "template5": []}
        for r in range(args.rounds):
            order = ["template3", "template5"] if r % 2 == 0 else ["template5", "template3"]
            for side in order:
                extra = [f"--g={hq // hkv}"] if side == "template5" else []
                sides[side].append(run(args.before if side == "template3" else args.after, common + extra))
        med = {
            s: statistics.median(x["time_ms"]["median"] for x in runs)
            if all("time_ms" in x for x in runs)
            else None
            for s, runs in sides.items()
        }
        rows[name] = {
            "dims": {"b": b, "hq": hq, "hkv": hkv, "seq": seq},
            "median_ms": med,
            "speedup_t5_over_t3": (med["template3"] / med["template5"]) if all(med.values()) else None,
            "all_checks_passed": all(
                x.get("verification", {}).get("passed") is True for v in sides.values() for x in v
            ),
            "runs": sides,
        }
        print(
            name,
            json.dumps({k: rows[name][k] for k in ("median_ms", "speedup_t5_over_t3", "all_checks_passed")}),
        )
    doc = {
        "what": "prefill template 3 (K/V per query head) against template 5 (K/V heads shared by stride 0), "
        "alternating rounds, every run checked",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    return 0 if all(r["all_checks_passed"] for r in rows.values()) else 4


if __name__ == "__main__":
    raise SystemExit(main())
