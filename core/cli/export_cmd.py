"""Export tuned kernels as a library: sm90 -> a CMake project with PyTorch operators
(torch.ops.NAME.gemm, grouped_mm, moe_gemm, attention for the kinds tuned) and C++ dispatch headers; Intel Xe -> a dispatch header, the sycl-tla kernels as a CMake
library with PyTorch XPU operators (built with icpx) and tile_shapes.json.  Shapes that were not tuned follow --fallback."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="*", metavar="RUN.json", help="run documents written by `kernelpilot tune`"
    )
    parser.add_argument("--out", required=True, help="folder to create (written atomically)")
    parser.add_argument("--name", default="kp_tuned", help="package / torch.ops namespace / C++ namespace")
    parser.add_argument(
        "--fallback",
        default="vendor",
        help="untuned shapes: vendor (torch.matmul, default), nearest (closest tuned shape whose kernel is "
        "legal for the problem), error",
    )
    parser.add_argument(
        "--min-vendor-ratio",
        type=float,
        default=1.0,
        metavar="R",
        help="a tuned kernel serves its shape only where the run's confirmed vendor/tuned time ratio is at "
        "least R (default 1.0: shapes on which the vendor library was measured faster call the vendor "
        "library); 0 keeps every tuned kernel",
    )
    parser.add_argument(
        "--store", help="results store (SQLite) to export instead of run files (with --target)"
    )
    parser.add_argument("--target", help="target of the --store rows to export (sm90, bmg, pvc, ...)")
    parser.add_argument(
        "--cutlass-dir", help="CUTLASS headers to bundle (default: CUTLASS_DIR, ./.deps/cutlass)"
    )
    parser.add_argument(
        "--no-bundle-cutlass",
        action="store_true",
        help="do not copy the CUTLASS headers into the project (build with -DCUTLASS_DIR=... / CUTLASS_DIR)",
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from kernelpilot.export import export

    res = export(
        [Path(p) for p in args.runs],
        Path(args.out),
        name=args.name,
        fallback=args.fallback,
        store=Path(args.store) if args.store else None,
        target=args.target,
        bundle_cutlass=not args.no_bundle_cutlass,
        cutlass_dir=args.cutlass_dir,
        force=args.force,
        min_vendor_ratio=args.min_vendor_ratio,
    )
    summary = {"out": str(res.out), "target": res.target, "kernels": res.kernels, "entries": res.entries,
               "notes": res.notes, "files": res.files}  # fmt: skip
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"exported {res.entries} tuned shapes ({res.kernels} kernels, target {res.target}) to {res.out}")
    for note in res.notes:
        print(f"note: {note}")
    if res.target == "sm90":
        print(f"build: pip install {res.out}")
        ops = ", ".join(f"torch.ops.{args.name}.{op}" for op in res.ops) or "none"
        print(f"call:  import {args.name}; then {ops}  (dispatch.json says which shapes each serves)")
    return 0
