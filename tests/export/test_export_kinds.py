"""`kernelpilot export` of the grouped GEMM, MoE GEMM and attention kinds, from the recorded H200 run.

The run (benchmarks/results/confirm_h200_run_kinds.json) holds one run document per kind; each is
written to its own file, as `kernelpilot tune` writes them.  The dispatch headers are compiled with
the host compiler and asked for tuned, untuned, illegal and other-dtype problems under each fallback;
the expectations come from the run documents, not from the exporter's code.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.export.test_export_build import _c10_cuda_stub, _cuda_include
from tests.support.benchmark_scripts import load_benchmark_script

RUN = REPO / "benchmarks" / "results" / "confirm_h200_run_kinds.json"
CUTLASS = REPO / ".deps" / "cutlass"
GXX = shutil.which("g++")
NVCC = shutil.which("nvcc")


def _runs(tmp: Path) -> list[Path]:
    doc = json.loads(RUN.read_text())
    paths = []
    for kind, run in sorted(doc.items()):
        path = tmp / f"{kind}.json"
        path.write_text(json.dumps(run))
        paths.append(path)
    return paths


def _workloads() -> dict[str, dict]:
    return {w["name"]: w for run in json.loads(RUN.read_text()).values() for w in run["workloads"]}


def _operator_vendor_ratio(w: dict) -> float:
    """vendor / tuned for the vendor call the exported operator makes: torch._grouped_mm for the grouped
    kinds (their run baseline may be a torch.mm loop, which the operator cannot call), the run's own
    baseline otherwise."""
    v = w["vendor"]
    if w["kernel"] in ("grouped_gemm", "moe_gemm") and v["backend"] != "torch._grouped_mm":
        return v["candidates"]["torch._grouped_mm"]["time_ms"]["median"] / w["best"]["confirmed_ms"]
    return w["vs_vendor"]


@pytest.fixture(scope="module")
def kinds_export(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("kinds")
    # every tuned problem keeps its kernel here (the vendor-served rows: test_export_routing.py)
    r = run_cli("export", *map(str, _runs(tmp)), "--out", str(tmp / "out"), "--name", "kpk",
                "--no-bundle-cutlass", "--min-vendor-ratio", "0", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (tmp / "out" / "summary.json").write_text(r.stdout)
    return tmp / "out"


def test_every_tuned_problem_is_exported_with_its_run_evidence(kinds_export):
    doc = json.loads((kinds_export / "dispatch.json").read_text())
    wls = _workloads()
    assert doc["ops"] == ["attention", "grouped_mm", "moe_gemm"] and doc["entries"] == []
    # no GEMM rows, but every kind row carries its confirmed time: the file says so, as the CLI does
    assert doc["times"].startswith("confirmed medians"), doc["times"]
    grouped = {e["origin"]["workload"]: e for e in doc["grouped"]["entries"]}
    attention = {e["origin"]["workload"]: e for e in doc["attention"]["entries"]}
    # the one grouped problem whose groups differ in (N, K) is reported, not dropped silently
    uniform = {n for n, w in wls.items() if w["kernel"] in ("grouped_gemm", "moe_gemm")
               and len({(g[1], g[2]) for g in w["dims"]["groups"]}) == 1}  # fmt: skip
    mixed = {n for n, w in wls.items() if w["kernel"] == "grouped_gemm"} - uniform
    assert mixed == {"mixed_mnk_16"} and set(grouped) == uniform
    assert [s["workload"] for s in doc["grouped"]["skipped"]] == ["mixed_mnk_16"]
    notes = json.loads((kinds_export / "summary.json").read_text())["notes"]
    assert any("mixed_mnk_16" in n and "(N, K)" in n for n in notes)
    assert set(attention) == {n for n, w in wls.items() if w["kernel"].startswith("fa_")}
    kernels = {k["id"]: k for k in doc["grouped"]["kernels"] + doc["attention"]["kernels"]}
    for name, e in {**grouped, **attention}.items():
        w, best = wls[name], wls[name]["best"]
        cfg = {k: v for k, v in best["config"].items() if k not in ("kernel", "dtype")}
        assert all(
            kernels[e["kernel"]]["config"][k] == v
            for k, v in cfg.items()
            if k in ("tile", "schedule", "cluster")
        )
        assert e["time_ms"] == pytest.approx(best["confirmed_ms"]) and e["time_source"] == "confirmed"
        assert e["vendor_ratio"] == pytest.approx(_operator_vendor_ratio(w))
        if w["vendor"]["backend"] != e["origin"]["vendor"]:  # the run's faster path, kept as evidence
            assert e["origin"]["vendor"] == "torch._grouped_mm" and e["kind"] in ("grouped_gemm", "moe_gemm")
            assert e["origin"]["best_vendor"] == w["vendor"]["backend"] == "torch.mm loop"
            assert e["origin"]["best_vendor_ms"] == pytest.approx(w["vendor"]["confirmed_ms"])
        assert e["origin"]["search_time_ms"] == best["search_ms"] and e["kind"] == w["kernel"]
    for name, e in grouped.items():
        w = wls[name]
        groups = w["dims"]["groups"]
        assert e["op"] == ("moe_gemm" if w["kernel"] == "moe_gemm" else "grouped_mm")
        assert e["key"] == {
            "groups": len(groups),
            "N": groups[0][1],
            "K": groups[0][2],
            "M": sum(g[0] for g in groups),
        }
        assert e["knobs"] == {
            "raster": w["best"]["runtime"]["raster"],
            "swizzle": w["best"]["runtime"]["swizzle"],
        }
    for name, e in attention.items():
        d = wls[name]["dims"]
        assert e["key"] == {"batch": d["batch"], "heads_q": d["num_heads_q"], "heads_kv": d["num_heads_kv"],
                            "seq_q": d["seq_qo"], "seq_kv": d["seq_kv"], "head_dim": d["head_dim"],
                            "causal": d["causal"]}  # fmt: skip
        k = kernels[e["kernel"]]
        assert k["head_dim"] == d["head_dim"] and k["causal"] == d["causal"]
    # one compiled kernel per distinct (config, dtype) -- shared by grouped_mm and moe_gemm -- and per
    # (config, dtype, mask) for attention; each its own translation unit
    grouped_cfgs = {
        json.dumps(wls[n]["best"]["config"]["tile"] + wls[n]["best"]["config"]["cluster"]) for n in grouped
    }
    assert len(doc["grouped"]["kernels"]) == len(grouped_cfgs)
    fa_cfgs = {json.dumps([wls[n]["best"]["config"]["tile"], wls[n]["best"]["config"]["schedule"], wls[n]["dims"]["causal"]])
               for n in attention}  # fmt: skip
    assert len(doc["attention"]["kernels"]) == len(fa_cfgs)
    assert sorted(p.name for p in (kinds_export / "csrc" / "grouped").iterdir()) == [
        f"{k['id']}.cu" for k in doc["grouped"]["kernels"]
    ]
    assert sorted(p.name for p in (kinds_export / "csrc" / "attention").iterdir()) == [
        f"{k['id']}.cu" for k in doc["attention"]["kernels"]
    ]
    assert {json.dumps(k["alignment"]) for k in doc["grouped"]["kernels"]} == {json.dumps({"N": 8, "K": 8})}


def test_exported_kernels_are_the_tuning_programs_kernels(kinds_export):
    """Each translation unit carries the benchmark program's kernel types verbatim, without its main."""
    from kernelpilot.dsl_plugins.cuda.fmha import normalize_fmha_config, render_fmha_program
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import render_grouped_program

    doc = json.loads((kinds_export / "dispatch.json").read_text())
    for k in doc["grouped"]["kernels"]:
        bench = next(iter(render_grouped_program("grouped_gemm", k["config"], k["dtype"]).sources.values()))
        types = bench[bench.index("constexpr int kTileM") : bench.index("constexpr double kRtol")]
        exported = (kinds_export / "csrc" / "grouped" / f"{k['id']}.cu").read_text()
        assert "GemmUniversal<ProblemShape" in types and types in exported and "int main(" not in exported
        args = bench[
            bench.index("  typename Gemm::Arguments args{") : bench.index(
                "  return args;", bench.index("make_args")
            )
        ]
        assert args.replace("buf.", "").replace("int(shapes_host.size())", "static_cast<int>(c.groups)") .replace(
            "shapes_host.data()", "host_shapes").replace("_dev", "") in exported  # fmt: skip
    for k in doc["attention"]["kernels"]:
        problem = {"causal": k["causal"], "dtype": k["dtype"], "head_dim": k["head_dim"]}
        cfg = normalize_fmha_config(k["config"], k["head_dim"])
        bench = next(iter(render_fmha_program("fa_prefill", cfg, problem).sources.values()))
        types = bench[bench.index("constexpr int kHeadDim") : bench.index("constexpr double kAtol")]
        exported = (kinds_export / "csrc" / "attention" / f"{k['id']}.cu").read_text()
        assert "FmhaBuilder<" in types and types in exported and "int main(" not in exported


def _select_program(root: Path, lines: list[str], tmp: Path) -> list[str]:
    src = tmp / "sel.cpp"
    src.write_text("\n".join(['#include "kpk/grouped_dispatch.h"', '#include "kpk/attention_dispatch.h"',
                              "#include <cstdio>", "int main() {", "  using namespace kpk;", *lines,
                              "  return 0;", "}"]))  # fmt: skip
    cc = subprocess.run([GXX, "-std=c++17", "-Wall", "-Werror", f"-I{root / 'include'}", str(src), "-o", str(tmp / "sel")],
                        capture_output=True, text=True)  # fmt: skip
    assert cc.returncode == 0, cc.stderr
    return subprocess.run([str(tmp / "sel")], capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_grouped_dispatch_tuned_nearest_vendor_error(kinds_export, tmp_path):
    doc = json.loads((kinds_export / "dispatch.json").read_text())
    entries = doc["grouped"]["entries"]
    problems = [
        (e["op"], "bf16", e["key"]["groups"], e["key"]["N"], e["key"]["K"], e["key"]["M"]) for e in entries
    ]
    problems += [
        ("moe_gemm", "bf16", 128, 1536, 2048, 30000),  # fewer tokens: nearest is the tuned gate_up row
        ("grouped_mm", "bf16", 8, 14336, 4096, 9000),  # nearest: the 8-group up projection
        ("grouped_mm", "bf16", 8, 14330, 4096, 9908),  # N not a multiple of 8: no kernel is legal (TMA)
        ("grouped_mm", "f16", 8, 14336, 4096, 9908),  # no f16 kernel was tuned
    ]
    lines = []
    for policy in ("vendor", "nearest", "error"):
        for op, dt, g, n, k, m in problems:
            lines.append(
                f"  {{ auto c = select_grouped(GroupedOp::{op}, DType::{dt}, {g}, {n}, {k}, {m}, Fallback::{policy});"
                f'    std::printf("{policy} {op} {dt} {g}x{n}x{k}x{m} %s %s %c:%d %lld\\n", to_string(c.how),'
                '    c.kernel >= 0 ? kGroupedKernels[c.kernel].id : "-", c.knobs.raster, c.knobs.swizzle,'
                "    c.entry >= 0 ? kGroupedEntries[c.entry].n : -1LL); }"
            )
    got = {tuple(x.split()[:4]): x.split()[4:] for x in _select_program(kinds_export, lines, tmp_path)}
    for e in entries:
        key = f"{e['key']['groups']}x{e['key']['N']}x{e['key']['K']}x{e['key']['M']}"
        for policy in ("vendor", "nearest", "error"):
            knobs = f"{e['knobs']['raster']}:{e['knobs']['swizzle']}"
            assert got[(policy, e["op"], "bf16", key)] == ["tuned", e["kernel"], knobs, str(e["key"]["N"])]
    gate_up = next(e for e in entries if e["op"] == "moe_gemm" and e["key"]["N"] == 1536)
    assert got[("nearest", "moe_gemm", "bf16", "128x1536x2048x30000")][::3] == ["nearest", "1536"]
    assert got[("nearest", "moe_gemm", "bf16", "128x1536x2048x30000")][1] == gate_up["kernel"]
    up = next(e for e in entries if e["key"]["N"] == 14336)
    assert got[("nearest", "grouped_mm", "bf16", "8x14336x4096x9000")][2:] == [
        f"{up['knobs']['raster']}:{up['knobs']['swizzle']}",
        "14336",
    ]
    for untuned in (("moe_gemm", "bf16", "128x1536x2048x30000"), ("grouped_mm", "bf16", "8x14336x4096x9000")):
        assert got[("vendor", *untuned)][:2] == ["vendor", "-"] and got[("error", *untuned)][:2] == [
            "error",
            "-",
        ]
    for other in (("grouped_mm", "bf16", "8x14330x4096x9908"), ("grouped_mm", "f16", "8x14336x4096x9908")):
        assert got[("nearest", *other)][:2] == ["vendor", "-"] and got[("error", *other)][:2] == [
            "error",
            "-",
        ]


@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_attention_dispatch_tuned_nearest_vendor_error(kinds_export, tmp_path):
    doc = json.loads((kinds_export / "dispatch.json").read_text())
    entries = doc["attention"]["entries"]
    keys = [e["key"] for e in entries]
    problems = [
        (k["causal"], k["batch"], k["heads_q"], k["heads_kv"], k["seq_q"], k["seq_kv"], k["head_dim"])
        for k in keys
    ]
    problems += [
        (True, 4, 32, 8, 3000, 3000, 128),  # untuned prefill length: nearest is the causal d128 4k row
        (False, 48, 32, 8, 1, 5000, 128),  # untuned decode: nearest is a no-mask d128 row
        (True, 4, 32, 8, 4096, 4096, 96),  # head dim 96: no kernel was compiled for it
        (False, 4, 32, 8, 4096, 4096, 64),  # no-mask prefill, d64: the decode kernel is legal (nearest)
    ]
    lines = []
    for policy in ("vendor", "nearest", "error"):
        for causal, b, hq, hkv, sq, skv, d in problems:
            c = "true" if causal else "false"
            lines.append(
                f"  {{ auto c = select_attention(DType::bf16, {c}, {b}, {hq}, {hkv}, {sq}, {skv}, {d}, Fallback::{policy});"
                f'    std::printf("{policy} {c} {b}x{hq}x{hkv}x{sq}x{skv}x{d} %s %s %lld\\n", to_string(c.how),'
                '    c.kernel >= 0 ? kAttentionKernels[c.kernel].id : "-", c.entry >= 0 ? kAttentionEntries[c.entry].seq_kv : -1LL); }'
            )
    got = {tuple(x.split()[:3]): x.split()[3:] for x in _select_program(kinds_export, lines, tmp_path)}
    for e in entries:
        k = e["key"]
        key = "x".join(str(k[f]) for f in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim"))
        for policy in ("vendor", "nearest", "error"):
            assert got[(policy, "true" if k["causal"] else "false", key)] == [
                "tuned",
                e["kernel"],
                str(k["seq_kv"]),
            ]
    by = {
        (e["key"]["causal"], e["key"]["head_dim"], e["key"]["heads_q"], e["key"]["seq_kv"]): e
        for e in entries
    }
    assert got[("nearest", "true", "4x32x8x3000x3000x128")][:2] == [
        "nearest",
        by[(True, 128, 32, 4096)]["kernel"],
    ]
    near = got[("nearest", "false", "48x32x8x1x5000x128")]
    assert near[0] == "nearest" and near[1] == by[(False, 128, 32, 4096)]["kernel"]
    assert got[("nearest", "false", "4x32x8x4096x4096x64")][:2] == [
        "nearest",
        by[(False, 64, 64, 4096)]["kernel"],
    ]
    assert got[("nearest", "true", "4x32x8x4096x4096x96")][:2] == ["vendor", "-"]
    for untuned in (("true", "4x32x8x3000x3000x128"), ("true", "4x32x8x4096x4096x96")):
        assert got[("vendor", *untuned)][:2] == ["vendor", "-"] and got[("error", *untuned)][:2] == [
            "error",
            "-",
        ]
    assert math.isfinite(entries[0]["time_ms"])


def test_package_registers_the_ops_and_their_fakes(kinds_export):
    import py_compile

    init = kinds_export / "python" / "kpk" / "__init__.py"
    py_compile.compile(str(init), doraise=True)
    text = init.read_text()
    for op in ("grouped_mm", "moe_gemm", "attention"):
        assert f'@torch.library.register_fake("kpk::{op}")' in text and f"def {op}(" in text
    ops = (kinds_export / "csrc" / "grouped_ops.cpp").read_text() + (
        kinds_export / "csrc" / "attention_ops.cpp"
    ).read_text()
    for schema in ("grouped_mm(Tensor a, Tensor b, Tensor offs) -> Tensor", "moe_gemm(Tensor x, Tensor w, Tensor offs) -> Tensor",
                   "attention(Tensor q, Tensor k, Tensor v, bool causal=False) -> Tensor"):  # fmt: skip
        assert schema in ops
    cmake = (kinds_export / "CMakeLists.txt").read_text()
    assert 'cmake/grouped.cmake"' in cmake and 'cmake/attention.cmake"' in cmake
    # the kinds' libraries build with the flags their tuning programs were built with
    from kernelpilot.dsl_plugins.cuda.fmha import FMHA_NVCC_FLAGS
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import NVCC_FLAGS

    part = (kinds_export / "cmake" / "attention.cmake").read_text()
    assert "examples/88_hopper_fmha" in part and "csrc/attention_ops.cpp" in part
    for flag in FMHA_NVCC_FLAGS:
        if flag not in ("-Xptxas", "-v"):
            assert f"$<$<COMPILE_LANGUAGE:CUDA>:{flag}>" in part
    grouped_part = (kinds_export / "cmake" / "grouped.cmake").read_text()
    for flag in NVCC_FLAGS:
        if flag not in ("-Xptxas", "-v"):
            assert f"$<$<COMPILE_LANGUAGE:CUDA>:{flag}>" in grouped_part
    assert "-ftz=true" in part and "-ftz=true" not in grouped_part  # the FMHA programs' flag, theirs only


def test_bad_kind_inputs_exit_2_and_write_nothing(tmp_path):
    runs = {p.stem: p for p in _runs(tmp_path)}
    grouped = json.loads(runs["grouped_gemm"].read_text())
    only_mixed = {**grouped, "workloads": [w for w in grouped["workloads"] if w["name"] == "mixed_mnk_16"]}
    (tmp_path / "mixed.json").write_text(json.dumps(only_mixed))
    fa = json.loads(runs["fa_prefill"].read_text())
    bad_tile = json.loads(json.dumps(fa))
    bad_tile["workloads"][0]["best"]["config"]["tile"] = [128, 128, 64]  # head dim 64 on a d128 problem
    (tmp_path / "bad_tile.json").write_text(json.dumps(bad_tile))
    bad_raster = json.loads(runs["moe_gemm"].read_text())
    bad_raster["workloads"][0]["best"]["runtime"]["raster"] = "diagonal"
    (tmp_path / "bad_raster.json").write_text(json.dumps(bad_raster))
    cases = [
        ("mixed.json", "nothing exportable"),
        ("bad_tile.json", "head dim"),
        ("bad_raster.json", "raster 'diagonal' not in M, N"),
    ]
    for file, message in cases:
        r = run_cli("export", str(tmp_path / file), "--out", str(tmp_path / "out"), "--no-bundle-cutlass")
        assert r.returncode == 2, (file, r.stderr)
        assert message in r.stderr, (file, r.stderr)
        assert not (tmp_path / "out").exists()
        assert not [p for p in tmp_path.iterdir() if ".export-" in p.name]


needs_tools = pytest.mark.skipif(
    not (NVCC and GXX and shutil.which("cmake") and shutil.which("ninja") and CUTLASS.exists()),
    reason="needs nvcc, g++, cmake, ninja and CUTLASS headers in .deps/cutlass",
)


@pytest.mark.slow
@needs_tools
def test_kind_sources_pass_the_compiler_front_ends(tmp_path):
    """With the bundled CUTLASS (and its Hopper FMHA collective): CMake configures the project, nvcc
    preprocesses every grouped and attention kernel, compiles the grouped table (its entry points and the
    kernel that zeroes the rows after offs[-1]; no CUTLASS in it, so seconds) for sm_90a with -Werror, and
    the three operator sources (the GEMM one with empty GEMM tables) compile against the torch headers
    with -Wall -Wextra -Werror."""
    import sys

    import torch
    import torch.utils.cpp_extension as ce

    out = tmp_path / "proj"
    r = run_cli(
        "export",
        *map(str, _runs(tmp_path)),
        "--out",
        str(out),
        "--name",
        "kpk",
        "--cutlass-dir",
        str(CUTLASS),
        "--min-vendor-ratio",
        "0",  # every tuned kernel, so every kind's kernel sources exist to compile
    )
    assert r.returncode == 0, r.stderr
    cutlass = out / "third_party" / "cutlass"
    assert (cutlass / "examples/88_hopper_fmha/kernel/fmha_kernel_builder.hpp").is_file()
    r = subprocess.run(["cmake", "-S", str(out), "-B", str(tmp_path / "b"), "-G", "Ninja", f"-DPython_EXECUTABLE={sys.executable}"],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ninja = (tmp_path / "b" / "build.ninja").read_text()
    for src in [*(out / "csrc" / "grouped").iterdir(), *(out / "csrc" / "attention").iterdir()]:
        assert f"csrc/{src.parent.name}/{src.name}" in ninja
    assert "grouped_ops.cpp" in ninja and "attention_ops.cpp" in ninja
    inc = [f"-I{out / 'include'}", f"-I{cutlass / 'include'}", f"-I{cutlass / 'tools/util/include'}",
           f"-I{cutlass / 'examples/88_hopper_fmha'}"]  # fmt: skip
    for src in [*sorted((out / "csrc" / "grouped").iterdir()), *sorted((out / "csrc" / "attention").iterdir()),
                out / "csrc" / "grouped_table.cu", out / "csrc" / "attention_table.cu"]:  # fmt: skip
        r = subprocess.run([NVCC, "-std=c++17", "-E", "-gencode", "arch=compute_90a,code=sm_90a", *inc, str(src), "-o", "/dev/null"],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
        assert r.returncode == 0, (src.name, r.stderr[-3000:])
    r = subprocess.run([NVCC, "-std=c++17", "-c", "-gencode", "arch=compute_90a,code=sm_90a", "-Xcompiler", "-Wall,-Wextra,-Werror",
                        f"-I{out / 'include'}", str(out / "csrc" / "grouped_table.cu"), "-o", str(tmp_path / "grouped_table.o")],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    _c10_cuda_stub(tmp_path / "stub")
    cuda_inc = _cuda_include()
    torch_inc = [a for p in ce.include_paths() for a in ("-isystem", p)]
    for src in ("grouped_ops.cpp", "attention_ops.cpp", "ops.cpp"):
        r = subprocess.run(
            [GXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *torch_inc, "-isystem", str(tmp_path / "stub"),
             "-isystem", str(cuda_inc), f"-I{out / 'include'}", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             str(out / "csrc" / src)],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert r.returncode == 0, (src, r.stderr[-4000:])


def test_h200_kinds_check_plans_from_the_export(kinds_export):
    """benchmarks/export_kinds_h200.py --dry-run (no torch, no GPU) plans from the export's dispatch.json:
    every tuned grouped and attention problem, untuned variants of each op, all three policies."""
    import sys

    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "export_kinds_h200.py"), "--name", "kpk", "--dispatch",
         str(kinds_export / "dispatch.json"), "--out", "unused.json", "--dry-run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    plan = json.loads(r.stdout)["plan"]
    doc = json.loads((kinds_export / "dispatch.json").read_text())
    tuned = [p for p in plan["grouped"] if p[0].startswith("tuned_")]
    assert sorted(tuple(p[1:]) for p in tuned) == sorted(
        (e["op"], e["key"]["groups"], e["key"]["N"], e["key"]["K"], e["key"]["M"])
        for e in doc["grouped"]["entries"]
    )
    assert {p[1] for p in plan["grouped"] if not p[0].startswith("tuned_")} == {"grouped_mm", "moe_gemm"}
    # rows after the last offset, which the operators return as zeros: one case per op, M past the groups
    tail = {p[1]: p[5] for p in plan["grouped"] if p[0].endswith("_rows_after_last_offset")}

    # the untuned variants reuse, per op, the kernel-served tuned row of the smallest N x K (the 300-group
    # case holds 300 weight matrices of that size)
    def base_rank(e):
        return (not e.get("kernel"), e["key"]["N"] * e["key"]["K"])

    base = {op: min((e for e in doc["grouped"]["entries"] if e["op"] == op), key=base_rank) for op in tail}
    assert set(tail) == {"grouped_mm", "moe_gemm"}
    assert all(tail[op] > sum(base[op]["tuned_group_rows"]) for op in tail)
    many = {p[1]: tuple(p[2:5]) for p in plan["grouped"] if p[0].endswith("_300_groups")}
    assert many == {op: (300, base[op]["key"]["N"], base[op]["key"]["K"]) for op in tail}
    assert sum(a.startswith("tuned_") for a in plan["attention"]) == len(doc["attention"]["entries"])
    assert len(plan["attention"]) > len(doc["attention"]["entries"]) and plan["policies"] == [
        "vendor",
        "nearest",
        "error",
    ]
    # causal grouped-query cases in both layouts: contiguous tensors (one launch over shared K/V heads) and
    # [B, S, H, D] views, whose batch stride does not span the heads (one launch per query head)
    gqa = [c for c in _kinds_driver().attention_cases(doc) if c["causal"] and c["heads_q"] > c["heads_kv"]]
    assert {bool(c.get("bshd")) for c in gqa if c["legal"]} == {False, True}


def _function(source: str, signature: str) -> str:
    """The text of the C++ function starting at ``signature`` up to its closing brace at column 0."""
    start = source.index(signature)
    return source[start : source.index("\n}\n", start) + 2]


def test_vendor_paths_keep_the_operators_contract(kinds_export):
    """The fallbacks return what the kernels' path and register_fake promise: a contiguous result and,
    for the grouped ops, zero rows after offs[-1].  torch._grouped_mm leaves those rows unwritten and pads
    its rows to 16 bytes when N is not a multiple of 8 (checked below on this machine's torch), and SDPA's
    CUDA backends may return the [B, S, H, D] layout: without the fix the vendor path returns garbage
    rows, and a torch.compile graph (which trusts the fake's strides) fails its stride check."""
    import torch

    a = torch.ones(10, 16, dtype=torch.bfloat16)
    raw = torch._grouped_mm(a, torch.ones(2, 12, 16, dtype=torch.bfloat16).transpose(-2, -1),
                            torch.tensor([3, 6], dtype=torch.int32))  # fmt: skip
    assert not raw.is_contiguous()  # why the vendor result is made contiguous

    grouped = (kinds_export / "csrc" / "grouped_ops.cpp").read_text()
    vendor = _function(grouped, "at::Tensor vendor(GroupedOp op,")
    assert (
        "vendor_grouped(a, op == GroupedOp::moe_gemm ? b.transpose(-2, -1) : b, offs).contiguous()" in vendor
    )
    # the tail: on the GPU with int32 offs a kernel writes only rows [offs[-1], M), reading offs[-1] on the
    # device, on the current stream, its launch checked; every other input keeps the masked_fill (run on
    # CPU tensors by test_grouped_ops_zero_the_tail_on_cpu)
    assert "const at::Tensor last = offs.select(0, offs.numel() - 1);" in vendor
    start = vendor.index("if (out.is_cuda()")
    cuda = vendor[start : vendor.index("return out;", start)]
    assert "last.scalar_type() == at::kInt" in cuda and "last.device() == out.device()" in cuda
    assert (
        "grouped_zero_tail(out.data_ptr(), out.size(0), out.size(1) * static_cast<long long>(out.element_size()),\n"
        "                      last.data_ptr<int>(), c10::cuda::getCurrentCUDAStream(out.get_device()).stream());\n"
        "    C10_CUDA_KERNEL_LAUNCH_CHECK();" in cuda
    )
    assert (
        "masked_fill_" not in cuda
        and "out.masked_fill_(rows.ge(last.to(out.device(), at::kLong)).unsqueeze(1), 0)" in vendor
    )
    assert ".item" not in vendor and "kCPU" not in vendor  # no host read of offs: CUDA-graph safe
    header = (kinds_export / "include" / "kpk" / "grouped.h").read_text()
    assert (
        "void grouped_zero_tail(void* d, long long rows, long long row_bytes, const int* end_row, cudaStream_t stream);"
        in header
    )
    table = (kinds_export / "csrc" / "grouped_table.cu").read_text()
    assert (
        "void grouped_zero_tail(void* d, long long rows, long long row_bytes, const int* end_row, cudaStream_t stream) {"
        in table
    )
    kernel = _function(table, "__global__ void zero_tail_kernel(")
    assert (
        "long long end = *end_row;" in kernel and "end = end < 0 ? 0 : (end > rows ? rows : end);" in kernel
    )
    # from the tail's first word to the end, grid-stride
    assert "i = end * row_words +" in kernel and "i += stride" in kernel
    # every fallback of run() goes through vendor(), never through vendor_grouped() alone
    body = _function(grouped, "at::Tensor run(GroupedOp op,")
    assert body.count("return vendor(op, a, b, offs);") == 2 and "vendor_grouped(" not in body

    attention = (kinds_export / "csrc" / "attention_ops.cpp").read_text()
    vendor = _function(attention, "at::Tensor vendor(const at::Tensor& q,")
    assert (
        "at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, std::nullopt, gqa).contiguous()" in vendor
    )
    decide = _function(attention, "AttentionDecision decide(")
    assert "d.b > 65535 || d.hq > 65535" in decide  # grid y / z of the FMHA launch
    # strides go into the TMA descriptors as they are: positive (no expand broadcast) and int-sized
    strides = _function(attention, "bool strides_ok(")
    assert "t.stride(i) <= 0 || t.stride(i) >= (1LL << 31)" in strides


# Loads the CPU-only build of the grouped operators and calls them on CPU tensors, every CPU allocation
# poisoned (c10's junk fill: NaN-like bytes where torch._grouped_mm leaves rows unwritten); prints JSON.
_CPU_CALL = """
import ctypes, importlib.util, json, os, sys
import torch

path, ns = sys.argv[1], sys.argv[2]
sys.setdlopenflags(os.RTLD_LAZY)  # the CUDA entry points stay unbound: the CPU dispatch never calls them
spec = importlib.util.spec_from_file_location(ns + "_cpu", path)
spec.loader.exec_module(importlib.util.module_from_spec(spec))
ops = getattr(torch.ops, ns)
c10 = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
ctypes.c_bool.in_dll(c10, "FLAGS_caffe2_cpu_allocator_do_junk_fill").value = True
torch.manual_seed(0)
offs = torch.tensor([3, 3, 8], dtype=torch.int32)  # groups of 3, 0 and 5 rows; rows 8..11 after the last
x = torch.randn(12, 16).to(torch.bfloat16)
rec = {}
for op, n in (("grouped_mm", 24), ("moe_gemm", 12)):  # 48-byte rows; 24-byte rows (a strided vendor result)
    w = torch.randn(3, n, 16).to(torch.bfloat16)
    b = w.transpose(-2, -1) if op == "grouped_mm" else w
    raw = torch._grouped_mm(x, w.transpose(-2, -1), offs)
    ref = torch.zeros(12, n)
    for g, (s, e) in enumerate(zip([0, 3, 3], offs.tolist())):
        ref[s:e] = x[s:e].float() @ w[g].float().T
    y = getattr(ops, op)(x, b, offs)
    tol = 2.0**-7 * float(ref.abs().max())
    rec[op] = {"raw_tail_zero": bool((raw[8:] == 0).all()), "tail_zero": bool((y[8:] == 0).all()),
               "head_ok": bool(torch.allclose(y[:8].float(), ref[:8], rtol=2.0**-7, atol=tol)),
               "contiguous": y.is_contiguous(), "shape": list(y.shape),
               "explain": getattr(ops, "explain_" + op)(x, b, offs)}
print(json.dumps(rec))
"""

_PY_MODULE = """#include <Python.h>
#include <c10/cuda/CUDACachingAllocator.h>
// The CUDA caching allocator's handle is data, which the dynamic linker binds at load time even when it
// binds functions lazily; a CPU-only torch has none.  Defined here, never used: no CUDA tensor is made.
decltype(c10::cuda::CUDACachingAllocator::allocator) c10::cuda::CUDACachingAllocator::allocator{};
static PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "NAME_cpu", nullptr, -1, nullptr, nullptr, nullptr, nullptr, nullptr};
PyMODINIT_FUNC PyInit_NAME_cpu(void) { return PyModule_Create(&kModule); }
"""


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_grouped_ops_zero_the_tail_on_cpu(tmp_path):
    """The exported grouped_ops.cpp, built against this machine's CPU-only torch (its CUDA entry points
    left to lazy binding: CPU tensors never reach them) and called through torch.ops on CPU tensors: the
    vendor path's rows after offs[-1] are zero and the rows before match the fp32 reference, for both ops.
    Every CPU allocation is junk-filled, and the raw torch._grouped_mm result is checked to keep junk in
    those rows, so the test fails if the operator's masked_fill path stops zeroing them."""
    import sys
    import sysconfig

    import torch
    import torch.utils.cpp_extension as ce

    cuda_inc = _cuda_include()
    out = tmp_path / "proj"
    r = run_cli("export", *map(str, _runs(tmp_path)), "--out", str(out), "--name", "kpcpu", "--no-bundle-cutlass",
                "--min-vendor-ratio", "0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    _c10_cuda_stub(tmp_path / "stub")
    (tmp_path / "module.cpp").write_text(_PY_MODULE.replace("NAME", "kpcpu"))
    lib = Path(torch.__file__).parent / "lib"
    so = tmp_path / f"kpcpu_cpu{sysconfig.get_config_var('EXT_SUFFIX')}"
    r = subprocess.run(
        [GXX, "-std=c++17", "-O0", "-shared", "-fPIC", *[a for p in ce.include_paths() for a in ("-isystem", p)],
         "-isystem", str(tmp_path / "stub"), "-isystem", str(cuda_inc), "-isystem", sysconfig.get_paths()["include"],
         f"-I{out / 'include'}", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
         str(out / "csrc" / "grouped_ops.cpp"), str(tmp_path / "module.cpp"), f"-L{lib}", "-lc10", "-ltorch_cpu",
         "-ltorch", f"-Wl,-rpath,{lib}", "-o", str(so)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run(
        [sys.executable, "-c", _CPU_CALL, str(so), "kpcpu"], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-4000:]
    rec = json.loads(r.stdout)
    for op, n in (("grouped_mm", 24), ("moe_gemm", 12)):
        assert rec[op]["raw_tail_zero"] is False  # the vendor leaves the tail unwritten: junk, not zeros
        assert rec[op]["tail_zero"] and rec[op]["head_ok"], (op, rec[op])
        assert rec[op]["contiguous"] and rec[op]["shape"] == [12, n]
        assert rec[op]["explain"].startswith("vendor: the kernels take CUDA tensors only"), rec[op]["explain"]


def _kinds_driver():
    return load_benchmark_script("export_kinds_h200")


def test_h200_kinds_check_catches_unwritten_rows_and_strided_results():
    """The device check's own helpers, run on CPU tensors: its vendor result has zero rows after the last
    offset and is contiguous, it matches the fp32 reference, and check_call fails a result that is
    strided (torch._grouped_mm as it comes) or has NaN rows (what poisoned memory shows for rows an
    operator never wrote)."""
    import functools

    import torch

    drv = _kinds_driver()
    case = {"op": "moe_gemm", "rows": [3, 0, 5], "N": 12, "K": 16, "tail": 4}
    x, w, offs = drv.grouped_inputs(case, seed=1, device="cpu")
    assert x.shape == (12, 16) and offs.tolist() == [3, 3, 8]
    ven = drv.grouped_vendor("moe_gemm", x, w, offs)
    ref = drv.grouped_reference("moe_gemm", x, w, offs)
    assert ven.is_contiguous() and bool((ven[8:] == 0).all()) and bool((ref[8:] == 0).all())
    tol = (1e-2 * (1.0 + math.sqrt(16) / 3.0), 1e-2)
    check = functools.partial(drv.check_call, "vendor", "vendor: not a tuned problem", vendor=functools.partial(
        drv.grouped_vendor, "moe_gemm", x, w, offs), reference=functools.partial(drv.grouped_reference, "moe_gemm", x, w,
        offs), tol=tol, tuned=False, legal=True)  # fmt: skip
    assert check(call=functools.partial(drv.grouped_vendor, "moe_gemm", x, w, offs))["ok"]
    raw = check(call=lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs))
    assert not raw["ok"] and raw["contiguous"] is False

    def unwritten_tail():
        out = drv.grouped_vendor("moe_gemm", x, w, offs).clone()
        out[8:] = float("nan")
        return out

    rec = check(call=unwritten_tail)
    assert not rec["ok"] and rec["bad"] == 4 * 12
    assert drv.poisoned(lambda: 7, 1024) == 7  # no GPU here: the call alone


class _FakeVendor:
    """A vendor function returning its results in turn (the last one from then on), counting calls."""

    def __init__(self, *results):
        self.results, self.calls = results, 0

    def __call__(self):
        self.calls += 1
        return self.results[min(self.calls, len(self.results)) - 1].clone()


def test_h200_kinds_check_accepts_a_nondeterministic_vendor_only_within_its_own_spread():
    """The vendor-path check of the device script (check_call and expect_raise_or_vendor, via
    matches_vendor) with fake vendors on CPU tensors: equal bits pass with one vendor call; a result
    that differs is checked against a second vendor call: against a deterministic vendor it passes only
    within one bf16 rounding step of the largest output, against a vendor whose two results differ it passes within their max |diff| (recorded with
    vendor_deterministic false) and fails past it; NaN never passes."""
    import functools

    import torch

    drv = _kinds_driver()
    g = torch.Generator().manual_seed(3)
    first = (torch.rand((2, 4, 8, 16), generator=g) * 2 - 1).to(torch.bfloat16)
    first.view(-1)[5], first.view(-1)[7] = 0.5, 0.125  # the steps below are exact in bf16 there
    step = torch.zeros_like(first)
    step.view(-1)[5] = 2**-8  # one element one step apart: the vendor's run-to-run spread
    second = first + step
    spread = float((second.float() - first.float()).abs().max())
    assert spread > 0
    inside = first.clone()
    inside.view(-1)[7] += 2**-9  # another element, less than the spread away
    outside = first + 4 * step
    nan = first.clone()
    nan.view(-1)[0] = float("nan")
    reference = functools.partial(first.float)

    def check(out, vendor, via_check_call=True):
        if via_check_call:
            return drv.check_call("vendor", "vendor: not a tuned problem", lambda: out.clone(), vendor, reference,
                                  (2e-2, 2e-2), tuned=False, legal=True)  # fmt: skip
        return drv.expect_raise_or_vendor("nearest", "vendor: dtype not in bfloat16, float16",
                                          lambda: out.clone(), vendor)  # fmt: skip

    for via in (True, False):
        det = _FakeVendor(first)
        rec = check(first, det, via)
        assert rec["ok"] and rec["equals_vendor"] is True and det.calls == 1
        assert "vendor_deterministic" not in rec
        det = _FakeVendor(first)  # deterministic: within one bf16 step of the largest output passes
        rec = check(inside, det, via)
        assert rec["ok"] and rec["equals_vendor"] is False and rec["vendor_deterministic"] is True
        assert det.calls == 2 and rec["vendor_rounding_step"] == 2.0**-7 * float(first.abs().max())
        far = first.clone()
        far.view(-1)[7] += 0.0625  # several bf16 steps of the largest output away
        rec = check(far, _FakeVendor(first), via)
        assert not rec["ok"] and rec["vendor_deterministic"] is True
        assert not check(nan, _FakeVendor(first), via)["ok"]
        flaky = _FakeVendor(first, second)
        rec = check(inside, flaky, via)
        assert rec["ok"] and rec["equals_vendor"] is False and rec["vendor_deterministic"] is False
        assert (
            rec["vendor_max_diff"] == spread and 0 < rec["max_diff_vs_vendor"] <= spread and flaky.calls == 2
        )
        rec = check(second, _FakeVendor(first, second), via)  # the vendor's other result
        assert rec["ok"] and rec["max_diff_vs_vendor"] == 0.0
        rec = check(outside, _FakeVendor(first, second), via)
        assert not rec["ok"] and rec["vendor_deterministic"] is False and rec["max_diff_vs_vendor"] > spread
        assert not check(nan, _FakeVendor(first, second), via)["ok"]


def _split_entry(splits: int = 4):
    from kernelpilot.export.runs import TunedEntry

    dims = {"batch": 4, "num_heads_q": 32, "num_heads_kv": 8, "seq_kv": 32768, "head_dim": 128}
    config = {
        "kernel": "fa_decode",
        "dtype": "bf16",
        "tile": [64, 128, 128],
        "schedule": "tma",
        "splits": splits,
    }
    return TunedEntry(kind="fa_decode", dtype="bf16", layout="", dims=dims, config=config,
                      label=f"64x128x128_tma_sk{splits}", runtime={}, time_ms=0.1756, time_source="confirmed",
                      origin={"run": "run.json", "workload": "llama3_8b_decode_b4_kv32k"}, raw_dtype="bf16")  # fmt: skip


def test_split_kv_winner_is_exported_with_its_combine_step() -> None:
    """A split-KV winner exports as the kernel the run measured: the collective over batch x head "batches"
    and kSplits chunks with Q read in place, its partials in the workspace after the collective's, and the
    combine kernel as a programmatic dependent launch writing through the operator's strides; launches
    whose strides do not flatten or whose keys do not split into 8-row chunks are rejected (the operator
    then falls back), and an unsplit kernel renders none of it."""
    from kernelpilot.dsl_plugins.cuda.gemm import template_env
    from kernelpilot.export.attention_ops import build, render_kernel
    from kernelpilot.targets import get_target_model

    table = build([_split_entry(4), _split_entry(0)], get_target_model("sm90"))
    split, plain = table.kernels
    assert split.config["splits"] == 4 and not plain.config.get("splits")
    assert [r.kernel for r in table.rows] == [split, plain]
    assert table.rows[0].label == "tma_64x128x128_sk4_nomask"
    src = render_kernel(split, "kpk", template_env())
    assert "constexpr int kSplits = 4;" in src
    assert "ProblemShapeType problem{c.b * c.h, kSplits, c.q_rows, len, kHeadDim};" in src
    assert "StrideQ sq = make_stride(int(c.q_row), _1{}, make_stride(int(c.q_h), 0));" in src
    assert "StrideQ sk = make_stride(int(c.k_row), _1{}, make_stride(int(c.k_h), int(len * c.k_row)));" in src
    assert (
        "c.k_rows % (8 * kSplits) == 0" in src and "flat(c.q_b, c.q_h)" in src and "flat(c.o_b, c.o_h)" in src
    )
    # the workspace holds the collective's part, then the partial O and LSE; the size check covers all three
    assert "return split_layout(c, Operation::get_workspace_size(args)).total;" in src
    assert "l.total > workspace_bytes" in src
    combine = src[src.index("__global__ void combine_splits") :]
    combine = combine[: combine.index("\n}\n")]
    assert combine.index("cudaGridDependencySynchronize();") < combine.index("combine_split_row(os, lses,")
    assert "bi * c.o_b + hi * c.o_h + row * c.o_row" in combine
    assert "c.lse[bi * c.lse_b + hi * c.lse_h + row] = mt.y > 0.f ? mt.x + logf(mt.y) : -INFINITY;" in combine
    # the tuning program's combine row and programmatic dependent launch, on the operator's stream
    assert "__device__ __forceinline__ float2 combine_split_row(" in src
    assert "cudaLaunchAttributeProgrammaticStreamSerialization" in src
    assert "launch_combine(combine_splits, (long long)c.b * c.h * c.q_rows, c.stream," in src
    unsplit = render_kernel(plain, "kpk", template_env())
    assert "kSplits" not in unsplit and "combine_splits" not in unsplit
    assert "auto args = arguments_of(c, sm_count);" in unsplit
    # both ask CUTLASS's can_implement about the rows rounded up to 8 and launch the true count
    assert (
        "split_arguments_of(rows_rounded(c)," in src
        and "auto args = split_arguments_of(c, os, lses, sm_count);" in src
    )
    assert "can_implement(arguments_of(rows_rounded(c), sm_count))" in unsplit


def test_the_operator_pads_query_rows_only_under_the_causal_mask(kinds_export):
    """Decode with 4 or 7 query heads per kv head packs 4 or 7 rows: without the mask the kernels take
    them as they are (no padded copy of Q in, none of O out); causal launches keep rows in multiples of 8,
    as the tuning programs ran them."""
    ops = (kinds_export / "csrc" / "attention_ops.cpp").read_text()
    assert "rpad = causal ? (rows + 7) / 8 * 8 : rows;" in ops
    body = ops[ops.index("if (rpad != rows) {") :]
    assert "qk.narrow(2, 0, rows).copy_(qv);" in body[: body.index("\n  }\n")]


SPLIT_RUN = REPO / "benchmarks" / "results" / "kinds_t4_h100_decode_run_kinds.json"


@pytest.mark.slow
@pytest.mark.extra_build
@needs_tools
def test_a_recorded_split_kv_winner_exports_and_its_kernel_compiles_for_sm90a(tmp_path):
    """The decode run recorded on an H100 (its Llama-3-8B b4 kv32k winner is split-KV) exports with the
    split kernel routed to that problem, and the kernel's translation unit builds with nvcc for sm_90a
    against the CUTLASS headers (one real FMHA compile, about a minute on two cores)."""
    from kernelpilot.dsl_plugins.cuda.fmha import FMHA_NVCC_FLAGS, FmhaKernel

    run = tmp_path / "fa_decode.json"
    run.write_text(json.dumps(json.loads(SPLIT_RUN.read_text())["fa_decode"]))
    out = tmp_path / "out"
    r = run_cli("export", str(run), "--out", str(out), "--name", "kpk", "--no-bundle-cutlass",
                "--min-vendor-ratio", "0")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "dispatch.json").read_text())["attention"]
    split = [k for k in doc["kernels"] if k["config"].get("splits")]
    assert [k["label"] for k in split] == ["tma_64x128x128_sk4_nomask"]
    (entry,) = [e for e in doc["entries"] if e["origin"]["workload"] == "llama3_8b_decode_b4_kv32k"]
    assert entry["kernel"] == split[0]["id"]
    src = out / "csrc" / "attention" / f"{split[0]['id']}.cu"
    assert "constexpr int kSplits = 4;" in src.read_text()
    flags = [f for f in FMHA_NVCC_FLAGS if f not in ("-Xptxas", "-v")]
    recipe = FmhaKernel("fa_decode").build_recipe("sm90", {"cutlass_dir": str(CUTLASS)})
    paths = [f"-I{out / 'include'}", *(f"-I{d}" for d in recipe.include_dirs)]
    r = subprocess.run([NVCC, *flags, *paths, "-c", str(src), "-o", str(tmp_path / "split.o")],
                       capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    assert (tmp_path / "split.o").stat().st_size > 0


def _grouped_vendor_table(config: dict, tokens: tuple[int, ...], n: int, k: int, label: str):
    """The export table of one tuned grouped shape whose config is ``config`` (confirmed 1.07x the vendor)."""
    from kernelpilot.export.grouped_ops import build
    from kernelpilot.export.runs import TunedEntry
    from kernelpilot.targets import get_target_model

    entry = TunedEntry(kind="grouped_gemm", dtype="bf16", layout="rc", dims={"groups": [[m, n, k] for m in tokens]},
                       config={"kernel": "grouped_gemm", "dtype": "bf16", "cluster": [1, 1], **config}, label=label,
                       runtime={}, time_ms=1.5, time_source="confirmed",
                       origin={"run": "run.json", "workload": "w"}, raw_dtype="bf16", vendor_ms=1.6,
                       vendor_ratio=1.6 / 1.5)  # fmt: skip
    return build([entry], get_target_model("sm90"))


def test_per_group_winner_is_served_by_the_vendor_op_with_the_reason() -> None:
    """The exported grouped operator is one ptr-array launch, so a shape whose winner is a per-group
    config (the dense kernel launched once per group) is routed to the vendor op, and the row says why,
    rather than the grouped kernel of its tile running under the tuned config's name."""
    config = {
        "tile": [128, 256, 64],
        "schedule": "cooperative",
        "tile_scheduler": "streamk",
        "launch": "per_group",
    }
    table = _grouped_vendor_table(
        config, (1035, 1044, 1011, 1000), 4096, 14336, "128x256x64_c1x1_coop_streamk_pergroup"
    )
    (row,) = table.rows
    assert row.kernel is None and "launch: per_group" in row.vendor_reason and not table.kernels


def test_fused_winner_is_served_by_the_vendor_op_with_the_reason() -> None:
    """Likewise a fused-launch winner (the dense kernel's body over every group in one launch, its
    descriptors in the kernel parameters): not the exported ptr-array launch."""
    config = {"tile": [128, 256, 64], "schedule": "cooperative", "launch": "fused"}
    table = _grouped_vendor_table(config, (1035, 1044, 1011, 1000), 4096, 14336, "128x256x64_c1x1_coop_fused")
    (row,) = table.rows
    assert row.kernel is None and "launch: fused" in row.vendor_reason and not table.kernels


def test_mixed_width_winner_is_served_by_the_vendor_op_with_the_reason() -> None:
    """A mixed-width winner (extra_tile_n: one swap-AB launch per token-side width) is not one grouped
    launch either: the vendor op serves its shape and the row names the reason."""
    config = {"tile": [128, 176, 64], "schedule": "cooperative", "swap_ab": True, "extra_tile_n": [160, 144]}
    tokens = (179, 481, 728, 1019)
    table = _grouped_vendor_table(config, tokens, 4096, 12288, "128x176x64_c1x1_coop_swap_n160+144")
    (row,) = table.rows
    assert row.kernel is None and "extra_tile_n" in row.vendor_reason and not table.kernels
    # the same tile without the extra widths is exported as a grouped kernel
    single = {k: v for k, v in config.items() if k != "extra_tile_n"}
    table = _grouped_vendor_table(single, tokens, 4096, 12288, "128x176x64_c1x1_coop_swap")
    assert table.rows[0].kernel is not None and len(table.kernels) == 1


def test_store_export_of_the_kinds(tmp_path):
    """A results store holding grouped and attention measurements (the tuner's normalized problems, as
    `kernelpilot tune --store` records them) exports the same operators; search-time numbers only."""
    from kernelpilot.tile_tuner.store import Measurement, MeasurementKey, ResultsStore, canonical, problem_key

    store = ResultsStore(tmp_path / "kinds.sqlite")
    wls = _workloads()
    for name in ("llama3_8b_mlp_up_varlen8", "qwen3_30b_a3b_gate_up", "llama3_8b_prefill_4k"):
        w = wls[name]
        for t in w["tried"]:
            if t["status"] != "ok":
                continue
            key = MeasurementKey(target="sm90", device="NVIDIA H200", toolchain="nvcc", library="cutlass 4.2.0",
                                 template_version="1", kernel=w["kernel"], dtype="bf16",
                                 layout=w["dims"].get("layout", "rr"), problem=problem_key(w["dims"]),
                                 config_key=canonical(t["config"]))  # fmt: skip
            store.record(
                Measurement(key=key, status="ok", time_ms=t["time_ms"], runtime=t["runtime"], run_id="r1")
            )
    store.close()
    r = run_cli("export", "--store", str(tmp_path / "kinds.sqlite"), "--target", "sm90", "--out", str(tmp_path / "out"),
                "--name", "kps", "--no-bundle-cutlass", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out" / "dispatch.json").read_text())
    assert doc["ops"] == ["attention", "grouped_mm", "moe_gemm"]
    best = {n: min((t for t in wls[n]["tried"] if t["status"] == "ok"), key=lambda t: t["time_ms"])
            for n in ("llama3_8b_mlp_up_varlen8", "qwen3_30b_a3b_gate_up", "llama3_8b_prefill_4k")}  # fmt: skip
    grouped = {e["op"]: e for e in doc["grouped"]["entries"]}
    kernels = {k["id"]: k for k in doc["grouped"]["kernels"] + doc["attention"]["kernels"]}
    for op, name in (("grouped_mm", "llama3_8b_mlp_up_varlen8"), ("moe_gemm", "qwen3_30b_a3b_gate_up")):
        e = grouped[op]
        assert e["time_source"] == "search" and e["time_ms"] == pytest.approx(best[name]["time_ms"])
        assert kernels[e["kernel"]]["config"]["tile"] == best[name]["config"]["tile"]
        assert e["knobs"]["raster"] == best[name]["runtime"]["raster"]
    (att,) = doc["attention"]["entries"]
    # causal grouped-query: SDPA serves it (the operator's per-head launches are not what the run timed)
    assert att["key"]["seq_q"] == 4096 and att["route"] == "vendor" and att["kernel"] is None
    assert "causal grouped-query" in att["route_reason"] and doc["attention"]["kernels"] == []
    assert att["tuned_config"]["tile"] == best["llama3_8b_prefill_4k"]["config"]["tile"]
    assert "search-time" in " ".join(json.loads(r.stdout)["notes"])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc: the build-cache key holds its version")
def test_h200_kinds_check_times_the_runs_own_tuning_programs(tmp_path):
    """The device check times each kernel-served row's tuning program beside the exported op: it finds the
    winner's binary in the run's build cache under the key the tuner builds it with and runs it with the
    winner's run-time knobs and the confirmation's timing arguments; a winner not in the cache is left out."""
    import os

    from kernelpilot.tile_tuner.builder import BuildCache, BuildItem
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    drv = _kinds_driver()
    run = json.loads(RUN.read_text())["grouped_gemm"]
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps({"grouped_gemm": run}))
    cache = tmp_path / "cache"
    assert drv.tuning_programs(str(runs), str(cache)) == {}  # nothing built: nothing to time
    w = next(w for w in run["workloads"] if w["best"]["runtime"].get("raster"))
    kernel = get_tile_kernel("grouped_gemm", "sm90")
    recipe = kernel.build_recipe("sm90", {"cutlass_dir": os.environ.get("CUTLASS_DIR")})
    program = kernel.render(w["best"]["config"], {**w["dims"], "dtype": w["dtype"]}, "sm90")
    key = BuildItem.create(program, recipe, kernel.template_version).cache_key
    fake = tmp_path / "program"
    fake.write_text("#!/bin/sh\n")
    stored = BuildCache(cache).store(key, fake, None, None, 60.0)
    got = drv.tuning_programs(str(runs), str(cache))
    same = {v["name"] for v in run["workloads"] if v["best"]["config"] == w["best"]["config"]}
    assert set(got) == same and w["name"] in got  # one binary serves every shape of its config
    argv = got[w["name"]]["argv"]
    rt = w["best"]["runtime"]
    assert argv[0] == str(stored)
    assert f"--raster={rt['raster']}" in argv and f"--swizzle={rt['swizzle']}" in argv
    assert f"--iters={rt['iters']}" in argv and f"--reps={rt['reps']}" in argv
    assert got[w["name"]]["iters"] == rt["iters"]
    groups = next(a for a in argv if a.startswith("--groups="))
    assert groups.count("x") == 2 * len(w["dims"]["groups"])  # the run's own problem, group by group


def test_h200_kinds_check_interleaves_the_program_with_the_exported_op(monkeypatch):
    """The timing rounds rotate their start over exported op, vendor and tuning program, give the CUDA
    graphs the program's calls per window, and report medians over the rounds (one slow round does not
    decide) with exported / program and exported / run against the 3 % goal."""
    drv = _kinds_driver()
    seen: list[tuple[str, int | None]] = []
    times = {  # the first value of each is the untimed warm-up round: far off, and never counted
        "exported": [9.0, 1.00, 1.02, 1.50, 1.01, 0.99],
        "vendor": [9.0, 1.20, 1.21, 1.19, 1.22, 1.18],
        "program": [9.0, 0.98, 1.00, 0.99, 1.01, 0.97],
    }

    rests: list[float] = []

    def fake_graph_time(fn, sets, reps=5, iters=None, rest_s=0.0):
        name = fn()
        seen.append((name, iters))
        rests.append(rest_s)
        return {"median": times[name].pop(0)}

    def fake_program_time(argv, rest_s=0.0):
        seen.append(("program", None))
        rests.append(rest_s)
        return {"median": times["program"].pop(0), "status": "ok"}

    monkeypatch.setattr(drv, "graph_time", fake_graph_time)
    monkeypatch.setattr(drv, "program_time", fake_program_time)
    times = {name: [*vals, 5.0, 5.0] for name, vals in times.items()}  # then two back-to-back rounds
    e = drv.timing_entry("tuned_x", lambda: "exported", lambda: "vendor", [()], 1.05, "g000",
                         {"argv": ["prog"], "iters": 20}, n_rounds=5, rest_s=0.25, back_to_back_rounds=2)  # fmt: skip
    # every counted contender (and the warm-up round) starts from the pause; the back-to-back ones do not
    assert rests == [0.25] * 18 + [0.0] * 6 and e["rest_s"] == 0.25
    assert e["back_to_back_not_counted"]["median_ms"] == {"exported": 5.0, "vendor": 5.0, "program": 5.0}
    firsts = [seen[3 * r][0] for r in range(1, 6)]
    assert firsts == ["exported", "vendor", "program", "exported", "vendor"]
    assert e["warmup_round_not_counted"]["exported"] == {"median": 9.0}
    assert all(iters == 20 for name, iters in seen if name != "program")
    assert e["exported_ms"] == 1.01 and e["program_ms"] == 0.99 and e["vendor_ms"] == 1.20
    assert e["exported_vs_program"] == pytest.approx(1.01 / 0.99) and e["within_3pct_of_program"]
    assert e["within_3pct_of_run"] and e["vendor_over_exported"] == pytest.approx(1.20 / 1.01)
    assert len(e["rounds"]) == 5
    # without a program (a vendor-served row): two contenders, no program fields
    times.update(exported=[0.1, 2.0, 2.1], vendor=[0.1, 1.0, 1.1])
    seen.clear()
    e = drv.timing_entry("tuned_y", lambda: "exported", lambda: "vendor", [()], 1.0, None, None, n_rounds=2,
                         back_to_back_rounds=0)  # fmt: skip
    assert (
        "program_ms" not in e
        and not e["within_3pct_of_run"]
        and e["exported_ms"] == pytest.approx(2.05)
        and [s[0] for s in seen][2:4] == ["exported", "vendor"]
    )
