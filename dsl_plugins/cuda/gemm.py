"""CUTLASS sm90a dense GEMM as a tile-tunable kernel (the CUDA backend's ``gemm``).

Renders ``cpp_templates/cuda/gemm_sm90.cu.j2`` for one compile-time config (tile, cluster, schedule,
epilogue, stages, tile scheduler).  Problem sizes and the run-time knobs (raster order, swizzle,
split-K / stream-K) are program arguments, so one binary per config serves every shape and every
knob setting: the build cache builds it once.  The program measures all run-time variants of a
config in one process (``runs_variants_in_one_process``) and prints one JSON line with the best
variant in ``runtime`` and every variant in ``variants``.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram, TileKernelBase, config_dict

TEMPLATE_VERSION = "gemm_sm90-3"  # 2: timed launches replayed from a CUDA graph; 3: CUTLASS workspace reset per launch, checked after timing
NVCC_FLAGS = (
    "-std=c++17",
    "-O3",
    "-DNDEBUG",
    "-gencode",
    "arch=compute_90a,code=sm_90a",
    "--expt-relaxed-constexpr",
    "-Xptxas=-v",
)
DTYPES = {"bf16": "cutlass::bfloat16_t", "f16": "cutlass::half_t"}
DTYPE_ALIASES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "f16": "f16",
    "fp16": "f16",
    "float16": "f16",
    "half": "f16",
}
# layout names: first letter A, second B; "r" row-major, "c" column-major.  "rr" is x @ W in PyTorch.
LAYOUTS = {
    "rr": ("cutlass::layout::RowMajor", "cutlass::layout::RowMajor"),
    "rc": ("cutlass::layout::RowMajor", "cutlass::layout::ColumnMajor"),
}
TRANSPOSED = {
    "cutlass::layout::RowMajor": "cutlass::layout::ColumnMajor",
    "cutlass::layout::ColumnMajor": "cutlass::layout::RowMajor",
}
SCHEDULES = {
    "cooperative": (
        "cutlass::gemm::KernelTmaWarpSpecializedCooperative",
        "cutlass::epilogue::TmaWarpSpecializedCooperative",
    ),
    "pingpong": ("cutlass::gemm::KernelTmaWarpSpecializedPingpong", "cutlass::epilogue::TmaWarpSpecialized"),
    "ws": ("cutlass::gemm::KernelTmaWarpSpecialized", "cutlass::epilogue::TmaWarpSpecialized"),
}
# "tma" picks the epilogue that pairs with the schedule (above); these force one explicitly
EXPLICIT_EPILOGUES = {
    "tma_coop": "cutlass::epilogue::TmaWarpSpecializedCooperative",
    "tma_ws": "cutlass::epilogue::TmaWarpSpecialized",
}
SM_COUNT_H200 = 132


def _norm_dtype(dtype: Any) -> str:
    name = str(getattr(dtype, "name", dtype)).lower()
    if name not in DTYPE_ALIASES:
        raise InputError(
            f"dtype {dtype!r} is not supported by the CUTLASS sm90 GEMM; allowed: bf16, f16", field="dtype"
        )
    return DTYPE_ALIASES[name]


def normalize(cfg: dict[str, Any]) -> dict[str, Any]:
    """Fill the template's fields from a config dict (model field names; defaults documented here)."""
    tile = list(cfg.get("tile") or [cfg.get("tile_m"), cfg.get("tile_n"), cfg.get("tile_k")])
    cluster = list(cfg.get("cluster") or [cfg.get("cluster_m", 1), cfg.get("cluster_n", 1)])
    schedule = str(cfg.get("schedule", "cooperative"))
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} not in {sorted(SCHEDULES)}")
    epilogue = str(cfg.get("epilogue") or "tma")
    # stream-K is a scheduler of the cooperative kernel only (pingpong and ws static_assert on it)
    tile_scheduler = str(
        cfg.get("tile_scheduler") or ("streamk" if schedule == "cooperative" else "persistent")
    )
    out = {
        "tile": [int(t) for t in tile],
        "cluster": [int(c) for c in cluster[:2]],
        "schedule": schedule,
        "epilogue": epilogue,
        "stages": int(cfg.get("stages") or 0),
        "tile_scheduler": tile_scheduler,
    }
    if cfg.get("swap_ab"):  # only when set: the rendered source of unswapped configs stays as built
        out["swap_ab"] = True
    return out


@lru_cache(maxsize=1)
def template_env(loader: Any = None):
    """The Jinja environment over ``cpp_templates`` (the benchmark program and the exported library
    import the kernel part, ``cuda/gemm_sm90_kernel.j2``, from it).  ``loader`` replaces the package's
    folder with another source of the same templates (an A/B benchmark renders a git revision's), under
    the same settings, so both sides render alike."""
    from importlib.resources import files

    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    if loader is None:
        loader = FileSystemLoader(str(files("kernelpilot.cpp_templates")))
    return Environment(
        loader=loader,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _template():
    return template_env().get_template("cuda/gemm_sm90.cu.j2")


def render_source(cfg: dict[str, Any], dtype: str, layout: str) -> str:
    """The complete .cu program for one normalized config."""
    return _template().render(**render_context(cfg, dtype, layout))


def render_context(cfg: dict[str, Any], dtype: str, layout: str) -> dict[str, Any]:
    """The template variables of one config: the benchmark program and ``kernelpilot export`` render
    the same kernel part (``cuda/gemm_sm90_kernel.j2``) from them."""
    n = normalize(cfg)
    kernel_schedule, epilogue_schedule = SCHEDULES[n["schedule"]]
    if n["epilogue"] in ("nosmem", "no_smem"):
        epilogue_schedule = "cutlass::epilogue::NoSmemWarpSpecialized"
    elif n["epilogue"] in EXPLICIT_EPILOGUES:
        # an explicit TMA epilogue schedule, independent of the mainloop: lets the sm90 model's
        # validation build the mismatched pairings it rejects (the tuner never proposes them)
        epilogue_schedule = EXPLICIT_EPILOGUES[n["epilogue"]]
    elif n["epilogue"] not in ("tma", "auto", "default"):
        raise ValueError(f"epilogue {n['epilogue']!r} not in tma, nosmem, {', '.join(EXPLICIT_EPILOGUES)}")
    if n["tile_scheduler"] == "streamk":
        ts_type = "cutlass::gemm::StreamKScheduler"
    elif n["tile_scheduler"] == "persistent":
        ts_type = "cutlass::gemm::PersistentScheduler"
    else:
        raise ValueError(f"tile_scheduler {n['tile_scheduler']!r} not in persistent, streamk")
    la, lb = LAYOUTS[layout]
    config_json = json.dumps(n, sort_keys=True)
    return dict(
        template_version=TEMPLATE_VERSION,
        tile_m=n["tile"][0],
        tile_n=n["tile"][1],
        tile_k=n["tile"][2],
        cluster_m=n["cluster"][0],
        cluster_n=n["cluster"][1],
        schedule=n["schedule"],
        epilogue=n["epilogue"],
        stages=n["stages"],
        tile_scheduler=n["tile_scheduler"],
        tile_scheduler_type=ts_type,
        kernel_schedule=kernel_schedule,
        epilogue_schedule=epilogue_schedule,
        element=DTYPES[dtype],
        dtype=dtype,
        layout=layout,
        layout_a=la,
        layout_b=lb,
        layout_b_kmajor=layout[1] == "c",
        swap_ab=bool(n.get("swap_ab")),
        # swapped operands: A' = B^T, B' = A^T (the transpose of a layout tag is the other tag)
        layout_a_swapped=TRANSPOSED[lb],
        layout_b_swapped=TRANSPOSED[la],
        config_json_literal=json.dumps(config_json),
    )


class CutlassSm90Gemm(TileKernelBase):
    """TileKernel for CUTLASS sm90a dense GEMM (bf16/f16 in, fp32 accumulate, same-type out)."""

    kind = "gemm"
    backend = "cuda"
    targets = ("sm90",)
    template_version = TEMPLATE_VERSION
    runs_variants_in_one_process = True
    # bump when runtime_variants() changes which knobs are measured: part of the results-store key
    # (not of the build-cache key, so binaries are reused).  v1 recorded the H200 ground truth.
    variants_version = "v2"

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        allowed = {"M", "N", "K", "layout"}
        unknown = sorted(set(dims) - allowed)
        if unknown:
            raise InputError(f"{where}: unknown dims {unknown}; allowed: M, N, K, layout", field="dims")
        out: dict[str, Any] = {}
        for name in ("M", "N", "K"):
            if name not in dims:
                raise InputError(f"{where}: missing dim {name} (gemm needs M, N, K)", field=f"dims.{name}")
            value = dims[name]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(
                    f"{where}: dim {name}={value!r} must be a positive integer", field=f"dims.{name}"
                )
            out[name] = value
        layout = str(dims.get("layout", "rr"))
        if layout not in LAYOUTS:
            raise InputError(f"{where}: layout {layout!r} not in {sorted(LAYOUTS)}", field="dims.layout")
        # TMA needs 16-byte aligned contiguous extents: N (row-major B and D) and K (row-major A)
        for name in ("N", "K"):
            if out[name] % 8:
                raise InputError(
                    f"{where}: {name}={out[name]} is not a multiple of 8: CUTLASS sm90 TMA needs 16-byte "
                    "aligned rows for 16-bit types",
                    field=f"dims.{name}",
                )
        out["layout"] = layout
        out["dtype"] = _norm_dtype(dtype)
        return out

    def build_recipe(self, target: str, options: dict[str, Any]) -> BuildRecipe:
        from kernelpilot import toolchain

        dry = bool(options.get("dry_run"))
        tree = toolchain.find_headers("cutlass", options.get("cutlass_dir"))
        if tree is None and not dry:
            raise ToolMissingError(
                "CUTLASS headers not found: set CUTLASS_DIR to a CUTLASS checkout or to a folder made with "
                "`pip install --target DIR nvidia-cutlass`"
            )
        nvcc = options.get("nvcc") or toolchain.which("nvcc")
        if nvcc is None and not dry:
            raise ToolMissingError("nvcc not found on PATH (install the CUDA toolkit >= 12.3)")
        include_dirs: tuple[Path, ...] = ()
        if tree is not None:
            include_dirs = (tree.include, *tree.extra_includes)
        return BuildRecipe(
            compiler=nvcc or "nvcc",
            language="CUDA",
            flags=NVCC_FLAGS,
            include_dirs=include_dirs,
            toolchain_version=(toolchain.tool_version("nvcc") or "") if nvcc else "",
            library_version=f"cutlass {tree.version}" if tree else "cutlass (not found)",
            memory_gb_per_job=3.4,
            timeout_s=float(options.get("build_timeout_s", 900.0)),
        )

    def check_runtime(self) -> None:
        """Before the first build of a real run: is there an NVIDIA GPU to run the programs on?"""
        import shutil
        import subprocess

        smi = shutil.which("nvidia-smi")
        gpus = ""
        if smi:
            try:
                gpus = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout.strip()
            except (OSError, subprocess.TimeoutExpired):
                gpus = ""
        if not gpus:
            raise ToolMissingError(
                "no NVIDIA GPU found (nvidia-smi -L lists none): use --dry-run to render the programs, "
                "or --replay STORE to tune from recorded measurements"
            )

    def render(self, config: Any, problem: dict[str, Any], target: str) -> RenderedProgram:
        cfg = normalize(config_dict(config))
        src = render_source(cfg, problem.get("dtype", "bf16"), problem.get("layout", "rr"))
        return RenderedProgram(target_name="gemm", sources={"gemm.cu": src})

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        """Raster order x swizzle for every schedule; split-K / stream-K for cooperative stream-K builds
        when the grid is small (< 2 waves) or ragged (< 4 waves, last one under 75 % full)."""
        cfg = normalize(config_dict(config))
        tm, tn, tk = cfg["tile"]
        rows, cols = (problem["N"], problem["M"]) if cfg.get("swap_ab") else (problem["M"], problem["N"])
        tiles_m, tiles_n = math.ceil(rows / tm), math.ceil(cols / tn)
        swizzles = [1, 8] if min(tiles_m, tiles_n) >= 6 else [1, 2] if min(tiles_m, tiles_n) >= 2 else [1]
        rasters = ["M", "N"] if min(tiles_m, tiles_n) > 1 else ["H"]
        decomp = "D" if cfg["tile_scheduler"] == "streamk" else "H"
        out = [{"raster": r, "swizzle": s, "decomp": decomp, "splits": 1} for r in rasters for s in swizzles]
        tiles = tiles_m * tiles_n
        waves = tiles / SM_COUNT_H200
        last_wave_fill = waves - math.floor(waves)
        # stream-K / split-K pay off when the grid is small or its last wave is mostly empty (wave
        # quantization: 3000^3 with 128x256 tiles is 288 tiles = 2.18 waves on 132 SMs)
        small_or_ragged = tiles < 2 * SM_COUNT_H200 or (waves < 4 and 0 < last_wave_fill < 0.75)
        if cfg["tile_scheduler"] == "streamk" and small_or_ragged:
            k_tiles = math.ceil(problem["K"] / tk)
            out.append({"raster": "H", "swizzle": 1, "decomp": "K", "splits": 1})
            for splits in (2, 4, 8):
                if k_tiles >= 2 * splits:
                    out.append({"raster": "H", "swizzle": 1, "decomp": "S", "splits": splits})
        return out

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        variants = runtime.get("variants") or [
            runtime or {"raster": "H", "swizzle": 1, "decomp": "H", "splits": 1}
        ]
        spec = ",".join(
            f"{v.get('raster', 'H')}:{v.get('swizzle', 1)}:{v.get('decomp', 'H')}:{v.get('splits', 1)}"
            for v in variants
        )
        argv = [
            str(binary),
            f"--m={problem['M']}",
            f"--n={problem['N']}",
            f"--k={problem['K']}",
            f"--variants={spec}",
        ]
        for key in ("target_ms", "reps", "seed"):
            if key in runtime:
                argv.append(f"--{key}={runtime[key]}")
        return argv, {}

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> Any:
        """cuBLAS through ``torch.matmul`` (see :mod:`kernelpilot.dsl_plugins.cuda.vendor_worker`)."""
        from kernelpilot.dsl_plugins.cuda.vendor_baseline import vendor_plan

        return vendor_plan(self.kind, problem, bench_args)

    def variant_from_runtime(self, runtime: dict[str, Any]) -> dict[str, Any] | None:
        """The ``runtime_variants`` entry a program's reported ``runtime`` came from (the program
        spells the knobs out: ``along_m``, ``data_parallel``), or None for an unknown spelling."""
        raster = {"along_m": "M", "along_n": "N", "heuristic": "H"}.get(str(runtime.get("raster")))
        decomp = {"data_parallel": "D", "split_k": "S", "stream_k": "K", "heuristic": "H"}.get(
            str(runtime.get("decomposition"))
        )
        if raster is None or decomp is None:
            return None
        return {"raster": raster, "swizzle": int(runtime.get("swizzle", 1)), "decomp": decomp,
                "splits": int(runtime.get("splits", 1))}  # fmt: skip

    def flops(self, problem: dict[str, Any]) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]

    def min_bytes(self, problem: dict[str, Any]) -> float:
        """Fewest bytes through device memory: A and B read once, D written once (2 bytes each)."""
        return 2.0 * (problem["M"] * problem["K"] + problem["K"] * problem["N"] + problem["M"] * problem["N"])


def default_cutlass_dir() -> str | None:
    return os.environ.get("CUTLASS_DIR")
