"""Analytical cost model of CUTLASS sm90a GEMMs: rank legal configs for a problem.  Useful for ranking,
not exact.

The model (the Xe one in :mod:`kernelpilot.hw_models.xe.cost` has the same structure) is a tile-level
roofline:

* **per-tile mainloop**: each K step costs ``max(compute, operand feed)``; compute is the tile's
  FLOPs at the core's share of the device's peak (times a schedule efficiency), the feed is the
  bytes of the A and B slices over the core's share of on-chip (L2) bandwidth.  Larger tiles reuse
  operands more (fewer bytes per FLOP), clusters multicast A/B (each CTA fetches 1/CN of A and 1/CM
  of B from L2);
* **wave quantization**: tiles run in ``ceil(tiles / concurrent CTAs)`` waves; a ragged edge tile
  costs a full tile (tile efficiency on the edges falls out of this);
* **memory roofline**: the unique bytes at the device bandwidth, and no CTA can pull more than a
  few times its fair share of DRAM bandwidth (small-M GEMMs with few tiles are latency-bound);
* fixed per-tile costs: epilogue (hidden by ping-pong), pipeline fill, non-persistent launch.

All constants are named at the top and meant to be recalibrated from measurements (the tuner's
results store); the defaults reproduce the ordering of the H200 measurements in
docs/reference/sm90_h200_measurements.md#dense-gemm-timings (128x256 coop 2x1 > 128x128 pingpong > 128x128 coop > ws >
64x256 pingpong).
"""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.problems import batch, gemm_problems
from kernelpilot.hw_models.sm90.gemm import PTR_ARRAY_KERNELS, Sm90GemmConfig, auto_stages
from kernelpilot.hw_models.sm90.token_widths import groups_by_width, width_for_tokens

# ---- sm90 constants (calibration targets) --------------------------------------------------------
SM90_L2_BYTES_PER_S = 8.7e12  # aggregate L2 -> SM operand bandwidth seen by GEMM mainloops (fit, H200)
SM90_MULTICAST_GAIN = 0.35  # share of the ideal 1/C multicast saving that materialises (fit: 1x2 vs 1x1)
SM90_SCHEDULE_EFF = {"cooperative": 0.72, "pingpong": 0.72, "ws": 0.70}
SM90_FEW_STAGES_EFF = {2: 0.88, 3: 0.95}  # too few stages expose load latency
SM90_TM64_EFF = 0.70  # a 64-row tile keeps one WGMMA M atom per warpgroup (measured 64x256 pp: 376 TF)
SM90_PER_SM_DRAM_SHARE = 3.0  # one SM can draw ~3x its fair share of DRAM bandwidth
SM90_TILE_OVERHEAD_S = 1.2e-6  # prologue + pipeline fill per tile (persistent)
SM90_LAUNCH_TILE_OVERHEAD_S = 2.0e-6  # non-persistent ws: CTA launch + fill per tile
SM90_KERNEL_LAUNCH_S = 4.0e-6
SM90_STREAMK_FIXUP_S = 3.0e-6
SM90_STORE_BYTES_PER_S_PER_SM = 80.0e9  # epilogue store rate per SM (unhidden for coop / ws)
# Skinny GEMMs (M <= 64; benchmarks/results/gemm_h200_skinny_run.json + the ground truth): a K step of the
# mainloop never took less than ~0.2 us (64x16/64x32/64x64 pingpong: 200/248/222 ns per step whatever the
# bytes), WGMMA with N < 64 runs at the N=64 instruction rate, and split-K / stream-K on a grid smaller
# than the SM count ran ~2.4x slower per K step than its compute estimate (128x128 coop split-K 4 on
# M=16: 0.93 us per step; partial-tile fixups through the workspace serialize the splits).
SM90_MIN_STEP_S = 0.2e-6
SM90_MIN_WGMMA_N = 64
SM90_SPLIT_STEP_PENALTY = 2.4
# ptr-array (grouped / MoE) kernels with the NoSmem epilogue: their TMA-epilogue twins were 2.7-20.8 %
# faster on the H200 although nosmem gets one more mainloop stage (benchmarks/results/
# cuda_kinds_h200_grouped_rerun.json, 128x256x64 c1x1/c2x1 on two workloads; geometric mean 1.117x)
SM90_PTR_ARRAY_NOSMEM_EFF = 1.0 / 1.117
# A persistent ptr-array launch's ramp and drain beyond its waves.  Run as separate per-width launches, a
# single-width config's groups took 1.036x, 1.107x and 1.045x its one launch over all groups on the three
# short-K MoE rows, where the wave count alone gives 1.011x, 1.081x and 1.008x: 6, 10 and 19 us per extra
# launch (H100, benchmarks/results/mixed_width_probe_h100_call.json).  Every launch pays it, so a mixed-width
# config pays it once per width.
SM90_PTR_ARRAY_RAMP_S = 10.0e-6
# Per-group launches back to back on one stream: each dense launch drains its last wave before the next
# one fills the SMs.  The two-stream twin of the same tile, which overlaps them, ran 1.006-1.118x faster:
# 1-24 us per group, median 10 us, over nine pairs on Llama-3-8B MLP up and Mixtral-8x7B down (H100,
# search-time medians in benchmarks/results/kinds_t6_h100_grouped_run_kinds.json and
# kinds_t7_h100_pgswap_run_kinds.json).  Without it the one-stream estimate, a sum of stream-K estimates
# that spread each last wave evenly, came within 1 % of the two-stream one.
SM90_SERIAL_LAUNCH_RAMP_S = 10.0e-6


def sm90_active_ctas(cores: int, cluster_size: int) -> int:
    """CTAs the persistent grid can keep resident: H200 measured 132 SMs for clusters of 1-2 and 120 for
    2x2 (max_active_clusters 30, docs/reference/sm90_h200_measurements.md#clusters-and-occupancy); larger clusters fragment GPCs further (estimate)."""
    if cluster_size <= 2:
        return cores - cores % cluster_size
    loss = {4: 12, 8: 20, 16: 36}.get(cluster_size, cores // 4)
    usable = max(cluster_size, cores - loss)
    return usable - usable % cluster_size


def _sum_over_widths(cfg: Sm90GemmConfig, groups: list[list[int]], dtype: Any, device: Device) -> float:
    """A mixed-width config as its widths' launches, summed: each the same config with one width (the tile
    N) over the groups that width pads least (``launch`` and ``streams`` kept, so the caller's launch
    prices each part)."""
    return sum(
        sm90_time_s(
            cfg.model_copy(
                update={"kernel": "grouped_gemm", "tile": (cfg.tile[0], w, cfg.tile[2]), "extra_tile_n": ()}
            ),
            {"groups": width_groups, "dtype": dtype},
            device,
        )
        for w, width_groups in groups_by_width(groups, cfg.token_widths).items()
    )


def sm90_time_s(cfg: Sm90GemmConfig, problem: dict[str, Any], device: Device) -> float:
    if cfg.launch == "per_group" and cfg.kernel in PTR_ARRAY_KERNELS and cfg.streams > 1:
        # one dense launch per group over several streams: a group's last partial wave shares the SMs
        # with the next group's first tiles, so the tiles of all groups fill waves together, as one grid
        # over them would (the grouped estimate of the same tile less the ptr-array launch's ramp; with
        # the nosmem epilogue it keeps the grouped kernel's factor, an over-estimate), and every launch
        # pays its own launch cost
        groups = [[m, n, k] for m, n, k in gemm_problems(problem, cfg.kernel) if m > 0]
        if cfg.extra_tile_n:
            # mixed token-side widths: each width's groups as one grid of that width's tile, summed (an
            # over-estimate by up to one partial wave per further width with the persistent scheduler:
            # the streams also overlap the widths' last waves)
            return _sum_over_widths(cfg, groups, problem.get("dtype"), device)
        shared = cfg.model_copy(update={"kernel": "grouped_gemm", "launch": "grouped", "streams": 1})
        one_grid = sm90_time_s(shared, {"groups": groups, "dtype": problem.get("dtype")}, device)
        return one_grid - SM90_PTR_ARRAY_RAMP_S + (len(groups) - 1) * SM90_KERNEL_LAUNCH_S
    if cfg.launch == "per_group" and cfg.kernel in PTR_ARRAY_KERNELS:
        # one dense launch per group, back to back on one stream: the sum of the dense estimates, each
        # launch paying its ramp and drain; with mixed token-side widths each group's launch has the tile
        # of the width that pads its tokens least
        dense = cfg.model_copy(update={"kernel": "gemm", "launch": "grouped", "extra_tile_n": ()})
        return sum(
            sm90_time_s(
                dense.model_copy(
                    update={"tile": (cfg.tile[0], width_for_tokens(m, cfg.token_widths), cfg.tile[2])}
                ),
                {"M": m, "N": n, "K": k, "dtype": problem.get("dtype")},
                device,
            )
            + SM90_SERIAL_LAUNCH_RAMP_S
            for m, n, k in gemm_problems(problem, cfg.kernel)
            if m > 0
        )
    if cfg.extra_tile_n and cfg.kernel in PTR_ARRAY_KERNELS:
        # mixed token-side widths: one ptr-array launch per width over the groups it pads least, back to
        # back on one stream (each launch pays its own launch and last-wave tail)
        groups = [[m, n, k] for m, n, k in gemm_problems(problem, cfg.kernel) if m > 0]
        return _sum_over_widths(cfg, groups, problem.get("dtype"), device)
    if cfg.swap_ab and cfg.kernel not in PTR_ARRAY_KERNELS:  # the kernel runs D^T = B^T A^T: N x M x K
        problem = {**problem, "M": problem["N"], "N": problem["M"]}
    tm, tn, tk = cfg.tile
    cm, cn = cfg.cluster
    bytes_a = cfg.dtype.bits_a / 8
    bytes_b = cfg.dtype.bits_b / 8
    out_bytes = 2.0
    dtype_key = cfg.dtype.a
    peak = device.peak(dtype_key) * 1e12
    cores = device.cores
    stages = cfg.stages or auto_stages(cfg)
    eff = SM90_SCHEDULE_EFF[cfg.schedule] * (SM90_TM64_EFF if tm == 64 else 1.0)
    eff *= SM90_FEW_STAGES_EFF.get(stages, 1.0)
    if cfg.ptr_array and cfg.effective_epilogue() == "nosmem":
        eff *= SM90_PTR_ARRAY_NOSMEM_EFF
    per_sm_flops = peak / cores * eff
    per_sm_l2 = SM90_L2_BYTES_PER_S / cores
    ctas = sm90_active_ctas(cores, cm * cn)

    problems = list(gemm_problems(problem, cfg.kernel))
    if cfg.swap_ab and cfg.kernel in PTR_ARRAY_KERNELS:  # every group runs as N x M x K (tokens along N)
        problems = [(n, m, k) for m, n, k in problems]
    # per K-step of one tile
    step_compute = 2.0 * tm * max(tn, SM90_MIN_WGMMA_N) * tk / per_sm_flops
    # A is multicast across the CN CTAs of a cluster row, B across the CM CTAs of a column; TMA does
    # not fetch the rows of A past M (they are zero-filled), which matters when M < tile M
    share_a = 1.0 - SM90_MULTICAST_GAIN * (1.0 - 1.0 / cn)
    share_b = 1.0 - SM90_MULTICAST_GAIN * (1.0 - 1.0 / cm)
    rows_a = min(tm, max((m for m, _, _ in problems), default=tm))
    step_bytes = rows_a * tk * bytes_a * share_a + tn * tk * bytes_b * share_b
    step_feed = step_bytes / per_sm_l2
    step = max(step_compute, step_feed, SM90_MIN_STEP_S)
    epilogue = tm * tn * out_bytes / SM90_STORE_BYTES_PER_S_PER_SM
    if cfg.schedule == "pingpong":
        epilogue *= 0.15  # the other warpgroup's mainloop hides the epilogue
    per_tile_fixed = SM90_LAUNCH_TILE_OVERHEAD_S if cfg.schedule == "ws" else SM90_TILE_OVERHEAD_S

    nb = batch(problem)
    total_compute_path = 0.0
    unique_bytes = 0.0
    max_cta_bytes = 0.0
    work: list[tuple[int, int]] = []  # (tiles, k_steps) per GEMM
    for m, n, k in problems:
        # the grid is a whole number of clusters: a cluster wider than the tile grid runs empty CTAs
        tiles = ceil_div(ceil_div(m, tm), cm) * cm * ceil_div(ceil_div(n, tn), cn) * cn * nb
        ksteps = ceil_div(k, tk)
        work.append((tiles, ksteps))
        unique_bytes += nb * (m * k * bytes_a + k * n * bytes_b + m * n * out_bytes)
        max_cta_bytes = max(max_cta_bytes, ksteps * tk * (tm * bytes_a + tn * bytes_b))
    if cfg.tile_scheduler == "streamk":
        units = sum(t * s for t, s in work)
        per_cta_units = ceil_div(units, ctas)
        total_tiles = sum(t for t, _ in work)
        split = units > 0 and total_tiles < ctas
        split_step = step * SM90_SPLIT_STEP_PENALTY if split else step
        total_compute_path = per_cta_units * split_step + ceil_div(total_tiles, ctas) * (
            epilogue + per_tile_fixed
        )
        if split:
            total_compute_path += SM90_STREAMK_FIXUP_S
        max_cta_bytes = max_cta_bytes * min(1.0, total_tiles / ctas) if split else max_cta_bytes
    else:
        # grouped GEMM tiles of all groups share one persistent grid
        total_tiles = sum(t for t, _ in work)
        mean_steps = sum(t * s for t, s in work) / max(1, total_tiles)
        waves = ceil_div(total_tiles, ctas)
        total_compute_path = waves * (mean_steps * step + epilogue + per_tile_fixed)
    per_sm_dram = device.bandwidth_gbs() * 1e9 / cores * SM90_PER_SM_DRAM_SHARE
    memory_path = max(unique_bytes / (device.bandwidth_gbs() * 1e9), max_cta_bytes / per_sm_dram)
    # the fused launch (the dense kernel's body over every group) has no ptr-array ramp
    launch = SM90_KERNEL_LAUNCH_S + (SM90_PTR_ARRAY_RAMP_S if cfg.ptr_array else 0.0)
    return launch + max(total_compute_path, memory_path)
