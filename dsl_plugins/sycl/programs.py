"""Render Xe tile configs into complete sycl-tla benchmark programs (Jinja2 templates in cpp_templates/sycl).

A config arrives as the Xe target model's config object (``.as_dict()``) or a plain dict with the
model's field names: GEMM-like kinds ``wg: [M, N, K]``, ``sg: [SG_M, SG_N, SG_K]`` (absent = derive it as
sycl-tla's CollectiveBuilder would), ``stages``, ``schedule``; flash attention ``qk``, ``pv``, ``out``,
``sg_qk``, ``sg_pv`` (absent = ``get_sg_layout_pv``), ``stages``, ``causal``, ``persistent``.  Only
compile-time facts of the problem (dtype, layout, output type, causal) reach the source; sizes are
run-time arguments.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib.resources import files
from typing import Any

from kernelpilot.dsl_plugins.sycl import dtypes
from kernelpilot.hw_models.dtypes import parse_dtype
from kernelpilot.tile_tuner.kernel_api import config_dict

COMMON_HEADER = "kp_sycl_common.hpp"
#: sycl-tla headers shipped patched (cpp_templates/sycl/sycl_tla_patched/README.md says what changed and
#: why); they travel next to the program, so its quoted includes find them before the sycl-tla tree.
PATCHED_DIR = "sycl_tla_patched"
PATCHED_HEADERS = {"moe_gemm": ("kp_moe_grouped_gemm.hpp", "kp_moe_gemms.hpp")}
TEMPLATES = {
    "gemm": "gemm.cpp.j2",
    "grouped_gemm": "grouped_gemm.cpp.j2",
    "moe_gemm": "moe_gemm.cpp.j2",
    "fa_prefill": "fa.cpp.j2",
    "fa_decode": "fa.cpp.j2",
}
SCHEDULES = ("default", "persistent", "streamk", "splitk")
LAYOUT_CPP = {"row": "cutlass::layout::RowMajor", "col": "cutlass::layout::ColumnMajor"}
#: builder stage counts (xe_mma_builder.inl:107-110): 2 for the grouped (ptr-array) schedule, else 3.
BUILDER_STAGES = {"gemm": 3, "grouped_gemm": 2, "moe_gemm": 3}


@cache
def _env():
    """Jinja environment over ``cpp_templates`` (the GEMM program imports its kernel part,
    ``sycl/gemm_kernel.j2``, which the exported library imports too)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(str(files("kernelpilot.cpp_templates"))),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@cache
def template_text(name: str) -> str:
    return files("kernelpilot.cpp_templates").joinpath("sycl", name).read_text()


@cache
def _template(name: str):
    return _env().get_template(f"sycl/{name}")


def common_header() -> str:
    return template_text(COMMON_HEADER)


def patched_headers(kind: str) -> dict[str, str]:
    """{file name: text} of the patched sycl-tla headers a program of ``kind`` includes."""
    folder = files("kernelpilot.cpp_templates").joinpath("sycl", PATCHED_DIR)
    return {name: folder.joinpath(name).read_text() for name in PATCHED_HEADERS.get(kind, ())}


def _ints(value: Any, n: int, field: str) -> list[int]:
    if not isinstance(value, (list, tuple)) or len(value) < n:
        raise ValueError(f"config field {field}={value!r} needs {n} integers")
    return [int(v) for v in value[:n]]


def builder_sg_layout(wg_m: int, wg_n: int) -> tuple[int, int]:
    """The subgroup layout sycl-tla's Xe CollectiveBuilder derives (xe_mma_builder.inl:89-98)."""
    atom_m = math.gcd(8, wg_m)
    grid_m, grid_n = wg_m // atom_m, max(wg_n // 16, 1)
    sg_m0 = min(grid_m, 8)
    sg_n = min(grid_n, 32 // sg_m0)
    sg_m = min(grid_m, 32 // sg_n)
    return sg_m, sg_n


def gemm_like(cfg: dict[str, Any], kind: str) -> dict[str, Any]:
    """wg / sg / stages / schedule of a GEMM-like config with the builder's defaults filled in."""
    wg = _ints(cfg.get("wg"), 3, "wg")
    if cfg.get("sg") is not None:
        sg = _ints(cfg["sg"], 2, "sg")
        sg_k = int(cfg["sg"][2]) if len(cfg["sg"]) > 2 else 1
        if sg_k != 1:
            raise ValueError(
                f"sg={cfg['sg']}: the Xe GEMM mainloops do not reduce across SG_K; SG_K must be 1"
            )
    else:
        sg = list(builder_sg_layout(wg[0], wg[1]))
    stages = cfg.get("stages")
    schedule = cfg.get("schedule") or "default"
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} not in {', '.join(SCHEDULES)}")
    if kind != "gemm" and schedule not in ("default", "persistent"):
        raise ValueError(f"schedule {schedule!r}: {kind} has one scheduler (grouped / MoE persistent)")
    # DPAS repeat count M: the model's explicit atom_m / mma_atom win; otherwise gcd(8, WG_M) when the
    # builder derives the layout (xe_mma_builder.inl:89), gcd(8, per-SG M) with an explicit layout.
    atom_m = cfg.get("atom_m")
    mma_atom = cfg.get("mma_atom")
    if mma_atom:
        from kernelpilot.hw_models.xe.dpas import parse_atom

        atom_m = parse_atom(str(mma_atom), "config").m
    if not atom_m:
        atom_m = math.gcd(8, wg[0]) if cfg.get("sg") is None else math.gcd(8, wg[0] // sg[0])
    return {
        "wg": wg,
        "sg": sg,
        "stages": int(stages) if stages else BUILDER_STAGES[kind],
        "schedule": schedule,
        "atom_m": int(atom_m),
        "mma_atom": str(mma_atom) if mma_atom else None,
    }


def config_label(kind: str, n: dict[str, Any]) -> str:
    if kind.startswith("fa_"):
        sgq = "x".join(map(str, n["sg_qk"]))
        tail = ("_causal" if n["causal"] else "") + ("_persistent" if n["persistent"] else "")
        return (
            f"{kind}_qk{'x'.join(map(str, n['qk']))}_pv{'x'.join(map(str, n['pv']))}_o{'x'.join(map(str, n['out']))}"
            f"_sg{sgq}_s{n['stages']}{tail}"
        )
    wg, sg = n["wg"], n["sg"]
    return f"{kind}_wg{wg[0]}x{wg[1]}x{wg[2]}_sg{sg[0]}x{sg[1]}_s{n['stages']}_{n['schedule']}"


def _json_literal(cfg: dict[str, Any]) -> str:
    text = json.dumps(cfg, sort_keys=True, separators=(",", ":"))
    if ")KPJSON" in text:  # cannot happen for model configs; guard the raw string delimiter anyway
        raise ValueError("config JSON contains the raw-string delimiter")
    return text


def _gemm_mma_op(n: dict[str, Any], pair: Any) -> str:
    """The builder's DPAS for the dtype pair; an explicit ``mma_atom`` of the model (new ``XE_DPAS_TT<...>``
    or legacy ``XE_8x16x16_F32BF16BF16F32_TT`` vocabulary) is rendered as the equivalent new-API atom,
    since the programs use the current MainloopXeL1Staged path."""
    if not n.get("mma_atom"):
        return dtypes.dpas_op(n["atom_m"], pair)
    from kernelpilot.hw_models.dtypes import DTypePair
    from kernelpilot.hw_models.xe.dpas import parse_atom

    atom = parse_atom(n["mma_atom"], "config")
    return dtypes.dpas_op(atom.m, DTypePair(a=atom.type_a, b=atom.type_b))


def _gemm_context(
    kind: str, cfg: dict[str, Any], problem: dict[str, Any], target: str, version: str
) -> dict[str, Any]:
    n = gemm_like(cfg, kind)
    pair = parse_dtype(problem.get("dtype", cfg.get("dtype", "bf16")), "problem")
    out = problem.get("out_dtype") or dtypes.output_dtype(pair, None, "problem")
    acc = dtypes.accumulator(pair)
    la, lb = {"rr": ("row", "row"), "rc": ("row", "col"), "cr": ("col", "row"), "cc": ("col", "col")}[
        problem.get("layout", "rr")
    ]
    rtol, atol = dtypes.tolerance(out)
    fa, fb = dtypes.fill_for(pair.a), dtypes.fill_for(pair.b)
    schedule = n["schedule"]
    cooperative = schedule in ("streamk", "splitk")
    scheduler = {
        "default": "",
        "persistent": "cutlass::gemm::PersistentScheduler",
        "streamk": "cutlass::gemm::StreamKScheduler",
        "splitk": "cutlass::gemm::StreamKScheduler",
    }[schedule]
    return {
        "target": target,
        "config_label": config_label(kind, n),
        "config_json": _json_literal({**cfg, "kernel": kind, "resolved": n}),
        "library_version": version,
        "element_a": dtypes.CPP_TYPES[pair.a],
        "element_b": dtypes.CPP_TYPES[pair.b],
        "element_acc": dtypes.CPP_TYPES[acc],
        "element_compute": dtypes.CPP_TYPES[acc],
        "element_out": dtypes.CPP_TYPES[out],
        "out_dtype": out,
        "layout_a": LAYOUT_CPP[la],
        "layout_b": LAYOUT_CPP[lb],
        "wg_m": n["wg"][0],
        "wg_n": n["wg"][1],
        "wg_k": n["wg"][2],
        "sg_m": n["sg"][0],
        "sg_n": n["sg"][1],
        "stages": n["stages"],
        "mma_op": _gemm_mma_op(n, pair),
        "cooperative": cooperative,
        "scheduler": scheduler,
        "default_mode": {"streamk": "streamk", "splitk": "splitk"}.get(schedule, "none"),
        "default_splits": 2 if schedule == "splitk" else 1,
        "fill_range_a": fa.range,
        "fill_scale_a": fa.scale,
        "fill_range_b": fb.range,
        "fill_scale_b": fb.scale,
        "rtol": rtol,
        "atol": atol,
    }


def fa_config(cfg: dict[str, Any], problem: dict[str, Any]) -> dict[str, Any]:
    """qk / pv / out / sg layouts / stages / causal / persistent of a flash-attention config."""
    if cfg.get("api", "new") != "new":
        raise ValueError(
            f"flash-attention config with api={cfg.get('api')!r}: the model checks sycl-tla's legacy FA tile "
            "vocabulary, but kernelpilot benchmarks the current applications/flash_attention_v2 kernel only; "
            "rendering it on the new API would measure a different kernel under this label"
        )
    qk = _ints(cfg.get("qk"), 3, "qk")
    pv = _ints(cfg.get("pv"), 3, "pv")
    out = _ints(cfg.get("out"), 2, "out")
    if cfg.get("sg_qk") is None:
        raise ValueError("flash-attention config needs sg_qk (the QK subgroup layout [SG_Q, SG_K, 1])")
    sg_qk = _ints(cfg["sg_qk"], 2, "sg_qk") + ([int(cfg["sg_qk"][2])] if len(cfg["sg_qk"]) > 2 else [1])
    sg_pv = None
    if cfg.get("sg_pv") is not None:
        sg_pv = _ints(cfg["sg_pv"], 2, "sg_pv") + ([int(cfg["sg_pv"][2])] if len(cfg["sg_pv"]) > 2 else [1])
    causal = bool(cfg.get("causal", problem.get("causal", False)))
    persistent = bool(cfg.get("persistent", problem.get("persistent", False)))
    stages = cfg.get("stages")
    # sycl-tla's examples and benchmarks: 2 stages for prefill, 1 for decode (06_xe_fmha_fwd.cpp:154-158)
    if not stages:
        stages = (
            1
            if problem.get("fa_mode", cfg.get("kernel", "fa_prefill").removeprefix("fa_")) == "decode"
            else 2
        )
    return {
        "qk": qk,
        "pv": pv,
        "out": out,
        "sg_qk": sg_qk,
        "sg_pv": sg_pv,
        "stages": int(stages),
        "causal": causal,
        "persistent": persistent,
        "atom_m": math.gcd(qk[0] // sg_qk[0], 8),
    }


def _fa_context(
    kind: str, cfg: dict[str, Any], problem: dict[str, Any], target: str, version: str
) -> dict[str, Any]:
    from kernelpilot.dsl_plugins.sycl.sycl_tla import SUPPORTED_FA_VERSIONS

    n = fa_config(cfg, problem)
    pair = parse_dtype(problem.get("dtype", cfg.get("dtype", "bf16")), "problem")
    mma_input = "cutlass::half_t" if pair.a in ("e4m3", "e5m2") else dtypes.CPP_TYPES[pair.a]
    return {
        "target": target,
        "kernel_kind": kind,
        "config_label": config_label(kind, n),
        "config_json": _json_literal({**cfg, "kernel": kind, "resolved": n}),
        "library_version": version,
        "supported_fa_versions": ", ".join(SUPPORTED_FA_VERSIONS),
        "causal": n["causal"],
        "persistent": n["persistent"],
        "element_q": dtypes.CPP_TYPES[pair.a],
        "element_o": dtypes.CPP_TYPES[problem.get("out_dtype", "f32")],
        "qk": n["qk"],
        "pv": n["pv"],
        "out": n["out"],
        "sg_qk": n["sg_qk"],
        "sg_pv": n["sg_pv"],
        "stages": n["stages"],
        "mma_op": f"XE_DPAS_TT<{n['atom_m']}, float, {mma_input}>",
        "rtol": 0.05,
        "atol": 0.05,
    }


def render_context(
    kind: str, config: Any, problem: dict[str, Any], target: str, version: str
) -> dict[str, Any]:
    """The template context of one config's program (the exported library renders its GEMM kernels'
    translation units from the same context, ``kernelpilot.export.xe_project``)."""
    cfg = config_dict(config)
    if kind in ("fa_prefill", "fa_decode"):
        return _fa_context(kind, cfg, problem, target, version)
    return _gemm_context(kind, cfg, problem, target, version)


def render_program(
    kind: str, config: Any, problem: dict[str, Any], target: str, version: str
) -> dict[str, str]:
    """{file name: text} of the complete program for one config: main source, the shared header and any
    patched sycl-tla header it includes."""
    context = render_context(kind, config, problem, target, version)
    source = _template(TEMPLATES[kind]).render(**context)
    return {f"{kind}.cpp": source, COMMON_HEADER: common_header(), **patched_headers(kind)}


def normalized(kind: str, config: Any, problem: dict[str, Any]) -> dict[str, Any]:
    """The resolved config (defaults filled in) -- what the program prints as config.resolved."""
    cfg = config_dict(config)
    return fa_config(cfg, problem) if kind.startswith("fa_") else gemm_like(cfg, kind)
