"""The CLI skeleton: fast --help, version, exit codes, settings errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from kernelpilot import __version__

HEAVY = ("torch", "triton", "litellm", "optuna", "matplotlib")


def test_help_is_fast_and_imports_nothing_heavy() -> None:
    code = (
        "import sys, time; t=time.perf_counter();"
        "from kernelpilot.cli import build_parser; build_parser().format_help();"
        "print(time.perf_counter()-t);"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed, heavy = out.stdout.strip().splitlines()
    assert heavy == "[]", f"--help imported heavy modules: {heavy}"
    assert float(elapsed) < 0.5


def test_help_wall_time_under_a_second(cli) -> None:
    cli("--help")  # warm the bytecode cache
    start = time.perf_counter()
    result = cli("--help")
    assert result.returncode == 0
    assert time.perf_counter() - start < 1.0
    for command in ("plugins", "doctor", "new-dsl"):
        assert command in result.stdout


def test_version(cli) -> None:
    result = cli("--version")
    assert result.returncode == 0 and __version__ in result.stdout


def test_no_command_is_usage_error(cli) -> None:
    assert cli().returncode == 2
    assert cli("no-such-command").returncode == 2


def test_plugins_json_lists_builtins_with_hooks(cli) -> None:
    result = cli("plugins", "--json")
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    for name in ("triton", "gluon", "sycl", "cuda"):
        assert records[name]["loaded"], records[name]
        assert records[name]["distribution"] == "kernelpilot"
        assert "kp_plugin_info" in records[name]["hooks"]
    # sycl availability is honest about icpx
    import shutil

    if shutil.which("icpx") is None:
        assert records["sycl"]["available"] is False
        assert "icpx" in records["sycl"]["reason"]


def test_bad_settings_exit_2_and_name_the_variable(cli) -> None:
    result = cli("doctor", "--json", env={"CORRECTNESS_RTOL": "abc"})
    assert result.returncode == 2
    assert "CORRECTNESS_RTOL" in result.stderr and "abc" in result.stderr
    result = cli("doctor", "--json", env={"ENGINE": "bogus"})
    assert result.returncode == 2
    assert "ENGINE" in result.stderr and "'rules'" in result.stderr


def test_doctor_json_reports_tools_and_llm(cli) -> None:
    result = cli("doctor", "--json", env={"OPENAI_API_KEY": "sk-secret-value-123"})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report["tools"]) >= {"nvcc", "icpx", "cmake", "ninja"}
    assert report["tools"]["cmake"]["path"], "cmake comes with the cmake PyPI dependency"
    assert report["llm"]["api_key_set"] is True
    assert "sk-secret-value-123" not in result.stdout + result.stderr


def test_doctor_shows_backend_checks_from_plugins(cli) -> None:
    import shutil

    result = cli("doctor", "--json")
    assert result.returncode == 0, result.stderr
    checks = {c["name"]: c for c in json.loads(result.stdout)["backends"]}
    assert checks["xe: icpx"]["plugin"] == "sycl"
    if shutil.which("icpx") is None:
        assert checks["xe: icpx"]["ok"] is False and "oneAPI" in checks["xe: icpx"]["detail"]
    assert "IGC_ExtraOCLOptions" in checks["xe: runtime environment"]["detail"]


def test_doctor_survives_a_failing_plugin_check(monkeypatch) -> None:
    from kernelpilot.cli import doctor_cmd
    from kernelpilot.hookspecs import hookimpl
    from kernelpilot.plugins import get_registry

    class Exploding:
        @hookimpl
        def kp_doctor_checks(self):
            raise RuntimeError("probe blew up")

    registry = get_registry()
    registry.register(Exploding(), "exploding")
    try:
        checks = doctor_cmd._backend_checks()
    finally:
        registry.manager.unregister(name="exploding")
        registry.records[:] = [r for r in registry.records if r.name != "exploding"]
    failed = [c for c in checks if c["plugin"] == "exploding"]
    assert failed and failed[0]["ok"] is False and "probe blew up" in failed[0]["detail"]
