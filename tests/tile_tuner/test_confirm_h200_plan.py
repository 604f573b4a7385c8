"""The device driver benchmarks/confirm_h200.py rehearsed on a CPU: its batches and dry-run plans
(what the one GPU call will build and tune)."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.support import REPO
from tests.support.benchmark_scripts import load_benchmark_script


def test_plan_only_writes_the_batches_and_counts_the_programs(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(out),
                        "--work", str(work), "--plan-only"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    plan = summary["phases"]["plan"]
    assert set(plan) == {"gemm", "fa_prefill", "fa_decode", "moe_gemm", "grouped_gemm"}
    assert all(p["programs"] >= 2 for p in plan.values())
    gemm = yaml.safe_load(summary["batches"]["gemm"])
    shapes = {(w["dims"]["M"], w["dims"]["N"], w["dims"]["K"]) for w in gemm["workloads"]}
    assert len(shapes) == 6 and (2048, 7168, 18432) in shapes and (32, 12288, 4096) in shapes
    # every workload's search is one round (budget <= batch size 8): the build step can build it all
    for name in plan:
        doc = yaml.safe_load(summary["batches"][name])
        assert doc["defaults"]["budget_configs"] <= 8
        assert len(doc["workloads"]) >= 3


NEW_WORKLOADS = {
    "gemma3_12b_prefill_4k": "fa_prefill",
    "qwen25_7b_decode_b32_kv8k": "fa_decode",
    "llama2_7b_decode_b16_kv4k": "fa_decode",
    "mixtral_8x7b_down": "moe_gemm",
    "deepseek_v2_lite_gate_up": "moe_gemm",
    "phi3_medium_qkv_varlen16": "grouped_gemm",
    "deepseek_v3_gate_up": "moe_gemm",
    "deepseek_v3_down": "moe_gemm",
    "qwen3_235b_a22b_down": "moe_gemm",
    "qwen25_7b_prefill_4k": "fa_prefill",
    "phi3_medium_prefill_4k": "fa_prefill",
}


def test_workload_filter_plans_the_public_model_workloads_and_counts_unique_programs(tmp_path):
    """The next device call's selection: the --workloads filter takes each further public-model
    workload into its kind's batch, every one plans legal programs, and the plan counts the unique
    programs per build family (one grouped binary serves grouped and MoE shapes alike)."""
    out, work = tmp_path / "out", tmp_path / "work"
    args = [sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(out), "--work", str(work),
            "--plan-only", "--workloads", ",".join(NEW_WORKLOADS), "--budget", "fa_decode=4,moe_gemm=4",
            "--cache", str(tmp_path / "cache")]  # fmt: skip
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    for name, kind in NEW_WORKLOADS.items():
        doc = yaml.safe_load(summary["batches"][kind])
        assert name in {w["name"] for w in doc["workloads"]}, (name, kind)
        plan = json.loads((work / f"plan_{kind}" / "plan.json").read_text())
        (w,) = [w for w in plan["workloads"] if w["name"] == name]
        assert w["planned"] and all(p["valid"] for p in w["planned"]), name
        want = 4 if kind in ("fa_decode", "moe_gemm") else 3 if kind == "grouped_gemm" else 2
        assert len(w["planned"]) == min(want, w["space_size"] + 1), (name, w["space_size"])
    unique = summary["build_plan"]
    assert {"fmha", "grouped"} <= set(unique) and all(u["cached"] == 0 for u in unique.values())
    planned_grouped = sum(
        len(w["planned"])
        for kind in ("moe_gemm", "grouped_gemm")
        for w in json.loads((work / f"plan_{kind}" / "plan.json").read_text())["workloads"]
    )
    # the default and the model's picks recur across grouped and MoE workloads: built once
    assert 2 <= unique["grouped"]["programs"] < planned_grouped


def test_unknown_workload_name_is_refused_with_the_allowed_names(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(tmp_path / "o"),
                        "--work", str(tmp_path / "w"), "--plan-only", "--workloads", "mixtral_8x7b_dwon"],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2
    assert "mixtral_8x7b_dwon" in r.stderr and "mixtral_8x7b_down" in r.stderr
    assert not (tmp_path / "w" / "moe_gemm.yaml").exists()


def test_space_option_filters_the_grouped_kinds_only(tmp_path):
    """--space writes a space filter into the grouped / MoE batches (here one that leaves the swap-AB
    family, part of the default space, out of their plans) and leaves the other kinds' batches alone; a
    malformed filter is refused by name."""
    out, work = tmp_path / "out", tmp_path / "work"
    base = [sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(out), "--work", str(work),
            "--plan-only", "--workloads", "mixtral_8x7b_down,llama3_8b_prefill_4k", "--budget", "moe_gemm=8"]  # fmt: skip
    r = subprocess.run(
        [*base, "--space", '{"swap_ab": [false]}'], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert yaml.safe_load(summary["batches"]["moe_gemm"])["defaults"]["space"] == {"swap_ab": [False]}
    assert "space" not in yaml.safe_load(summary["batches"]["fa_prefill"])["defaults"]
    plan = json.loads((work / "plan_moe_gemm" / "plan.json").read_text())
    (w,) = plan["workloads"]
    assert w["planned"] and not any(p["config"].get("swap_ab") for p in w["planned"]), [
        p["label"] for p in w["planned"]
    ]
    for text in ('["swap_ab"]', '{"swap_ab": false}', "{swap_ab: [false]}"):  # a list; a bare value; not JSON
        bad = subprocess.run([*base, "--space", text], capture_output=True, text=True, timeout=300)
        assert bad.returncode == 2 and "--space" in bad.stderr and text in bad.stderr, bad.stderr


def test_store_copy_keeps_the_results_a_stopped_tune_left_in_the_wal(tmp_path):
    """A tune stopped by the deadline leaves its last results in the store's -wal file; the copy the
    driver hands back (for --resume) must hold them, which a copy of the database file alone does not."""
    import shutil
    import sqlite3

    driver = load_benchmark_script("confirm_h200")
    store = tmp_path / "moe_gemm.sqlite"
    writer = sqlite3.connect(store)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE results (config TEXT, ms REAL)")
    writer.execute("INSERT INTO results VALUES ('128x176x64_swap', 1.25)")
    writer.commit()  # committed into the WAL; the writer still holds it open, as a killed tune would
    try:
        shutil.copyfile(store, tmp_path / "plain.sqlite")
        plain = sqlite3.connect(tmp_path / "plain.sqlite")
        assert plain.execute("SELECT name FROM sqlite_master").fetchall() == []  # what the copy would lose
        plain.close()
        driver.copy_store(store, tmp_path / "store_moe_gemm.sqlite")
    finally:
        writer.close()
    copied = sqlite3.connect(tmp_path / "store_moe_gemm.sqlite")
    assert copied.execute("SELECT config, ms FROM results").fetchall() == [("128x176x64_swap", 1.25)]
    copied.close()


def test_resume_from_a_missing_folder_is_refused_by_name(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(tmp_path / "o"),
                        "--work", str(tmp_path / "w"), "--plan-only", "--resume", str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 2 and "--resume" in r.stderr and "nope" in r.stderr
    assert not (tmp_path / "w").exists()


def test_compile_slots_leave_finished_programs_when_a_deadline_stops_the_build():
    """With a deadline only as many programs compile at once as there are jobs, so the ones that finish
    before it are cached; without one up to twice as many; never more than memory fits."""
    drv = load_benchmark_script("confirm_h200")
    assert drv.compile_slots_scale(56, 16, 1.0, has_deadline=True) * 56 == 16
    assert drv.compile_slots_scale(56, 16, 1.0, has_deadline=False) * 56 == 32
    # fewer programs than jobs: all at once
    assert drv.compile_slots_scale(8, 16, 1.0, has_deadline=True) == 1.0
    assert drv.compile_slots_scale(56, 16, 0.1, has_deadline=False) == 0.1  # memory binds first


def test_build_labels_keep_only_those_programs_in_the_build(tmp_path):
    """A call that confirms again from a store needs its finalists' programs only: --build-labels keeps
    the build (and the plan's count of unique programs) to the planned programs of those labels."""
    out, work = tmp_path / "out", tmp_path / "work"
    base = [sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(out), "--work", str(work),
            "--plan-only", "--phases", "plan,grouped_gemm", "--workloads", "phi3_medium_qkv_varlen16",
            "--budget", "grouped_gemm=4", "--cache", str(tmp_path / "cache")]  # fmt: skip
    r = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    planned = json.loads((work / "plan_grouped_gemm" / "plan.json").read_text())["workloads"][0]["planned"]
    labels = [e["label"] for e in planned]
    assert len(labels) == 4
    everything = json.loads((out / "summary.json").read_text())["build_plan"]["grouped"]["programs"]
    assert everything == 4
    r = subprocess.run(
        [*base, "--build-labels", ",".join(labels[:2])], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "summary.json").read_text())["build_plan"]["grouped"]["programs"] == 2


def test_build_label_matching_no_planned_config_is_refused_with_the_planned_labels(tmp_path):
    """A mistyped --build-labels entry must not shrink the prebuild silently: the driver exits 2 and names
    the unknown label and the planned ones."""
    out, work = tmp_path / "out", tmp_path / "work"
    base = [sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(out), "--work", str(work),
            "--plan-only", "--phases", "plan,grouped_gemm", "--workloads", "phi3_medium_qkv_varlen16",
            "--budget", "grouped_gemm=2", "--cache", str(tmp_path / "cache")]  # fmt: skip
    r = subprocess.run(
        [*base, "--build-labels", "128x256x64_c9x9_typo"], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 2
    assert "--build-labels: ['128x256x64_c9x9_typo'] match no planned config" in r.stderr
    planned = json.loads((work / "plan_grouped_gemm" / "plan.json").read_text())["workloads"][0]["planned"]
    assert len(planned) == 2
    for entry in planned:
        assert entry["label"] in r.stderr
