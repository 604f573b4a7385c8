"""Host-side compile of the Xe programs with g++ against the real sycl-tla and SYCL headers.

Why: without icpx nothing compiles the device code, but most template mistakes (wrong Arguments
structures, non-default-constructible members, misspelled types, a macro such as cute's
``#define printf sycl::...::printf`` breaking ``std::printf``) are host-side and g++ finds them.  This
check found real bugs in the templates before any Intel hardware saw them.

What is compiled: the golden program of every kernel kind, plus configs from the edges of the search
space -- the smallest and the largest tile the model accepts for each kind, every operand layout
(rr, rc, cr, cc) and every element-type family (16-bit float, tf32, int8, fp8, int4, fp4, mixed).

What it is not: a device compile.  g++ parses and instantiates the host pass only (code under
``__SYCL_DEVICE_ONLY__`` -- DPAS, block-2D loads -- is skipped), with ``-fpermissive -w`` because g++ is
stricter than clang about some of CUTLASS's own member typedefs.  Register pressure, IGC, ocloc and
run-time behaviour need icpx and an Intel GPU (tests marked ``icpx``).

Headers: downloaded once into pytest's cache folder (``tests/support/sycl_downloads.py``: the
``intel-sycl-rt`` and ``sycl-tla`` wheels, and sycl-tla's ``applications/`` from its release archive);
``SYCL_TLA_DIR`` / ``KP_SYCL_INCLUDE`` point at local copies instead.  Skipped, with the reason, only when
a download fails.

Speed: programs of one kind are compiled together, a few per translation unit (each wrapped in its own
namespace), which parses the heavy headers once per unit; units run in parallel on every core.  A unit
that fails is recompiled program by program so that the failure names the config.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kernelpilot.dsl_plugins.sycl import programs, sycl_tla
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.targets import get_target_model
from tests.support import REPO
from tests.support.sycl_downloads import Unavailable, cache_root, sycl_include, sycl_tla_tree

pytestmark = pytest.mark.slow
GOLDEN = REPO / "tests" / "data" / "sycl" / "golden"
KERNELS = {k.kind: k for k in all_kernels()}
KINDS = ("gemm", "grouped_gemm", "moe_gemm", "fa_prefill", "fa_decode")
#: programs per translation unit: the headers are parsed once per unit, g++ needs ~0.9 GB per program
PER_UNIT = 3

GOLDENS = {
    "gemm_bf16_default_bmg": "gemm",
    "gemm_s8_splitk_rc_pvc": "gemm",
    "grouped_gemm_f16_bmg": "grouped_gemm",
    "moe_gemm_bf16_bmg": "moe_gemm",
    "fa_prefill_bf16_causal_hd128_bmg": "fa_prefill",
    "fa_decode_e4m3_persistent_hd64_bmg": "fa_decode",
}
GEMM = {"M": 1024, "N": 1024, "K": 1024}
GROUPED = {"shapes": [[256, 512, 256], [64, 1024, 512]]}
MOE = {"N": 2880, "K": 2880, "num_experts": 8, "total_tokens": 4096}
PREFILL = {"batch": 1, "num_heads_q": 8, "num_heads_kv": 2, "seq_qo": 1024, "seq_kv": 1024}
DECODE = {"batch": 2, "num_heads_q": 16, "num_heads_kv": 4, "seq_qo": 1, "seq_kv": 4096}

#: (kind, target, dims, dtype, config): a dict is a config, "smallest"/"largest" the model's edge tile
RENDERED: dict[str, tuple[str, str, dict, Any, Any]] = {
    # element-type families and schedules beyond the goldens (int4, mixed, tf32, fp8, fp4)
    "gemm_s4": ("gemm", "bmg", GEMM, "s4", {"wg": [256, 256, 64], "sg": [8, 4, 1], "stages": 2}),
    "gemm_bf16_u4_rc": ("gemm", "bmg", {**GEMM, "layout": "rc"}, {"a": "bf16", "b": "u4"},
                        {"wg": [128, 256, 32], "sg": [4, 8, 1], "stages": 3}),
    "gemm_tf32_cr": ("gemm", "bmg", {**GEMM, "layout": "cr"}, "tf32", {"wg": [256, 128, 32], "sg": [8, 4, 1], "stages": 3}),
    "gemm_e5m2_streamk_bf16_out": ("gemm", "bmg", {**GEMM, "out_dtype": "bf16"}, "e5m2",
                                   {"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2, "schedule": "streamk"}),
    "grouped_e2m1": ("grouped_gemm", "bmg", {"shapes": [[256, 512, 256]]}, "e2m1",
                     {"wg": [256, 256, 64], "sg": [8, 4, 1], "stages": 2}),
    # edges of the space: smallest and largest tiles, the remaining layout (cc) and 8-bit types
    "gemm_smallest_f16_cc": ("gemm", "bmg", {**GEMM, "layout": "cc"}, "f16", "smallest"),
    "gemm_largest_u8": ("gemm", "bmg", GEMM, "u8", "largest"),
    "grouped_smallest_bf16_s8": ("grouped_gemm", "bmg", GROUPED, {"a": "bf16", "b": "s8"}, "smallest"),
    "grouped_largest_e4m3": ("grouped_gemm", "pvc", GROUPED, "e4m3", "largest"),
    "moe_smallest_f16": ("moe_gemm", "bmg", MOE, "f16", "smallest"),
    "moe_largest_bf16": ("moe_gemm", "pvc", MOE, "bf16", "largest"),
    "fa_prefill_smallest_f16_hd64": ("fa_prefill", "bmg", {**PREFILL, "head_dim": 64}, "f16", "smallest"),
    "fa_prefill_largest_e5m2_hd192": ("fa_prefill", "bmg", {**PREFILL, "head_dim": 192}, "e5m2", "largest"),
    "fa_decode_largest_bf16_hd128_causal": ("fa_decode", "pvc", {**DECODE, "head_dim": 128, "causal": True}, "bf16", "largest"),
}  # fmt: skip


def _tile_volume(cfg: Any) -> int:
    d = cfg.as_dict()
    dims = d["wg"] if "wg" in d else [*d["qk"], *d["out"]]
    vol = 1
    for v in dims:
        vol *= int(v)
    return vol


def edge_config(kind: str, target: str, problem: dict, which: str) -> Any:
    """The smallest or largest tile (by work-group tile volume) the model accepts for this problem."""
    model = get_target_model(target)
    space = sorted(
        model.enumerate(kind, problem["dtype"], problem), key=lambda c: (_tile_volume(c), c.label())
    )
    assert space, f"the {target} model accepts no {kind} config for {problem}"
    return space[0] if which == "smallest" else space[-1]


def render_case(name: str) -> tuple[str, str]:
    """(kind, program source) of a named case."""
    if name in GOLDENS:
        return GOLDENS[name], (GOLDEN / f"{name}.cpp").read_text()
    kind, target, dims, dtype, raw = RENDERED[name]
    model = get_target_model(target)
    problem = KERNELS[kind].validate_problem(dims, dtype, name)
    if isinstance(raw, str):
        cfg = edge_config(kind, target, problem, raw)
    else:
        cfg = model.parse_config({"kernel": kind, "dtype": dtype, **raw})
    check = model.check(cfg, problem)
    assert check.valid, f"{name}: {check.violations}"
    return kind, programs.render_program(kind, cfg, problem, target, "host-check")[f"{kind}.cpp"]


def combine(sources: list[str]) -> str:
    """One translation unit from several programs: their includes once, each body in its own namespace
    (a function named main may live in a namespace; only ::main is the program's entry point)."""
    includes: list[str] = []
    bodies: list[str] = []
    for i, src in enumerate(sources):
        cut = src.index("using namespace cute;")
        for line in src[:cut].splitlines():
            if line.startswith("#") and line not in includes:
                includes.append(line)
        body = src[cut:].replace(
            "int main(int argc, const char** argv)", "int program_main(int argc, const char** argv)"
        )
        bodies.append(f"namespace kp_case_{i} {{\n{body}\n}}  // namespace kp_case_{i}\n")
    return "\n".join(includes) + "\n\n" + "".join(bodies)


@dataclass
class Unit:
    kind: str
    names: list[str]
    errors: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class HostCompile:
    units: list[Unit]
    skipped: dict[str, str]  # case -> reason
    wall_s: float
    cpu_s: float  # user + system time of every g++ run

    def errors_of(self, name: str) -> list[str] | None:
        for unit in self.units:
            if name in unit.names:
                return unit.errors.get(name, [])
        return None


def _gxx_argv(
    gxx: str, tree: sycl_tla.SyclTlaTree, sycl_inc: Path, kind: str, folder: Path, src: Path
) -> list[str]:
    includes = [f"-I{p}" for p in sycl_tla.include_dirs(tree, kind)] + [f"-I{sycl_inc}", f"-I{folder}"]
    return [
        gxx, "-std=c++17", "-fsyntax-only", "-fpermissive", "-w", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING",
        "-DCUTLASS_ENABLE_SYCL", "-DSYCL_INTEL_TARGET", *includes, str(src),
    ]  # fmt: skip


def _errors(stderr: str) -> list[str]:
    return [line[:500] for line in stderr.splitlines() if "error" in line]


def _compile(argv: list[str]) -> list[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    errors = _errors(proc.stderr)
    if proc.returncode != 0 and not errors:
        errors = [f"g++ exited {proc.returncode}: {proc.stderr.strip()[-500:]}"]
    return errors


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.fixture(scope="module")
def host_compile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> HostCompile:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("needs g++")
    cache = cache_root(request.config)
    try:
        sycl_inc = sycl_include(cache)
        tree, no_fa = sycl_tla_tree(cache, applications=True)
    except Unavailable as exc:
        pytest.skip(str(exc))
    skipped: dict[str, str] = {}
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for name in [*GOLDENS, *RENDERED]:
        kind, source = render_case(name)
        try:
            sycl_tla.check_tree_for_kind(tree, kind)
        except Exception as exc:  # noqa: BLE001 (ToolMissingError: the reason becomes the skip message)
            skipped[name] = no_fa or str(exc)
            continue
        by_kind.setdefault(kind, []).append((name, source))
    root = tmp_path_factory.mktemp("host-compile")
    (root / programs.COMMON_HEADER).write_text(programs.common_header())
    for kind in KINDS:  # the patched sycl-tla headers travel next to the program, as in a real build
        for name, text in programs.patched_headers(kind).items():
            (root / name).write_text(text)
    units: list[tuple[Unit, list[str]]] = []
    for kind, cases in by_kind.items():
        for start in range(0, len(cases), PER_UNIT):
            chunk = cases[start : start + PER_UNIT]
            units.append((Unit(kind, [n for n, _ in chunk]), [s for _, s in chunk]))

    def run(job: tuple[Unit, list[str]]) -> Unit:
        unit, sources = job
        t0 = time.monotonic()
        src = root / f"{unit.kind}_{unit.names[0]}.cpp"
        src.write_text(combine(sources))
        if _compile(_gxx_argv(gxx, tree, sycl_inc, unit.kind, root, src)):
            for name, source in zip(unit.names, sources, strict=True):  # attribute the failure
                single = root / f"{name}.cpp"
                single.write_text(source)
                unit.errors[name] = _compile(_gxx_argv(gxx, tree, sycl_inc, unit.kind, root, single))
        unit.seconds = time.monotonic() - t0
        return unit

    t0, cpu0 = time.monotonic(), _children_cpu_s()
    # heaviest units first so that the last one to finish is a short one
    units.sort(key=lambda u: (u[0].kind.startswith("fa_"), len(u[1])), reverse=True)
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        done = list(pool.map(run, units))
    return HostCompile(done, skipped, time.monotonic() - t0, _children_cpu_s() - cpu0)


CASES = sorted([*GOLDENS, *RENDERED])


@pytest.mark.parametrize("name", CASES)
def test_program_passes_the_host_compile(host_compile: HostCompile, name: str) -> None:
    if name in host_compile.skipped:
        pytest.skip(host_compile.skipped[name])
    errors = host_compile.errors_of(name)
    assert errors is not None, f"{name} was not compiled"
    assert not errors, "\n".join(errors[:10])


def test_every_kind_layout_and_type_family_is_covered() -> None:
    """The case list itself: a golden per kind, smallest and largest tiles per kind, all four GEMM
    layouts and every element-type family the Xe models accept."""
    assert set(GOLDENS.values()) == set(KINDS)
    for kind in KINDS:
        edges = {raw for k, _, _, _, raw in RENDERED.values() if k == kind and isinstance(raw, str)}
        assert edges == {"smallest", "largest"} or (kind == "fa_decode" and "largest" in edges), kind
    layouts = {"rr", "rc"} | {
        dims.get("layout", "rr") for k, _, dims, _, _ in RENDERED.values() if k == "gemm"
    }
    assert layouts == {"rr", "rc", "cr", "cc"}
    families = {
        "bf16": "float16", "f16": "float16", "tf32": "tf32", "s8": "int8", "u8": "int8", "e4m3": "fp8",
        "e5m2": "fp8", "s4": "int4", "u4": "int4", "e2m1": "fp4",
    }  # fmt: skip
    seen = {"float16", "int8", "fp8"}  # the goldens: bf16, s8, e4m3
    for _, _, _, dtype, _ in RENDERED.values():
        seen.add("mixed" if isinstance(dtype, dict) else families[dtype])
    assert seen == {"float16", "tf32", "int8", "fp8", "int4", "fp4", "mixed"}


def test_edge_configs_are_the_extremes_of_the_space() -> None:
    kind, target, dims, dtype, _ = RENDERED["gemm_smallest_f16_cc"]
    problem = KERNELS[kind].validate_problem(dims, dtype, "t")
    small = edge_config(kind, target, problem, "smallest")
    large = edge_config(kind, target, problem, "largest")
    volumes = [_tile_volume(c) for c in get_target_model(target).enumerate(kind, problem["dtype"], problem)]
    assert _tile_volume(small) == min(volumes) and _tile_volume(large) == max(volumes)
    assert _tile_volume(small) < _tile_volume(large)


def test_combined_unit_keeps_programs_apart() -> None:
    a = render_case("gemm_s4")[1]
    b = render_case("gemm_tf32_cr")[1]
    unit = combine([a, b])
    assert unit.count("\nnamespace kp_case_") == 2 and "int main(" not in unit
    assert unit.count('#include "kp_sycl_common.hpp"') == 1
    # everything before the first namespace is includes (nothing of a program body leaks out)
    head = unit[: unit.index("namespace kp_case_0")]
    assert all(line.startswith("#") or not line.strip() for line in head.splitlines())


def test_host_compile_fits_the_ci_budget(host_compile: HostCompile) -> None:
    """Five minutes on two cores: at most 600 CPU-seconds of g++ for the whole module.  CPU time, not
    wall time, so that a loaded machine does not fail it; the wall time is in the message."""
    per_unit = {u.names[0]: round(u.seconds) for u in host_compile.units}
    assert host_compile.cpu_s <= 600.0, (
        f"{host_compile.cpu_s:.0f} CPU-s (wall {host_compile.wall_s:.0f} s) > 600: {per_unit}"
    )


def _changed_lines(old: str, new: str) -> list[str]:
    import difflib

    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(old.splitlines(True), new.splitlines(True), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_patched_moe_headers_are_upstream_plus_the_recorded_change(request: pytest.FixtureRequest) -> None:
    """The shipped copies differ from sycl-tla's example 12 headers by exactly the lines the README's diff
    shows (provenance that cannot drift), and that diff clears the accumulator."""
    try:
        tree, _ = sycl_tla_tree(cache_root(request.config), applications=False)
    except Unavailable as exc:
        pytest.skip(str(exc))
    if tree.version != "0.9.1" or tree.moe_dir is None:
        pytest.skip(f"the patches are against sycl-tla 0.9.1's example 12; {tree.root} is {tree.version}")
    folder = REPO / "cpp_templates" / "sycl" / programs.PATCHED_DIR
    shipped = programs.patched_headers("moe_gemm")
    changed = _changed_lines((tree.moe_dir / "moe_gemms.hpp").read_text(), shipped["kp_moe_gemms.hpp"])
    changed += _changed_lines(
        (tree.moe_dir / "moe_grouped_gemm.hpp").read_text(), shipped["kp_moe_grouped_gemm.hpp"]
    )
    readme = (folder / "README.md").read_text()
    block = readme.split("```diff\n", 1)[1].split("```", 1)[0]
    recorded = [
        line for line in block.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed == recorded
    assert "+  clear(tCrD);" in changed
    assert (folder / "LICENSE.txt").read_text() == (
        REPO / "tests" / "data" / "sycl_tla_v0.9.1" / "LICENSE.txt"
    ).read_text()
