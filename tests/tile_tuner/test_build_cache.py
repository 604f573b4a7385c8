"""The build cache: write-once publication, checksums, eviction of entries that cannot run, cached
failures that are retried (longer timeout, ``--remeasure``, age), and ``kernelpilot cache``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kernelpilot.cli import main
from kernelpilot.tile_tuner.builder import FAILED_TTL_S, BuildCache, BuildItem, build_batch
from tests.support.tuner_doubles import ToyConfig, ToyKernel

KEY = "k" * 40


def _program(tmp: Path, text: str = "#!/bin/sh\necho hi\n") -> Path:
    p = tmp / f"prog-{abs(hash(text))}"
    p.write_text(text)
    p.chmod(0o755)
    return p


def test_an_entry_is_published_once_and_never_replaced(tmp_path):
    cache = BuildCache(tmp_path / "c")
    first = cache.store(KEY, _program(tmp_path, "#!/bin/sh\necho first\n"), None, None)
    inode = first.stat().st_ino
    second = cache.store(KEY, _program(tmp_path, "#!/bin/sh\necho second\n"), None, None)
    assert second == first and second.stat().st_ino == inode and "first" in second.read_text()
    assert [p.name for p in cache.root.iterdir() if p.name != ".locks"] == [KEY]  # the loser's copy is gone


def test_concurrent_publication_of_one_key_has_one_winner_and_no_error(tmp_path):
    cache = BuildCache(tmp_path / "c")
    progs = [_program(tmp_path, f"#!/bin/sh\necho {i}\n") for i in range(8)]
    errors: list[BaseException] = []

    def publish(p: Path) -> None:
        try:
            assert BuildCache(tmp_path / "c").store(KEY, p, None, None) is not None
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(p,)) for p in progs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cache.verify(KEY) is None and cache.manifest(KEY)["status"] == "built"


@pytest.mark.parametrize("damage", ["truncate", "zero", "delete"])
def test_verify_detects_a_damaged_program(damage, tmp_path):
    cache = BuildCache(tmp_path / "c")
    binary = cache.store(KEY, _program(tmp_path, "#!/bin/sh\n" + "echo x\n" * 100), None, None)
    data = binary.read_bytes()
    if damage == "truncate":
        binary.write_bytes(data[:10])
    elif damage == "zero":
        binary.write_bytes(b"\0" * len(data))
    else:
        binary.unlink()
    assert cache.verify(KEY) is not None


def test_cached_failures_are_retried_after_a_longer_timeout_remeasure_or_a_week(tmp_path):
    cache = BuildCache(tmp_path / "c")
    cache.store(KEY, None, None, "timeout: killed\nTIMEOUT", timeout_s=5)
    assert cache.usable(KEY, timeout_s=5, retry_failures=False) is None  # same limit: still a timeout
    assert "this run allows 60" in cache.usable(KEY, timeout_s=60, retry_failures=False)
    assert "--remeasure" in cache.usable(KEY, timeout_s=5, retry_failures=True)
    manifest = cache.root / KEY / "MANIFEST.json"
    info = json.loads(manifest.read_text())
    info["created"] = time.time() - FAILED_TTL_S - 1
    manifest.write_text(json.dumps(info))
    assert "older than a week" in cache.usable(KEY, timeout_s=5, retry_failures=False)


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
def test_a_truncated_cached_program_is_rebuilt_not_run(tmp_path):
    kernel = ToyKernel()
    recipe = kernel.build_recipe("toy", {})
    problem = {"M": 10, "N": 10, "K": 1, "dtype": "bf16", "layout": "rr"}
    item = BuildItem.create(kernel.render(ToyConfig(tile=(32, 32)), problem, "toy"), recipe, "toy-1")
    cache = BuildCache(tmp_path / "cache")
    [first] = build_batch([item], recipe, cache, tmp_path / "work", jobs=1).values()
    assert first.status == "built"
    first.binary.write_bytes(first.binary.read_bytes()[:100])  # a disk-full or killed copy
    [again] = build_batch([item], recipe, cache, tmp_path / "work", jobs=1).values()
    assert again.status == "built" and cache.verify(item.cache_key) is None
    run = subprocess.run([str(again.binary), "--m=10", "--n=10", "--k=1"], capture_output=True, text=True)
    assert run.returncode == 0 and '"status": "ok"' in run.stdout


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
def test_a_build_whose_compiler_never_ran_is_not_cached_as_the_configs_failure(tmp_path, monkeypatch):
    """A launcher that cannot start (seen with a relative project path: code 127, no compile log) says
    nothing about the config: the outcome is a failure, but no failure is cached, and the next build
    with a working launcher builds the program."""
    from kernelpilot.tile_tuner import builder

    kernel = ToyKernel()
    recipe = kernel.build_recipe("toy", {})
    problem = {"M": 10, "N": 10, "K": 1, "dtype": "bf16", "layout": "rr"}
    item = BuildItem.create(kernel.render(ToyConfig(tile=(32, 32)), problem, "toy"), recipe, "toy-1")
    cache = BuildCache(tmp_path / "cache")
    with monkeypatch.context() as m:
        m.setattr(builder, "LAUNCHER", "#!/bin/sh\nexit 127\n")
        [broken] = build_batch([item], recipe, cache, tmp_path / "work", jobs=1).values()
    assert broken.status == "build_failed" and "no compile log" in broken.message
    assert cache.manifest(item.cache_key) is None  # nothing published for the key
    [again] = build_batch([item], recipe, cache, tmp_path / "work", jobs=1).values()
    assert again.status == "built"


def test_cache_verify_and_clean_commands(tmp_path, capsys):
    root = tmp_path / "c"
    cache = BuildCache(root)
    cache.store(KEY, _program(tmp_path), None, None)
    bad = "b" * 40
    cache.store(bad, _program(tmp_path, "#!/bin/sh\necho bad\n"), None, None)
    (root / bad / "program").write_bytes(b"\0")
    failed = "f" * 40
    cache.store(failed, None, None, "build_failed: error")
    dead = root / f".{KEY}.999999999.abcd.tmp"  # a temp folder of a killed run (no such pid)
    dead.mkdir()
    assert main(["cache", "verify", "--cache-dir", str(root)]) == 1
    assert f"{bad}: program is 1 bytes" in capsys.readouterr().out
    assert main(["cache", "verify", "--cache-dir", str(root), "--fix"]) == 0
    assert not (root / bad).exists() and (root / KEY).exists()
    assert main(["cache", "clean", "--cache-dir", str(root), "--failed"]) == 0
    assert not dead.exists() and not (root / failed).exists() and (root / KEY).exists()
    assert main(["cache", "clean", "--cache-dir", str(root), "--all"]) == 0
    assert [p.name for p in root.iterdir()] == [".locks"]
    assert main(["cache", "verify", "--cache-dir", str(tmp_path / "absent")]) == 2
    assert os.path.exists(root)
