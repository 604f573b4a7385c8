"""Worker-side pieces of the Dask executor, without a cluster: program bytes become an executable
once, chunks split without moving bytes to the client, a worker with another toolchain refuses to
build, and the in-process seam still runs the loop's own build path."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.tile_tuner.kernel_api import BuildRecipe
from kernelpilot.tile_tuner.scaleout import jobs
from kernelpilot.tile_tuner.scaleout.dask_executor import validate_cluster

SCRIPT = b"#!/bin/sh\necho kp-worker-ran\n"


def _binary(key: str = "k" * 40, path: str | None = None, host: str = "elsewhere") -> jobs.BuiltBinary:
    return jobs.BuiltBinary(key, "built", "", 1.0, path, host, SCRIPT)


def test_materialize_writes_an_executable_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_WORKER_CACHE", str(tmp_path))
    first = jobs.materialize(_binary())
    assert first.read_bytes() == SCRIPT and os.access(first, os.X_OK)
    assert subprocess.run([str(first)], capture_output=True, text=True).stdout.strip() == "kp-worker-ran"
    mtime = first.stat().st_mtime_ns
    again = jobs.materialize(_binary())
    assert again == first and again.stat().st_mtime_ns == mtime  # content-addressed: not rewritten
    assert not [p for p in first.parent.iterdir() if p.name.endswith(".tmp")]


def test_materialize_uses_the_build_path_on_the_same_host(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELPILOT_WORKER_CACHE", str(tmp_path / "worker"))
    built = tmp_path / "cache" / "program"
    built.parent.mkdir()
    built.write_bytes(SCRIPT)
    assert jobs.materialize(_binary(path=str(built), host=socket.gethostname())) == built
    # another host's path is never trusted, even if a file of that name exists here
    assert jobs.materialize(_binary(path=str(built), host="other-host")) != built


def test_materialize_refuses_a_failed_build():
    with pytest.raises(ValueError, match="no program bytes"):
        jobs.materialize(jobs.BuiltBinary("k", "build_failed", "error: x", 1.0, None, "h", None))


def test_pick_and_strip():
    chunk = {"a": _binary("a"), "b": _binary("b")}
    assert jobs.pick(chunk, "b").data == SCRIPT
    meta = jobs.strip(chunk)
    assert set(meta) == {"a", "b"} and all(v.data is None for v in meta.values())
    assert chunk["a"].data == SCRIPT  # the chunk itself keeps its bytes


class _Kernel:
    kind = "gemm"

    def build_recipe(self, target, options):
        return BuildRecipe(compiler="nvcc", language="CUDA", flags=("-O3",), include_dirs=(),
                           toolchain_version="nvcc 12.8 (worker)", library_version="cutlass 4.1")  # fmt: skip


def test_a_worker_with_another_toolchain_refuses_to_build(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "_tile_kernel", lambda kind, target: _Kernel())
    chunk = jobs.BuildChunk(
        kind="gemm", target="sm90", kernel_options={}, fingerprint="client recipe differs", items=(),
        cache_dir=str(tmp_path / "cache"), work_dir=str(tmp_path / "build"), jobs=1, timeout_s=10,
    )  # fmt: skip
    with pytest.raises(ToolMissingError, match="different toolchain"):
        jobs.run_build_chunk(chunk)
    assert not (tmp_path / "cache").exists()  # nothing built, nothing cached


def test_cluster_address_validation():
    assert validate_cluster("local") == "local"
    assert validate_cluster("tcp://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    for bad in ("", "10.0.0.5:8786", "tcp://", "locale"):
        with pytest.raises(InputError) as e:
            validate_cluster(bad)
        assert e.value.field == "--cluster"


def test_worker_identity_outside_dask_reads_the_variable_the_vendor_pins_with(monkeypatch):
    from kernelpilot.targets import get_target_model

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setenv("ZE_AFFINITY_MASK", "5")
    nvidia = get_target_model("sm90").vendor.visible_devices_env
    intel = get_target_model("bmg").vendor.visible_devices_env
    ident = jobs.worker_identity(nvidia)
    assert ident["gpu"] == "3" and ident["host"] == socket.gethostname() and ident["worker"] == ""
    assert jobs.worker_identity(intel)["gpu"] == "5"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert jobs.worker_identity(nvidia)["gpu"] == ""  # never another vendor's variable
    assert jobs.worker_identity()["gpu"] == ""


def test_remote_cluster_rejects_gpus_flag(tmp_path):
    from kernelpilot.tile_tuner.scaleout.dask_executor import DaskExecutor
    from kernelpilot.tile_tuner.workload import TuneOptions

    opts = TuneOptions(out_dir=tmp_path, store_path=tmp_path / "s", cache_dir=tmp_path / "c",
                       cluster="tcp://127.0.0.1:1", gpus="0")  # fmt: skip
    with pytest.raises(InputError, match="GPU workers decide"):
        DaskExecutor.from_options(opts, "cuda")


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    """A scheduler that is not there fails the run with exit 1 and a message naming --cluster."""
    code = (
        "from kernelpilot.tile_tuner.scaleout.dask_executor import DaskExecutor\n"
        "ex = DaskExecutor('tcp://127.0.0.1:9')\n"
        "try:\n    ex.client\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
        "ex.close()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "KERNELPILOT_DASK_CONNECT_S": "2"})  # fmt: skip
    assert "ToolMissingError" in r.stdout and "--cluster tcp://127.0.0.1:9" in r.stdout, r.stdout + r.stderr


def test_path_helpers_fall_back_to_temp(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    got = jobs._usable_dir(str(blocked / "sub"), "build_cache")
    assert got.is_dir() and Path(got).name == "build_cache"
