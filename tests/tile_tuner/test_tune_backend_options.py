"""Backend build options reach the SYCL build: the user's device picks the AOT target, an explicit
--aot-device wins over it."""

from __future__ import annotations

from pathlib import Path

from tests.support import REPO, run_cli


def _aot_devices(out: Path) -> set[str]:
    text = "".join(p.read_text(errors="replace") for p in out.rglob("CMakeLists.txt"))
    return {dev for dev in ("bmg-g21", "bmg-g31", "pvc") if f"-device {dev}" in text or f"{dev}" in text}


def test_device_selects_aot_target_and_explicit_aot_wins(tmp_path: Path) -> None:
    batch = str(REPO / "examples" / "xe_gemm.yaml")
    b70 = run_cli(
        "tune",
        batch,
        "--target",
        "bmg",
        "--dry-run",
        "--out",
        str(tmp_path / "b70"),
        "--device",
        "arc_pro_b70",
    )
    assert b70.returncode == 0, b70.stderr
    assert _aot_devices(tmp_path / "b70") == {"bmg-g31"}
    forced = run_cli(
        "tune",
        batch,
        "--target",
        "bmg",
        "--dry-run",
        "--out",
        str(tmp_path / "forced"),
        "--device",
        "arc_pro_b70",
        "--aot-device",
        "bmg-g21",
    )
    assert forced.returncode == 0, forced.stderr
    assert _aot_devices(tmp_path / "forced") == {"bmg-g21"}
    wrong = run_cli(
        "tune", batch, "--target", "bmg", "--dry-run", "--out", str(tmp_path / "wrong"), "--device", "h200"
    )
    assert wrong.returncode == 2 and "h200" in wrong.stderr


def test_run_without_icpx_writes_nothing(tmp_path: Path) -> None:
    import shutil

    if shutil.which("icpx"):
        import pytest

        pytest.skip("icpx is installed: a real run would start")
    home, out = tmp_path / "home", tmp_path / "out"
    result = run_cli(
        "tune",
        str(REPO / "examples" / "xe_gemm.yaml"),
        "--target",
        "bmg",
        "--out",
        str(out),
        env={"KERNELPILOT_HOME": str(home), "SYCL_TLA_DIR": ""},
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "icpx" in result.stderr and "--dry-run" in result.stderr
    assert not home.exists() and not out.exists(), (
        "a batch that cannot start must not write a store or outputs"
    )
