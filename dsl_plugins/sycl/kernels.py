"""The five sycl-tla tile-tunable kernels (``TileKernel`` contract of kernelpilot.tile_tuner.kernel_api).

One class per kind; they share the build recipe (icpx flags from :mod:`.sycl_tla`) and differ in how
they validate a workload, which template they render and how they pass sizes to the program.  All
programs print one ``ProgramResult`` JSON line and exit 0 / 3 (cannot run) / 4 (wrong result).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.sycl import problems, programs, sycl_tla
from kernelpilot.errors import ToolMissingError
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram, TileKernelBase

TEMPLATE_VERSION = "sycl-1"
TIMING_KEYS = ("warmup", "iterations", "repetitions")
DEFAULT_L2_MIB = 64


def library_version_for_render() -> str:
    """sycl-tla release baked into every program (and so into its output); 'not found' in dry runs
    without headers -- the build recipe refuses to build then anyway."""
    return _library_version(os.environ.get("SYCL_TLA_DIR", ""))


@lru_cache(maxsize=8)
def _library_version(sycl_tla_dir: str) -> str:
    try:
        tree = sycl_tla.find_sycl_tla()
    except Exception:  # noqa: BLE001 - a broken tree is reported by build_recipe, not by render
        tree = None
    return tree.key() if tree else "sycl-tla (not found)"


def _bits(problem: dict[str, Any]) -> tuple[int, int, int]:
    """Bits per element of A (or Q/K/V), B and the output of a validated problem."""
    from kernelpilot.hw_models.dtypes import DTYPE_BITS, parse_dtype

    pair = parse_dtype(problem["dtype"], "problem")
    out = problem.get("out_dtype") or "f32"
    return pair.bits_a, pair.bits_b, {"s32": 32}.get(out) or DTYPE_BITS[out]


def _l2_arg(runtime: dict[str, Any]) -> list[str]:
    """Operand rotation: the program cycles through enough input sets to stream twice ``l2_mib`` (the
    tuner passes the device's L2; 64 MiB covers BMG's 18-24 MiB when it does not)."""
    return [f"--l2_mib={int(runtime.get('l2_mib', DEFAULT_L2_MIB))}"]


def _timing_args(runtime: dict[str, Any]) -> list[str]:
    """Timing knobs: ours (warmup, iterations, repetitions, target_ms) and the tuner's generic names
    (``reps`` = repetitions, ``target_ms``)."""
    args = {k: runtime[k] for k in TIMING_KEYS if k in runtime}
    if "reps" in runtime:
        args.setdefault("repetitions", runtime["reps"])
    if "target_ms" in runtime:
        args["target_ms"] = max(1, round(float(runtime["target_ms"])))
    return [f"--{k}={int(v)}" for k, v in args.items()]


class SyclTileKernel(TileKernelBase):
    """Shared parts: build recipe, rendering, environment."""

    kind = ""
    backend = "sycl"
    targets = ("bmg", "pvc")
    template_version = TEMPLATE_VERSION
    runs_variants_in_one_process = False

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        raise NotImplementedError

    def build_recipe(self, target: str, options: dict[str, Any]) -> BuildRecipe:
        """icpx + sycl-tla flags for ``target``; with ``options['dry_run']`` missing tools are tolerated
        (the recipe then names icpx and the headers that would be used) so a dry run can render."""
        dry = bool(options.get("dry_run"))
        aot = sycl_tla.aot_device(target, options)
        problems_found: list[str] = []
        tree = None
        try:
            tree = sycl_tla.require_sycl_tla(self.kind, options.get("sycl_tla_dir"))
        except ToolMissingError as exc:
            problems_found.append(str(exc))
            tree = sycl_tla.find_sycl_tla(options.get("sycl_tla_dir"))
        icpx, banner = "icpx", ""
        try:
            icpx, banner = sycl_tla.require_icpx(options.get("icpx"))
        except ToolMissingError as exc:
            problems_found.append(str(exc))
        if problems_found and not dry:
            # every missing piece at once, before anything is built or run
            raise ToolMissingError(
                f"cannot build {self.kind} programs for {target}: " + " | ".join(problems_found)
            )
        return BuildRecipe(
            compiler=icpx,
            language="CXX",
            flags=sycl_tla.compile_flags(),
            include_dirs=sycl_tla.include_dirs(tree, self.kind) if tree else (),
            # every build setting (256 GRF, IGC options, SPIR-V extensions) is on the link line, none in
            # the environment: the generated project and BUILD.txt reproduce the build by hand
            link_flags=sycl_tla.link_flags(aot, sycl_tla.parse_icpx_release(banner), self.kind),
            toolchain_version=banner,
            library_version=tree.key() if tree else "sycl-tla (not found)",
            memory_gb_per_job=6.0 if self.kind.startswith("fa_") else 4.0,
            timeout_s=float(options.get("build_timeout_s", 900.0)),
        )

    def render(self, config: Any, problem: dict[str, Any], target: str) -> RenderedProgram:
        sources = programs.render_program(self.kind, config, problem, target, library_version_for_render())
        return RenderedProgram(target_name=self.kind, sources=sources)

    def env(self) -> dict[str, str]:
        return sycl_tla.runtime_env()

    variants_version = "1"

    def check_runtime(self) -> None:
        """Before the first build of a real run: a Level Zero GPU must be visible (``sycl-ls``), else
        nothing is built in vain.  The message says what is missing and that dry runs need none of it."""
        from kernelpilot.dsl_plugins.sycl.doctor import level_zero_gpus

        gpus, note = level_zero_gpus()
        if not gpus:
            raise ToolMissingError(
                f"no Intel GPU to benchmark on: {note}; install the GPU driver (Level Zero) and check "
                "`sycl-ls`, or use --dry-run to plan and render without one"
            )

    def min_bytes(self, problem: dict[str, Any]) -> float:
        """Compulsory device-memory traffic: every operand read once, every output written once."""
        raise NotImplementedError

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        return [{}]

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> Any:
        """The torch.xpu path (oneDNN, XPU SDPA): :mod:`kernelpilot.dsl_plugins.sycl.vendor_worker`."""
        from kernelpilot.dsl_plugins.sycl.vendor_baseline import vendor_plan

        return vendor_plan(self.kind, problem, bench_args)

    def flops(self, problem: dict[str, Any]) -> float:
        raise NotImplementedError


class XeGemm(SyclTileKernel):
    """Dense GEMM: bf16/f16/tf32/fp8 (fp32 accumulate) and s8/u8 (s32), row/column layouts,
    default / persistent / stream-K / split-K schedules."""

    kind = "gemm"

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        return problems.validate_gemm(dims, dtype, where)

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        """Stream-K builds also run data-parallel; split-K builds try the splits the K extent allows."""
        n = programs.normalized(self.kind, config, problem)
        if n["schedule"] == "streamk":
            return [{"mode": "streamk", "splits": 1}, {"mode": "dp", "splits": 1}]
        if n["schedule"] == "splitk":
            k_tiles = math.ceil(problem["K"] / n["wg"][2])
            splits = [s for s in (2, 4, 8) if k_tiles >= 2 * s] or [2]
            return [{"mode": "splitk", "splits": s} for s in splits]
        return [{}]

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        argv = [str(binary), f"--m={problem['M']}", f"--n={problem['N']}", f"--k={problem['K']}"]
        if "mode" in runtime:
            argv += [f"--mode={runtime['mode']}", f"--splits={int(runtime.get('splits', 1))}"]
        return argv + _l2_arg(runtime) + _timing_args(runtime), self.env()

    def flops(self, problem: dict[str, Any]) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]

    def min_bytes(self, problem: dict[str, Any]) -> float:
        a, b, out = _bits(problem)
        m, n, k = problem["M"], problem["N"], problem["K"]
        return (m * k * a + k * n * b + m * n * out) / 8.0


class XeGroupedGemm(SyclTileKernel):
    """Grouped GEMM (pointer-array, GroupScheduler): groups of different M, N, K in one launch."""

    kind = "grouped_gemm"

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        return problems.validate_grouped(dims, dtype, where)

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        shapes = ",".join(f"{m}x{n}x{k}" for m, n, k in problem["shapes"])
        return [str(binary), f"--shapes={shapes}", *_l2_arg(runtime), *_timing_args(runtime)], self.env()

    def flops(self, problem: dict[str, Any]) -> float:
        return sum(2.0 * m * n * k for m, n, k in problem["shapes"])

    def min_bytes(self, problem: dict[str, Any]) -> float:
        a, b, out = _bits(problem)
        return sum(m * k * a + k * n * b + m * n * out for m, n, k in problem["shapes"]) / 8.0


class XeMoeGemm(SyclTileKernel):
    """MoE GEMM after sycl-tla example 12: experts with different token counts, one persistent launch."""

    kind = "moe_gemm"

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        return problems.validate_moe(dims, dtype, where)

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        tokens = ",".join(str(t) for t in problem["tokens_per_expert"])
        argv = [str(binary), f"--n={problem['N']}", f"--k={problem['K']}", f"--tokens={tokens}"]
        return argv + _l2_arg(runtime) + _timing_args(runtime), self.env()

    def flops(self, problem: dict[str, Any]) -> float:
        return sum(2.0 * t * problem["N"] * problem["K"] for t in problem["tokens_per_expert"])

    def min_bytes(self, problem: dict[str, Any]) -> float:
        a, b, out = _bits(problem)
        n, k, total, experts = problem["N"], problem["K"], problem["total_tokens"], problem["num_experts"]
        return (total * k * a + experts * n * k * b + total * n * out) / 8.0


class XeFlashAttention(SyclTileKernel):
    """Flash-attention-2 forward through sycl-tla's applications/flash_attention_v2."""

    mode = "prefill"

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        return problems.validate_fa(dims, dtype, where, self.mode)

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        argv = [
            str(binary),
            f"--batch={problem['batch']}",
            f"--num_heads_q={problem['num_heads_q']}",
            f"--num_heads_kv={problem['num_heads_kv']}",
            f"--seq_qo={problem['seq_qo']}",
            f"--seq_kv={problem['seq_kv']}",
            f"--head_dim_qk={problem['head_dim_qk']}",
            f"--head_dim_vo={problem['head_dim_vo']}",
        ]
        return argv + _l2_arg(runtime) + _timing_args(runtime), self.env()

    def flops(self, problem: dict[str, Any]) -> float:
        return problems.fa_flops(problem)

    def min_bytes(self, problem: dict[str, Any]) -> float:
        a, _, out = _bits(problem)
        p = problem
        q_o = p["batch"] * p["num_heads_q"] * p["seq_qo"] * (p["head_dim_qk"] * a + p["head_dim_vo"] * out)
        kv = p["batch"] * p["num_heads_kv"] * p["seq_kv"] * (p["head_dim_qk"] + p["head_dim_vo"]) * a
        return (q_o + kv) / 8.0


class XeFlashAttentionPrefill(XeFlashAttention):
    kind = "fa_prefill"
    mode = "prefill"


class XeFlashAttentionDecode(XeFlashAttention):
    kind = "fa_decode"
    mode = "decode"


def all_kernels() -> list[SyclTileKernel]:
    return [XeGemm(), XeGroupedGemm(), XeMoeGemm(), XeFlashAttentionPrefill(), XeFlashAttentionDecode()]
