"""`kernelpilot export` on the CPU: from the recorded H200 replay store and from a run made with it.

The dispatch table is checked by compiling the generated plain C++ header with the host compiler and
running ``select_gemm`` on tuned, untuned, unaligned and other-dtype problems under each fallback;
the expectations come from SQL over the store, not from the exporter's code.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

STORE = REPO / "tests" / "data" / "replay" / "h200_gemm_bf16.sqlite"
GXX = shutil.which("g++")


def _store_best() -> dict[tuple[int, int, int], tuple[dict, dict, float]]:
    """(M, N, K) -> (config, runtime, ms) of the fastest ok row, straight from SQL."""
    con = sqlite3.connect(f"file:{STORE}?mode=ro", uri=True)
    out: dict[tuple[int, int, int], tuple[dict, dict, float]] = {}
    for problem, cfg, runtime, ms in con.execute(
        "select problem, config_key, runtime, time_ms from measurements where status='ok' order by time_ms desc"
    ):
        p = json.loads(problem)
        c = {k: v for k, v in json.loads(cfg).items() if k not in ("kernel", "dtype")}
        out[(p["M"], p["N"], p["K"])] = (c, json.loads(runtime), ms)
    return out


def _export(tmp: Path, *args: str, name: str = "kpt") -> subprocess.CompletedProcess[str]:
    return run_cli(
        "export", *args, "--out", str(tmp / "out"), "--name", name, "--no-bundle-cutlass", "--json"
    )


@pytest.fixture(scope="module")
def store_export(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("store")
    r = _export(tmp, "--store", str(STORE), "--target", "sm90")
    assert r.returncode == 0, r.stderr
    return tmp / "out"


def test_store_export_has_the_recorded_best_of_every_shape(store_export):
    doc = json.loads((store_export / "dispatch.json").read_text())
    best = _store_best()
    assert doc["target"] == "sm90" and doc["fallback"] == "vendor" and len(doc["entries"]) == len(best) == 10
    kernels = {k["id"]: k for k in doc["kernels"]}
    codes = {"along_m": "M", "along_n": "N", "heuristic": "H"}
    for e in doc["entries"]:
        cfg, runtime, ms = best[(e["dims"]["M"], e["dims"]["N"], e["dims"]["K"])]
        assert kernels[e["kernel"]]["config"] == cfg
        assert (
            e["time_ms"] == pytest.approx(ms) and e["time_source"] == "search" and e["vendor_ratio"] is None
        )
        assert (
            e["knobs"]["raster"] == codes[runtime["raster"]] and e["knobs"]["swizzle"] == runtime["swizzle"]
        )
        assert e["origin"]["store"] == STORE.name
    # one compiled kernel per distinct winning config; the hardware model's TMA rule: N, K multiples of 8
    assert len(kernels) == len({json.dumps(c, sort_keys=True) for c, _, _ in best.values()})
    assert {json.dumps(k["alignment"]) for k in doc["kernels"]} == {json.dumps({"M": 1, "N": 8, "K": 8})}
    assert "search-time" in doc["times"]
    # the package copy is the same document, and every kernel has its own translation unit
    assert json.loads((store_export / "python" / "kpt" / "dispatch.json").read_text()) == doc
    assert sorted(p.name for p in (store_export / "csrc" / "kernels").iterdir()) == [
        f"{k}.cu" for k in sorted(kernels)
    ]


def test_exported_kernel_is_the_tuning_programs_kernel(store_export):
    """The exported translation unit carries the benchmark program's kernel part verbatim (one template)."""
    from kernelpilot.dsl_plugins.cuda.gemm import render_source

    doc = json.loads((store_export / "dispatch.json").read_text())
    for k in doc["kernels"]:
        bench = render_source(k["config"], "bf16", "rr")
        exported = (store_export / "csrc" / "kernels" / f"{k['id']}.cu").read_text()
        start = bench.index("using ElementA")
        types = bench[start : bench.index("\n\n// ----", start)]
        assert types in exported and "int main(" not in exported
        head = "const Variant& v, const cutlass::KernelHardwareInfo& hw) {\n"
        body = bench[bench.index(head) + len(head) : bench.index("  (void)o;\n  return args;")]
        assert "make_cute_packed_stride" in body and body.replace("buf.", "") in exported


def _dispatch_program(
    root: Path, name: str, problems: list[tuple[str, str, int, int, int]], tmp: Path
) -> list[str]:
    """Compile a host program over the generated dispatch.h and return select_gemm's answers."""
    lines = [
        f'#include "{name}/dispatch.h"',
        "#include <cstdio>",
        "int main() {",
        f"  using namespace {name};",
    ]
    for policy in ("vendor", "nearest", "error"):
        for dtype, layout, m, n, k in problems:
            lines.append(
                f"  {{ auto c = select_gemm(DType::{dtype}, Layout::{layout}, {m}, {n}, {k}, Fallback::{policy});"
                f'    std::printf("{policy} {dtype} {layout} {m}x{n}x{k} %s %s %c:%d:%c:%d %lld\\n", to_string(c.how),'
                '    c.kernel >= 0 ? kKernels[c.kernel].id : "-", c.knobs.raster, c.knobs.swizzle, c.knobs.decomp,'
                "    c.knobs.splits, c.entry >= 0 ? kGemmEntries[c.entry].m : -1LL); }"
            )
    lines += ["  return 0;", "}"]
    src = tmp / "t.cpp"
    src.write_text("\n".join(lines))
    exe = tmp / "t"
    cc = subprocess.run([GXX, "-std=c++17", "-Wall", "-Werror", f"-I{root / 'include'}", str(src), "-o", str(exe)],
                        capture_output=True, text=True)  # fmt: skip
    assert cc.returncode == 0, cc.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_dispatch_header_selects_tuned_nearest_vendor_and_error(store_export, tmp_path):
    doc = json.loads((store_export / "dispatch.json").read_text())
    by_shape = {(e["dims"]["M"], e["dims"]["N"], e["dims"]["K"]): e for e in doc["entries"]}
    problems = [("bf16", "rr", *s) for s in by_shape] + [
        ("bf16", "rr", 4000, 4000, 4000),  # untuned; nearest tuned shape: 4096^3
        ("bf16", "rr", 20, 4096, 14336),  # untuned; nearest: 16 x 4096 x 14336 (the swap-AB kernel)
        ("bf16", "rr", 4096, 4001, 4096),  # N not a multiple of 8: no kernel is legal (TMA alignment)
        ("f16", "rr", 4096, 4096, 4096),  # no f16 kernel was tuned
        ("bf16", "rc", 4096, 4096, 4096),  # no column-major-B kernel was tuned
    ]
    got = {
        tuple(line.split()[:4]): line.split()[4:]
        for line in _dispatch_program(store_export, "kpt", problems, tmp_path)
    }
    for shape, e in by_shape.items():
        key = "x".join(map(str, shape))
        k = e["knobs"]
        for policy in ("vendor", "nearest", "error"):  # a tuned shape is tuned under every policy
            assert got[(policy, "bf16", "rr", key)] == [
                "tuned",
                e["kernel"],
                f"{k['raster']}:{k['swizzle']}:{k['decomp']}:{k['splits']}",
                str(shape[0]),
            ]
    near = by_shape[(4096, 4096, 4096)]
    assert got[("nearest", "bf16", "rr", "4000x4000x4000")][:2] == ["nearest", near["kernel"]]
    assert got[("nearest", "bf16", "rr", "4000x4000x4000")][2].endswith(
        ":H:1"
    )  # split counts not carried over
    assert got[("nearest", "bf16", "rr", "20x4096x14336")][::3] == ["nearest", "16"]
    assert got[("nearest", "bf16", "rr", "20x4096x14336")][1] == by_shape[(16, 4096, 14336)]["kernel"]
    for untuned in ("4000x4000x4000", "20x4096x14336"):
        assert got[("vendor", "bf16", "rr", untuned)][:2] == ["vendor", "-"]
        assert got[("error", "bf16", "rr", untuned)][:2] == ["error", "-"]
    for other in (
        ("bf16", "rr", "4096x4001x4096"),
        ("f16", "rr", "4096x4096x4096"),
        ("bf16", "rc", "4096x4096x4096"),
    ):
        assert got[("nearest", *other)][:2] == ["vendor", "-"]  # nothing legal: the vendor library
        assert got[("error", *other)][:2] == ["error", "-"]


def _toy_run(tmp: Path, shapes: list[str], out_name: str) -> Path:
    """A real `kernelpilot tune` run over the recorded store (exhaustive on a small space)."""
    space = {"tile_k": [64], "cluster": [[1, 1]], "schedule": ["cooperative", "pingpong"]}
    yaml = tmp / f"{out_name}.yaml"
    wl = "\n".join(f"  - name: s{i}\n    dims: {{{s}}}" for i, s in enumerate(shapes))
    yaml.write_text(
        "target: sm90\ndefaults: {kernel: gemm, dtype: bf16, layout: rr, proposer: exhaustive, budget_configs: 40,"
        f" space: {json.dumps(space)}}}\nworkloads:\n{wl}\n"
    )
    r = run_cli(
        "tune", str(yaml), "--replay", str(STORE), "--out", str(tmp / out_name), "--no-plots", "--json"
    )
    assert r.returncode == 0, r.stderr
    return tmp / out_name / "run.json"


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    return _toy_run(
        tmp_path_factory.mktemp("toy"), ["M: 4096, N: 4096, K: 4096", "M: 1024, N: 1024, K: 1024"], "a"
    )


def test_export_from_a_run_and_merge_of_runs(tmp_path, toy_run):
    run_a = toy_run
    doc_a = json.loads(run_a.read_text())
    r = _export(tmp_path, str(run_a), "--fallback", "nearest")
    assert r.returncode == 0, r.stderr
    assert "search-time" in " ".join(json.loads(r.stdout)["notes"])
    d = json.loads((tmp_path / "out" / "dispatch.json").read_text())
    assert (
        d["fallback"] == "nearest"
        and "Fallback::nearest" in (tmp_path / "out/include/kpt/dispatch.h").read_text()
    )
    wl = {w["name"]: w for w in doc_a["workloads"]}
    assert [(e["origin"]["workload"], e["time_ms"]) for e in d["entries"]] == sorted(
        [(n, w["best"]["time_ms"]) for n, w in wl.items()],
        key=lambda t: (wl[t[0]]["dims"]["K"], wl[t[0]]["dims"]["M"]),
    )
    # a second run of 4096^3 whose winner was confirmed (and beat cuBLAS): it replaces the search-time entry
    doc_b = json.loads(run_a.read_text())
    doc_b["workloads"] = [w for w in doc_b["workloads"] if w["dims"]["M"] == 4096]
    best = doc_b["workloads"][0]["best"]
    # the fields a confirming run writes: best.time_ms is the confirmed median, search_ms the search's
    best.update(confirmed=True, confirmed_ms=best["time_ms"] * 1.01, search_ms=best["time_ms"])
    best["time_ms"] = best["confirmed_ms"]
    doc_b["workloads"][0]["vendor"] = {
        "label": "vendor",
        "backend": "cublas",
        "role": "vendor",
        "confirmed_ms": best["search_ms"] * 1.1,
    }
    doc_b["workloads"][0]["vs_vendor"] = 1.1 / 1.01
    run_b = tmp_path / "b.json"
    run_b.write_text(json.dumps(doc_b))
    r = run_cli("export", str(run_a), str(run_b), "--out", str(tmp_path / "m"), "--no-bundle-cutlass")
    assert r.returncode == 0, r.stderr
    m = {e["dims"]["M"]: e for e in json.loads((tmp_path / "m" / "dispatch.json").read_text())["entries"]}
    assert m[4096]["time_source"] == "confirmed" and m[4096]["time_ms"] == pytest.approx(best["confirmed_ms"])
    assert (
        m[4096]["origin"]["search_time_ms"] == best["search_ms"] and m[4096]["origin"]["vendor"] == "cublas"
    )
    assert m[4096]["vendor_ms"] == pytest.approx(best["search_ms"] * 1.1)
    assert m[4096]["vendor_ratio"] == pytest.approx(1.1 / 1.01) and m[4096]["origin"]["run"] == "b.json"
    assert m[1024]["time_source"] == "search" and m[1024]["origin"]["run"] == "run.json"


def _assert_nothing_written(tmp: Path) -> None:
    assert not (tmp / "out").exists()
    assert not [p for p in tmp.iterdir() if ".export-" in p.name or ".old-" in p.name]


def test_bad_inputs_exit_2_and_write_nothing(tmp_path, toy_run):
    run_doc = json.loads(toy_run.read_text())
    no_ok = {**run_doc, "workloads": [{**w, "best": None} for w in run_doc["workloads"]]}
    (tmp_path / "no_ok.json").write_text(json.dumps(no_ok))
    xe = {**run_doc, "target": "bmg", "workloads": [{**w, "target": "bmg"} for w in run_doc["workloads"]]}
    (tmp_path / "xe.json").write_text(json.dumps(xe))
    grouped = {**run_doc, "workloads": [{**run_doc["workloads"][0], "kernel": "grouped_gemm", "name": "g0"}]}
    (tmp_path / "grouped.json").write_text(json.dumps(grouped))
    (tmp_path / "plan.json").write_text(json.dumps({"dry_run": True, "workloads": []}))
    final = str(toy_run)
    cases = [
        ((str(tmp_path / "missing.json"),), "missing.json"),
        ((str(tmp_path / "no_ok.json"),), "no workload has an 'ok' result"),
        ((final, str(tmp_path / "xe.json")), "mixed targets"),
        ((str(tmp_path / "grouped.json"),), "grouped_gemm"),
        ((str(tmp_path / "plan.json"),), "dry-run"),
        ((final, "--fallback", "closest"), "vendor, nearest, error"),
        ((final, "--name", "Bad-Name"), "lower-case identifier"),
        (("--store", str(STORE)), "--store needs --target"),
        (("--store", str(STORE), "--target", "bmg"), "no 'ok' measurement for target 'bmg'"),
        ((), "nothing to export"),
    ]
    for args, message in cases:
        r = run_cli("export", *args, "--out", str(tmp_path / "out"), "--no-bundle-cutlass")
        assert r.returncode == 2, (args, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        _assert_nothing_written(tmp_path)
    # an existing non-empty folder is kept as it is without --force, replaced with it
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    r = run_cli("export", final, "--out", str(tmp_path / "out"), "--no-bundle-cutlass")
    assert r.returncode == 2 and "--force" in r.stderr and (tmp_path / "out" / "keep.txt").exists()
    r = run_cli("export", final, "--out", str(tmp_path / "out"), "--no-bundle-cutlass", "--force")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "out" / "keep.txt").exists() and (tmp_path / "out" / "dispatch.json").exists()


def test_interrupted_write_leaves_no_folder(tmp_path):
    from kernelpilot.export.writer import write_atomically

    def fill(d: Path) -> None:
        (d / "half.txt").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(tmp_path / "out", fill)
    _assert_nothing_written(tmp_path)


def test_h200_check_script_plans_from_the_export(store_export):
    """benchmarks/export_h200.py --dry-run (no torch, no GPU) reads the export's dispatch.json."""
    import sys

    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "export_h200.py"), "--name", "kpt", "--dispatch",
         str(store_export / "dispatch.json"), "--out", "unused.json", "--dry-run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    plan = json.loads(r.stdout)["plan"]
    assert sorted(map(tuple, plan["tuned"])) == sorted(_store_best()) and plan["policies"] == [
        "vendor",
        "nearest",
        "error",
    ]


def test_exported_call_launches_as_the_tuning_program_does(store_export):
    """Per call, the exported kernel does on the GPU what the tuning program's timed launch does: the
    scheduler's barrier reset (GemmKernel::initialize_workspace) and the launch, with the SM count and
    active clusters queried once per device and the shared-memory attribute set once per device (not
    through GemmUniversalAdapter::initialize() on every call); its device code is compiled with the
    tuning program's flags."""
    from kernelpilot.dsl_plugins.cuda.gemm import NVCC_FLAGS, render_source

    doc = json.loads((store_export / "dispatch.json").read_text())
    k = doc["kernels"][0]
    bench = render_source(k["config"], "bf16", "rr")
    launch = bench[bench.index("static cudaError_t launch(") : bench.index("// Most launches captured")]
    assert "GemmKernel::initialize_workspace(L.args, L.workspace, s)" in launch and "L.gemm.run(s)" in launch
    src = (store_export / "csrc" / "kernels" / f"{k['id']}.cu").read_text()
    run = src[src.index(f"int {k['id']}_run(") :]
    assert "GemmKernel::initialize_workspace(args, workspace, c.stream)" in run
    assert f"{k['id']}::Gemm::run(params, c.stream)" in run
    assert ".initialize(" not in run and "cudaFuncSetAttribute" not in run
    hw = src[
        src.index("static cutlass::KernelHardwareInfo hardware(") : src.index(
            "static typename Gemm::Arguments arguments_of"
        )
    ]
    assert hw.index("if (it != cache.end()) return it->second;") < hw.index(
        "query_device_max_active_clusters"
    )
    assert hw.index("query_device_max_active_clusters") < hw.index("cudaFuncSetAttribute")
    cmake = (store_export / "CMakeLists.txt").read_text()
    flags = [f for f in NVCC_FLAGS if not f.startswith("-Xptxas")]
    assert all(f"$<$<COMPILE_LANGUAGE:CUDA>:{f}>" in cmake for f in flags)
    assert "CUTLASS_ENABLE_GDC_FOR_SM90" not in cmake + src and "use_fast_math" not in cmake
