"""``kernelpilot export``: turn tuning runs into a library a model can call.

Inputs are run documents (``run.json``) or a results store plus a target; the output is one folder:
for sm90 a CMake project of the tuned CUTLASS kernels with PyTorch operators (``torch.ops.NAME.gemm``,
``grouped_mm``, ``moe_gemm``, ``attention`` for the kinds present),
a plain C++ dispatch header and ``dispatch.json``; for Intel Xe targets the dispatch as a C++ header,
a CMake target against sycl-tla and ``tile_shapes.json``.  The folder depends on PyTorch (and the
vendor headers), never on kernelpilot: what kernelpilot knows (which config is legal for which
problem) is decided here and written into the tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError

NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
#: target families (``TargetModel.family``) an export project exists for
EXPORT_FAMILIES = ("sm90", "xe")


@dataclass
class ExportResult:
    out: Path
    target: str
    files: list[str]
    kernels: int
    entries: int
    notes: list[str] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)  # the PyTorch operators of an sm90 export


def check_name(name: str) -> str:
    import keyword

    if not NAME_RE.match(name) or keyword.iskeyword(name) or name in ("torch", "aten", "prim", "std"):
        raise InputError(
            f"name {name!r} must be a lower-case identifier (a-z, 0-9, _; not a Python keyword): it is the "
            "Python package, the torch.ops namespace and the C++ namespace",
            field="--name",
        )
    return name


def exportable_targets() -> list[str]:
    """The installed targets whose family has an export project, by name."""
    from kernelpilot.targets import list_target_models

    return sorted(n for n, m in list_target_models().items() if m.family in EXPORT_FAMILIES)


def load_sources(run_files: list[Path], store: Path | None, target: str | None) -> Any:
    """Merge the inputs: run documents, or one results store read for ``target``."""
    from kernelpilot.export import runs

    if store is not None:
        if run_files:
            raise InputError("give run files or --store with --target, not both", field="--store")
        if not target:
            raise InputError("--store needs --target (the store can hold several targets)", field="--target")
        return runs.load_store(store, target)
    if target:
        raise InputError("--target goes with --store; run files carry their target", field="--target")
    if not run_files:
        raise InputError(
            "nothing to export: give RUN.json files or --store STORE --target T", field="RUN.json"
        )
    return runs.merge([runs.load_run(p) for p in run_files])


def export(
    run_files: list[Path],
    out: Path,
    *,
    name: str = "kp_tuned",
    fallback: str = "vendor",
    store: Path | None = None,
    target: str | None = None,
    bundle_cutlass: bool = True,
    cutlass_dir: str | None = None,
    force: bool = False,
    min_vendor_ratio: float = 1.0,
) -> ExportResult:
    """Export tuned kernels into ``out`` (written atomically); input errors raise :class:`InputError`.

    ``min_vendor_ratio``: a tuned kernel serves its shape only where the run's confirmed vendor/tuned
    ratio is at least this; below it the operator calls the vendor library (``routing``)."""
    from kernelpilot import __version__
    from kernelpilot.export.dispatch import build_table, dispatch_document
    from kernelpilot.export.routing import check_min_vendor_ratio
    from kernelpilot.export.writer import write_atomically
    from kernelpilot.targets import get_target_model

    check_name(name)
    check_min_vendor_ratio(min_vendor_ratio)
    source = load_sources(run_files, store, target)
    model = get_target_model(source.target)
    files: list[str] = []
    notes: list[str] = []
    all_rows: list[Any] = []  # every exported row of every kind (the GEMM table for Xe)
    if model.family == "xe":
        from kernelpilot.export import xe_project

        table = xe_project.build_table(source, fallback, min_vendor_ratio)
        doc = xe_project.dispatch_document(table, source, name)

        def fill(tmp: Path) -> None:
            files.extend(xe_project.write_project(tmp, table, doc, name=name, version=__version__))

    elif model.family == "sm90":
        import dataclasses

        from kernelpilot.export import attention_ops, cuda_project, grouped_ops

        by_kind = {kinds: [e for e in source.entries if e.kind in kinds]
                   for kinds in (grouped_ops.KINDS, attention_ops.KINDS)}  # fmt: skip
        rest = [e for e in source.entries if e.kind not in (*grouped_ops.KINDS, *attention_ops.KINDS)]
        table = build_table(
            dataclasses.replace(source, entries=rest), fallback, model, min_vendor_ratio=min_vendor_ratio
        )
        cuda_project.check_kinds(table)
        grouped = grouped_ops.build(by_kind[grouped_ops.KINDS], model, min_vendor_ratio)
        attention = attention_ops.build(by_kind[attention_ops.KINDS], model, min_vendor_ratio)
        all_rows.extend([*table.rows, *grouped.rows, *attention.rows])
        for s in grouped.skipped:
            notes.append(f"not exported: {s['workload']} ({s['kind']}): {s['reason']}")
        if not all_rows:
            raise InputError(
                "nothing exportable: every tuned problem was left out (see the notes)", field="workloads"
            )
        doc = dispatch_document(table, source, name, timed_rows=all_rows)
        doc["ops"] = sorted(
            ({"gemm"} if table.rows else set())
            | {r.op for r in grouped.rows}
            | ({"attention"} if attention.rows else set())
        )
        doc["grouped"] = grouped_ops.document(grouped)
        doc["attention"] = attention_ops.document(attention)
        doc["exported_by"] = f"kernelpilot {__version__}"

        def fill(tmp: Path) -> None:
            files.extend(
                cuda_project.write_project(
                    tmp,
                    table,
                    doc,
                    name=name,
                    version=__version__,
                    cutlass=bundle_cutlass,
                    cutlass_dir=cutlass_dir,
                    grouped=grouped,
                    attention=attention,
                )  # fmt: skip
            )

    else:
        raise InputError(
            f"target {source.target!r} cannot be exported; exportable: {', '.join(exportable_targets())}",
            field="target",
        )
    if model.family == "xe":
        all_rows = list(table.rows)
    routed = [r for r in all_rows if r.vendor_reason]
    if routed:
        notes.append(
            f"{len(routed)} tuned shape(s) call the vendor library instead of their kernel: the run's "
            "confirmation measured it faster, or the operator could not run the kernel as the run timed it "
            "(dispatch.json: route_reason; --min-vendor-ratio 0 keeps every tuned kernel)"
        )
    if all(r.entry.time_source == "search" for r in all_rows):
        notes.append(
            "times are search-time medians: no input confirmed its winners against the vendor library"
        )
    kernel_count = len(table.kernels)
    if model.family == "sm90":
        kernel_count += len(grouped.kernels) + len(attention.kernels)
    written = write_atomically(out, fill, force=force)
    return ExportResult(
        out=written, target=source.target, files=files, kernels=kernel_count, entries=len(all_rows),
        notes=notes, ops=list(doc.get("ops", [])),
    )  # fmt: skip
