"""Causal grouped-query prefill programs of FMHA template 5 (each K/V head shared by its query heads)
against the same configs as template 3 rendered them (K and V copied per query head), timed side by side
on one GPU.

Under the causal mask the G query heads of one K/V head cannot be packed into query rows, so template 3
ran a grouped-query problem as multi-head attention over the query heads: the same FLOPs, G times the K/V
bytes, and not the layout of the user's tensors.  Template 5 runs (batch x K/V heads, G) with head
stride 0 on K and V (``--g``), as SDPA's ``enable_gqa`` reads them.  Both variants render from this
checkout (``render_fmha_program(..., version="3", kv_groups=False)`` is template 3's source byte for byte,
which a test pins), one binary per config and variant; a case runs its workload's arguments, without
``--g`` for template 3.  On the GPU both run in alternating order for ``--rounds`` rounds (each run: the
program's own checks against its fp32 reference, which reads K/V head (b, h) / G under template 5, then
its CUDA-graph timing, median of its repetitions); ``speedup`` = median template 3 / median template 5.
A failing run marks its case failed; the others go on.

    # CPU (or the device's 16 cores): build whatever DIR lacks
    python benchmarks/fmha_gqa_ab.py build --dir .kp-gqa-ab --jobs 2
    # GPU
    python benchmarks/fmha_gqa_ab.py run --dir .kp-gqa-ab --rounds 6 --out $OUT/fmha_gqa_ab.json

CUTLASS headers with ``examples/88_hopper_fmha``: ``--cutlass-dir`` or ``CUTLASS_DIR`` (build only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_kinds_common import kernels, problems
from fmha_ftz_ab import ab_parser, build_staged, run_and_record

from kernelpilot.dsl_plugins.cuda.fmha import fmha_label, normalize_fmha_config, render_fmha_program

COOP_128_LF = {"tile": [128, 128, 128], "schedule": "cooperative", "longest_first": True}
#: (workload, config): every causal grouped-query prefill workload of cuda_kinds_common.py with the config
#: its H200 run confirmed (template 3), and Qwen2.5-7B's runner-up that differs only in longest_first
DEFAULT_CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("qwen25_7b_prefill_4k", {"tile": [128, 128, 128], "schedule": "cooperative"}),
    ("qwen25_7b_prefill_4k", COOP_128_LF),
    ("llama3_8b_prefill_4k", COOP_128_LF),
    ("qwen3_32b_prefill_8k", COOP_128_LF),
    ("phi3_medium_prefill_4k", COOP_128_LF),
    ("gpt_oss_20b_prefill_4k",
     {"tile": [192, 128, 64], "schedule": "cooperative", "warpgroups": 3, "longest_first": True}),
    ("gemma3_12b_prefill_4k", {"tile": [128, 64, 256], "schedule": "cooperative", "longest_first": True}),
)  # fmt: skip
BASELINE = "t3"
#: label -> (template version, kv_groups) of the two renders
VARIANTS = {"t3": ("3", False), "t5": ("", True)}


def variant_args(workload: str, problem: dict[str, Any]) -> dict[str, list[str]]:
    """The program arguments of ``workload`` per variant: template 3 runs the query heads without ``--g``."""
    argv, _ = kernels()["fa_prefill"].run_command(Path("BINARY"), problem, {})
    new = argv[1:]
    if not any(a.startswith("--g=") for a in new):
        raise ValueError(f"{workload} is not a causal grouped-query problem (its program takes no --g)")
    return {"t3": [a for a in new if not a.startswith("--g=")], "t5": new}


def build(folder: Path, cutlass_dir: str, jobs: int) -> int:
    """Render both variants of every case's config and build what ``folder`` lacks (one binary per config
    and variant, shared by the workloads that run it)."""
    cases = []
    for workload, config in DEFAULT_CASES:
        problem = problems()["fa_prefill"][workload]
        cfg = normalize_fmha_config(dict(config), problem["head_dim"])
        sources = {}
        for label, (version, kv_groups) in VARIANTS.items():
            program = render_fmha_program("fa_prefill", cfg, problem, version=version, kv_groups=kv_groups)
            sources[label] = (f"{fmha_label(cfg)}_{label}", next(iter(program.sources.values())))
        args_of = variant_args(workload, problem)
        cases.append({"kind": "fa_prefill", "workload": workload, "config": config, "args": args_of["t5"],
                      "args_of": args_of, "sources": sources})  # fmt: skip
    return build_staged(folder, cutlass_dir, jobs, "fa_prefill", cases)


def main(argv: list[str] | None = None) -> int:
    ap, _ = ab_parser(__doc__.splitlines()[0], "render and build both templates of every case into --dir",
                      "time both templates side by side (GPU)")  # fmt: skip
    args = ap.parse_args(argv)
    if args.mode == "build":
        return build(Path(args.dir), args.cutlass_dir, args.jobs)
    return run_and_record(
        args,
        "fmha_gqa_ab.py",
        BASELINE,
        "causal grouped-query prefill programs of FMHA template 5 (each K/V head shared by its G query "
        "heads, head stride 0, --g; t5) against the same configs as template 3 renders them (K/V per query "
        "head; t3), alternating order per round, each run checked; speedup = median ms t3 / median ms t5",
    )


if __name__ == "__main__":
    raise SystemExit(main())
