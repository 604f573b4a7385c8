"""Where the grouped GEMM's time goes against the dense kernel: the same tile as a ptr-array grouped launch
over a workload's groups, as a grouped launch of one group holding all their rows, and as the dense kernel
on that one shape, next to cuBLAS on the same three problems, on one GPU.

On the grouped workloads of few large GEMMs the tuned ptr-array grouped kernel runs at 615-690 TFLOP/s
where cuBLAS (a ``torch.mm`` loop) reaches 725-785, while the dense CUTLASS kernel of the same tile ran the
large dense shapes at 770-810 TFLOP/s on the H200, ahead of cuBLAS (docs/tile_tuner.md).  Per workload
this times, in alternating order per round (every program run with its own checks):

* ``grouped_groups``: the grouped program on the workload's groups (Llama-3-8B MLP up, Qwen3-8B down,
  Mixtral-8x7B's experts);
* ``grouped_one``: the same binary on one group of sum(M) rows (no group boundaries: no padding of each
  group's last tile, no switch of TMA descriptors between groups);
* ``dense_one``: the dense GEMM program of the same tile (stream-K build, data-parallel; raster and
  swizzle variants) on the same sum(M) x N x K;
* ``torch_groups`` / ``torch_one``: ``torch.mm`` per group / one ``torch.mm`` on sum(M) rows, with the
  vendor baseline's timing rules.

``grouped_one`` against ``dense_one`` is the ptr-array kernel's cost per tile; ``grouped_groups`` against
``grouped_one`` the cost of the group boundaries; ``torch_groups`` against ``torch_one`` the same for
cuBLAS.

``build`` also makes ``grouped_swz``: the grouped program with the group tile scheduler of
``cpp_templates/cuda/swizzled_group_scheduler_sm90.hpp``, a copy of CUTLASS's whose swizzle takes effect
(CUTLASS 4.2's ignores ``max_swizzle_size``).  ``--per-variant`` then also times it per variant, on one
group and over the groups, beside the stock grouped kernel over the groups and the ``torch.mm`` loop.

``--per-variant`` splits ``grouped_one`` and ``dense_one`` into one program run per raster / swizzle variant
(``grouped_one[M:8]`` ...; ``torch_one`` beside them), to tell a tile-order effect from the kernel's own
cost; every run's wall-clock span is recorded so that a clock log of the same call (the device script
samples ``nvidia-smi``) can be matched to it.

    # CPU: render and build the programs into DIR
    python benchmarks/grouped_vs_dense_probe.py build --dir .kp-grouped-dense --jobs 2
    # GPU
    python benchmarks/grouped_vs_dense_probe.py run --dir .kp-grouped-dense --rounds 3 --out F [--per-variant]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from cuda_kinds_common import kernels, problems
from fmha_ftz_ab import compile_programs, device_name, finish_build, run_once

from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
from kernelpilot.errors import ToolMissingError
from kernelpilot.toolchain import tool_version

MANIFEST = "manifest.json"
#: the CUTLASS include after which the swizzled scheduler and its selector go in the grouped source
_SCHEDULER_ANCHOR = '#include "cutlass/gemm/kernel/gemm_universal.hpp"\n'
#: the kernel picks its tile scheduler through TileSchedulerSelector: this specialization, more specialized
#: than CUTLASS's for GroupScheduler in the problem shape, hands the grouped programs' kernels the copy
_SELECTOR = """
namespace cutlass::gemm::kernel::detail {
template <class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<GroupScheduler, arch::Sm90, TileShape, ClusterShape, Stages,
                             cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>> {
  using Scheduler =
      SwizzledTileSchedulerSm90Group<cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>, Stages>;
};
}  // namespace cutlass::gemm::kernel::detail
"""


def with_swizzled_scheduler(source: str) -> str:
    """The grouped program's source with the group tile scheduler whose swizzle takes effect."""
    from importlib.resources import files

    header = (files("kernelpilot.cpp_templates") / "cuda" / "swizzled_group_scheduler_sm90.hpp").read_text()
    if source.count(_SCHEDULER_ANCHOR) != 1:
        raise ValueError(f"the grouped source has no single {_SCHEDULER_ANCHOR.strip()!r}")
    return source.replace(_SCHEDULER_ANCHOR, _SCHEDULER_ANCHOR + header + _SELECTOR)


#: (kind, workload): three of the four workloads of few large GEMMs the torch.mm loop wins (Mixtral's
#: experts as a grouped problem of the same groups), all with B an nn.Linear weight (layout rc); and the tile
#: both kernels run: 128x256x64 cooperative, cluster 1x1 (the unswapped grouped winner of those rows and
#: the dense winner of the large dense shapes)
WORKLOADS = (
    ("grouped_gemm", "llama3_8b_mlp_up_varlen8"),
    ("grouped_gemm", "qwen3_8b_mlp_down_varlen16"),
    ("moe_gemm", "mixtral_8x7b_down"),
)
TILE = {"tile": [128, 256, 64], "cluster": [1, 1], "schedule": "cooperative"}
GROUPED_CONFIG = {**TILE, "tile_scheduler": "persistent", "epilogue": "tma"}
DENSE_CONFIG = {**TILE, "tile_scheduler": "streamk", "epilogue": "tma"}
GROUPED_VARIANTS = [{"raster": r, "swizzle": s} for r in "MN" for s in (1, 8)]
DENSE_VARIANTS = [{"raster": r, "swizzle": s, "decomp": "D", "splits": 1} for r in "MN" for s in (1, 8)]


def one_group(problem: dict[str, Any]) -> tuple[int, int, int]:
    n, k = problem["groups"][0][1], problem["groups"][0][2]
    return sum(g[0] for g in problem["groups"]), n, k


def build(folder: Path, cutlass_dir: str, jobs: int) -> int:
    """Render the grouped and the dense program of the tile (one dense binary per shape's layout) and build
    what ``folder`` lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    grouped, dense = kernels()["grouped_gemm"], CutlassSm90Gemm()
    options = {"cutlass_dir": cutlass_dir or None}
    try:
        g_recipe = grouped.build_recipe("sm90", options)
        d_recipe = dense.build_recipe("sm90", options)
    except ToolMissingError as exc:
        print(f"error: {exc} (--cutlass-dir or CUTLASS_DIR)", file=sys.stderr)
        return 1
    probs = problems()
    kind, name = WORKLOADS[0]
    first = probs[kind][name]
    layout = first.get("layout", "rc")
    layouts = {probs[k][w].get("layout", "rc") for k, w in WORKLOADS}
    if layouts != {layout}:
        print(
            f"error: the workloads mix layouts {sorted(layouts)}; one dense program serves one",
            file=sys.stderr,
        )
        return 1
    sources = {
        "grouped": (grouped.render(GROUPED_CONFIG, first, "sm90"), g_recipe),
        f"dense_{layout}": (dense.render(DENSE_CONFIG, {"M": 1, "N": 8, "K": 8, "layout": layout}, "sm90"), d_recipe),
    }  # fmt: skip
    todo = []
    texts = {}
    for program, (rendered, recipe) in sources.items():
        ((_, text),) = rendered.sources.items()
        texts[program] = (text, recipe)
    texts["grouped_swz"] = (with_swizzled_scheduler(texts["grouped"][0]), g_recipe)
    for program, (text, recipe) in texts.items():
        (folder / f"{program}.cu").write_text(text)
        if not (folder / program).exists():
            todo.append((folder / f"{program}.cu", tuple(recipe.flags), folder / program))
    # both recipes name the same CUTLASS tree; the union keeps either build whole if they ever differ
    includes = list(dict.fromkeys(f"-I{p}" for r in (g_recipe, d_recipe) for p in r.include_dirs))
    errors = compile_programs(todo, includes, jobs)
    manifest = {"nvcc": tool_version("nvcc"), "cutlass": g_recipe.library_version, "layout": layout,
                "grouped_config": GROUPED_CONFIG, "dense_config": DENSE_CONFIG, "workloads": [list(w) for w in WORKLOADS]}  # fmt: skip
    return finish_build(folder, manifest, len(todo), errors)


def torch_side(groups: list[list[int]], layout: str) -> float:
    """The vendor baseline's torch.mm loop over ``groups`` (one group: one torch.mm), median ms."""
    from kernelpilot.tile_tuner import torch_baselines
    from kernelpilot.tile_tuner.vendor_timing import Rule

    out = torch_baselines.grouped(
        {"groups": groups, "dtype": "bf16", "layout": layout}, "cuda", Rule(iters_rule="fixed")
    )
    loop = out["torch.mm loop"]
    if "time_ms" not in loop:
        raise RuntimeError(f"torch.mm loop did not run: {loop}")
    return float(loop["time_ms"]["median"])


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def variant_commands(
    folder: Path, problem: dict[str, Any], layout: str, grouped: Any, dense: CutlassSm90Gemm
) -> dict[str, list[str]]:
    """One command per raster / swizzle variant of ``grouped_one`` and ``dense_one`` (and, with the
    ``grouped_swz`` build, of both grouped programs over the groups); ``grouped`` and ``dense`` are the
    caller's kernel objects, whose ``run_command`` writes each program's command line."""
    m, n, k = one_group(problem)
    one = {**problem, "groups": [[m, n, k]]}
    out = {}
    for v in GROUPED_VARIANTS:
        out[f"grouped_one[{v['raster']}:{v['swizzle']}]"] = grouped.run_command(
            folder / "grouped", one, {"variants": [v]}
        )[0]
    for v in DENSE_VARIANTS:
        out[f"dense_one[{v['raster']}:{v['swizzle']}]"] = dense.run_command(
            folder / f"dense_{layout}", {"M": m, "N": n, "K": k}, {"variants": [v]}
        )[0]
    if (folder / "grouped_swz").exists():
        for v in GROUPED_VARIANTS:
            tag = f"[{v['raster']}:{v['swizzle']}]"
            out["swz_one" + tag] = grouped.run_command(folder / "grouped_swz", one, {"variants": [v]})[0]
            out["swz_groups" + tag] = grouped.run_command(folder / "grouped_swz", problem, {"variants": [v]})[
                0
            ]
            out["grouped_groups" + tag] = grouped.run_command(folder / "grouped", problem, {"variants": [v]})[
                0
            ]
    return out


def run(folder: Path, rounds: int, out: Path, per_variant: bool = False) -> int:
    manifest = json.loads((folder / MANIFEST).read_text())
    grouped, dense = kernels()["grouped_gemm"], CutlassSm90Gemm()
    probs = problems()
    layout = manifest["layout"]
    rows, failed = [], False
    for kind, workload in manifest["workloads"]:
        problem = probs[kind][workload]
        m, n, k = one_group(problem)
        flop = 2.0 * sum(g[0] * g[1] * g[2] for g in problem["groups"])
        one = {**problem, "groups": [[m, n, k]]}
        commands = variant_commands(folder, problem, layout, grouped, dense) if per_variant else {
            "grouped_groups": grouped.run_command(folder / "grouped", problem, {"variants": GROUPED_VARIANTS})[0],
            "grouped_one": grouped.run_command(folder / "grouped", one, {"variants": GROUPED_VARIANTS})[0],
            "dense_one": dense.run_command(folder / f"dense_{layout}", {"M": m, "N": n, "K": k}, {"variants": DENSE_VARIANTS})[0],
        }  # fmt: skip
        swz = per_variant and (folder / "grouped_swz").exists()
        torch_names = ["torch_one"] if per_variant and not swz else ["torch_groups", "torch_one"]
        times: dict[str, list[float]] = {name: [] for name in [*commands, *torch_names]}
        spans: list[tuple[str, float, float]] = []
        notes: dict[str, Any] = {}
        for r in range(rounds):
            order = list(commands) if r % 2 == 0 else list(reversed(commands))
            for name in order:
                t0 = time.time()
                got = run_once(Path(commands[name][0]), commands[name][1:])
                spans.append((name, t0, time.time()))
                if got["ok"]:
                    times[name].append(got["ms"])
                    notes[name] = got["runtime"]
                else:
                    notes[name] = got["why"]
                    failed = True
            if "torch_groups" in times:
                times["torch_groups"].append(torch_side(problem["groups"], layout))
            times["torch_one"].append(torch_side([[m, n, k]], layout))
        med = {name: statistics.median(v) for name, v in times.items() if v}
        row = {
            "workload": workload,
            "groups": len(problem["groups"]),
            "one_group": [m, n, k],
            "median_ms": med,
            "tflops": {name: flop / (ms * 1e9) for name, ms in med.items()},
            "rounds_ms": times,
            "best_variant_or_failure": notes,
            "spans_unix_s": [[name, round(a, 3), round(b, 3)] for name, a, b in spans],
        }
        if {"grouped_one", "dense_one", "grouped_groups", "torch_groups", "torch_one"} <= set(med):
            row["ratios"] = {
                "grouped_one / dense_one (ptr-array cost per tile)": med["grouped_one"] / med["dense_one"],
                "grouped_groups / grouped_one (group boundaries, CUTLASS)": med["grouped_groups"] / med["grouped_one"],
                "torch_groups / torch_one (group boundaries, cuBLAS)": med["torch_groups"] / med["torch_one"],
                "dense_one / torch_one": med["dense_one"] / med["torch_one"],
                "grouped_groups / torch_groups (the tuner's yardstick)": med["grouped_groups"] / med["torch_groups"],
            }  # fmt: skip
        rows.append(row)
        print(workload, {name: round(v, 4) for name, v in med.items()}, json.dumps(row.get("ratios", {})))
    record = {
        "what": __doc__.splitlines()[0] + " " + " ".join(__doc__.split("\n\n")[0].splitlines()[1:]),
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(),
        "versions": {"torch": torch_version(), "nvcc": manifest["nvcc"], "cutlass": manifest["cutlass"]},
        "command": f"python benchmarks/grouped_vs_dense_probe.py run --dir DIR --rounds {rounds} --out {out.name}"
        + (" --per-variant" if per_variant else ""),
        "configs": {"grouped": manifest["grouped_config"], "dense": manifest["dense_config"]},
        "rows": rows,
    }
    out.write_text(json.dumps(record, indent=1) + "\n")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("build", help="render and build the two programs into --dir (CPU)")
    b.add_argument("--dir", required=True)
    b.add_argument("--cutlass-dir", default="")
    b.add_argument("--jobs", type=int, default=2)
    r = sub.add_parser("run", help="time the five paths side by side (GPU)")
    r.add_argument("--dir", required=True)
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--out", required=True)
    r.add_argument(
        "--per-variant",
        action="store_true",
        help="one run per raster / swizzle variant of the one-group programs",
    )
    args = ap.parse_args(argv)
    folder = Path(args.dir)
    if args.mode == "build":
        return build(folder, args.cutlass_dir, args.jobs)
    if not (folder / MANIFEST).exists():
        print(f"error: {folder / MANIFEST} not found: run the build mode first", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    return run(folder, args.rounds, Path(args.out), args.per_variant)


if __name__ == "__main__":
    raise SystemExit(main())
