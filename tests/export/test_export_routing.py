"""Tuned shapes the run confirmed slower than the vendor library are served by the vendor library.

The runs here are the recorded H200 runs (and a toy run whose confirmation fields are set the way a
confirming `kernelpilot tune` writes them); which shape is vendor-served is computed from the run
documents' ``vs_vendor``, and the generated C++ dispatch is compiled and asked, as in the other export
tests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.export.test_export_cli import _dispatch_program, _toy_run
from tests.export.test_export_kinds import _operator_vendor_ratio, _runs, _select_program, _workloads

GXX = shutil.which("g++")


@pytest.fixture(scope="module")
def confirmed_runs(tmp_path_factory) -> tuple[Path, dict]:
    """A toy run of two shapes, both confirmed: cuBLAS faster on 1024^3 (0.9), slower on 4096^3 (1.1)."""
    tmp = tmp_path_factory.mktemp("routing")
    run = _toy_run(tmp, ["M: 4096, N: 4096, K: 4096", "M: 1024, N: 1024, K: 1024"], "r")
    doc = json.loads(run.read_text())
    ratios = {}
    for w in doc["workloads"]:
        best = w["best"]
        ratio = 0.9 if w["dims"]["M"] == 1024 else 1.1
        best.update(confirmed=True, confirmed_ms=best["time_ms"], search_ms=best["time_ms"])
        w["vendor"] = {"label": "vendor", "backend": "cublas", "role": "vendor",
                       "confirmed_ms": best["time_ms"] * ratio}  # fmt: skip
        w["vs_vendor"] = ratio
        ratios[w["dims"]["M"]] = ratio
    path = tmp / "confirmed.json"
    path.write_text(json.dumps(doc))
    return path, ratios


def _export(src: Path, out: Path, *extra: str, name: str = "kpr"):
    return run_cli(
        "export", str(src), "--out", str(out), "--name", name, "--no-bundle-cutlass", "--json", *extra
    )


@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_gemm_shape_where_cublas_won_is_served_by_cublas(confirmed_runs, tmp_path):
    run, ratios = confirmed_runs
    r = _export(run, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert any("1 tuned shape(s) call the vendor library" in n for n in json.loads(r.stdout)["notes"])
    doc = json.loads((tmp_path / "out" / "dispatch.json").read_text())
    assert doc["min_vendor_ratio"] == 1.0
    by_m = {e["dims"]["M"]: e for e in doc["entries"]}
    slow, fast = by_m[1024], by_m[4096]
    assert slow["route"] == "vendor" and slow["kernel"] is None and "0.900 < 1" in slow["route_reason"]
    src = json.loads(run.read_text())
    won = {w["dims"]["M"]: w["best"]["config"] for w in src["workloads"]}
    assert slow["tuned_config"] == {k: v for k, v in won[1024].items() if k not in ("kernel", "dtype")}
    assert fast["route"] == "kernel" and fast["route_reason"] is None and "tuned_config" not in fast
    # only kernels some kernel-served row uses are compiled
    assert {k["id"] for k in doc["kernels"]} == {fast["kernel"]}
    assert sorted(p.name for p in (tmp_path / "out" / "csrc" / "kernels").iterdir()) == [
        f"{fast['kernel']}.cu"
    ]
    problems = [
        ("bf16", "rr", 1024, 1024, 1024),
        ("bf16", "rr", 4096, 4096, 4096),
        ("bf16", "rr", 1000, 1000, 1000),
    ]
    got = {
        tuple(x.split()[:4]): x.split()[4:]
        for x in _dispatch_program(tmp_path / "out", "kpr", problems, tmp_path)
    }
    for policy in ("vendor", "nearest", "error"):  # the vendor-served row wins under every policy
        assert got[(policy, "bf16", "rr", "1024x1024x1024")] == ["vendor", "-", "H:1:H:1", "1024"]
        assert got[(policy, "bf16", "rr", "4096x4096x4096")][:2] == ["tuned", fast["kernel"]]
    # nearest never hands out a vendor-served row's config: 1000^3 is nearest to 1024^3, but gets 4096^3's kernel
    assert got[("nearest", "bf16", "rr", "1000x1000x1000")][:2] == ["nearest", fast["kernel"]]
    ops = (tmp_path / "out" / "csrc" / "ops.cpp").read_text()
    assert "measured the vendor library faster" in ops
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "| vendor " in readme
    # --min-vendor-ratio 0 keeps every tuned kernel
    r = _export(run, tmp_path / "all", "--min-vendor-ratio", "0")
    assert r.returncode == 0, r.stderr
    doc0 = json.loads((tmp_path / "all" / "dispatch.json").read_text())
    assert all(e["route"] == "kernel" and e["kernel"] for e in doc0["entries"])
    assert ratios == {1024: 0.9, 4096: 1.1}


@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_every_shape_vendor_served_still_builds_a_working_table(confirmed_runs, tmp_path):
    run, _ = confirmed_runs
    r = _export(run, tmp_path / "out", "--min-vendor-ratio", "2")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out" / "dispatch.json").read_text())
    assert doc["kernels"] == [] and all(e["route"] == "vendor" for e in doc["entries"])
    problems = [("bf16", "rr", 4096, 4096, 4096), ("bf16", "rr", 2000, 2000, 2000)]
    got = {
        tuple(x.split()[:4]): x.split()[4:]
        for x in _dispatch_program(tmp_path / "out", "kpr", problems, tmp_path)
    }
    assert got[("error", "bf16", "rr", "4096x4096x4096")][:2] == ["vendor", "-"]
    assert got[("nearest", "bf16", "rr", "2000x2000x2000")][:2] == ["vendor", "-"]
    assert got[("error", "bf16", "rr", "2000x2000x2000")][:2] == ["error", "-"]


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bad_min_vendor_ratio_exits_2_and_writes_nothing(confirmed_runs, tmp_path, value):
    run, _ = confirmed_runs
    r = _export(run, tmp_path / "out", "--min-vendor-ratio", value)
    assert r.returncode == 2 and "--min-vendor-ratio" in r.stderr and ">= 0" in r.stderr
    assert not (tmp_path / "out").exists()


def test_search_time_rows_keep_their_kernel(tmp_path):
    """A run without confirmation has no side-by-side vendor number: nothing is routed on a guess."""
    run = _toy_run(tmp_path, ["M: 1024, N: 1024, K: 1024"], "s")
    r = _export(run, tmp_path / "out", "--min-vendor-ratio", "100")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out" / "dispatch.json").read_text())
    assert [e["route"] for e in doc["entries"]] == ["kernel"] and len(doc["kernels"]) == 1


@pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")
def test_kinds_problems_where_the_vendor_won_are_vendor_served(tmp_path):
    r = run_cli("export", *map(str, _runs(tmp_path)), "--out", str(tmp_path / "out"), "--name", "kpk",
                "--no-bundle-cutlass", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    doc = json.loads((out / "dispatch.json").read_text())
    wls = _workloads()
    rows = doc["grouped"]["entries"] + doc["attention"]["entries"]
    slower = {
        e["origin"]["workload"] for e in rows if _operator_vendor_ratio(wls[e["origin"]["workload"]]) < 1.0
    }
    # causal grouped-query rows: the run timed the kernel on per-query-head K/V, not the operator's path
    gqa = {e["origin"]["workload"] for e in rows if e.get("key", {}).get("causal")
           and e["key"]["heads_q"] != e["key"]["heads_kv"]}  # fmt: skip
    assert (
        slower and gqa - slower and len(slower | gqa) < len(rows)
    )  # the recorded runs have every kind of row
    # grouped rows whose run baseline (a torch.mm loop) beat the kernel while torch._grouped_mm, the call
    # the operator makes, did not: calling the vendor there would be slower than the kernel
    loop_only = {n for n in (e["origin"]["workload"] for e in rows)
                 if wls[n]["vs_vendor"] < 1.0 <= _operator_vendor_ratio(wls[n])}  # fmt: skip
    assert loop_only and not loop_only & slower
    for e in rows:
        vendor = e["origin"]["workload"] in slower | gqa
        assert (e["route"] == "vendor") == vendor and (e["kernel"] is None) == vendor
        if e["origin"]["workload"] in gqa - slower:
            assert "causal grouped-query" in e["route_reason"]
    used = {e["kernel"] for e in rows if e["kernel"]}
    assert {k["id"] for k in doc["grouped"]["kernels"] + doc["attention"]["kernels"]} == used
    for kind in ("grouped", "attention"):
        folder = out / "csrc" / kind  # absent when the vendor serves every problem of the kind
        assert {p.stem for p in folder.glob("*.cu")} == {k["id"] for k in doc[kind]["kernels"]}
    assert (out / "csrc" / "attention_ops.cpp").is_file()  # the operator exists, served by SDPA
    lines = []
    for i, e in enumerate(doc["attention"]["entries"]):
        k = e["key"]
        c = "true" if k["causal"] else "false"
        lines.append(
            f"  {{ auto c = select_attention(DType::bf16, {c}, {k['batch']}, {k['heads_q']}, {k['heads_kv']}, "
            f"{k['seq_q']}, {k['seq_kv']}, {k['head_dim']}, Fallback::error);"
            f'    std::printf("a{i} %s %d %d\\n", to_string(c.how), c.kernel, c.entry); }}'
        )
    for i, e in enumerate(doc["grouped"]["entries"]):
        k = e["key"]
        lines.append(
            f"  {{ auto c = select_grouped(GroupedOp::{e['op']}, DType::bf16, {k['groups']}, {k['N']}, {k['K']}, "
            f"{k['M']}, Fallback::error);"
            f'    std::printf("g{i} %s %d %d\\n", to_string(c.how), c.kernel, c.entry); }}'
        )
    got = {x.split()[0]: x.split()[1:] for x in _select_program(out, lines, tmp_path)}
    for prefix, entries in (("a", doc["attention"]["entries"]), ("g", doc["grouped"]["entries"])):
        for i, e in enumerate(entries):
            how, kernel, entry = got[f"{prefix}{i}"]
            assert int(entry) == i  # the row itself, also when the vendor serves it
            assert how == ("vendor" if e["route"] == "vendor" else "tuned")
            assert (int(kernel) < 0) == (e["route"] == "vendor")
