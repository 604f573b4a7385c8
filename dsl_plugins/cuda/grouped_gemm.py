"""CUTLASS sm90 ptr-array grouped GEMM as a tile-tunable kernel (kind ``grouped_gemm``).

One binary per tile config serves every grouped problem: the group shapes are run-time arguments
(``--groups=MxNxK,...``), so the content-addressed build cache builds a config once for a whole batch.
The program follows CUTLASS's examples/57_hopper_grouped_gemm (bf16/fp16 instead of fp8) and checks
every group against a naive fp32 GPU reference.

Workload dims (``validate_problem``):

* explicit: ``groups: [[M, N, K], ...]`` (or ``"MxNxK"`` strings);
* generated: ``G`` (group count) and ``M``, ``N``, ``K`` each an int or a ``[lo, hi]`` range, with
  ``dist`` (``uniform`` | ``loguniform``, default uniform), ``seed`` (default 0) and ``align``
  (multiple applied to generated N and K, default 8: TMA needs 16-byte rows).

Layout is ``rc`` only (A row-major [M, K], B column-major = an ``nn.Linear`` weight [N, K], D
row-major; ``tn`` is accepted as an alias).  Groups with M = 0 (an expert without tokens) are dropped
from ``groups`` (the kernel would skip them) and counted in ``empty_groups``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError

# how a config runs its groups and the streams a per-group launch uses: the sm90 model's values, so the
# program side accepts exactly what the model's rules allow
from kernelpilot.hw_models.sm90.gemm import FUSED_MAX_GROUPS, GROUP_STREAMS, LAUNCHES
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram, TileKernelBase, config_dict

TEMPLATE_VERSION = "1"
DTYPES = {"bf16": "cutlass::bfloat16_t", "f16": "cutlass::half_t"}
DTYPE_ALIASES = {"bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "fp16": "f16", "half": "f16"}
RTOL = {"bf16": 1e-2, "f16": 2e-3}
NVCC_FLAGS = (
    "-std=c++17",
    "-O1",
    "-DNDEBUG",
    "-gencode",
    "arch=compute_90a,code=sm_90a",
    "--expt-relaxed-constexpr",
    "-Xptxas",
    "-v",
)
MAX_GROUPS = 4096
MAX_DIM = 1 << 20

# schedule -> (kernel schedule, matching TMA epilogue).  A ping-pong mainloop with the cooperative
# epilogue compiles and gives wrong results (docs/reference/sm90_h200_measurements.md): the pairing is fixed here.
SCHEDULES = {
    "cooperative": (
        "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative",
        "cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative",
    ),
    "pingpong": (
        "cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong",
        "cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong",
    ),
}
EPILOGUES = {"tma", "nosmem"}
EPILOGUE_ALIASES = {
    "tma": "tma",
    "auto": "tma",
    "tma_coop": "tma",
    "tma_ws": "tma",
    "nosmem": "nosmem",
    "PtrArrayNoSmemWarpSpecialized": "nosmem",
    "NoSmemWarpSpecialized": "nosmem",
    "PtrArrayTmaWarpSpecializedCooperative": "tma",
    "PtrArrayTmaWarpSpecializedPingpong": "tma",
    "TmaWarpSpecializedCooperative": "tma",
    "TmaWarpSpecialized": "tma",
}
SCHEDULE_ALIASES = {
    "cooperative": "cooperative",
    "coop": "cooperative",
    "pingpong": "pingpong",
    "ping-pong": "pingpong",
}


# ----------------------------------------------------------------------------- dtype / config
def normalize_dtype(dtype: Any, where: str) -> str:
    """The program supports equal 16-bit A/B/D types; anything else is an input error."""
    if isinstance(dtype, dict):
        vals = {DTYPE_ALIASES.get(str(v).lower()) for v in dtype.values()}
        if len(vals) != 1 or None in vals:
            raise InputError(
                f"grouped GEMM needs one 16-bit dtype for A and B, got {dtype}; allowed: bf16, f16",
                field=f"{where}.dtype",
            )
        return vals.pop()  # type: ignore[return-value]
    name = DTYPE_ALIASES.get(str(dtype).lower())
    if name is None:
        raise InputError(f"dtype {dtype!r} not supported; allowed: bf16, f16", field=f"{where}.dtype")
    return name


def normalize_gemm_config(config: Any) -> dict[str, Any]:
    """Tile/cluster/schedule/epilogue/stages of one grouped-GEMM config, with pairing enforced."""
    c = config_dict(config)
    try:
        tile = [int(x) for x in c["tile"]]
        cluster = [int(x) for x in c.get("cluster", [1, 1])][:2]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"grouped GEMM config needs tile [M,N,K] and cluster [CM,CN]: {c}") from exc
    if len(tile) != 3 or len(cluster) != 2:
        raise ValueError(f"tile must have 3 and cluster 2 entries: {c}")
    schedule = SCHEDULE_ALIASES.get(str(c.get("schedule", "cooperative")))
    if schedule is None:
        raise ValueError(
            f"grouped GEMM schedule {c.get('schedule')!r} is not a ptr-array schedule; "
            f"allowed: {sorted(SCHEDULES)}"
        )
    epilogue = EPILOGUE_ALIASES.get(str(c.get("epilogue", "tma")))
    if epilogue is None:
        raise ValueError(f"epilogue {c.get('epilogue')!r} unknown; allowed: {sorted(EPILOGUES)}")
    raw_epi = str(c.get("epilogue", "tma"))
    if schedule == "pingpong" and ("Cooperative" in raw_epi or raw_epi == "tma_coop"):
        raise ValueError("ping-pong mainloop with a cooperative epilogue gives wrong results")
    if schedule == "cooperative" and raw_epi in (
        "TmaWarpSpecialized",
        "PtrArrayTmaWarpSpecializedPingpong",
        "tma_ws",
    ):
        raise ValueError(
            "cooperative mainloop needs the cooperative TMA epilogue (MMA_TILE_M must divide EPI_TILE_M)"
        )
    launch = str(c.get("launch") or "grouped")
    if launch not in LAUNCHES:
        raise ValueError(f"launch {launch!r} unknown; allowed: {list(LAUNCHES)}")
    tile_scheduler = str(c.get("tile_scheduler") or "persistent")
    if launch == "grouped" and tile_scheduler != "persistent":
        raise ValueError("grouped GEMM has only the group scheduler (no stream-K / split-K)")
    if launch == "fused":
        if tile_scheduler != "persistent" or schedule != "cooperative":
            raise ValueError(
                "launch fused runs the cooperative kernel's body with its own persistent schedule"
            )
        if c.get("swap_ab") or c.get("extra_tile_n") or c.get("streams", 1) != 1:
            raise ValueError("launch fused takes no swap_ab, extra_tile_n or streams")
    if launch == "per_group" and tile_scheduler not in ("persistent", "streamk"):
        raise ValueError(f"tile_scheduler {tile_scheduler!r}; per-group launches take persistent or streamk")
    if tile_scheduler == "streamk" and schedule != "cooperative":
        raise ValueError("stream-K needs the cooperative schedule (ping-pong static_asserts against it)")
    stages = c.get("stages") or 0
    out: dict[str, Any] = {
        "tile": tile,
        "cluster": cluster,
        "schedule": schedule,
        "epilogue": epilogue,
        "stages": int(stages),
    }
    if launch != "grouped":  # written only then: grouped configs keep their rendered source and keys
        out.update(launch=launch, tile_scheduler=tile_scheduler)
    streams = c.get("streams", 1)
    if isinstance(streams, bool) or not isinstance(streams, int) or streams not in GROUP_STREAMS:
        raise ValueError(f"streams {streams!r} unknown; allowed: {list(GROUP_STREAMS)}")
    if streams != 1:
        if launch != "per_group":
            raise ValueError("streams > 1 needs launch: per_group (the grouped launch is one kernel)")
        out["streams"] = streams  # likewise written only when set
    swap_ab = c.get("swap_ab", False)
    if not isinstance(swap_ab, bool):
        raise ValueError(f"swap_ab must be true or false, got {swap_ab!r}")
    if swap_ab:
        out["swap_ab"] = True  # likewise written only when set
    extra = c.get("extra_tile_n") or []
    if extra:
        if not swap_ab:
            raise ValueError("extra_tile_n (mixed token-side widths) needs swap_ab: true")
        try:
            widths = [int(w) for w in extra]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"extra_tile_n must be a list of tile N widths, got {extra!r}") from exc
        if len({tile[1], *widths}) != 1 + len(widths):
            raise ValueError(f"extra_tile_n {widths} repeats a width (tile N is {tile[1]})")
        out["extra_tile_n"] = widths  # likewise
    return out


def config_label(cfg: dict[str, Any]) -> str:
    t, cl = cfg["tile"], cfg["cluster"]
    st = f"_s{cfg['stages']}" if cfg["stages"] else ""
    pg = ""
    if cfg.get("launch") == "per_group":
        pg = "_pergroup" + ("_streamk" if cfg.get("tile_scheduler") == "streamk" else "")
        pg += f"_{cfg['streams']}streams" if cfg.get("streams", 1) > 1 else ""
    elif cfg.get("launch") == "fused":
        pg = "_fused"
    swap = "_swap" if cfg.get("swap_ab") else ""
    if cfg.get("extra_tile_n"):
        swap += "_n" + "+".join(str(w) for w in cfg["extra_tile_n"])
    return f"{cfg['schedule'][:4]}_{t[0]}x{t[1]}x{t[2]}_c{cl[0]}x{cl[1]}_{cfg['epilogue']}{st}{pg}{swap}"


def c_string(text: str) -> str:
    """Escape text for a C string literal."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


# ----------------------------------------------------------------------------- problems
def _as_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{value!r} is not an integer", field=field)
    try:
        f = float(value)
    except ValueError as exc:
        raise InputError(f"{value!r} is not an integer", field=field) from exc
    if not f.is_integer():
        raise InputError(f"{value!r} is not an integer", field=field)
    return int(f)


def _range(value: Any, field: str, lo_allowed: int) -> tuple[int, int]:
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise InputError(f"expected an int or [lo, hi], got {value!r}", field=field)
        lo, hi = (_as_int(v, field) for v in value)
    else:
        lo = hi = _as_int(value, field)
    if lo < lo_allowed or hi < lo or hi > MAX_DIM:
        raise InputError(
            f"range [{lo}, {hi}] invalid: need {lo_allowed} <= lo <= hi <= {MAX_DIM}", field=field
        )
    return lo, hi


def _draw(rng: random.Random, lo: int, hi: int, dist: str, align: int) -> int:
    if lo == hi:
        return lo
    if dist == "loguniform":
        v = math.exp(rng.uniform(math.log(max(lo, 1)), math.log(hi)))
    else:
        v = rng.uniform(lo, hi)
    v = int(round(v / align)) * align if align > 1 else int(round(v))
    return min(max(v, lo), hi)


def generate_groups(
    count: int,
    m: tuple[int, int],
    n: tuple[int, int],
    k: tuple[int, int],
    dist: str = "uniform",
    seed: int = 0,
    align: int = 8,
) -> list[list[int]]:
    """Seeded group shapes: same arguments, same list on every machine (Python's Mersenne Twister)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append(
            [
                _draw(rng, *m, dist, 1),
                _draw(rng, *n, dist, align),
                _draw(rng, *k, dist, align),
            ]
        )
    return out


def check_group_list(groups: Iterable[Any], where: str) -> list[list[int]]:
    """Each group [M, N, K]: M >= 0, N and K positive multiples of 8 (16-byte TMA rows)."""
    out: list[list[int]] = []
    for i, g in enumerate(groups):
        field = f"{where}.groups[{i}]"
        if isinstance(g, str):
            parts = g.lower().split("x")
        elif isinstance(g, (list, tuple)):
            parts = list(g)
        else:
            raise InputError(f"group {g!r} must be [M, N, K] or 'MxNxK'", field=field)
        if len(parts) != 3:
            raise InputError(f"group {g!r} must have three extents M, N, K", field=field)
        m, n, k = (_as_int(p, field) for p in parts)
        if m < 0 or n <= 0 or k <= 0 or max(m, n, k) > MAX_DIM:
            raise InputError(f"group {g!r}: need M >= 0, N > 0, K > 0, each <= {MAX_DIM}", field=field)
        if n % 8 or k % 8:
            raise InputError(
                f"group {g!r}: N and K must be multiples of 8 (TMA needs 16-byte aligned rows)",
                field=field,
            )
        out.append([m, n, k])
    if not out:
        raise InputError("no groups given", field=f"{where}.groups")
    if len(out) > MAX_GROUPS:
        raise InputError(f"{len(out)} groups; at most {MAX_GROUPS}", field=f"{where}.groups")
    if all(g[0] == 0 for g in out):
        raise InputError("every group has M = 0: nothing to compute", field=f"{where}.groups")
    return out


GROUPED_KEYS = {"groups", "G", "M", "N", "K", "dist", "seed", "align", "dtype", "layout"}


def validate_grouped_dims(dims: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = set(dims) - GROUPED_KEYS
    if unknown:
        raise InputError(
            f"unknown dims {sorted(unknown)}; allowed: {sorted(GROUPED_KEYS)}", field=f"{where}.dims"
        )
    check_layout(dims, where)
    if "groups" in dims:
        extra = {"G", "M", "N", "K", "dist"} & set(dims)
        if extra:
            raise InputError(
                f"give either groups or a generator (G, M, N, K), not both: {sorted(extra)}",
                field=f"{where}.dims",
            )
        groups = check_group_list(dims["groups"], f"{where}.dims")
        return grouped_problem(groups, {"kind": "explicit"})
    missing = [k for k in ("G", "M", "N", "K") if k not in dims]
    if missing:
        raise InputError(
            f"missing {missing}: give groups: [[M,N,K],...] or G, M, N, K (int or [lo, hi])",
            field=f"{where}.dims",
        )
    count = _as_int(dims["G"], f"{where}.dims.G")
    if not 1 <= count <= MAX_GROUPS:
        raise InputError(f"G={count}; allowed 1..{MAX_GROUPS}", field=f"{where}.dims.G")
    dist = str(dims.get("dist", "uniform"))
    if dist not in ("uniform", "loguniform"):
        raise InputError(f"dist {dist!r}; allowed: uniform, loguniform", field=f"{where}.dims.dist")
    align = _as_int(dims.get("align", 8), f"{where}.dims.align")
    if align <= 0 or align % 8:
        raise InputError(f"align={align}; must be a positive multiple of 8", field=f"{where}.dims.align")
    seed = _as_int(dims.get("seed", 0), f"{where}.dims.seed")
    m = _range(dims["M"], f"{where}.dims.M", 0)
    n = _range(dims["N"], f"{where}.dims.N", 8)
    k = _range(dims["K"], f"{where}.dims.K", 8)
    groups = generate_groups(count, m, n, k, dist=dist, seed=seed, align=align)
    groups = check_group_list(groups, f"{where}.dims")
    source = {"kind": "generated", "G": count, "M": list(m), "N": list(n), "K": list(k)}
    source.update({"dist": dist, "seed": seed, "align": align})
    return grouped_problem(groups, source)


def check_layout(dims: dict[str, Any], where: str) -> str:
    layout = str(dims.get("layout", "rc")).lower()
    if layout not in ("rc", "tn"):
        raise InputError(
            f"layout {layout!r} not supported; allowed: rc (A row-major, B = nn.Linear weight [N, K]; alias tn)",
            field=f"{where}.dims.layout",
        )
    return "rc"


def grouped_problem(groups: list[list[int]], source: dict[str, Any]) -> dict[str, Any]:
    """Normalized problem: non-empty groups only (what the hw model and the program see)."""
    kept = [g for g in groups if g[0] > 0]
    return {"groups": kept, "empty_groups": len(groups) - len(kept), "layout": "rc", "source": source}


def groups_flops(groups: list[list[int]]) -> float:
    return float(sum(2.0 * m * n * k for m, n, k in groups))


def groups_arg(groups: list[list[int]]) -> str:
    return "--groups=" + ",".join(f"{m}x{n}x{k}" for m, n, k in groups)


# ----------------------------------------------------------------------------- build recipe
def cuda_build_recipe(
    memory_gb: float,
    timeout_s: float,
    options: dict[str, Any],
    extra_includes: tuple[Path, ...] = (),
    flags: tuple[str, ...] = NVCC_FLAGS,
) -> BuildRecipe:
    """nvcc for sm_90a with the CUTLASS headers found by kernelpilot.toolchain (``flags``: the grouped
    programs' by default; the FMHA programs add to them).

    A dry run (``options["dry_run"]``) renders programs and the CMake project only, so it must work on
    a machine without nvcc or CUTLASS: the recipe then names what is missing instead of raising.
    """
    from kernelpilot.toolchain import find_headers, tool_version, which

    dry = bool(options.get("dry_run"))
    nvcc = options.get("nvcc") or which("nvcc")
    if nvcc is None and not dry:
        raise ToolMissingError("nvcc not found: install the CUDA toolkit (>= 12.3) or put nvcc on PATH")
    tree = find_headers("cutlass", options.get("cutlass_dir"))
    if tree is None and not dry:
        raise ToolMissingError(
            "CUTLASS headers not found: set CUTLASS_DIR to a CUTLASS checkout or "
            "`pip install --target DIR nvidia-cutlass` and set CUTLASS_DIR=DIR"
        )
    includes: tuple[Path, ...] = (tree.include, *tree.extra_includes) if tree else ()
    return BuildRecipe(
        compiler=nvcc or "nvcc",
        language="CUDA",
        flags=flags,
        include_dirs=(*includes, *extra_includes),
        toolchain_version=(tool_version("nvcc") or "") if nvcc else "",
        library_version=f"cutlass {tree.version}" if tree else "cutlass (not found)",
        memory_gb_per_job=memory_gb,
        timeout_s=timeout_s,
    )


def kernel_context(cfg: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The names ``cuda/grouped_gemm_sm90_kernel.j2`` renders one config from (benchmark and export)."""
    kernel_schedule, tma_epilogue = SCHEDULES[cfg["schedule"]]
    epilogue = (
        tma_epilogue if cfg["epilogue"] == "tma" else "cutlass::epilogue::PtrArrayNoSmemWarpSpecialized"
    )
    return {
        "tile_m": cfg["tile"][0],
        "tile_n": cfg["tile"][1],
        "tile_k": cfg["tile"][2],
        "cluster_m": cfg["cluster"][0],
        "cluster_n": cfg["cluster"][1],
        "stages": cfg["stages"],
        "cutlass_dtype": DTYPES[dtype],
        "dtype": dtype,
        "kernel_schedule": kernel_schedule,
        "epilogue_schedule": epilogue,
        "epilogue": cfg["epilogue"],
        "swap_ab": bool(cfg.get("swap_ab")),
        # every token-side width (tile N first): more than one renders one kernel per width
        "widths": [cfg["tile"][1], *cfg.get("extra_tile_n", [])],
    }


def per_group_context(cfg: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The names ``cuda/gemm_sm90_kernel.j2`` renders the dense kernel of a per-group config from
    (layout rc: A row-major, B an nn.Linear weight).  With ``swap_ab`` the program's buffers keep each
    group's own M x N x K and the dense kernel's arguments swap the operands (D^T = W X^T)."""
    from kernelpilot.dsl_plugins.cuda.gemm import render_context

    dense = {k: cfg[k] for k in ("tile", "cluster", "schedule", "epilogue", "stages", "tile_scheduler")}
    if cfg.get("swap_ab"):  # D^T = W X^T per group: the tokens on the tile's N side
        dense["swap_ab"] = True
    ctx = render_context(dense, dtype, "rc")
    ctx.pop("template_version")
    # every token-side width (tile N first): more than one renders the dense kernel once per width and
    # runs each group with the width that pads its tokens least
    return {**ctx, "cutlass_dtype": DTYPES[dtype], "widths": [cfg["tile"][1], *cfg.get("extra_tile_n", [])]}


def fused_kernel_source() -> str:
    """The fused-groups kernel body (a modified copy of CUTLASS's cooperative kernel), pasted into the
    rendered program so that the program's source - and with it its build-cache key - holds all of it."""
    from importlib.resources import files

    text = (files("kernelpilot.cpp_templates") / "cuda" / "fused_groups_gemm_sm90.hpp").read_text()
    return text.replace("#pragma once\n", "", 1)  # a header's guard, a warning in a main file


def render_grouped_program(kind: str, cfg: dict[str, Any], dtype: str) -> RenderedProgram:
    from kernelpilot.dsl_plugins.cuda.gemm import template_env

    per_group = cfg.get("launch") == "per_group"
    fused = cfg.get("launch") == "fused"
    context = per_group_context(cfg, dtype) if per_group or fused else kernel_context(cfg, dtype)
    public = {**cfg, "dtype": dtype}
    source = (
        template_env()
        .get_template("cuda/grouped_gemm_sm90.cu.j2")
        .render(
            template_version=TEMPLATE_VERSION,
            kernel_kind=kind,
            config_json=c_string(json.dumps(public, separators=(",", ":"))),
            rtol=RTOL[dtype],
            per_group=per_group,
            fused=fused,
            fused_kernel_source=fused_kernel_source() if fused else "",
            fused_max_groups=FUSED_MAX_GROUPS,
            streams=cfg.get("streams", 1),
            **context,
        )
    )
    name = f"{kind}_{dtype}_{config_label(cfg)}"
    return RenderedProgram(target_name=name, sources={f"{name}.cu": source})


# ----------------------------------------------------------------------------- the kernel
class GroupedGemmKernel(TileKernelBase):
    """``grouped_gemm`` on sm90: CUTLASS ptr-array grouped GEMM (cooperative / ping-pong)."""

    kind = "grouped_gemm"
    backend = "cuda"
    targets = ("sm90",)
    template_version = TEMPLATE_VERSION
    # like the dense GEMM program: all run-time variants of a config are measured in one process and
    # the JSON line reports the best in ``runtime`` and each one in ``variants``
    runs_variants_in_one_process = True

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        problem = validate_grouped_dims(dict(dims), where)
        problem["dtype"] = normalize_dtype(dtype, where)
        return problem

    def build_recipe(self, target: str, options: dict[str, Any]) -> BuildRecipe:
        if target != "sm90":
            raise ToolMissingError(f"{self.kind} (cuda) builds only for target sm90, not {target!r}")
        return cuda_build_recipe(3.6, float(options.get("build_timeout_s", 900)), options)

    def render(self, config: Any, problem: dict[str, Any], target: str) -> RenderedProgram:
        cfg = normalize_gemm_config(config)
        return render_grouped_program(self.kind, cfg, problem.get("dtype", "bf16"))

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        argv = [str(binary), groups_arg(problem["groups"])]
        variants = runtime.get("variants")
        if variants:
            argv.append(
                "--variants=" + ",".join(f"{v.get('raster', 'M')}:{v.get('swizzle', 1)}" for v in variants)
            )
        for key in ("raster", "swizzle", "warmup", "iters", "reps", "buffers", "seed", "verify_rows"):
            if key in runtime:
                argv.append(f"--{key}={runtime[key]}")
        return argv, {}

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        # The group scheduler has no raster heuristic ("largest dimension can change per group"):
        # both orders are worth one run each.  Swizzle only matters with many tiles per group, and only
        # the per-group launch (the dense kernel's scheduler) applies it: CUTLASS 4.2's group scheduler
        # linearizes every group's tiles into a (tiles, 1, 1) grid before choosing its swizzle
        # (sm90_tile_scheduler_group.hpp get_tiled_cta_shape_mnl), so get_log_swizzle_size sees a
        # dimension of 1 and always picks none: a ptr-array swizzle variant would rerun swizzle 1.
        variants: list[dict[str, Any]] = [{"raster": "M", "swizzle": 1}, {"raster": "N", "swizzle": 1}]
        launch = config_dict(config).get("launch") if config is not None else None
        if launch == "fused":
            # the fused kernel's own walk applies the swizzle within each group (strips of 2-8 units)
            return variants + [{"raster": r, "swizzle": s} for s in (2, 4, 8) for r in ("M", "N")]
        per_group = launch == "per_group"
        if per_group and max(g[0] for g in problem["groups"]) >= 1024:
            # both orders at both widths: on one large group the dense kernel ran fastest with N:8 on
            # Llama-3-8B's MLP up, M:8 and N:8 within 0.2 % on Qwen3-8B's down
            # (benchmarks/results/grouped_vs_dense_variants_h100.json)
            variants += [{"raster": r, "swizzle": s} for s in (4, 8) for r in ("M", "N")]
        return variants

    def variant_from_runtime(self, runtime: dict[str, Any]) -> dict[str, Any] | None:
        """The raster / swizzle a program reported, as a variant, or None when it reported none it takes.

        Read from the record rather than matched against :meth:`runtime_variants`: a run stored before
        that list changed (ptr-array swizzle variants, dropped as no-ops) is re-run with the knobs it
        was timed with."""
        raster, swizzle = runtime.get("raster"), runtime.get("swizzle")
        if raster in ("M", "N") and swizzle in (1, 2, 4, 8):
            return {"raster": raster, "swizzle": int(swizzle)}
        return None

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> Any:
        """The best of torch._grouped_mm and a torch.mm loop (see :mod:`kernelpilot.dsl_plugins.cuda.vendor_worker`)."""
        from kernelpilot.dsl_plugins.cuda.vendor_baseline import vendor_plan

        return vendor_plan(self.kind, problem, bench_args)

    def flops(self, problem: dict[str, Any]) -> float:
        return groups_flops(problem["groups"])

    def min_bytes(self, problem: dict[str, Any]) -> float:
        """Fewest bytes through device memory: every A, B read once and D written once (16-bit)."""
        return float(sum(2 * (m * k + n * k + m * n) for m, n, k in problem["groups"]))
