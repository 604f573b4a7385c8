"""Proposer convergence by replay of the recorded H200 exhaustive ground truth (no GPU needed).

    python benchmarks/gemm_convergence.py --store benchmarks/results/gemm_h200_gt.sqlite \
        --out benchmarks/results/gemm_h200_convergence.json --plot benchmarks/results/gemm_h200_convergence.png

For every shape recorded in the store: the exhaustive best over the ground-truth space, then each
proposer (model: deterministic; random and bayes: --seeds seeds) replayed through the real tuning
engine (ReplayBackend: measurements come from the store, nothing is built or run) with the budget of
--budget configs, the library default measured first.  Reported per shape and proposer: best-so-far
as a fraction of the exhaustive best (time_best_exhaustive / time_best_so_far) after each measured
config, and the number of configs needed to reach 98 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from gemm_h200 import GT_SPACE  # the filter the recorded ground truth was measured over

from kernelpilot.tile_tuner.engine import TuneEngine
from kernelpilot.tile_tuner.store import ResultsStore
from kernelpilot.tile_tuner.workload import TuneOptions, Workload


def replay_trace(
    store_path: Path, dims: dict, proposer: str, seed: int, budget: int, batch: int
) -> list[float | None]:
    from kernelpilot.dsl_plugins.cuda.gemm import CutlassSm90Gemm
    from kernelpilot.targets import get_target_model

    with tempfile.TemporaryDirectory() as tmp:
        opts = TuneOptions(
            out_dir=Path(tmp),
            store_path=Path(tmp) / "s.sqlite",
            cache_dir=Path(tmp) / "c",
            replay=store_path,
            batch_size=batch,
        )
        store = ResultsStore(opts.store_path)
        wl = Workload(name="w", kernel="gemm", dtype="bf16", dims=dims, target="sm90", proposer=proposer,
                      budget_configs=budget, space_filter=GT_SPACE, seed=seed)  # fmt: skip
        engine = TuneEngine(get_target_model("sm90"), CutlassSm90Gemm(), "sm90", opts, store)
        [state] = engine.run([wl])
        store.close()
        return state.best_trace


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--proposers", default="model,random,bayes")
    args = ap.parse_args()
    store = ResultsStore(args.store, readonly=True)
    rows = store.all(target="sm90", kernel="gemm", dtype="bf16")
    shapes: dict[str, dict] = {}
    for m in rows:
        p = json.loads(m.key.problem)
        key = f"{p['M']}x{p['N']}x{p['K']}"
        s = shapes.setdefault(
            key,
            {"dims": {"M": p["M"], "N": p["N"], "K": p["K"], "layout": m.key.layout}, "best": None, "n": 0},
        )
        s["n"] += 1
        if m.status == "ok" and m.time_ms and (s["best"] is None or m.time_ms < s["best"]):
            s["best"] = m.time_ms
    result: dict = {
        "store": args.store,
        "budget": args.budget,
        "batch": args.batch,
        "seeds": args.seeds,
        "shapes": {},
    }
    curves: dict[str, list[list[float | None]]] = {}
    for key, s in shapes.items():
        if not s["best"]:
            continue
        entry = {"exhaustive_best_ms": s["best"], "recorded_configs": s["n"], "proposers": {}}
        for prop in args.proposers.split(","):
            seeds = [0] if prop == "model" else list(range(args.seeds))
            fracs = []
            for seed in seeds:
                tr = replay_trace(Path(args.store), s["dims"], prop, seed, args.budget, args.batch)
                frac = [(s["best"] / t) if t else 0.0 for t in tr]
                fracs.append(frac)
                curves.setdefault(prop, []).append(frac)
            final = [f[-1] if f else 0.0 for f in fracs]
            reach = [next((i + 1 for i, v in enumerate(f) if v >= 0.98), None) for f in fracs]
            entry["proposers"][prop] = {
                "final_fraction_median": statistics.median(final),
                "final_fraction_min": min(final),
                "reached_98pct_within_budget": sum(r is not None for r in reach) / len(reach),
                "configs_to_98pct": reach,
                "curves": fracs,
            }
            print(f"{key:>20} {prop:>7}: final {statistics.median(final):.3f} (min {min(final):.3f}), "
                  f"98% reached in {sum(r is not None for r in reach)}/{len(reach)} runs", flush=True)  # fmt: skip
        result["shapes"][key] = entry
    summary = {}
    for prop in args.proposers.split(","):
        vals = [
            e["proposers"][prop]["final_fraction_median"]
            for e in result["shapes"].values()
            if prop in e["proposers"]
        ]
        hit = [
            e["proposers"][prop]["reached_98pct_within_budget"]
            for e in result["shapes"].values()
            if prop in e["proposers"]
        ]
        if vals:
            summary[prop] = {"median_final_fraction": statistics.median(vals), "min_final_fraction": min(vals),
                             "share_of_shape_runs_reaching_98pct": statistics.mean(hit)}  # fmt: skip
    result["summary"] = summary
    result["command"] = " ".join(sys.argv)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(summary, indent=1))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        colours = {"model": "C0", "random": "C1", "bayes": "C2", "exhaustive": "C3"}
        for prop, traces in curves.items():
            n = max(len(t) for t in traces)
            med = [statistics.median([t[i] for t in traces if len(t) > i]) for i in range(n)]
            lo = [min(t[i] for t in traces if len(t) > i) for i in range(n)]
            xs = list(range(1, n + 1))
            ax.plot(xs, med, color=colours.get(prop), label=f"{prop} (median over shapes x seeds)")
            ax.fill_between(xs, lo, med, color=colours.get(prop), alpha=0.15)
        ax.axhline(0.98, color="grey", ls=":", lw=1)
        ax.set_xlabel("measured configs (library default first)")
        ax.set_ylabel("exhaustive best time / best-so-far time")
        ax.set_ylim(0.0, 1.02)
        ax.set_title("H200 bf16 GEMM: proposer convergence (replay of recorded measurements)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
