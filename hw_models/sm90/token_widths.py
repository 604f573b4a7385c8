"""Token-side tile widths of the sm90 swap-AB grouped / MoE GEMM: the widths the swap-AB family is fitted
with, and mixed widths (``extra_tile_n``), where each group runs with the width that pads it least.

Why a module of its own: the rules here are about a problem's token counts, not about a kernel's
resources; :mod:`.gemm` (the config and its resource model) and :mod:`.model` (rules, enumeration) use
them."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from typing import TYPE_CHECKING, Any

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.problems import gemm_problems
from kernelpilot.hw_models.types import CheckResult, Collector

if TYPE_CHECKING:
    from kernelpilot.hw_models.sm90.gemm import Sm90GemmConfig

# Swap-AB ptr-array kernels (grouped / MoE): the kernel computes D^T = W X^T per group, so the tokens of a
# group run along the tile's N.  A tile M is a multiple of 64 (WGMMA M), and one tile serves every group,
# so a group of 1035 tokens pays for 1152 rows at TM = 128 and 1280 at 256; WGMMA N comes in steps of 8
# up to 256 (include/cute/arch/mma_sm90.hpp ss_op_selector), so a token-side tile can fit the groups'
# token counts.  A per-GEMM vendor kernel does exactly this (on Mixtral's experts a torch.mm loop ran
# cuBLAS tiles of 176 tokens for the experts of 1034-1044 tokens and 256 for those of 1011-1021,
# benchmarks/results/grouped_gap_h100_call.json).  The family's token-side widths are the
# ``SWAP_PTR_ARRAY_WIDTHS`` widths of ``ENUM_SWAP_PTR_ARRAY_TILE_N`` that pad the problem's groups least,
# ties to the wider tile: multiples of 16 (an epilogue tile of gcd(32, TN) >= 16 columns) other than the
# 128 / 192 / 256 whose padding the unswapped tiles already have (a swapped 256x128 pads like an
# unswapped 128x256).  Its tile M (along the weight's N) is the generator's, with 4 WGMMA K steps only
# (the K-step axis would double the family without a measured reason to).
ENUM_SWAP_PTR_ARRAY_TILE_N = (144, 160, 176, 208, 224, 240)
SWAP_PTR_ARRAY_WIDTHS = 3
# Mixed token-side widths (``extra_tile_n``): one width for every group still pads each group to its own
# multiple of that width (Qwen3-8B down's 16 requests of 179-1019 tokens pay 14 % of their MMAs on padding
# at 176; Phi-3's 11 %), where a per-GEMM vendor kernel picks a tile per group.  A mixed config instantiates
# the swap-AB ptr-array kernel once per width and launches each over the groups that width pads least (ties
# to the wider tile, which has fewer tiles), one launch after the other.  Widths are chosen from this menu
# (the family's widths and the base WGMMA widths of the unswapped tiles), at most ``MAX_TOKEN_WIDTHS`` per
# config: every width is one more kernel instantiation to compile and one more launch tail to pay.
MIXED_WIDTH_MENU = (128, 144, 160, 176, 192, 208, 224, 240, 256)
MAX_TOKEN_WIDTHS = 3
#: a mixed config is enumerated only where it saves at least this share of the best single width's rows:
#: below it, the extra launch tail costs more than the padding it removes
MIXED_MIN_PADDING_SAVING = 0.02
#: the same threshold for the per-group launch, which launches the dense kernel once per group whatever
#: the widths: a further width costs a kernel instantiation, no launch, so any saving of rows is worth
#: ranking (Mixtral-8x7B's experts of 1000-1044 tokens: 176 and 128 compute 1.5 % fewer rows than 176 alone)
MIXED_MIN_PADDING_SAVING_PER_GROUP = 0.0
#: whether the space enumerates the per-group launch's mixed-width twins.  Off: timed on an H100 against
#: their single-width twins, the best configs of earlier runs and a torch.mm loop on the three rows of few
#: large GEMMs (benchmarks/results/pergroup_mixed_h100.json), the best twin of three of the four per-group
#: bases ran 3.5-6.3 % faster than its single-width config (Llama-3-8B MLP up, Qwen3-8B MLP down and
#: Mixtral-8x7B's 128x208; 2.5 % slower, within the rounds' spread, on Mixtral's 256x176), but none reached
#: the loop or passed the best earlier config, and the cost model ranks them first on all three rows, so in
#: the default space they push measured winners out of the 16 proposals (Mixtral's 256x176 ptr-array
#: swap).  Neighbours and explicit configs reach them.
ENUM_PER_GROUP_MIXED_TWINS = False


def padded_rows(tokens: list[int], width: int) -> int:
    """Rows a token-side tile of ``width`` computes over groups of ``tokens`` (ragged tiles in full)."""
    return sum(ceil_div(t, width) * width for t in tokens)


def width_for_tokens(tokens: int, widths: tuple[int, ...]) -> int:
    """The token-side width of ``widths`` a group of ``tokens`` runs with in a mixed config: the one that
    pads it least, ties to the wider tile (fewer tiles).  The program applies the same rule
    (cpp_templates/cuda/grouped_gemm_sm90.cu.j2 ``width_class``)."""
    return min(widths, key=lambda w: (ceil_div(tokens, w) * w, -w))


def groups_by_width(groups: list[list[int]], widths: tuple[int, ...]) -> dict[int, list[list[int]]]:
    """Groups ``[tokens, n, k]`` by the width each runs with in a mixed config (:func:`width_for_tokens`)."""
    out: dict[int, list[list[int]]] = {}
    for g in groups:
        out.setdefault(width_for_tokens(g[0], widths), []).append(g)
    return out


def mixed_padded_rows(tokens: list[int], widths: tuple[int, ...]) -> int:
    """Rows a mixed config computes: each group padded to the width it runs with."""
    return sum(padded_rows([t], width_for_tokens(t, widths)) for t in tokens)


def width_sets(
    tokens: list[int], menu: tuple[int, ...], size: int, min_saving: float = MIXED_MIN_PADDING_SAVING
) -> dict[tuple[int, ...], int]:
    """The sets of ``size`` widths of ``menu`` (each widest first) a mixed config may use on ``tokens``, with
    the rows each computes: every width runs at least one group (a width no group uses is a build and a
    launch for nothing) and the set computes fewer rows than the best single width, by at least
    ``min_saving`` of them."""
    if not tokens or not menu or not 2 <= size <= MAX_TOKEN_WIDTHS:
        return {}
    best_single = min(padded_rows(tokens, w) for w in menu)
    limit = best_single * (1.0 - min_saving)
    sets = {}
    for combo in combinations(sorted(menu, reverse=True), size):
        chosen = [width_for_tokens(t, combo) for t in tokens]  # each group's width, once per set
        if len(set(chosen)) < size:
            continue
        rows = sum(padded_rows([t], w) for t, w in zip(tokens, chosen, strict=True))
        if rows <= limit and rows < best_single:
            sets[combo] = rows
    return sets


def mixed_token_widths(
    tokens: list[int],
    menu: tuple[int, ...],
    size: int,
    cost: Callable[[tuple[int, ...]], float] | None = None,
    min_saving: float = MIXED_MIN_PADDING_SAVING,
) -> tuple[int, ...]:
    """Of :func:`width_sets`, the set with the lowest ``cost`` (the model's estimate of the config that
    uses it: fewer padded rows can still mean more waves), then the fewest padded rows, then the widest;
    without ``cost`` the fewest padded rows.  ``()`` when there is none."""
    sets = width_sets(tokens, menu, size, min_saving)
    if not sets:
        return ()
    return min(sets, key=lambda c: (cost(c) if cost else 0.0, sets[c], -sum(c)))


def group_tokens(problem: dict[str, Any] | None, kernel: str) -> list[int]:
    """The token counts of a grouped / MoE problem's non-empty groups."""
    if not problem:
        return []
    return [m for m, _, _ in gemm_problems(problem, kernel) if m > 0]


def swap_token_tile_ns(problem: dict[str, Any] | None, kernel: str) -> tuple[int, ...]:
    """The token-side tile widths of the swap-AB ptr-array family for this problem (see above), widest
    first; empty without a problem (the family is fitted to one)."""
    tokens = group_tokens(problem, kernel)
    if not tokens:
        return ()
    ranked = sorted(ENUM_SWAP_PTR_ARRAY_TILE_N, key=lambda w: (padded_rows(tokens, w), -w))
    return tuple(sorted(ranked[:SWAP_PTR_ARRAY_WIDTHS], reverse=True))


def check_extra_tile_n(
    cfg: Sm90GemmConfig, check: Callable[[Sm90GemmConfig], CheckResult], out: Collector
) -> None:
    """Rule ``sm90.extra_tile_n``: the program instantiates the swap-AB kernel once per width (the ptr-array
    kernel, launched once per width, or the dense kernel, launched once per group), so mixed widths need a
    swap-AB grouped / MoE config, no width may repeat, and each must be a legal tile N of the same kernel
    by itself (``check`` is the model's rule walk)."""
    if not cfg.extra_tile_n:
        return
    if not out.require(
        cfg.swap_ab and (cfg.ptr_array or cfg.launch == "per_group"),
        "sm90.extra_tile_n",
        "extra_tile_n (mixed token-side widths) needs a swap-AB grouped_gemm / moe_gemm config, got "
        f"kernel={cfg.kernel}, launch={cfg.launch}, swap_ab={cfg.swap_ab}",
    ):
        return
    widths = cfg.token_widths
    if not out.require(
        len(set(widths)) == len(widths),
        "sm90.extra_tile_n",
        f"token-side widths {list(widths)} (tile N, then extra_tile_n) repeat a width",
    ):
        return
    for w in cfg.extra_tile_n:
        res = check(cfg.model_copy(update={"tile": (cfg.tile[0], w, cfg.tile[2]), "extra_tile_n": ()}))
        if not res.valid:
            out.fail(
                "sm90.extra_tile_n",
                f"token-side width {w} is not a legal tile N of this kernel: "
                + "; ".join(f"{v.rule}: {v.message}" for v in res.violations),
            )


def mixed_twins(
    cfg: Sm90GemmConfig,
    problem: dict[str, Any] | None,
    check: Callable[..., CheckResult],
    cost: Callable[[Sm90GemmConfig, dict[str, Any]], float],
) -> list[Sm90GemmConfig]:
    """The mixed-width twins of a swap-AB grouped config, one per number of widths (2 up to
    ``MAX_TOKEN_WIDTHS``): of the widths of ``MIXED_WIDTH_MENU`` that are legal tile Ns of its kernel, the
    set the model's ``cost`` estimates fastest among those that save enough rows (:func:`mixed_token_widths`).
    Every number of widths gets its twin because fewer widths pad more but pay fewer launch tails; the
    ranking and the measurement weigh the two.  Twins that break a rule are left out."""
    tokens = group_tokens(problem, cfg.kernel)
    if not tokens or problem is None:
        return []
    menu = tuple(
        w
        for w in MIXED_WIDTH_MENU
        if check(cfg.model_copy(update={"tile": (cfg.tile[0], w, cfg.tile[2])})).valid
    )

    def with_widths(widths: tuple[int, ...]) -> Sm90GemmConfig:
        return cfg.model_copy(
            update={"tile": (cfg.tile[0], widths[0], cfg.tile[2]), "extra_tile_n": widths[1:]}
        )

    min_saving = MIXED_MIN_PADDING_SAVING_PER_GROUP if cfg.launch == "per_group" else MIXED_MIN_PADDING_SAVING
    twins = []
    for size in range(2, MAX_TOKEN_WIDTHS + 1):
        widths = mixed_token_widths(tokens, menu, size, lambda c: cost(with_widths(c), problem), min_saving)
        if widths and check(with_widths(widths), problem).valid:
            twins.append(with_widths(widths))
    return twins
