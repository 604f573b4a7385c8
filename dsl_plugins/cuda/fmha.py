"""CUTLASS Hopper FMHA forward (examples/88_hopper_fmha) as tile-tunable kernels ``fa_prefill`` / ``fa_decode``.

The collective ships in the nvidia-cutlass wheel under ``examples/88_hopper_fmha`` (not under
``include/``), so the build adds that folder to the include path.  One binary per (tile config,
head dim, mask, dtype); batch, heads and sequence lengths are run-time arguments.

Workload dims (names follow the Xe-Forge FA workloads users already have):
``batch``, ``num_heads_q``, ``num_heads_kv`` (default = num_heads_q), ``seq_qo``, ``seq_kv``
(default = seq_qo; decode: seq_qo defaults to 1), ``head_dim`` (32, 64, 128, 256), ``causal``
(prefill default true, decode default false).

Grouped-query attention: the kernel's head stride is one integer, so it cannot map query head h to
kv head h // G.  Without a mask the G query heads that share a kv head are packed into the query rows
(BHSD layout makes heads h*G..h*G+G-1 of one kv head contiguous), which is exact and is also what makes
decode efficient (G rows per tile instead of 1).  With a causal mask packing would break the mask, so
the program runs as MHA over num_heads_q heads with K/V expanded (same FLOPs, more K/V traffic).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.cuda.grouped_gemm import (
    DTYPES,
    NVCC_FLAGS,
    _as_int,
    c_string,
    config_dict,
    cuda_build_recipe,
    normalize_dtype,
)
from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram, TileKernelBase

#: Per kind, since a change to one kind's program must not move the other's results-store and build keys.
#: 2: timed launches replayed from a CUDA graph; 3: built with -ftz=true (FMHA_NVCC_FLAGS); 4 (decode):
#: split-KV chunks read Q in place (no replication launch), the combine launch overlaps the attention
#: kernel's tail (programmatic dependent launch)
# fa_prefill 5: a causal grouped-query problem runs as one launch whose G query heads share their K/V head
# (head stride 0, ``--g``); before, the program took K/V per query head.  The decode programs keep
# template 4's source byte for byte (their build-cache keys stay valid).
TEMPLATE_VERSIONS = {"fa_prefill": "5", "fa_decode": "4"}
#: The grouped programs' flags plus ``-ftz=true``.  The collective's softmax calls ``exp2f``; without
#: denormal flushing nvcc wraps every MUFU.EX2 in a range test and two multiplies (the subnormal path), three
#: extra ALU instructions per score on the softmax's critical path (the FMHA kernel of the hd64 prefill
#: program: 3040 SASS instructions, 2416 with the flag; benchmarks/fmha_ftz_sass_check.py; 1.07x as fast on an
#: H100, benchmarks/fmha_ftz_ab.py).  CUTLASS builds
#: example 88 with ``--use_fast_math`` (examples/88_hopper_fmha/CMakeLists.txt), which implies it;
#: ``-ftz=true`` alone keeps the program's fp32 reference on the precise ``expf`` and division.
FMHA_NVCC_FLAGS = (*NVCC_FLAGS, "-ftz=true")
HEAD_DIMS = (32, 64, 128, 256)
SCHEDULE_TYPES = {
    "tma": "cutlass::gemm::KernelTma",
    "cooperative": "cutlass::gemm::KernelTmaWarpSpecializedCooperative",
    "pingpong": "cutlass::gemm::KernelTmaWarpSpecializedPingpong",
}
SCHEDULE_ALIASES = {
    "tma": "tma",
    "ws": "tma",
    "nonpersistent": "tma",
    "cooperative": "cooperative",
    "coop": "cooperative",
    "pingpong": "pingpong",
    "ping-pong": "pingpong",
}
#: Option<Tag::kNumMmaWarpGroups> values the warp-specialized kernel dispatches
#: (kernel/fmha_kernel_tma_warpspecialized.hpp Consumer0..3) and Option<Tag::kBlocksPerSM> for KernelTma
WARPGROUPS = (2, 3, 4)
BLOCKS_PER_SM = (1, 2, 3, 4)
#: split-KV chunk counts (flash-decoding; the program's combine kernel keeps a weight per chunk in registers)
SPLITS = (2, 4, 8, 16)
#: exp2 emulation periods: every k-th score of a thread's row fragment takes its exponential on the FMA pipe
#: (cpp_templates/cuda/fmha_sm90_kernel.j2, prelude); 0 = every exponential on MUFU
EXP2_EMULATION = (2, 3, 4, 6, 8)
TOL = {"bf16": (2e-2, 2e-2), "f16": (5e-3, 5e-3)}  # (atol, rtol) on O; P is rounded to 16 bit in-kernel
FA_KEYS = {"batch", "num_heads_q", "num_heads_kv", "seq_qo", "seq_kv", "head_dim", "causal"}
MAX_SEQ = 1 << 20


def normalize_fmha_config(config: Any, head_dim: int | None = None) -> dict[str, Any]:
    """tile [QO, KV, D], schedule tma|cooperative|pingpong, stages (KV pipeline stages, 0 = default),
    warpgroups (MMA warpgroups of the warp-specialized schedules, 0 = 2) and blocks_per_sm (KernelTma's
    launch bound, 0 = 2).  The last two are written only when set, so earlier configs render unchanged."""
    c = config_dict(config)
    try:
        tile = [int(x) for x in c["tile"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"FMHA config needs tile [QO, KV, D]: {c}") from exc
    if len(tile) == 2 and head_dim is not None:
        tile.append(head_dim)
    if len(tile) != 3:
        raise ValueError(f"FMHA tile must be [QO, KV, D]: {c}")
    if head_dim is not None and tile[2] != head_dim:
        raise ValueError(f"FMHA tile head dim {tile[2]} != problem head_dim {head_dim}")
    schedule = SCHEDULE_ALIASES.get(str(c.get("schedule", "cooperative")))
    if schedule is None:
        raise ValueError(f"FMHA schedule {c.get('schedule')!r}; allowed: {sorted(SCHEDULE_TYPES)}")
    stages = int(c.get("stages") or 0)
    if stages == 1 or stages < 0:
        raise ValueError("FMHA needs at least 2 KV stages (collective static_assert), or 0 for default")
    out: dict[str, Any] = {"tile": tile, "schedule": schedule, "stages": stages}
    warpgroups = int(c.get("warpgroups") or 0)
    blocks = int(c.get("blocks_per_sm") or 0)
    if warpgroups:
        if schedule == "tma" or warpgroups not in WARPGROUPS:
            raise ValueError(
                f"FMHA warpgroups={warpgroups}: the cooperative and pingpong schedules take {list(WARPGROUPS)}"
            )
        if tile[0] % (64 * warpgroups):
            raise ValueError(f"FMHA tile QO={tile[0]} is not a multiple of 64 x warpgroups={warpgroups}")
        out["warpgroups"] = warpgroups
    if blocks:
        if schedule != "tma" or blocks not in BLOCKS_PER_SM:
            raise ValueError(f"FMHA blocks_per_sm={blocks}: the tma schedule takes {list(BLOCKS_PER_SM)}")
        out["blocks_per_sm"] = blocks
    splits = int(c.get("splits") or 0)
    if splits:
        if splits not in SPLITS:
            raise ValueError(f"FMHA splits={splits}: split-KV takes {list(SPLITS)} chunks (0 = no split)")
        out["splits"] = splits
    emulation = int(c.get("exp2_emulation") or 0)
    if emulation:
        if emulation not in EXP2_EMULATION:
            raise ValueError(
                f"FMHA exp2_emulation={emulation}: every k-th exponential on the FMA pipe takes k in "
                f"{list(EXP2_EMULATION)} (0 = none)"
            )
        out["exp2_emulation"] = emulation
    for knob in ("longest_first", "lpt", "wg_locked"):
        if _bool(c.get(knob, False), knob):
            if schedule == "tma":
                raise ValueError(f"FMHA {knob}: only the cooperative and pingpong schedules take it")
            out[knob] = True
    if out.get("longest_first") and out.get("lpt"):
        raise ValueError(
            "FMHA lpt and longest_first order the same Q tiles (across heads / within each head): set one"
        )
    return out


def fmha_label(cfg: dict[str, Any]) -> str:
    t = cfg["tile"]
    st = f"_s{cfg['stages']}" if cfg["stages"] else ""
    wg = f"_wg{cfg['warpgroups']}" if cfg.get("warpgroups") else ""
    bps = f"_b{cfg['blocks_per_sm']}" if cfg.get("blocks_per_sm") else ""
    sk = f"_sk{cfg['splits']}" if cfg.get("splits") else ""
    lf = ("_lf" if cfg.get("longest_first") else "") + ("_lpt" if cfg.get("lpt") else "")
    lk = "_lk" if cfg.get("wg_locked") else ""
    ex = f"_ex{cfg['exp2_emulation']}" if cfg.get("exp2_emulation") else ""
    return f"{cfg['schedule'][:4]}_{t[0]}x{t[1]}x{t[2]}{st}{wg}{bps}{sk}{lf}{lk}{ex}"


def _bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("1", "true", "yes"):
        return True
    if str(value).lower() in ("0", "false", "no"):
        return False
    raise InputError(f"{value!r} is not a boolean", field=field)


def validate_fa_dims(dims: dict[str, Any], where: str, decode: bool) -> dict[str, Any]:
    unknown = set(dims) - FA_KEYS - {"dtype"}
    if unknown:
        raise InputError(f"unknown dims {sorted(unknown)}; allowed: {sorted(FA_KEYS)}", field=f"{where}.dims")
    required = ["batch", "num_heads_q", "head_dim", "seq_kv" if decode else "seq_qo"]
    missing = [k for k in required if k not in dims]
    if missing:
        raise InputError(f"missing dims {missing}", field=f"{where}.dims")
    v = {k: _as_int(dims[k], f"{where}.dims.{k}") for k in FA_KEYS - {"causal"} if k in dims}
    v.setdefault("num_heads_kv", v["num_heads_q"])
    if decode:
        v.setdefault("seq_qo", 1)
    else:
        v.setdefault("seq_kv", v["seq_qo"])
    for k in ("batch", "num_heads_q", "num_heads_kv", "seq_qo", "seq_kv"):
        if not 1 <= v[k] <= MAX_SEQ:
            raise InputError(f"{k}={v[k]} out of range 1..{MAX_SEQ}", field=f"{where}.dims.{k}")
    if v["head_dim"] not in HEAD_DIMS:
        raise InputError(
            f"head_dim={v['head_dim']}; the Hopper FMHA supports {list(HEAD_DIMS)}",
            field=f"{where}.dims.head_dim",
        )
    if v["num_heads_q"] % v["num_heads_kv"]:
        raise InputError(
            f"num_heads_q={v['num_heads_q']} is not a multiple of num_heads_kv={v['num_heads_kv']}",
            field=f"{where}.dims.num_heads_kv",
        )
    causal = _bool(dims.get("causal", not decode), f"{where}.dims.causal")
    if causal and v["seq_qo"] != v["seq_kv"]:
        raise InputError(
            f"causal needs seq_qo == seq_kv (the kernel's mask is top-left aligned); got "
            f"{v['seq_qo']} and {v['seq_kv']}",
            field=f"{where}.dims.causal",
        )
    if decode and v["seq_qo"] > 64:
        raise InputError(f"fa_decode takes seq_qo <= 64, got {v['seq_qo']}", field=f"{where}.dims.seq_qo")
    return {**v, "causal": causal}


def program_dims(problem: dict[str, Any], kv_groups: bool = False) -> dict[str, int]:
    """The (b, h, q, k) the program runs, and with ``kv_groups`` (the prefill programs, which read
    ``--g``) g for a causal grouped-query problem.

    Without a mask the G query heads of one K/V head are packed into query rows (one K/V read serves
    G x seq_qo rows).  Under the causal mask packing would misplace the mask, so the G heads stay heads;
    a prefill program shares their K/V head by stride 0 (``--g``, template 5), so K and V hold
    num_heads_kv heads, as the user's tensors and SDPA's ``enable_gqa`` do; a decode program (template
    4, no ``--g``) takes K/V per query head."""
    g = problem["num_heads_q"] // problem["num_heads_kv"]
    if problem["causal"] or g == 1:
        return {
            "b": problem["batch"],
            "h": problem["num_heads_q"],
            **({"g": g} if kv_groups and g > 1 else {}),
            "q": problem["seq_qo"],
            "k": problem["seq_kv"],
        }
    return {
        "b": problem["batch"],
        "h": problem["num_heads_kv"],
        "q": g * problem["seq_qo"],
        "k": problem["seq_kv"],
    }


def fa_flops(problem: dict[str, Any]) -> float:
    """4*B*Hq*Sq*Skv*D (two GEMMs); causal counts half, the convention of FA papers and example 88."""
    f = (
        4.0
        * problem["batch"]
        * problem["num_heads_q"]
        * problem["seq_qo"]
        * problem["seq_kv"]
        * problem["head_dim"]
    )
    return f * (0.5 if problem["causal"] else 1.0)


def fa_min_bytes(problem: dict[str, Any]) -> float:
    """Q read, K and V read once per K/V head, O written; 2 bytes each (the programs are 16-bit).

    Decode is memory-bound, so its yardstick is this traffic over the time against the device's copy
    bandwidth; GQA counts K/V once per K/V head, as a kernel that shares them across the query heads
    (cuDNN's SDPA and the packed decode programs) reads them.
    """
    b, d = problem["batch"], problem["head_dim"]
    q_and_o = 2 * b * problem["num_heads_q"] * problem["seq_qo"] * d
    k_and_v = 2 * b * problem["num_heads_kv"] * problem["seq_kv"] * d
    return 2.0 * (q_and_o + k_and_v)


def kernel_context(cfg: dict[str, Any], dtype: str, causal: bool) -> dict[str, Any]:
    """The names ``cuda/fmha_sm90_kernel.j2`` renders one config from (benchmark and export)."""
    options = []
    if cfg["stages"]:
        options.append(f"Option<Tag::kStagesKV, Int<{cfg['stages']}>>")
    if cfg.get("warpgroups"):
        options.append(f"Option<Tag::kNumMmaWarpGroups, Int<{cfg['warpgroups']}>>")
    if cfg.get("blocks_per_sm"):
        options.append(f"Option<Tag::kBlocksPerSM, Int<{cfg['blocks_per_sm']}>>")
    if cfg.get("wg_locked"):
        options.append("Option<Tag::kIsMainloopLocked, true_type>")
    for knob in ("longest_first", "lpt"):
        if cfg.get(knob) and not causal:
            raise ValueError(f"FMHA {knob} needs the causal mask (every tile does the same work without it)")
    return {
        "head_dim": cfg["tile"][2],
        "causal": "true" if causal else "false",
        "cutlass_dtype": DTYPES[dtype],
        "dtype": dtype,
        "tile_q": cfg["tile"][0],
        "tile_kv": cfg["tile"][1],
        "schedule_type": SCHEDULE_TYPES[cfg["schedule"]],
        "options": options,
        "longest_first": bool(cfg.get("longest_first")),
        "lpt": bool(cfg.get("lpt")),
        "persistent": cfg["schedule"] == "pingpong",
        "exp2_emulation": int(cfg.get("exp2_emulation") or 0),
    }


def render_fmha_program(
    kind: str,
    cfg: dict[str, Any],
    problem: dict[str, Any],
    env: Any = None,
    version: str = "",
    kv_groups: bool | None = None,
) -> RenderedProgram:
    """The program of one config; ``env`` (a ``template_env``) and ``version`` render other templates than
    the package's (an A/B benchmark's earlier revision, with the version it had).  ``kv_groups`` (default:
    the prefill programs) renders the shared-K/V-head path of prefill template 5; off, a prefill program
    renders as template 3 did."""
    from kernelpilot.dsl_plugins.cuda.gemm import template_env

    if cfg.get("splits") and problem["causal"]:
        raise ValueError("FMHA split-KV needs a problem without the causal mask (the mask is per chunk)")
    dtype = problem.get("dtype", "bf16")
    atol, rtol = TOL[dtype]
    public = {**cfg, "dtype": dtype, "causal": problem["causal"]}
    source = (
        (env or template_env())
        .get_template("cuda/fmha_sm90.cu.j2")
        .render(
            template_version=version or TEMPLATE_VERSIONS[kind],
            kernel_kind=kind,
            config_json=c_string(json.dumps(public, separators=(",", ":"))),
            atol=atol,
            rtol=rtol,
            splits=cfg.get("splits", 0),
            kv_groups=kind == "fa_prefill" if kv_groups is None else kv_groups,
            **kernel_context(cfg, dtype, bool(problem["causal"])),
        )
    )
    mask = "causal" if problem["causal"] else "nomask"
    name = f"{kind}_{dtype}_{mask}_{fmha_label(cfg)}"
    return RenderedProgram(target_name=name, sources={f"{name}.cu": source})


def fmha_include_dir(cutlass_dir: str | None = None, required: bool = True) -> tuple[Path, ...]:
    """examples/88_hopper_fmha next to the CUTLASS include tree (wheel or checkout)."""
    from kernelpilot.toolchain import find_headers

    tree = find_headers("cutlass", cutlass_dir)
    if tree is None:
        if not required:
            return ()
        raise ToolMissingError(
            "CUTLASS headers not found: set CUTLASS_DIR (checkout or nvidia-cutlass wheel)"
        )
    folder = tree.include.parent / "examples" / "88_hopper_fmha"
    if not (folder / "kernel" / "fmha_kernel_builder.hpp").exists():
        if not required:
            return ()
        raise ToolMissingError(
            f"{folder} lacks the Hopper FMHA collective (examples/88_hopper_fmha): use CUTLASS >= 3.9 "
            "from a checkout or the nvidia-cutlass wheel, which ships examples/"
        )
    return (folder,)


class FmhaKernel(TileKernelBase):
    """``fa_prefill`` / ``fa_decode`` on sm90 through the Hopper FMHA collective."""

    backend = "cuda"
    targets = ("sm90",)

    def __init__(self, kind: str) -> None:
        if kind not in TEMPLATE_VERSIONS:
            raise ValueError(kind)
        self.kind = kind
        self.template_version = TEMPLATE_VERSIONS[kind]

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        problem = validate_fa_dims(dict(dims), where, decode=self.kind == "fa_decode")
        problem["dtype"] = normalize_dtype(dtype, where)
        return problem

    def build_recipe(self, target: str, options: dict[str, Any]) -> BuildRecipe:
        if target != "sm90":
            raise ToolMissingError(f"{self.kind} (cuda) builds only for target sm90, not {target!r}")
        # One FMHA config (one fusion, one head dim): 3.9 GB peak measured (nvcc 13.0); example 88 (57 kernels) 10.8 GB.
        dry = bool(options.get("dry_run"))
        extra = fmha_include_dir(options.get("cutlass_dir"), required=not dry)
        return cuda_build_recipe(
            4.5, float(options.get("build_timeout_s", 1500)), options, extra, flags=FMHA_NVCC_FLAGS
        )

    def render(self, config: Any, problem: dict[str, Any], target: str) -> RenderedProgram:
        cfg = normalize_fmha_config(config, problem["head_dim"])
        return render_fmha_program(self.kind, cfg, problem)

    def run_command(
        self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]
    ) -> tuple[list[str], dict[str, str]]:
        d = program_dims(problem, kv_groups=self.kind == "fa_prefill")
        argv = [str(binary)] + [f"--{k}={v}" for k, v in d.items()]
        for key in ("warmup", "iters", "reps", "buffers", "seed", "verify_rows"):
            if key in runtime:
                argv.append(f"--{key}={runtime[key]}")
        return argv, {}

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        return [{}]  # the FMHA kernels have no run-time scheduling knobs

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]) -> Any:
        """The best SDPA backend (cuDNN, flash, efficient) or flash_attn (see :mod:`kernelpilot.dsl_plugins.cuda.vendor_worker`)."""
        from kernelpilot.dsl_plugins.cuda.vendor_baseline import vendor_plan

        return vendor_plan(self.kind, problem, bench_args)

    def flops(self, problem: dict[str, Any]) -> float:
        return fa_flops(problem)

    def min_bytes(self, problem: dict[str, Any]) -> float:
        return fa_min_bytes(problem)
