"""Per-group launches with mixed token-side widths against their single-width twins, the best configs of
earlier runs and a torch.mm loop, side by side on the rows of few large GEMMs.

Why: a torch.mm loop launches one cuBLAS kernel per group and fits its tile to that group's token count
(on Mixtral-8x7B's experts, benchmarks/results/grouped_gap_h100_call.json: 176-token tiles for the experts
of 1034-1044 tokens, 256 for those of 1011-1021).  The per-group swap-AB launch (the dense kernel once per
group, tokens on the tile's N side) had one width for every group; with ``extra_tile_n`` each group's
launch runs the width that pads its tokens least, as cuBLAS does, at no extra launch.  Whether that closes
any of the gap is a measurement: this probe builds, per workload, the base configs below, the model's
mixed-width twins of each per-group base (``mixed_twins`` in hw_models/sm90/token_widths.py, the configs
the space enumerates) and times them with the loop in ``--rounds`` interleaved rounds (each program with
its best run-time variant of the first round; every run passes the program's own check).

On a GPU machine, from the repository root after ``source benchmarks/device_setup.sh``::

    python3 benchmarks/pergroup_mixed_probe.py --cache /tmp/kp_cache --out OUT.json

``--plan`` (any machine with nvcc) builds the programs into ``--cache`` and runs nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from cuda_kinds_common import GROUPED_WORKLOADS, MOE_WORKLOADS

SWAP_PG = {"swap_ab": True, "launch": "per_group", "streams": 2, "tile_scheduler": "streamk"}
# Per workload: the fastest configs of the H100 records (kinds_t6/t7/t8_h100_*_run_kinds.json) and the
# per-group swap bases whose mixed twins the model ranks first; ``twins`` asks for those twins.
BASES: dict[str, list[dict[str, Any]]] = {
    "mixtral_8x7b_down": [
        {"tile": [256, 176, 64], "cluster": [1, 2], "swap_ab": True},
        {"tile": [256, 176, 64], "cluster": [1, 2], **SWAP_PG, "twins": True},
        {"tile": [128, 208, 64], "cluster": [2, 1], **SWAP_PG, "twins": True},
    ],
    "llama3_8b_mlp_up_varlen8": [
        {"tile": [128, 256, 64], "cluster": [1, 1], "launch": "per_group", "streams": 2, "tile_scheduler": "streamk"},
        {"tile": [128, 192, 64], "cluster": [1, 2], "schedule": "pingpong", "launch": "per_group", "streams": 2},
        {"tile": [256, 144, 64], "cluster": [1, 1], **SWAP_PG, "twins": True},
    ],
    "qwen3_8b_mlp_down_varlen16": [
        {"tile": [256, 176, 64], "cluster": [2, 1], "swap_ab": True, "extra_tile_n": [160]},
        {"tile": [256, 144, 64], "cluster": [2, 1], **SWAP_PG, "twins": True},
    ],
}  # fmt: skip


def workload_problem(name: str) -> tuple[str, dict[str, Any]]:
    """The validated problem of a kinds workload, as the tuner builds it from benchmarks/cuda_kinds_common.py."""
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    kind, dims = (
        ("moe_gemm", MOE_WORKLOADS[name])
        if name in MOE_WORKLOADS
        else ("grouped_gemm", GROUPED_WORKLOADS[name])
    )
    return kind, get_tile_kernel(kind, "sm90").validate_problem(dict(dims), "bf16", f"workload {name}")


def configs_for(name: str) -> tuple[str, dict[str, Any], list[Any]]:
    """The workload's kind, problem and configs: each base, then the model's mixed twins of those that ask."""
    from kernelpilot.hw_models.sm90.token_widths import mixed_twins
    from kernelpilot.targets import get_target_model

    model = get_target_model("sm90")
    kind, problem = workload_problem(name)
    out: list[Any] = []
    for base in BASES[name]:
        raw = {k: v for k, v in base.items() if k != "twins"}
        cfg = model.parse_config({"kernel": kind, "dtype": "bf16", "schedule": "cooperative", **raw})
        res = model.check(cfg, problem)
        if not res.valid:
            sys.exit(f"{name}: {cfg.label()} is illegal: {[v.message for v in res.violations]}")
        out.append(cfg)
        if base.get("twins"):
            # the twins of the one-stream config (as the space enumerates them), on this base's streams; those
            # the model ranks ahead of the base (the ones a default search would propose first)
            one = cfg.model_copy(update={"streams": 1})
            twins = [
                t.model_copy(update={"streams": cfg.streams})
                for t in mixed_twins(one, problem, model.check, model.estimate_time_s)
            ]
            base_s = model.estimate_time_s(cfg, problem)
            out += [t for t in twins if model.estimate_time_s(t, problem) < base_s]
    return kind, problem, list(dict.fromkeys(out))


def build(
    kind: str, problem: dict[str, Any], configs: list[Any], cache: Path, work: Path, jobs: int
) -> dict[str, Path]:
    from kernelpilot.tile_tuner.builder import BuildCache, BuildItem, build_batch
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    kernel = get_tile_kernel(kind, "sm90")
    recipe = kernel.build_recipe("sm90", {})
    items = {
        c.label(): BuildItem.create(
            kernel.render(c.model_dump(mode="json"), problem, "sm90"),
            recipe,
            kernel.template_version,
            c.label(),
        )
        for c in configs
    }
    outcomes = build_batch(list(items.values()), recipe, BuildCache(cache), work, jobs=jobs)
    binaries = {}
    for label, item in items.items():
        out = outcomes[item.cache_key]
        if out.binary is None:
            sys.exit(f"build of {label} failed: {out.status} {out.message}")
        binaries[label] = out.binary
    return binaries


def measure(
    name: str, kind: str, problem: dict[str, Any], configs: list[Any], binaries: dict[str, Path], rounds: int
) -> dict[str, Any]:
    from kernelpilot.hw_models.catalogue import get_device
    from kernelpilot.hw_models.problems import gemm_problems
    from kernelpilot.hw_models.sm90.cost import sm90_time_s
    from kernelpilot.tile_tuner.kernels import get_tile_kernel
    from kernelpilot.tile_tuner.runner import run_program
    from kernelpilot.tile_tuner.torch_baselines import grouped
    from kernelpilot.tile_tuner.vendor_timing import Rule

    kernel = get_tile_kernel(kind, "sm90")
    device = get_device("h200" if "H200" in _gpu_name() else "h100_sxm")
    groups = [list(g) for g in gemm_problems(problem, kind) if g[0] > 0]
    loop_problem = {"groups": groups, "dtype": "bf16", "layout": "rc"}
    variant: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {c.label(): [] for c in configs}
    times["torch.mm loop"] = []
    for rnd in range(rounds):
        order = configs[rnd % len(configs) :] + configs[: rnd % len(configs)]  # a rotating start
        for cfg in order:
            label = cfg.label()
            runtime = (
                {"variants": [variant[label]]}
                if label in variant
                else {"variants": kernel.runtime_variants(cfg, problem)}
            )
            argv, env = kernel.run_command(binaries[label], problem, runtime)
            out = run_program(argv, env, 300.0)
            if out.status != "ok":
                sys.exit(f"{name} {label}: {out.status} {out.message}")
            rt = out.raw.get("runtime", {})
            variant.setdefault(label, {"raster": rt.get("raster", "M"), "swizzle": int(rt.get("swizzle", 1))})
            times[label].append(out.raw["time_ms"]["median"])
        loop = grouped(loop_problem, "cuda", Rule(iters_rule="fixed"))["torch.mm loop"]
        if "time_ms" not in loop:
            sys.exit(f"{name} torch.mm loop: {loop}")
        times["torch.mm loop"].append(
            loop["time_ms"]["median"] if isinstance(loop["time_ms"], dict) else loop["time_ms"]
        )
    loop_ms = statistics.median(times["torch.mm loop"])
    rows = []
    for cfg in configs:
        label = cfg.label()
        med = statistics.median(times[label])
        rows.append({"config": label, "median_ms": med, "rounds_ms": times[label], "variant": variant[label],
                     "model_ms": sm90_time_s(cfg, problem, device) * 1e3, "loop_over_config": loop_ms / med})  # fmt: skip
    return {"kind": kind, "groups": groups, "torch_mm_loop": {"median_ms": loop_ms, "rounds_ms": times["torch.mm loop"]},
            "configs": sorted(rows, key=lambda r: r["median_ms"])}  # fmt: skip


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


def probe_main(doc: str, bases: dict[str, Any], configs_of: Any, default_work: str) -> None:
    """The command line both interleaved-round probes share (this one and fused_groups_probe.py): build
    every workload's configs (``configs_of(name)`` -> kind, problem, configs), then, unless ``--plan``, time
    them with the loop and write the record after each workload."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--cache", required=True, help="build cache (content-addressed: a CPU prebuild is a hit)")
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--work", default=default_work)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plan", action="store_true", help="build only; run nothing")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(bases)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    specs = {n: configs_of(n) for n in names}
    built = {
        n: build(k, p, cs, Path(args.cache), Path(args.work), args.jobs) for n, (k, p, cs) in specs.items()
    }
    if args.plan:
        print(json.dumps({n: [c.label() for c in cs] for n, (_, _, cs) in specs.items()}, indent=1))
        return
    import torch

    rec: dict[str, Any] = {
        "what": doc.split("\n\n")[0],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
        "device": _gpu_name(),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "workloads": {},
    }
    # written after each workload: a call cut short keeps what it measured
    for n, (k, p, cs) in specs.items():
        rec["workloads"][n] = measure(n, k, p, cs, built[n], args.rounds)
        Path(args.out).write_text(json.dumps(rec, indent=1))
    print(json.dumps({n: [(r["config"], round(r["median_ms"], 4), round(r["loop_over_config"], 3)) for r in w["configs"]]
                      for n, w in rec["workloads"].items()}, indent=1))  # fmt: skip


def main() -> None:
    probe_main(__doc__, BASES, configs_for, "/tmp/kp_pgmixed_probe")


if __name__ == "__main__":
    main()
