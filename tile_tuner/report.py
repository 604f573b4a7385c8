"""Outputs of a tuning run: JSON, CSV, sycl-tla ``tile_shapes``, PNG plots and the console table.

All of them are rendered from the run document (``run.json``), so ``kernelpilot report RUN.json``
re-renders everything without touching a GPU.  A best result above the device peak, and every
*model disagreement* (a config the hardware model accepted that failed to build, run or verify),
are printed prominently: both are bugs, not results.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

#: target families whose runs also write ``tile_shapes.json``: sycl-tla's
#: ``SYCL_TLA_ADDITIONAL_TILE_SHAPES`` entries, which only the Xe configs (``wg``/``sg``) describe
TILE_SHAPES_FAMILIES = ("xe",)


def write_json(doc: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(path)
    return path


def write_csv(doc: dict[str, Any], path: Path) -> Path:
    """One row per (workload, config tried)."""
    cols = [
        "workload",
        "kernel",
        "dtype",
        "dims",
        "order",
        "label",
        "is_default",
        "status",
        "time_ms",
        "tflops",
        "runtime",
        "source",
        "reason",
    ]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for wl in doc.get("workloads", []):
            for t in wl.get("tried", []):
                w.writerow(
                    [
                        wl["name"], wl["kernel"], wl["dtype"], json.dumps(wl["dims"], sort_keys=True), t["order"], t["label"],
                        t["is_default"], t["status"], t["time_ms"], t["tflops"], json.dumps(t.get("runtime") or {}),
                        t["source"], t.get("reason", ""),
                    ]
                )  # fmt: skip
    return path


def tile_shapes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """``SYCL_TLA_ADDITIONAL_TILE_SHAPES`` entries ``{"wg": [M,N,K], "sg": [...]}`` of the best configs
    (deduplicated; Xe targets only, whose configs carry ``wg``/``sg``)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for wl in doc.get("workloads", []):
        best = wl.get("best")
        if not best:
            continue
        cfg = best["config"]
        if "wg" not in cfg:
            continue
        entry = {"wg": list(cfg["wg"])}
        if cfg.get("sg"):
            entry["sg"] = list(cfg["sg"])
        key = json.dumps(entry, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def _xeforge_config(cfg: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config as Xe-Forge's ``TileConfig``: ``wg``, ``sg`` and everything else under ``extra``."""
    if cfg is None:
        return None
    return {
        "wg": list(cfg["wg"]) if "wg" in cfg else None,
        "sg": list(cfg["sg"]) if cfg.get("sg") else None,
        "extra": {k: v for k, v in cfg.items() if k not in ("wg", "sg")},
    }


def xeforge_results(doc: dict[str, Any]) -> dict[str, Any]:
    """The run in Xe-Forge's results schema (its ``--tune-output`` / ``output:`` JSON): per workload
    ``problem_shape``, ``configs_tested`` (``config``, ``time_ms``, ``tflops``, ``passed``, ``error``),
    ``best_config``, ``best_tflops``, ``best_time_ms``, plus ``tile_shapes``.  Differences kept on
    purpose: each workload has its ``name``, ``sg`` is the real one for every config (Xe-Forge wrote
    [0, 0, 1] for all but the best), and ``passed`` means measured and verified (Xe-Forge counted
    unverified runs as passed)."""
    workloads = []
    for wl in doc.get("workloads", []):
        best = wl.get("best") or {}
        workloads.append(
            {
                "name": wl["name"],
                "problem_shape": dict(wl.get("dims", {})),
                "configs_tested": [
                    {
                        "config": _xeforge_config(t.get("config")),
                        "time_ms": t.get("time_ms"),
                        "tflops": t.get("tflops"),
                        "passed": t.get("status") == "ok",
                        "error": None if t.get("status") == "ok" else (t.get("reason") or t.get("status")),
                    }
                    for t in wl.get("tried", [])
                ],
                "best_config": _xeforge_config(best.get("config")),
                "best_tflops": best.get("tflops"),
                "best_time_ms": best.get("time_ms"),
            }
        )
    return {"workloads": workloads, "tile_shapes": tile_shapes(doc)}


def plot_convergence(
    doc: dict[str, Any], path: Path, curves: dict[str, list[list[float | None]]] | None = None
) -> Path:
    """Best-so-far time (relative to the best found) vs measured configs, one line per workload, or
    per proposer when ``curves`` (proposer -> list of traces) is given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    if curves:
        for name, traces in curves.items():
            for i, tr in enumerate(traces):
                ys: Any = list(tr)  # None (nothing measured yet) is drawn as a gap
                ax.plot(range(1, len(ys) + 1), ys, label=name if i == 0 else None, alpha=0.8)
        ax.set_ylabel("best-so-far / exhaustive best")
    else:
        for wl in doc.get("workloads", []):
            tr = [t for t in wl.get("best_trace_ms", [])]
            best = min((t for t in tr if t), default=None)
            if not best:
                continue
            ratios: Any = [(t / best) if t else None for t in tr]  # None is drawn as a gap
            ax.plot(range(1, len(tr) + 1), ratios, label=wl["name"])
        ax.set_ylabel("best-so-far time / final best")
    ax.set_xlabel("measured configs")
    ax.axhline(1.02, color="grey", ls=":", lw=1)
    ax.set_title("Convergence")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_roofline(
    doc: dict[str, Any], path: Path, peak_tflops: float | None = None, bandwidth_gbs: float | None = None
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = []
    for wl in doc.get("workloads", []):
        best = wl.get("best")
        if best and wl.get("min_bytes") and best.get("tflops"):
            pts.append((wl["flops"] / wl["min_bytes"], best["tflops"], wl["name"]))
        peak_tflops = peak_tflops or wl.get("peak_tflops")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if peak_tflops and bandwidth_gbs:
        import numpy as np

        xs = np.logspace(0, 4, 200)
        ax.plot(xs, np.minimum(peak_tflops, xs * bandwidth_gbs / 1000.0), "k-", lw=1, label="roofline")
    elif peak_tflops:
        ax.axhline(peak_tflops, color="k", lw=1, label="peak")
    for x, y, name in pts:
        ax.scatter([x], [y])
        ax.annotate(name, (x, y), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / byte, compulsory traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Roofline ({doc.get('device') or doc.get('target')})")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def problems_of(doc: dict[str, Any]) -> list[str]:
    """Lines that must be shown prominently: disagreements and above-peak results."""
    lines: list[str] = []
    for wl in doc.get("workloads", []):
        for d in wl.get("model_disagreements", []):
            kind = "RESULT ABOVE DEVICE PEAK" if d["status"] == "above_peak" else "MODEL DISAGREEMENT"
            lines.append(f"{kind}: {wl['name']}: {d['label']} -> {d['status']}: {d['reason'][:300]}")
    return lines


def experimental_notes(workload: dict[str, Any]) -> list[str]:
    """The workload's experimental labels (absent in documents written before they existed)."""
    return [str(n) for n in workload.get("experimental") or []]


def confirmation_notes(doc: dict[str, Any]) -> list[str]:
    """Plain-words lines per workload: an experimental label (no build of the element types has run
    yet), the verdict against the vendor library (a winner slower than the vendor is said so), a winner
    that changed in confirmation, unstable contenders, and why a confirmation or a baseline did not run."""
    lines: list[str] = [
        f"EXPERIMENTAL: {wl['name']}: {note}"
        for wl in doc.get("workloads", [])
        for note in experimental_notes(wl)
    ]
    for wl in doc.get("workloads", []):
        conf = wl.get("confirmation")
        if not conf:
            continue
        name = wl["name"]
        if conf.get("status") in ("not_possible", "skipped") and conf.get("reason"):
            lines.append(f"{name}: confirmation {conf['status'].replace('_', ' ')}: {conf['reason']}")
        if wl.get("verdict"):
            slower = wl.get("vs_vendor") is not None and wl["vs_vendor"] < 1.0
            lines.append(f"{'SLOWER THAN VENDOR: ' if slower else ''}{name}: {wl['verdict']}")
        if conf.get("winner_changed"):
            sb = wl.get("search_best") or {}
            lines.append(
                f"{name}: confirmation changed the winner: search-time best {sb.get('label')} "
                f"({sb.get('time_ms')} ms), confirmed best {wl['best']['label']} ({wl['best']['time_ms']:.4g} ms)"
            )
        if conf.get("unstable"):
            lines.append(
                f"UNSTABLE: {name}: per-round spread above {100 * conf.get('unstable_spread', 0.03):.0f} % for "
                + ", ".join(conf["unstable"])
            )
    return lines


def console(doc: dict[str, Any]) -> None:
    import sys

    from rich.console import Console
    from rich.table import Table

    con = Console(width=None if sys.stdout.isatty() else 200)  # logs and pipes get the whole table
    table = Table(
        title=f"kernelpilot tune: {doc.get('target')} on {doc.get('device_name') or doc.get('device')}"
    )
    for col in (
        "workload",
        "dims",
        "best config",
        "runtime",
        "ms",
        "TFLOP/s",
        "% peak",
        "vs default",
        "vs vendor",
        "tried",
        "stop",
    ):
        table.add_column(col)
    for wl in doc.get("workloads", []):
        best = wl.get("best") or {}
        rt = best.get("runtime") or {}
        short = {"raster": "raster", "swizzle": "swz", "decomposition": "decomp", "splits": "splits"}
        rts = " ".join(
            f"{short[k]}={v}" for k, v in rt.items() if k in short and not (k == "splits" and v == 1)
        )
        dims = " ".join(f"{k}={v}" for k, v in wl["dims"].items() if k != "layout")
        table.add_row(
            wl["name"],
            dims,
            best.get("label", "-"),
            rts,
            (f"{best['time_ms']:.4f}" + ("" if best.get("confirmed", True) else "*"))
            if best.get("time_ms")
            else "-",
            f"{best['tflops']:.1f}" if best.get("tflops") else "-",
            f"{best['pct_of_peak']:.1f}" if best.get("pct_of_peak") else "-",
            f"{wl['speedup_vs_default']:.2f}x" if wl.get("speedup_vs_default") else "-",
            f"{wl['vs_vendor']:.2f}x" if wl.get("vs_vendor") else "-",
            str(wl.get("measured_configs", 0)),
            wl.get("stop_reason", ""),
        )
    con.print(table)
    if any(not (wl.get("best") or {}).get("confirmed", True) for wl in doc.get("workloads", [])):
        con.print("* search-time number, not confirmed")
    for line in confirmation_notes(doc):
        con.print(line, markup=False, highlight=False)
    for line in problems_of(doc):
        con.print(f"[bold red]{line}[/bold red]")


def write_all(
    doc: dict[str, Any], out_dir: Path, *, plots: bool = True, basename: str = "run"
) -> dict[str, str]:
    """Write JSON, CSV, tile_shapes (Xe) and plots into ``out_dir``; returns name -> path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": str(write_json(doc, out_dir / f"{basename}.json")),
        "csv": str(write_csv(doc, out_dir / f"{basename}.csv")),
    }
    from kernelpilot.targets import target_family

    if target_family(doc.get("target")) in TILE_SHAPES_FAMILIES:
        p = out_dir / "tile_shapes.json"
        p.write_text(json.dumps(tile_shapes(doc), indent=1))
        paths["tile_shapes"] = str(p)
    if plots and doc.get("workloads"):
        try:
            paths["convergence"] = str(plot_convergence(doc, out_dir / "convergence.png"))
            bw = None
            try:
                from kernelpilot.hw_models.catalogue import get_device

                dev = get_device(doc["device"]) if doc.get("device") else None
                bw = dev.mem_bandwidth_gbs if dev else None
            except Exception:  # noqa: BLE001
                bw = None
            paths["roofline"] = str(plot_roofline(doc, out_dir / "roofline.png", bandwidth_gbs=bw))
        except ImportError:
            pass
    return paths
