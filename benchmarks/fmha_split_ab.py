"""Split-KV decode programs of this checkout against the same configs rendered from the templates of an
earlier git revision, timed side by side on one GPU.

FMHA template 4 (``fa_decode``) reads Q in place in every split-KV chunk (head stride 0) instead of copying
it once per chunk with a third kernel, and launches the combine kernel as a programmatic dependent of the
attention kernel.  Whether that is worth anything on the one decode workload where split-KV wins (Llama-3-8B,
batch 4, 32k keys: 32 (b, kv head) pairs for 132 SMs) is a measurement, so each case below is built twice:
``new`` from this checkout's templates, ``old`` from ``cpp_templates`` at ``--before`` (``git show``; the
default is the last revision with template 3's decode program).  On the GPU both run in alternating order
for ``--rounds`` rounds (each run: the program's own checks against its fp32 reference, poisoned outputs
included, then its CUDA-graph timing, median of its repetitions); ``speedup`` = median old / median new.
A failing run marks its case failed; the others go on.

    # CPU (or the device's 16 cores): build whatever DIR lacks
    python benchmarks/fmha_split_ab.py build --dir .kp-split-ab --jobs 2
    # GPU
    python benchmarks/fmha_split_ab.py run --dir .kp-split-ab --rounds 6 --out $OUT/fmha_split_ab.json

CUTLASS headers with ``examples/88_hopper_fmha``: ``--cutlass-dir`` or ``CUTLASS_DIR`` (build only).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cuda_kinds_common import kernels, problems
from fmha_ftz_ab import (
    ab_parser,
    compile_programs,
    finish_build,
    fmha_build_inputs,
    run_and_record,
    stage_source,
)
from jinja2 import FunctionLoader

from kernelpilot.dsl_plugins.cuda.fmha import normalize_fmha_config, render_fmha_program
from kernelpilot.dsl_plugins.cuda.gemm import template_env
from kernelpilot.toolchain import tool_version

#: the last revision whose decode program copies Q per split-KV chunk, and its decode template version
DEFAULT_BEFORE = "90c36dc"
BEFORE_VERSION = "3"
#: (workload, config): the split-KV configs the H100 and H200 runs confirmed or finished near the top on
#: the one workload where split-KV wins
DEFAULT_CASES = (
    ("llama3_8b_decode_b4_kv32k", {"tile": [64, 64, 128], "schedule": "tma", "stages": 6, "splits": 4}),
    ("llama3_8b_decode_b4_kv32k", {"tile": [64, 128, 128], "schedule": "tma", "splits": 4}),
    ("llama3_8b_decode_b4_kv32k", {"tile": [64, 128, 128], "schedule": "tma", "splits": 8}),
)  # fmt: skip
BASELINE = "old"
TEMPLATES = "cpp_templates"


def revision_env(revision: str, repo: Path):
    """A ``template_env`` whose templates are read from ``revision`` of ``repo`` (``git show``), so the
    earlier program renders under exactly the settings the tuner renders with."""

    def load(name: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), "show", f"{revision}:{TEMPLATES}/{name}"],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode != 0:
            raise FileNotFoundError(f"{TEMPLATES}/{name} at {revision}: {done.stderr.strip()}")
        return done.stdout

    return template_env(FunctionLoader(load))


def render_case(workload: str, config: dict, env=None, version: str = "") -> tuple[list[str], str]:
    """The program's arguments and its source (``env``, ``version``: another revision's templates)."""
    kernel, problem = kernels()["fa_decode"], problems()["fa_decode"][workload]
    argv, _ = kernel.run_command(Path("BINARY"), problem, {})
    cfg = normalize_fmha_config(dict(config), problem["head_dim"])
    program = render_fmha_program("fa_decode", cfg, problem, env, version)
    return argv[1:], next(iter(program.sources.values()))


def build(folder: Path, cutlass_dir: str, jobs: int, before: str) -> int:
    """Render every case from this checkout and from ``before`` and build what ``folder`` lacks."""
    folder.mkdir(parents=True, exist_ok=True)
    inputs = fmha_build_inputs("fa_decode", cutlass_dir)
    if inputs is None:
        return 1
    recipe, includes, flags = inputs
    try:
        old_env = revision_env(before, Path(__file__).resolve().parents[1])
        old_env.get_template("cuda/fmha_sm90.cu.j2")
    except FileNotFoundError as exc:
        print(f"error: --before {before}: {exc}", file=sys.stderr)
        return 1
    cases, todo = [], []
    for i, (workload, config) in enumerate(DEFAULT_CASES):
        binaries = {}
        for label, env, version in (("old", old_env, BEFORE_VERSION), ("new", None, "")):
            args, text = render_case(workload, config, env, version)
            name = binaries[label] = f"case{i}_{label}"
            if stage_source(folder, name, text):
                todo.append((folder / f"{name}.cu", flags, folder / name))
        cases.append({"kind": "fa_decode", "workload": workload, "config": config, "args": args,
                      "binaries": binaries})  # fmt: skip
    errors = compile_programs(todo, includes, jobs)
    manifest = {
        "nvcc": tool_version("nvcc"),
        "cutlass": recipe.library_version,
        "flags": list(flags),
        "before": before,
        "cases": cases,
    }
    return finish_build(folder, manifest, len(todo), errors)


def main(argv: list[str] | None = None) -> int:
    ap, sub = ab_parser(__doc__.splitlines()[0], "render and build both revisions of every case into --dir",
                        "time both revisions side by side (GPU)")  # fmt: skip
    sub.choices["build"].add_argument("--before", default=DEFAULT_BEFORE,
                                      help=f"git revision of the earlier templates (default {DEFAULT_BEFORE})")  # fmt: skip
    args = ap.parse_args(argv)
    folder = Path(args.dir)
    if args.mode == "build":
        return build(folder, args.cutlass_dir, args.jobs, args.before)
    return run_and_record(
        args,
        "fmha_split_ab.py",
        BASELINE,
        "split-KV decode programs of FMHA template 4 (Q read in place, combine as a programmatic dependent "
        "launch; new) against the same configs rendered from the templates at the manifest's `before` "
        "revision (Q copied per chunk by a third kernel; old), alternating order per round, each run "
        "checked; speedup = median ms old / median ms new",
        ("nvcc", "cutlass", "flags", "before"),
    )


if __name__ == "__main__":
    raise SystemExit(main())
