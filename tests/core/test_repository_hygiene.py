"""The repository holds only the product: no working notes or references to them, no absolute path of a
build machine, hardware models in files small enough to read, and one test collection whichever way
pytest is started."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support import REPO

#: recorded device runs and test data keep the commands and paths exactly as they ran (provenance)
RECORDS = ("benchmarks/results/", "tests/data/")
# spelled in pieces so this file does not match itself
NOTES = re.compile("notes" + "_for|shared" + "/reference")
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:" + "work|home|root|Users" + r")/[\w.-]")


def _tracked_text_files() -> list[tuple[str, str]]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    out = []
    for name in listed.stdout.decode().split("\0"):
        if not name or name.startswith(RECORDS) or not (REPO / name).is_file():
            continue
        data = (REPO / name).read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (images, sqlite)
        out.append((name, data.decode("utf-8", errors="replace")))
    return out


@pytest.fixture(scope="module")
def tracked() -> list[tuple[str, str]]:
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    return _tracked_text_files()


def test_no_working_notes_or_references_to_them(tracked):
    hits = [
        f"{name}:{n}"
        for name, text in tracked
        for n, line in enumerate(text.splitlines(), 1)
        if NOTES.search(line)
    ]
    assert hits == []


def test_no_absolute_path_of_a_build_machine(tracked):
    hits = [
        f"{name}:{n}: {line.strip()[:120]}"
        for name, text in tracked
        for n, line in enumerate(text.splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert hits == []


def test_no_hardware_model_file_over_500_lines():
    sizes = {
        str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in (REPO / "hw_models").rglob("*.py")
    }
    assert sizes and {name: n for name, n in sizes.items() if n > 500} == {}


@pytest.mark.slow
@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (no implicit sys.path entry) is 3.11+")
def test_pytest_and_python_m_pytest_collect_the_same_tests():
    """``python -m pytest`` puts the working directory on ``sys.path``, the ``pytest`` script does not;
    ``python -P -m pytest`` is the script's view, with this interpreter (a test suite that only imports
    through the implicit path entry collects under one and errors under the other)."""

    def collect(*flags: str) -> list[str]:
        command = [sys.executable, *flags, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        r = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        return sorted(line for line in r.stdout.splitlines() if "::" in line)

    plain, as_module = collect("-P"), collect()
    assert plain and plain == as_module
