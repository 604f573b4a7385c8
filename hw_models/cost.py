"""Analytical cost models: rank legal configs for a problem.  Useful for ranking, not exact.

The model per target is a tile-level roofline:

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

from typing import TYPE_CHECKING, Any

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.problems import batch, gemm_problems

if TYPE_CHECKING:
    from kernelpilot.hw_models.sm90 import Sm90GemmConfig

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


def sm90_active_ctas(cores: int, cluster_size: int) -> int:
    """CTAs the persistent grid can keep resident: H200 measured 132 SMs for clusters of 1-2 and 120 for
    2x2 (max_active_clusters 30, docs/reference/sm90_h200_measurements.md#clusters-and-occupancy); larger clusters fragment GPCs further (estimate)."""
    if cluster_size <= 2:
        return cores - cores % cluster_size
    loss = {4: 12, 8: 20, 16: 36}.get(cluster_size, cores // 4)
    usable = max(cluster_size, cores - loss)
    return usable - usable % cluster_size


def sm90_time_s(cfg: Sm90GemmConfig, problem: dict[str, Any], device: Device) -> float:
    if cfg.swap_ab:  # the kernel runs D^T = B^T A^T: an N x M x K problem
        problem = {**problem, "M": problem["N"], "N": problem["M"]}
    tm, tn, tk = cfg.tile
    cm, cn = cfg.cluster
    bytes_a = cfg.dtype.bits_a / 8
    bytes_b = cfg.dtype.bits_b / 8
    out_bytes = 2.0
    dtype_key = cfg.dtype.a
    peak = device.peak(dtype_key) * 1e12
    cores = device.cores
    from kernelpilot.hw_models.sm90 import PTR_ARRAY_KERNELS, auto_stages

    stages = cfg.stages or auto_stages(cfg)
    eff = SM90_SCHEDULE_EFF[cfg.schedule] * (SM90_TM64_EFF if tm == 64 else 1.0)
    eff *= SM90_FEW_STAGES_EFF.get(stages, 1.0)
    if cfg.kernel in PTR_ARRAY_KERNELS and cfg.effective_epilogue() == "nosmem":
        eff *= SM90_PTR_ARRAY_NOSMEM_EFF
    per_sm_flops = peak / cores * eff
    per_sm_l2 = SM90_L2_BYTES_PER_S / cores
    ctas = sm90_active_ctas(cores, cm * cn)

    problems = list(gemm_problems(problem, cfg.kernel))
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
    return SM90_KERNEL_LAUNCH_S + max(total_compute_path, memory_path)


# ---- Intel Xe -------------------------------------------------------------------------------------
# Per Xe-core and clock.  XMX: Xe2 2048 / Xe-HPC 4096 dense 16-bit FLOP per clock are already in the
# catalogue's peak_tflops; the feed constants below are calibration targets (no Intel GPU measured).
XE_L1_BYTES_PER_CLK = 128.0  # block-2D loads into GRF from L1, per Xe-core
XE_L2_BYTES_PER_CLK = 64.0  # L2 -> Xe-core
XE_MAINLOOP_EFF = 0.80
XE_VE_PER_CORE = 8  # vector engines per Xe-core
XE_THREADS_PER_VE_LARGE_GRF = 4  # 8 threads per XVE, halved in 256-GRF mode (compat/util.hpp:876-912)
XE_TILE_OVERHEAD_S = 1.5e-6
XE_GRF_SOFT_LIMIT = 1.5 * 256 * 64
XE_STEP_OVERHEAD_CLK = 60.0  # split barrier + prefetch issue per K step of the mainloop (xe_mma.hpp:253-283)
XE_KERNEL_LAUNCH_S = 8.0e-6
XE_PER_CORE_DRAM_SHARE = 3.0


def _xe_clock_hz(device: Device) -> float:
    return (device.boost_clock_mhz or device.base_clock_mhz or 1500.0) * 1e6


def xe_gemm_time_s(cfg: Any, problem: dict[str, Any], device: Device) -> float:
    """Tile roofline for sycl-tla GEMMs: no SLM, every subgroup loads its own A/B slices from L1/L2."""
    wm, wn, wk = cfg.wg
    sg = cfg.effective_sg()
    nsg = sg[0] * sg[1] * sg[2]
    pm, pn = wm // sg[0], wn // sg[1]
    ba, bb = cfg.dtype.bits_a / 8, cfg.dtype.bits_b / 8
    out_bytes = 4.0
    clock = _xe_clock_hz(device)
    cores = device.cores
    per_core_flops = device.peak(cfg.dtype.a if cfg.dtype.a == cfg.dtype.b else "bf16") * 1e12 / cores

    # occupancy: work-groups per core limited by hardware threads in 256-GRF mode (32 per core)
    threads = XE_VE_PER_CORE * XE_THREADS_PER_VE_LARGE_GRF
    wgs_per_core = max(1, threads // nsg)
    resident = wgs_per_core * nsg
    # all 8 vector engines need a thread, and >= 2 threads per engine hide load latency
    busy = min(1.0, resident / XE_VE_PER_CORE) * (0.75 if resident < 2 * XE_VE_PER_CORE else 1.0)
    eff = XE_MAINLOOP_EFF * busy
    concurrent = cores * wgs_per_core

    # per K step of one work-group
    step_flops = 2.0 * wm * wn * wk
    l1_bytes = nsg * (pm * wk * ba + wk * pn * bb)  # every SG loads its own slices
    l2_bytes = wm * wk * ba + wn * wk * bb  # unique per WG (L1 catches SG duplicates)
    step = (
        max(
            step_flops / (per_core_flops / wgs_per_core * eff),
            l1_bytes / (XE_L1_BYTES_PER_CLK * clock / wgs_per_core),
            l2_bytes / (XE_L2_BYTES_PER_CLK * clock / wgs_per_core),
        )
        + XE_STEP_OVERHEAD_CLK / clock
    )
    step *= 8.0 / cfg.atom().m if cfg.atom().m < 8 else 1.0
    # register pressure (soft GRF model of xe.py): the repo's 512x256x32 / SG 8x4 (~24 KB) still runs
    # well, so only penalise beyond 1.5x the 16 KB large-GRF budget (spills go to scratch memory)
    regs = pm * pn * 4 + pm * wk * max(ba, 2) + wk * pn * max(bb, 2)
    if regs > XE_GRF_SOFT_LIMIT:
        step *= 1.0 + 2.0 * (regs - XE_GRF_SOFT_LIMIT) / XE_GRF_SOFT_LIMIT
    epilogue = wm * wn * out_bytes / (XE_L2_BYTES_PER_CLK * clock / wgs_per_core)
    nb = batch(problem)
    tiles_total = 0
    weighted_steps = 0.0
    unique = 0.0
    max_wg_bytes = 0.0
    for m, n, k in gemm_problems(problem, cfg.kernel):
        tiles = ceil_div(m, wm) * ceil_div(n, wn) * nb
        steps = ceil_div(k, wk)
        tiles_total += tiles
        weighted_steps += tiles * steps
        unique += nb * (m * k * ba + k * n * bb + m * n * out_bytes)
        max_wg_bytes = max(max_wg_bytes, steps * l2_bytes)
    if tiles_total == 0:
        return XE_KERNEL_LAUNCH_S
    mean_steps = weighted_steps / tiles_total
    if cfg.schedule in ("streamk", "splitk") and tiles_total < concurrent:
        per = ceil_div(int(weighted_steps), concurrent)
        compute = per * step + epilogue + XE_TILE_OVERHEAD_S + 2 * XE_TILE_OVERHEAD_S
        max_wg_bytes *= tiles_total / concurrent
    else:
        waves = ceil_div(tiles_total, concurrent)
        compute = waves * (mean_steps * step + epilogue + XE_TILE_OVERHEAD_S)
    bw = device.bandwidth_gbs() * 1e9
    memory = max(unique / bw, max_wg_bytes / (bw / cores * XE_PER_CORE_DRAM_SHARE / wgs_per_core))
    return XE_KERNEL_LAUNCH_S + max(compute, memory)


def xe_fa_time_s(cfg: Any, problem: dict[str, Any], device: Device) -> float:
    """Flash-attention forward: each work-group owns a (q x out_v) output tile of one head and streams
    the whole KV sequence in KV tiles (two GEMMs per tile plus softmax), roofline per work-group."""
    from kernelpilot.hw_models.problems import attention_dims

    dims = attention_dims(problem)
    q, kv, _ = cfg.qk
    ov = cfg.out[1]
    nsg = cfg.sg_qk[0] * cfg.sg_qk[1] * cfg.sg_qk[2]
    hq, hv = dims["head_dim_qk"], dims["head_dim_vo"]
    bytes_el = DTYPE_BITS_FA.get(cfg.dtype.a, 2)
    clock = _xe_clock_hz(device)
    cores = device.cores
    per_core_flops = device.peak("f16" if cfg.dtype.a not in ("bf16", "f16") else cfg.dtype.a) * 1e12 / cores
    threads = XE_VE_PER_CORE * XE_THREADS_PER_VE_LARGE_GRF
    wgs_per_core = max(1, threads // nsg)
    resident = wgs_per_core * nsg
    busy = min(1.0, resident / XE_VE_PER_CORE)
    eff = 0.6 * busy
    q_tiles = ceil_div(dims["seq_qo"], q)
    v_tiles = ceil_div(hv, ov)
    wgs = dims["batch"] * dims["num_heads_q"] * q_tiles * v_tiles
    kv_len = dims["seq_kv"]
    if problem.get("causal") and dims["seq_qo"] > 1:
        kv_len = max(kv, kv_len // 2)
    kv_steps = ceil_div(kv_len, kv)
    rows = min(q, dims["seq_qo"]) if cfg.kernel == "fa_decode" else q
    step_flops = 2.0 * rows * kv * hq + 2.0 * rows * kv * ov
    step_flops_padded = 2.0 * q * kv * hq + 2.0 * q * kv * ov
    step_bytes = kv * (hq + ov) * bytes_el
    step = max(
        step_flops_padded / (per_core_flops / wgs_per_core * eff),
        step_bytes / (XE_L2_BYTES_PER_CLK * clock / wgs_per_core),
    )
    concurrent = cores * wgs_per_core
    if cfg.persistent:
        # dynamic split over KV: all cores share the KV sweep (max 8 partitions, xe_fmha_fwd_kernel.hpp:371)
        split = max(1, min(8, concurrent // max(1, wgs)))
        compute = ceil_div(wgs * split, concurrent) * (ceil_div(kv_steps, split) * step + XE_TILE_OVERHEAD_S)
    else:
        compute = ceil_div(wgs, concurrent) * (kv_steps * step + XE_TILE_OVERHEAD_S)
    kv_heads = dims["batch"] * dims["num_heads_kv"]
    unique = (
        kv_heads * dims["seq_kv"] * (hq + hv) * bytes_el
        + 2 * dims["batch"] * dims["num_heads_q"] * dims["seq_qo"] * (hq + hv) * bytes_el
    )
    memory = unique / (device.bandwidth_gbs() * 1e9)
    del step_flops
    return XE_KERNEL_LAUNCH_S + max(compute, memory)


DTYPE_BITS_FA = {"bf16": 2, "f16": 2, "e4m3": 1, "e5m2": 1}
