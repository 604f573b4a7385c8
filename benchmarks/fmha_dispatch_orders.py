"""What the dispatch simulation and the cost model predict for the three Q-tile orders of the causal
prefill programs, per causal prefill workload of cuda_kinds_common.py with its confirmed config.

A prediction, not a measurement: ``hw_models/sm90/fmha_dispatch.py`` replays greedy list scheduling of the
grid's blocks on the H200's 132 SMs x the config's resident blocks, in the natural order, with each head's
tiles longest first (``longest_first``) and with every head's longest tile first (``lpt``); the cost
model's estimates of the ``longest_first`` and ``lpt`` configs follow.  ``benchmarks/fmha_lpt_ab.py``
is the measurement that decides.  No GPU needed:

    python benchmarks/fmha_dispatch_orders.py --out benchmarks/results/fmha_dispatch_orders.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from cuda_kinds_common import problems
from fmha_lpt_ab import DEFAULT_CASES, variants

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.fmha import _program_rows
from kernelpilot.hw_models.sm90.fmha_cost import fmha_time_s
from kernelpilot.hw_models.sm90.fmha_dispatch import ORDERS, dispatch_overrun
from kernelpilot.targets import get_target_model


def predict(device_name: str = "h200") -> list[dict]:
    """One row per case: the overrun of each order, the simulated lf / lpt time ratio and the cost model's."""
    model, device = get_target_model("sm90"), get_device(device_name)
    rows = []
    for workload, config in DEFAULT_CASES:
        problem = {**problems()["fa_prefill"][workload], "dtype": "bf16"}
        cfgs = {
            label: model.parse_config({"kernel": "fa_prefill", **c}) for label, c in variants(config).items()
        }
        b, h, seq, _ = _program_rows(problem)
        qo, kv, _ = cfgs["lf"].tile
        slots = device.cores * cfgs["lf"].resident_blocks()
        overrun = {order: round(dispatch_overrun(order, b * h, qo, kv, seq, slots), 4) for order in ORDERS}
        estimate_us = {
            label: round(fmha_time_s(cfg, problem, device) * 1e6, 1) for label, cfg in cfgs.items()
        }
        rows.append({
            "workload": workload, "config": config, "grid": {"heads": b * h, "q_tiles": ceil_div(seq, qo), "slots": slots},
            "overrun": overrun, "simulated_lf_over_lpt": round(overrun["longest_first"] / overrun["lpt"], 4),
            "cost_model_us": estimate_us, "cost_model_lf_over_lpt": round(estimate_us["lf"] / estimate_us["lpt"], 4),
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON record to write")
    ap.add_argument("--device", default="h200", help="catalogue device (default h200)")
    args = ap.parse_args(argv)
    rows = predict(args.device)
    record = {
        "what": "predicted, not measured: the simulated dispatch of the causal prefill grids in three Q-tile "
        "orders (overrun = makespan / even share) and the cost model's estimates with longest_first and lpt",
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device_model": args.device,
        "command": f"python benchmarks/fmha_dispatch_orders.py --out {Path(args.out).name}"
        + (f" --device {args.device}" if args.device != "h200" else ""),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for r in rows:
        print(f"{r['workload']:26s} overrun {r['overrun']}  lf/lpt simulated {r['simulated_lf_over_lpt']}, "
              f"cost model {r['cost_model_lf_over_lpt']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
