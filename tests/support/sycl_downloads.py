"""The SYCL and sycl-tla headers the host-side checks need, fetched once into a cache folder.

Why downloads: no CI machine has oneAPI, but the SYCL headers ship in the ``intel-sycl-rt`` wheel and
sycl-tla's ``include/``, ``tools/util/include`` and MoE example in the ``sycl-tla`` wheel.  Neither wheel
is ever installed into the test environment (the sycl-tla wheel's top-level ``cutlass_library`` would
clash with ``nvidia-cutlass``): they are downloaded and unpacked into a cache folder.  sycl-tla's
``applications/`` (flash attention) is not in its wheel; a copy of the same tag is vendored in
``tests/data/sycl_tla_v0.9.1`` (the release archive on GitHub is the fallback).  Explicit folders win: ``SYCL_TLA_DIR`` (a checkout) and ``KP_SYCL_INCLUDE`` (a folder
holding ``sycl/sycl.hpp``, e.g. ``$ONEAPI_ROOT/compiler/latest/include``).

Every failure is an ``Unavailable`` carrying the reason, which the tests turn into a skip message.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from kernelpilot.dsl_plugins.sycl import sycl_tla
from kernelpilot.locks import HeldLock, KeyLocks

SYCL_TLA_VERSION = "0.9.1"
SYCL_TLA_WHEEL = f"sycl-tla=={SYCL_TLA_VERSION}"
#: the oneAPI 2025.2 runtime: the first release sycl-tla links with its full SPIR-V extension list
SYCL_RT_WHEEL = "intel-sycl-rt==2025.2.1"
SYCL_TLA_ARCHIVE = f"https://github.com/intel/sycl-tla/archive/refs/tags/v{SYCL_TLA_VERSION}.tar.gz"


class Unavailable(Exception):
    """A header set could not be found or fetched; the message says which and why."""


def cache_root(config: object | None) -> Path:
    """pytest's cache folder when there is one, else ~/.cache/kernelpilot (both survive between runs)."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("sycl-host"))
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernelpilot" / "sycl-host"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _pip(args: list[str], what: str) -> None:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"`pip {' '.join(args)}` for {what} failed: {exc}") from exc
    if proc.returncode != 0:
        raise Unavailable(
            f"`pip {' '.join(args)}` for {what} failed (no PyPI?): {proc.stderr.strip()[-300:]}"
        )


def _fetch_lock(cache: Path, key: str) -> HeldLock:
    """Test workers running in parallel (pytest-xdist) share the cache: one fetches, the others wait
    for it and then find the files there."""
    held = KeyLocks(cache / ".locks").acquire(key)
    assert held is not None  # acquire without a timeout waits until it holds the lock
    return held


def sycl_include(cache: Path) -> Path:
    """A folder holding ``sycl/sycl.hpp``: KP_SYCL_INCLUDE, else the intel-sycl-rt wheel's include/."""
    with _fetch_lock(cache, "sycl-include"):
        return _sycl_include(cache)


def _sycl_include(cache: Path) -> Path:
    explicit = os.environ.get("KP_SYCL_INCLUDE")
    if explicit:
        if not (Path(explicit) / "sycl" / "sycl.hpp").exists():
            raise Unavailable(f"KP_SYCL_INCLUDE={explicit} has no sycl/sycl.hpp")
        return Path(explicit)
    dest = cache / SYCL_RT_WHEEL.replace("==", "-") / "include"
    if (dest / "sycl" / "sycl.hpp").exists():
        return dest
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        _pip(
            ["download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", tmp, SYCL_RT_WHEEL],
            "SYCL headers",
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise Unavailable(f"pip download {SYCL_RT_WHEEL} produced no wheel")
        staging = Path(tmp) / "include"
        with zipfile.ZipFile(wheels[0]) as zf:
            for name in zf.namelist():
                _, sep, rel = name.partition(".data/data/include/")
                if sep and rel and not name.endswith("/"):
                    target = staging / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(name))
        if not (staging / "sycl" / "sycl.hpp").exists():
            raise Unavailable(f"the {SYCL_RT_WHEEL} wheel has no include/sycl/sycl.hpp")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), dest)
    return dest


#: ``applications/`` of the same tag, vendored because CI reaches the package registries but not GitHub
VENDORED_APPLICATIONS = (
    Path(__file__).resolve().parents[1] / "data" / f"sycl_tla_v{SYCL_TLA_VERSION}" / "applications"
)


def _add_applications(root: Path) -> None:
    """Put ``applications/`` next to the wheel's include/ (flash attention): the vendored copy of the same
    tag (tests/data), else the release archive from GitHub."""
    if VENDORED_APPLICATIONS.is_dir():
        staging = root / "applications.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(VENDORED_APPLICATIONS, staging)
        staging.rename(root / "applications")
        return
    prefix = f"sycl-tla-{SYCL_TLA_VERSION}/applications/"
    try:
        with urllib.request.urlopen(SYCL_TLA_ARCHIVE, timeout=120) as resp:  # noqa: S310 (fixed https URL)
            data = resp.read()
    except OSError as exc:
        raise Unavailable(
            f"flash attention needs sycl-tla's applications/, which the wheel lacks, and {SYCL_TLA_ARCHIVE} "
            f"could not be fetched ({exc}); set SYCL_TLA_DIR to a v{SYCL_TLA_VERSION} checkout"
        ) from exc
    staging = root / "applications.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(prefix) and ".." not in member.name:
                target = staging / member.name[len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tar.extractfile(member)
                if src is not None:
                    target.write_bytes(src.read())
    staging.rename(root / "applications")


def sycl_tla_tree(cache: Path, *, applications: bool) -> tuple[sycl_tla.SyclTlaTree, str | None]:
    """(tree, why flash attention cannot be checked or None): SYCL_TLA_DIR, else the cached wheel
    (plus the release archive's applications/ when ``applications`` is asked for)."""
    with _fetch_lock(cache, "sycl-tla"):
        return _sycl_tla_tree(cache, applications=applications)


def _sycl_tla_tree(cache: Path, *, applications: bool) -> tuple[sycl_tla.SyclTlaTree, str | None]:
    explicit = os.environ.get("SYCL_TLA_DIR")
    if explicit:
        found = sycl_tla.find_sycl_tla(explicit)
        if found is None:
            raise Unavailable(f"SYCL_TLA_DIR={explicit} holds no sycl-tla headers")
        return found, None if found.applications else f"SYCL_TLA_DIR={explicit} has no applications/"
    target = cache / f"sycl-tla-{SYCL_TLA_VERSION}"
    if not (target / "cutlass_library" / "source" / "include" / "cute").exists():
        _pip(["install", "--quiet", "--no-deps", "--target", str(target), SYCL_TLA_WHEEL], "sycl-tla headers")
    found = sycl_tla.find_sycl_tla(target)
    if found is None:
        raise Unavailable(f"the {SYCL_TLA_WHEEL} wheel in {target} has no headers where kernelpilot looks")
    why = None
    if applications and found.applications is None:
        try:
            _add_applications(found.root)
        except Unavailable as exc:
            why = str(exc)
        found = sycl_tla.find_sycl_tla(target) or found
    elif found.applications is None:
        why = "applications/ not requested"
    return found, why
