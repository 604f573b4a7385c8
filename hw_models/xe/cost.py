"""Analytical cost model of sycl-tla kernels on Intel Xe: a tile-level roofline per work-group.

Same structure as the sm90 model (:mod:`kernelpilot.hw_models.sm90.cost`); useful for ranking, not exact.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.problems import attention_dims, batch, gemm_problems
from kernelpilot.hw_models.xe.launch import one_work_group_per_core

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
    per_core_flops = device.peak(cfg.dtype) * 1e12 / cores  # the rate of the DPAS that does the math

    # occupancy: work-groups per core limited by hardware threads in 256-GRF mode (32 per core); the
    # grouped and MoE schedulers launch exactly one work-group per Xe-core (see .launch)
    threads = XE_VE_PER_CORE * XE_THREADS_PER_VE_LARGE_GRF
    wgs_per_core = 1 if one_work_group_per_core(cfg.kernel) else max(1, threads // nsg)
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
    # register pressure (soft GRF model of xe/gemm.py): the repo's 512x256x32 / SG 8x4 (~24 KB) still runs
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
    # the persistent decode kernel launches exactly one work-group per Xe-core (see .launch)
    wgs_per_core = 1 if one_work_group_per_core(cfg.kernel, cfg.persistent) else max(1, threads // nsg)
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
