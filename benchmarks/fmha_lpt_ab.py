"""Causal prefill programs with their Q tiles dispatched longest first across all heads (``lpt``) against
the same configs ordered longest first within each head (``longest_first``), timed side by side on one
GPU.

The GPU hands out thread blocks in linear order to the first free slot.  ``longest_first`` orders each
head's causal Q tiles from the longest down, so the grid still ends on the last heads' tiles, whose longest
ones start late; ``lpt`` runs every (batch, head)'s longest tile first, then every second-longest, and
leaves only the shortest tiles for the end (``hw_models/sm90/fmha_dispatch.py`` simulates both: 1.4-3.6 %
less time at the end of the grid on the hd64 and hd128 workloads, 12.8 % on Gemma-3's hd256).  Per causal
prefill workload of cuda_kinds_common.py, its confirmed config (``longest_first``) and that config with
``lpt`` instead, both rendered from this checkout (current template) and run with the workload's arguments.
On the GPU both run in alternating order for ``--rounds`` rounds (each run: the program's own checks
against its fp32 reference, then its CUDA-graph timing, median of its repetitions); ``speedup`` = median
``longest_first`` / median ``lpt``.  A failing run marks its case failed; the others go on.

    # CPU (or the device's 16 cores): build whatever DIR lacks
    python benchmarks/fmha_lpt_ab.py build --dir .kp-lpt-ab --jobs 2
    # GPU
    python benchmarks/fmha_lpt_ab.py run --dir .kp-lpt-ab --rounds 6 --out $OUT/fmha_lpt_ab.json

CUTLASS headers with ``examples/88_hopper_fmha``: ``--cutlass-dir`` or ``CUTLASS_DIR`` (build only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_kinds_common import kernels, problems
from fmha_ftz_ab import ab_parser, build_staged, run_and_record
from fmha_gqa_ab import DEFAULT_CASES as GQA_CASES

from kernelpilot.dsl_plugins.cuda.fmha import fmha_label, normalize_fmha_config, render_fmha_program

#: (workload, config): every causal prefill workload with its confirmed ``longest_first`` config (the
#: grouped-query A/B's cases, one per workload)
DEFAULT_CASES: tuple[tuple[str, dict[str, Any]], ...] = tuple(
    (workload, config) for workload, config in GQA_CASES if config.get("longest_first")
)
BASELINE = "lf"


def variants(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The two orders of one config's tiles: within each head (the baseline) and across all heads."""
    base = {k: v for k, v in config.items() if k not in ("longest_first", "lpt")}
    return {"lf": {**base, "longest_first": True}, "lpt": {**base, "lpt": True}}


def build(folder: Path, cutlass_dir: str, jobs: int) -> int:
    """Render both orders of every case's config and build what ``folder`` lacks (one binary per config,
    shared by the workloads that run it)."""
    cases = []
    for workload, config in DEFAULT_CASES:
        problem = problems()["fa_prefill"][workload]
        sources = {}
        for label, variant in variants(config).items():
            cfg = normalize_fmha_config(dict(variant), problem["head_dim"])
            program = render_fmha_program("fa_prefill", cfg, problem)
            sources[label] = (fmha_label(cfg), next(iter(program.sources.values())))
        argv, _ = kernels()["fa_prefill"].run_command(Path("BINARY"), problem, {})
        cases.append({"kind": "fa_prefill", "workload": workload, "config": config, "args": argv[1:],
                      "sources": sources})  # fmt: skip
    return build_staged(folder, cutlass_dir, jobs, "fa_prefill", cases)


def main(argv: list[str] | None = None) -> int:
    ap, _ = ab_parser(__doc__.splitlines()[0], "render and build both orders of every case into --dir",
                      "time both orders side by side (GPU)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.mode == "build":
        return build(Path(args.dir), args.cutlass_dir, args.jobs)
    return run_and_record(
        args,
        "fmha_lpt_ab.py",
        BASELINE,
        "causal prefill programs with the Q tiles of all heads longest first (lpt) against the same configs "
        "longest first within each head (lf), alternating order per round, each run checked; speedup = "
        "median ms lf / median ms lpt",
    )


if __name__ == "__main__":
    raise SystemExit(main())
