"""Local moves of an sm90 GEMM / grouped / MoE config: the neighbours the model proposer refines with.

Why a module of its own: the moves are a list of single-field changes (tile halves and doubles, cluster,
schedule, epilogue, scheduler, the other launch of a grouped tile, its streams and token-side widths);
:meth:`kernelpilot.hw_models.sm90.model.Sm90Model.neighbours` keeps the legal ones."""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.sm90.gemm import PTR_ARRAY_KERNELS, SCHEDULES, Sm90GemmConfig
from kernelpilot.hw_models.sm90.token_widths import MIXED_WIDTH_MENU


def neighbours_gemm(cfg: Sm90GemmConfig) -> list[Sm90GemmConfig]:
    """Copies of ``cfg`` one change away, legal or not (the model's rule walk filters them)."""
    tm, tn, tk = cfg.tile
    cands: list[dict[str, Any]] = []
    for dm in (tm // 2, tm * 2):
        cands.append({"tile": (dm, tn, tk)})
    for dn in (tn // 2, tn * 2, tn - 64, tn + 64):
        cands.append({"tile": (tm, dn, tk)})
    for dk in (tk // 2, tk * 2):
        cands.append({"tile": (tm, tn, dk)})
    cm, cn = cfg.cluster
    for cl in ((cm * 2, cn), (max(1, cm // 2), cn), (cm, cn * 2), (cm, max(1, cn // 2)), (cn, cm)):
        cands.append({"cluster": cl})
    for sched in SCHEDULES:
        if sched != cfg.schedule:
            cands.append({"schedule": sched, "tile_scheduler": "persistent"})
    for epi in ("tma", "nosmem"):
        if epi != cfg.epilogue:
            cands.append({"epilogue": epi})
    cands.append({"tile_scheduler": "streamk" if cfg.tile_scheduler == "persistent" else "persistent"})
    if cfg.kernel in PTR_ARRAY_KERNELS:  # the other launch of the same tile
        if cfg.launch == "grouped":
            # per group, both schedulers: stream-K balances a group's partial wave (Mixtral's experts
            # on the H200: 1.41 ms with stream-K, 1.73 persistent, benchmarks/results/
            # kinds_default_h200_attention_call.json)
            # (a mixed-width config's per-group twin keeps its widths: each group's dense launch
            # runs the width that pads it least)
            cands += [{"launch": "per_group", "tile_scheduler": ts} for ts in ("streamk", "persistent")]
        else:
            cands.append({"launch": "grouped", "tile_scheduler": "persistent", "streams": 1})
            cands.append({"streams": 2 if cfg.streams == 1 else 1})  # the same launch on other streams
            if cfg.swap_ab and cfg.extra_tile_n:  # its single-width twin
                cands.append({"extra_tile_n": ()})
            elif cfg.swap_ab:
                # a second token-side width once per group (the space does not enumerate these,
                # token_widths.ENUM_PER_GROUP_MIXED_TWINS): one step either side of the tile's N and 128
                cands += [
                    {"extra_tile_n": (w,)}
                    for w in dict.fromkeys((tn - 32, tn - 16, tn + 16, 128))
                    if w != tn and w in MIXED_WIDTH_MENU
                ]
    copies: list[Sm90GemmConfig] = []
    for change in cands:
        if any(isinstance(v, tuple) and v and min(v) < 1 for v in change.values()):
            continue
        try:
            copies.append(cfg.model_copy(update=change))
        except Exception:  # noqa: BLE001
            continue
    return copies
