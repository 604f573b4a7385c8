"""``kernelpilot tune FILE --target bmg --dry-run`` with Xe-Forge's YAML formats plans, validates and
renders every program plus the CMake project; without ``--dry-run`` and without icpx it stops with a
clear error before building or running anything."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from tests.support import REPO

EXAMPLES = REPO / "examples"
FILES = {
    "xe_gemm.yaml": ("gemm", 4),
    "xe_gemm_int8.yaml": ("gemm", 1),
    "xe_fa_prefill.yaml": ("fa_prefill", 2),
    "xe_fa_decode.yaml": ("fa_decode", 2),
    "xe_moe.yaml": ("moe_gemm", 2),
    "xe_grouped_gemm.yaml": ("grouped_gemm", 2),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_xeforge_yaml_dry_run_renders_programs_and_project(cli, tmp_path: Path, name: str) -> None:
    kind, n_workloads = FILES[name]
    out = tmp_path / "out"
    env = {"KERNELPILOT_HOME": str(tmp_path / "home"), "KERNELPILOT_AOT_DEVICE": ""}
    proc = cli(
        "tune", str(EXAMPLES / name), "--target", "bmg", "--dry-run", "--out", str(out), env=env, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert plan["dry_run"] and plan["target"] == "bmg" and len(plan["workloads"]) == n_workloads
    (project,) = plan["projects"]
    assert (
        project["kernel"] == kind
        and project["compiler"].endswith("icpx")
        and project["programs"] >= n_workloads
    )
    for workload in plan["workloads"]:
        assert workload["kernel"] == kind and workload["planned"]
        assert all(entry["valid"] for entry in workload["planned"]), workload["name"]
        assert workload["planned"][0]["is_default"]  # the library default is always planned first
        assert workload["baseline"] == {"source": "library", "note": ""}
    proj = Path(project["project"])
    cmake = (proj / "CMakeLists.txt").read_text()
    # no device chosen: both BMG dies; 256 GRF and vISA's performance model on the link line
    igc = "VISAOptions=-perfmodel" + (",VectorAliasBBThreshold=10000" if not kind.startswith("fa_") else "")
    backend = f"-device bmg-g21,bmg-g31 -options \"-cl-intel-256-GRF-per-thread -igc_opts '{igc}'\""
    assert '"-Xsycl-target-backend=spir64_gen" "' + backend.replace('"', '\\"') + '"' in cmake
    assert '"-fsycl"' in cmake
    programs = sorted(proj.glob(f"kp_*/{kind}.cpp"))
    assert len(programs) == project["programs"]
    for src in programs:
        assert (src.parent / "kp_sycl_common.hpp").exists()
        assert "int main(" in src.read_text()
    build_txt = (proj / "BUILD.txt").read_text()
    assert build_txt.startswith("cmake -S")
    # a hand build from BUILD.txt: no environment needed, and the link options are spelled out
    ninja_line = next(line for line in build_txt.splitlines() if "ninja -C" in line)
    assert ninja_line.startswith("ninja -C")
    link_line = next(line for line in build_txt.splitlines() if line.startswith("# link options"))
    assert shlex.split(link_line.split(": ", 1)[1])[2:4] == ["-Xsycl-target-backend=spir64_gen", backend]


def test_unknown_xeforge_mode_is_an_input_error(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: attention\ntune-xpu:\n  - name: x\n    dims: {head_dim: 64}\n")
    proc = cli("tune", str(bad), "--target", "bmg", "--dry-run", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 2 and "unknown mode 'attention'" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_bad_dims_name_the_file_workload_and_field(cli, tmp_path: Path) -> None:
    bad = tmp_path / "fa.yaml"
    bad.write_text(
        "mode: fa\nfa_mode: prefill\ntune-xpu:\n  - name: gqa\n"
        "    dims: {head_dim: 128, batch: 1, num_heads_q: 32, num_heads_kv: 6, seq_qo: 128, seq_kv: 128}\n"
    )
    proc = cli("tune", str(bad), "--target", "bmg", "--dry-run", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "fa.yaml" in proc.stderr and "'gqa'" in proc.stderr and "num_heads_kv=6" in proc.stderr


def test_real_run_without_icpx_stops_before_doing_anything(cli, tmp_path: Path) -> None:
    if shutil.which("icpx"):
        pytest.skip("icpx is installed here: a real run would start building")
    out = tmp_path / "out"
    env = {"KERNELPILOT_HOME": str(tmp_path / "home")}
    proc = cli(
        "tune", str(EXAMPLES / "xe_gemm.yaml"), "--target", "bmg", "--out", str(out), env=env, cwd=tmp_path
    )
    assert proc.returncode == 1
    assert "icpx (Intel oneAPI DPC++/C++ compiler) not found" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # no outputs, no project, no build
    assert not list(tmp_path.glob("home/build_cache/*"))


def test_head_dim_without_library_default_tunes_from_the_models_best_config(cli, tmp_path: Path) -> None:
    """Phi-2 attention (head_dim 80): sycl-tla's examples build no config for it, but the model has legal
    ones.  The batch is planned with the model's best legal config as the baseline, and the plan says so,
    instead of refusing the batch."""
    batch = tmp_path / "phi2.yaml"
    batch.write_text(
        "mode: fa2\ndtype: bf16\nfa_mode: prefill\ncausal: true\nmax_rounds: 1\ntune-xpu:\n"
        "  - name: phi2_prefill\n"
        "    dims: {head_dim: 80, batch: 1, num_heads_q: 32, num_heads_kv: 32, seq_qo: 2048, seq_kv: 2048}\n"
    )
    out = tmp_path / "out"
    env = {"KERNELPILOT_HOME": str(tmp_path / "home"), "KERNELPILOT_AOT_DEVICE": ""}
    proc = cli("tune", str(batch), "--target", "bmg", "--dry-run", "--out", str(out), env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (workload,) = json.loads((out / "plan.json").read_text())["workloads"]
    assert workload["baseline"]["source"] == "model_best"
    assert "no library default fa_prefill config for head_dim=80" in workload["baseline"]["note"]
    first = workload["planned"][0]
    assert first["is_default"] and first["valid"] and first["label"] in workload["baseline"]["note"]
    # it is the cost model's best: no planned config is estimated faster
    assert first["estimate_s"] == min(e["estimate_s"] for e in workload["planned"])


def test_dry_run_labels_4bit_gemm_experimental(cli, tmp_path: Path) -> None:
    """4-bit (and mixed-type) dense GEMM is experimental until an icpx build has run one: the dry run says
    so on the console and in plan.json; a bf16 workload of the same file is not labelled."""
    spec = tmp_path / "int4.yaml"
    spec.write_text(
        "target: bmg\ndefaults: {kernel: gemm, budget_configs: 1}\nworkloads:\n"
        "  - {name: w4, dtype: s4, dims: {M: 1024, N: 1024, K: 1024}}\n"
        "  - {name: w16, dtype: bf16, dims: {M: 1024, N: 1024, K: 1024}}\n"
    )
    out = tmp_path / "out"
    env = {"KERNELPILOT_HOME": str(tmp_path / "home"), "KERNELPILOT_AOT_DEVICE": ""}
    proc = cli("tune", str(spec), "--dry-run", "--out", str(out), env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    labels = [line for line in proc.stdout.splitlines() if line.startswith("EXPERIMENTAL:")]
    assert len(labels) == 1 and labels[0].startswith("EXPERIMENTAL: w4: experimental: s4 dense GEMM")
    plan = {w["name"]: w for w in json.loads((out / "plan.json").read_text())["workloads"]}
    assert plan["w16"]["experimental"] == [] and "no icpx build" in plan["w4"]["experimental"][0]
