"""What an export starts from: the tuned entries of run documents or of a results store.

A *tuned entry* is one (kind, dtype, layout, shape) with the config and run-time knobs that won, the
time it was won with, and where that came from.  Runs written after the winner was *confirmed*
(re-measured against the vendor library) carry confirmed times and vendor ratios; older runs and
results stores only have the search-time numbers, and every entry says which one it holds.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError

# run-time knob names of run.json -> the one-letter codes the kernels take (the benchmark's --variants)
RASTER_CODES = {"heuristic": "H", "along_m": "M", "along_n": "N", "H": "H", "M": "M", "N": "N"}
DECOMP_CODES = {
    "heuristic": "H",
    "data_parallel": "D",
    "split_k": "S",
    "stream_k": "K",
    "H": "H",
    "D": "D",
    "S": "S",
    "K": "K",
}


@dataclass
class TunedEntry:
    """One tuned shape: its winner and the evidence for it."""

    kind: str
    dtype: str
    layout: str
    dims: dict[str, Any]  # shape only: M, N, K for gemm; the tuner's normalized problem for other kinds
    config: dict[str, Any]
    label: str
    runtime: dict[str, Any]
    time_ms: float
    time_source: str  # "confirmed" | "search"
    vendor_ms: float | None = None
    vendor_ratio: float | None = None  # vendor time / tuned time (> 1: the tuned kernel is faster)
    origin: dict[str, Any] = field(default_factory=dict)
    raw_dtype: Any = None  # the run's dtype as the target model parses it (a dict for mixed Xe pairs)

    def provenance(self) -> dict[str, Any]:
        """Where this entry's time comes from, as every kind's ``dispatch.json`` rows record it."""
        return {
            "time_ms": self.time_ms,
            "time_source": self.time_source,
            "vendor_ms": self.vendor_ms,
            "vendor_ratio": self.vendor_ratio,
            "origin": self.origin,
        }

    @property
    def model_dtype(self) -> Any:
        return self.dtype if self.raw_dtype is None else self.raw_dtype

    def shape_key(self) -> tuple[str, str, str, Any]:
        """Identity and order of a tuned shape: integer dims sort numerically, other kinds' problems by
        their JSON text (entries of one kind always have the same form)."""
        if all(isinstance(v, int) for v in self.dims.values()):
            return (self.kind, self.dtype, self.layout, tuple(sorted(self.dims.items())))
        return (self.kind, self.dtype, self.layout, json.dumps(self.dims, sort_keys=True))


@dataclass
class ExportSource:
    """The entries of all inputs and the single target they share."""

    target: str
    device: str | None
    entries: list[TunedEntry]
    inputs: list[dict[str, Any]]  # one record per input file (path, kind of input, run id, notes)


def _num(value: Any) -> float | None:
    """A positive finite float from a number or a {median: ...} timing dict, else None."""
    if isinstance(value, dict):
        value = value.get("median", value.get("time_ms"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


#: The vendor call a kind's exported operator makes where the run's baseline may have timed a path the
#: operator cannot take: the grouped baseline is the faster of ``torch._grouped_mm`` and a ``torch.mm``
#: loop, but a loop reads the group offsets on the host (a sync, no CUDA-graph capture), so the exported
#: grouped_mm / moe_gemm call ``torch._grouped_mm``, and routing must weigh that call's time.
OPERATOR_VENDOR_PATH = {"grouped_gemm": "torch._grouped_mm", "moe_gemm": "torch._grouped_mm"}


def _operator_vendor(kind: str, vendor_doc: dict[str, Any]) -> tuple[str | None, float | None]:
    """(name, ms) of the vendor call the exported operator makes, as the run's confirmation timed it.

    The run's best vendor path (median of the confirmation rounds) when the operator makes that call;
    else the candidate of that name as the last confirmation round timed it (the vendor worker times
    every candidate each round, the run keeps the last round's); None where the run has no time for it."""
    backend = vendor_doc.get("backend") or vendor_doc.get("label")
    path = OPERATOR_VENDOR_PATH.get(kind)
    if path is None or backend == path:
        return backend, _num(vendor_doc.get("confirmed_ms"))
    candidate = (vendor_doc.get("candidates") or {}).get(path)
    return path, _num(candidate.get("time_ms")) if isinstance(candidate, dict) else None


def _confirmed(wl: dict[str, Any], best: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """(confirmed ms, vendor ms, vendor ratio) of a workload, Nones where the run has none.

    A run that confirmed its winner marks ``best.confirmed`` and puts the median of the confirmation
    rounds in ``best.confirmed_ms`` (``best.time_ms`` is then the same number; ``best.search_ms`` what
    the search saw); the vendor baseline of the same rounds is ``vendor.confirmed_ms`` and
    ``vs_vendor`` = vendor / winner.  For the kinds of :data:`OPERATOR_VENDOR_PATH` the vendor numbers
    are those of the call the exported operator makes.  Numbers a run does not have are never invented."""
    conf = _num(best.get("confirmed_ms")) if best.get("confirmed", True) else None
    vendor_doc = wl.get("vendor")
    if not isinstance(vendor_doc, dict):
        vendor_doc = {}
    backend, vendor = _operator_vendor(str(wl.get("kernel", "gemm")), vendor_doc)
    if backend != (vendor_doc.get("backend") or vendor_doc.get("label")):
        ratio = vendor / float(conf or best["time_ms"]) if vendor is not None else None
        return conf, vendor, ratio
    ratio = _num(wl.get("vs_vendor"))
    if ratio is None and vendor is not None:
        ratio = vendor / float(conf or best["time_ms"])
    return conf, vendor, ratio


def dtype_name(dtype: Any) -> str:
    """A run's dtype as one name: "bf16", or "a=bf16,b=u4" for the mixed pairs of Xe runs."""
    if isinstance(dtype, dict):
        return ",".join(f"{k}={v}" for k, v in sorted(dtype.items()))
    return str(dtype)


# kinds whose run documents carry no layout: grouped kernels read B column-major, attention is BHSD
DEFAULT_LAYOUT = {"grouped_gemm": "rc", "moe_gemm": "rc", "fa_prefill": "bhsd", "fa_decode": "bhsd"}


def dims_of(wl: dict[str, Any], path: Path, i: int) -> dict[str, Any]:
    """A workload's shape: integer M, N, K for gemm; the tuner's normalized problem (groups, heads,
    lengths, causal ...) for the other kinds, as JSON values."""
    raw = wl.get("dims")
    if not isinstance(raw, dict):
        raise InputError("workload without a dims mapping", file=str(path), field=f"workloads[{i}].dims")
    if wl.get("kernel", "gemm") != "gemm":
        return {k: v for k, v in raw.items() if k not in ("layout", "dtype")}
    try:
        return {k: int(v) for k, v in raw.items() if k != "layout"}
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"gemm dims must be integers: {exc}", file=str(path), field=f"workloads[{i}].dims"
        ) from exc


def load_run(path: Path) -> ExportSource:
    """Tuned entries of one ``run.json``; a file that is not a finished run with an ``ok`` result is an
    :class:`InputError` naming the file and field."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc}", file=str(path)) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("workloads"), list):
        raise InputError(
            "not a kernelpilot run document (no 'workloads' list)", file=str(path), field="workloads"
        )
    if doc.get("dry_run"):
        raise InputError(
            "this is a dry-run plan, not a run; nothing was measured", file=str(path), field="dry_run"
        )
    target = doc.get("target")
    if not isinstance(target, str) or not target:
        raise InputError("missing the tuning target", file=str(path), field="target")
    entries: list[TunedEntry] = []
    for i, wl in enumerate(doc["workloads"]):
        best = wl.get("best") if isinstance(wl, dict) else None
        if not best or _num(best.get("time_ms")) is None:
            continue  # a workload without an ok result exports nothing (reported below if none has one)
        if wl.get("target", target) != target:
            raise InputError(
                f"workload {wl.get('name')!r} is for target {wl.get('target')!r}, the run for {target!r}",
                file=str(path),
                field=f"workloads[{i}].target",
            )
        dims = dims_of(wl, path, i)
        conf, vendor, ratio = _confirmed(wl, best)
        vendor_doc = wl.get("vendor") if isinstance(wl.get("vendor"), dict) else {}
        best_vendor = vendor_doc.get("backend") or vendor_doc.get("label")
        operator_vendor = _operator_vendor(str(wl["kernel"]), vendor_doc)[0]
        entries.append(
            TunedEntry(
                kind=str(wl["kernel"]),
                dtype=dtype_name(wl["dtype"]),
                raw_dtype=wl["dtype"],
                layout=str(wl["dims"].get("layout", DEFAULT_LAYOUT.get(str(wl["kernel"]), "rr"))),
                dims=dims,
                config={k: v for k, v in best["config"].items() if k not in ("kernel", "dtype")},
                label=str(best.get("label", "")),
                runtime=dict(best.get("runtime") or {}),
                time_ms=conf or float(best["time_ms"]),
                time_source="confirmed" if conf else "search",
                vendor_ms=vendor,
                vendor_ratio=ratio,
                origin={
                    "run": path.name,
                    "run_id": doc.get("run_id"),
                    "workload": wl.get("name"),
                    "device": wl.get("device") or doc.get("device"),
                    "search_time_ms": best.get("search_ms") or best["time_ms"],
                    "vendor": operator_vendor,
                    # the run's faster vendor path, which the operator cannot call
                    **(
                        {"best_vendor": best_vendor, "best_vendor_ms": _num(vendor_doc.get("confirmed_ms"))}
                        if best_vendor != operator_vendor
                        else {}
                    ),
                },
            )  # fmt: skip
        )
    if not entries:
        raise InputError(
            "no workload has an 'ok' result (every best is empty): nothing to export",
            file=str(path),
            field="workloads[].best",
        )
    info = {"file": path.name, "type": "run", "run_id": doc.get("run_id"), "command": doc.get("command"),
            "device": doc.get("device_name") or doc.get("device"), "toolchain": doc.get("toolchain"),
            "library": doc.get("library"), "template_version": doc.get("template_version")}  # fmt: skip
    return ExportSource(target=target, device=doc.get("device"), entries=entries, inputs=[info])


def load_store(path: Path, target: str) -> ExportSource:
    """The fastest ``ok`` measurement per (kind, dtype, layout, shape) of ``target`` in a results store
    (search-time numbers: a store holds no confirmation)."""
    from kernelpilot.tile_tuner.store import ResultsStore

    if not path.is_file():
        raise InputError("no such results store", file=str(path))
    try:
        store = ResultsStore(path, readonly=True)
        rows = store.all(target=target, status="ok")
    except Exception as exc:  # noqa: BLE001 - sqlite3 errors of a file that is no store
        raise InputError(f"not a kernelpilot results store: {exc}", file=str(path)) from exc
    if not rows:
        raise InputError(f"holds no 'ok' measurement for target {target!r}", file=str(path), field="target")
    best: dict[tuple[str, str, str, str], tuple[float, Any]] = {}  # key -> (time_ms, measurement)
    for m in rows:
        k = m.key
        key = (k.kernel, k.dtype, k.layout, k.problem)
        if m.time_ms and (key not in best or m.time_ms < best[key][0]):
            best[key] = (m.time_ms, m)
    entries = []
    for (kernel, dtype, layout, problem), (time_ms, m) in sorted(best.items()):
        cfg = {k: v for k, v in m.config.items() if k not in ("kernel", "dtype")}
        entries.append(
            TunedEntry(
                kind=kernel,
                dtype=dtype,
                layout=layout,
                dims=store_dims(kernel, problem, path),
                config=cfg,
                label=_label(cfg),
                runtime=dict(m.runtime or {}),
                time_ms=float(time_ms),
                time_source="search",
                origin={
                    "store": path.name,
                    "run_id": m.run_id,
                    "device": m.key.device,
                    "search_time_ms": m.time_ms,
                },
            )  # fmt: skip
        )
    info = {"file": path.name, "type": "store", "target": target}
    return ExportSource(target=target, device=rows[0].key.device, entries=entries, inputs=[info])


def store_dims(kernel: str, problem: str, path: Path) -> dict[str, Any]:
    """A stored problem's shape: integer M, N, K for gemm, the tuner's normalized problem otherwise."""
    dims = json.loads(problem)
    if kernel != "gemm":
        return dims
    try:
        return {k: int(v) for k, v in dims.items()}
    except (TypeError, ValueError) as exc:
        raise InputError(f"a stored gemm problem is not integer M, N, K: {problem}", file=str(path)) from exc


def _label(cfg: dict[str, Any]) -> str:
    """A readable config label for store rows (run documents carry the model's own label)."""
    return "_".join(
        f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in sorted(cfg.items())
    )


def merge(sources: list[ExportSource]) -> ExportSource:
    """One source from several: one target for all (else an :class:`InputError` naming both); for a
    shape tuned in several inputs the fastest entry (confirmed times beat search-time ones) wins."""
    target = sources[0].target
    for s in sources[1:]:
        if s.target != target:
            raise InputError(
                f"mixed targets: {sources[0].inputs[0]['file']} is for {target!r}, "
                f"{s.inputs[0]['file']} for {s.target!r}; export one target at a time",
                file=s.inputs[0]["file"],
                field="target",
            )
    chosen: dict[Any, TunedEntry] = {}
    for s in sources:
        for e in s.entries:
            key = e.shape_key()
            old = chosen.get(key)
            rank = (e.time_source != "confirmed", e.time_ms)
            if old is None or rank < (old.time_source != "confirmed", old.time_ms):
                chosen[key] = e
    entries = sorted(chosen.values(), key=lambda e: e.shape_key())
    return ExportSource(
        target=target,
        device=sources[0].device,
        entries=entries,
        inputs=[i for s in sources for i in s.inputs],
    )
