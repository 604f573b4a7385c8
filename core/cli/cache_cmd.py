"""Check or clean the build cache (content-addressed benchmark programs).

verify:  kernelpilot cache verify [--cache-dir DIR] [--fix]   (exit 1 when an entry is corrupt and not fixed)
clean:   kernelpilot cache clean [--cache-dir DIR] [--failed] [--all]
The default cache is $KERNELPILOT_HOME/build_cache (.kernelpilot/build_cache).  A tune run already
rebuilds corrupt entries it needs; these commands check or tidy the whole cache at once.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, help_text in (
        ("verify", "check every entry's program against its manifest checksum"),
        ("clean", "remove leftovers of killed runs and corrupt entries (--failed, --all: more)"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--cache-dir", help="build cache (default: $KERNELPILOT_HOME/build_cache)")
        p.add_argument("--json", action="store_true", help="print JSON")
        if name == "verify":
            p.add_argument(
                "--fix", action="store_true", help="evict the corrupt entries (rebuilt when next needed)"
            )
        else:
            p.add_argument("--failed", action="store_true", help="also remove cached build failures")
            p.add_argument("--all", action="store_true", help="remove every entry")


def run(args: argparse.Namespace) -> int:
    import json
    import os
    import shutil
    from pathlib import Path

    from kernelpilot.errors import InputError
    from kernelpilot.tile_tuner.builder import BuildCache

    root = (
        Path(args.cache_dir)
        if args.cache_dir
        else Path(os.environ.get("KERNELPILOT_HOME", ".kernelpilot")) / "build_cache"
    )
    if not root.is_dir():
        raise InputError("no build cache here (not a folder)", file=str(root), field="--cache-dir")
    cache = BuildCache(root)
    report: dict[str, list[str]] = {"ok": [], "corrupt": [], "evicted": [], "leftovers": [], "busy": []}
    for key in cache.entries():
        lock = cache.locks.try_acquire(key)
        if lock is None:  # another process is building or rebuilding it right now
            report["busy"].append(key)
            continue
        try:
            problem = cache.verify(key)
            info = cache.manifest(key) or {}
            failed = info.get("status") in ("build_failed", "timeout") or cache.failure(key) is not None
            drop = args.action == "clean" and (
                problem is not None
                or getattr(args, "all", False)
                or (getattr(args, "failed", False) and failed)
            )
            if problem is not None:
                report["corrupt"].append(f"{key}: {problem}")
            else:
                report["ok"].append(key)
            if drop or (problem is not None and getattr(args, "fix", False)):
                cache.evict(key)
                report["evicted"].append(key)
        finally:
            lock.release()
    if args.action == "clean":
        for p in root.iterdir():
            # temp folders of killed runs and evicted entries whose deletion was interrupted
            if p.name.startswith(".evicted.") or (p.name.endswith(".tmp") and not _owner_alive(p.name)):
                shutil.rmtree(p, ignore_errors=True)
                report["leftovers"].append(p.name)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"build cache {root}: {len(report['ok'])} ok, {len(report['corrupt'])} corrupt, "
              f"{len(report['evicted'])} evicted, {len(report['leftovers'])} leftovers removed, "
              f"{len(report['busy'])} in use")  # fmt: skip
        for line in report["corrupt"]:
            print(f"  corrupt: {line}")
    unfixed = args.action == "verify" and report["corrupt"] and not args.fix
    return 1 if unfixed else 0


def _owner_alive(name: str) -> bool:
    """Temp folders are named ``.<key>.<pid>.<nonce>.tmp``; a live owner may still be writing."""
    import os

    parts = name.split(".")
    try:
        pid = int(parts[2])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
