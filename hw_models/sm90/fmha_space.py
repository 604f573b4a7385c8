"""The Hopper FMHA search space of the sm90 target: enumeration of the legal configs (:mod:`.fmha` holds
the config and its rules), the library default, and the neighbours the model proposer refines with.

Families enumerated: the warp-specialized schedules over (warpgroups, BlockQO) rows, KernelTma over
launch bounds and stages, split-KV counts for decode grids that leave SMs idle, and for prefill the
knobs that change when work runs (``longest_first``, ``lpt``) and, where the exponentials bound the softmax (head
dim 64 and below), exp2 emulation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kernelpilot.errors import NoLibraryDefaultError
from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.dtypes import DTypePair
from kernelpilot.hw_models.problems import attention_dims
from kernelpilot.hw_models.sm90.fmha import (
    EXP2_EMULATION_MAX_HEAD_DIM,
    FA_EXP2_EMULATION,
    FA_SCHEDULES,
    FA_SPLITS,
    FA_TMA_BLOCKS_PER_SM,
    FA_WARPGROUPS,
    INSTANTIATED_HEAD_DIMS,
    Sm90FmhaConfig,
    _program_rows,
    check_fmha,
)

#: (warpgroups, BlockQO) families of the warp-specialized schedules: the example's 2 warpgroups at 128
#: and 256 rows, 3 at 192 (64 rows each, the FlashAttention-3 choice for head dim 64) and 4 at 256
WS_ROW_FAMILIES = ((0, 128), (0, 256), (3, 192), (4, 256))
#: KernelTma: (blocks_per_sm, stages) pairs; 0 = the kernel defaults (2 blocks, 4 stages)
TMA_FAMILIES = ((0, 0), (3, 0), (0, 6), (3, 3), (4, 3))


def enumerate_fmha(kernel: str, pair: DTypePair, problem: dict[str, Any] | None) -> Iterator[Sm90FmhaConfig]:
    heads = (attention_dims(problem)["head_dim_qk"],) if problem else INSTANTIATED_HEAD_DIMS
    for d in heads:
        for schedule in FA_SCHEDULES:
            if schedule == "tma":
                fams = [dict(tile_q=64, blocks_per_sm=b, stages=st) for b, st in TMA_FAMILIES]
                fams = [f for f in fams if not f["blocks_per_sm"] or _raises_occupancy(f, pair, d, kernel)]
            else:
                fams = [dict(tile_q=qo, warpgroups=wg) for wg, qo in WS_ROW_FAMILIES]
            for fam in fams:
                qo = fam.pop("tile_q")
                for kv in (64, 128, 256):
                    cfg = Sm90FmhaConfig(
                        kernel=kernel, dtype=pair, tile=(qo, kv, d), schedule=schedule, **fam
                    )
                    if check_fmha(cfg, problem).valid:
                        yield cfg
                        for n in split_counts(cfg, problem):
                            split = cfg.model_copy(update={"splits": n})
                            if check_fmha(split, problem).valid:
                                yield split
                        for variant in schedule_variants(cfg, problem):
                            if check_fmha(variant, problem).valid:
                                yield variant


#: exp2 emulation periods enumerated for prefill at head dims up to EXP2_EMULATION_MAX_HEAD_DIM: none, since
#: every period measured slower (benchmarks/results/fmha_exp2_ab_h100.json: 0.85-0.98x at head dim 64)
ENUM_EXP2_EMULATION: tuple[int, ...] = ()


#: the across-heads order (``lpt``) in the enumeration: off until a GPU measures it against
#: ``longest_first`` (benchmarks/fmha_lpt_ab.py); the cost model already predicts its gain from the dispatch
#: simulation, so on it would take about a third of every causal prefill workload's default proposals.
#: Neighbours and explicit configs reach it meanwhile.
ENUM_LPT = False


def schedule_variants(cfg: Sm90FmhaConfig, problem: dict[str, Any] | None) -> list[Sm90FmhaConfig]:
    """Prefill only, warp-specialized configs: for causal problems the longest Q tiles first, within each
    head (``longest_first``, 0.5-1.0 % on the H200) and, with ``ENUM_LPT``, across all heads (``lpt``),
    knobs that change when work runs, not the tile; at head dims up to 64 every ``ENUM_EXP2_EMULATION``
    period, with and without them.  ``wg_locked`` is not enumerated: it measured no
    gain (hw_models/sm90/fmha_cost.py); neighbours and explicit configs still reach it."""
    if cfg.schedule == "tma" or cfg.kernel != "fa_prefill":
        return []
    bases = [cfg]
    if problem is None or problem.get("causal"):
        bases.append(cfg.model_copy(update={"longest_first": True}))
        if ENUM_LPT:
            bases.append(cfg.model_copy(update={"lpt": True}))
    out = bases[1:]
    if cfg.tile[2] <= EXP2_EMULATION_MAX_HEAD_DIM:
        out += [b.model_copy(update={"exp2_emulation": k}) for b in bases for k in ENUM_EXP2_EMULATION]
    return out


def _raises_occupancy(fam: dict[str, int], pair: DTypePair, d: int, kernel: str) -> bool:
    """A launch bound is worth a build only where it lets more blocks reside than the default bound
    (else the compiler already fits them: the same binary under another name)."""

    def blocks(b: int, kv: int) -> int:
        return Sm90FmhaConfig(
            kernel=kernel, dtype=pair, tile=(64, kv, d), schedule="tma", blocks_per_sm=b, stages=fam["stages"]
        ).resident_blocks()

    return any(blocks(fam["blocks_per_sm"], kv) > blocks(0, kv) for kv in (64, 128, 256))


def split_counts(cfg: Sm90FmhaConfig, problem: dict[str, Any] | None, cores: int | None = None) -> list[int]:
    """Split-KV chunk counts worth trying: only for decode grids that leave SMs idle (at most half the
    SMs x resident blocks of the target's default device), up to the count that fills about two waves,
    each chunk keeping at least two KV tiles."""
    if problem is None or cfg.kernel != "fa_decode" or problem.get("causal"):
        return []
    cores = cores or get_device("h200").cores
    b, h, rows, kv_len = _program_rows(problem)
    ctas = b * h * ceil_div(rows, cfg.tile[0])
    slots = cores * cfg.resident_blocks()
    if 2 * ctas > slots:
        return []
    return [n for n in FA_SPLITS if ctas * n <= 2 * slots and kv_len // n >= 2 * cfg.tile[1]]


def default_fmha(kernel: str, pair: DTypePair, problem: dict[str, Any] | None) -> Sm90FmhaConfig:
    """The first warp-specialized forward config 88_hopper_fmha.cu instantiates for the head dim:
    d32 coop 128x64 (:932), d64 coop 128x64 (:944), d128 coop 128x128 (:960), d256 coop 128x64 for
    16-bit (:984) and 128x128 for fp8 (:981)."""
    d = attention_dims(problem)["head_dim_qk"] if problem else 128
    table = {
        32: (128, 64),
        64: (128, 64),
        128: (128, 128),
        256: (128, 128) if pair.max_bits == 8 else (128, 64),
    }
    if d not in table:
        raise NoLibraryDefaultError(
            f"no library default Hopper FMHA config for head_dim={d}; the example has {sorted(table)}",
            field="head_dim",
        )
    qo, kv = table[d]
    return Sm90FmhaConfig(kernel=kernel, dtype=pair, tile=(qo, kv, d), schedule="cooperative")


def neighbours_fmha(cfg: Sm90FmhaConfig) -> list[Sm90FmhaConfig]:
    qo, kv, d = cfg.tile
    out = []
    cands: list[dict[str, Any]] = [
        {"tile": (qo, kv * 2, d)},
        {"tile": (qo, kv // 2, d)},
        {"tile": (qo * 2, kv, d)},
        {"tile": (qo // 2, kv, d)},
        {"stages": max(2, cfg.kv_stages - 1)},
        {"stages": cfg.kv_stages + 1},
    ] + [
        {
            "schedule": s,
            "blocks_per_sm": 0,
            "warpgroups": 0,
            "longest_first": False,
            "lpt": False,
            "wg_locked": False,
        }
        for s in FA_SCHEDULES
        if s != cfg.schedule
    ]
    if cfg.schedule != "tma":
        cands += [
            {"longest_first": not cfg.longest_first, "lpt": False},
            {"lpt": not cfg.lpt, "longest_first": False},
            {"wg_locked": not cfg.wg_locked},
        ]
    cands += [{"exp2_emulation": k} for k in (0, *FA_EXP2_EMULATION) if k != cfg.exp2_emulation]
    if cfg.kernel == "fa_decode":
        cands += [{"splits": n} for n in (cfg.splits * 2, cfg.splits // 2 if cfg.splits > 2 else 0, 2)]
    if cfg.schedule == "tma":
        cands += [{"blocks_per_sm": b} for b in FA_TMA_BLOCKS_PER_SM if b != cfg.tma_blocks_per_sm]
    else:
        for n in FA_WARPGROUPS:
            if n != cfg.mma_warpgroups:  # keep the rows per warpgroup
                cands.append({"warpgroups": n, "tile": (cfg.rows_per_wg * n, kv, d)})
    seen = {cfg}
    for change in cands:
        new = cfg.model_copy(update=change)
        if new in seen or min(new.tile) < 1:
            continue
        seen.add(new)
        if check_fmha(new, None).valid:
            out.append(new)
    return out
