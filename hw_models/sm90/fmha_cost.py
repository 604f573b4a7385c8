"""Cost model of the Hopper FMHA (:mod:`.fmha`): a per-SM estimate for ranking legal configs, calibrated
to the recorded H200 runs.  Useful for ranking, not exact."""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.sm90.fmha import Sm90FmhaConfig, _program_rows

#: replicate-Q and combine launches of a split-KV program (each a small kernel after/before the FMHA)
FA_SPLIT_LAUNCH_S = 2.5e-6

#: Calibration of :func:`fmha_time_s` to the H200 runs of the recorded FMHA configs
#: (tests/data/records/cuda_kinds_h200.json; d64 and d128, prefill and decode):
#: SM-wide softmax cost per attention score (ps): FA_SOFTMAX_PS + FA_RESCALE_PS x HeadDim / BlockKV (the
#: O rescale per KV step); causal d64 coop 128x64 ran 105 ps/score and d128 coop 128x64 136 ps/score
FA_SOFTMAX_PS = 73.5
FA_RESCALE_PS = 31.5
#: fraction of the dense bf16 peak the two GEMMs reach (d128 coop 128x128: 119 ps/score at 512 FLOP)
FA_MMA_EFFICIENCY = 0.57
#: one warpgroup's dependent chain per KV step (QK GEMM, softmax, PV GEMM) per score of its rows, and
#: for KernelTma (loads issued from the MMA warpgroup itself) the load latency it exposes.  Fit to the
#: runs: d64 decode tma 64x128 (3 blocks/SM: a full wave bandwidth-bound, then 116 CTAs alone on their
#: SMs at chain speed); d64 decode coop 128x64: 0.84 us per step; d128 decode tma 64x128 (1 block/SM,
#: bandwidth-bound at 1.92 us per step); d64 prefill tma 64x128 (throughput-bound)
FA_CHAIN_PS = {"tma": 150.0, "ws": 205.0}
FA_TMA_LOAD_LATENCY_S = {"hbm": 0.6e-6, "l2": 0.2e-6}
#: schedule factors on the softmax-bound time: the persistent pingpong ran 5-8 % slower than cooperative
#: on causal prefill (d64 and d128, tests/data/records/cuda_kinds_h200.json) but 8 % faster without a
#: mask (d64 b4 h32 8192, docs/reference/sm90_h200_measurements.md); three MMA warpgroups (64 rows each)
#: are not measured yet: the same as two
FA_SCHEDULE_FACTOR = {"tma": 1.0, "cooperative": 1.0, "pingpong": 1.06}
FA_PINGPONG_NOMASK_FACTOR = 0.92


def fmha_time_s(cfg: Sm90FmhaConfig, problem: dict[str, Any], device: Device) -> float:
    """Per-SM model: every resident CTA sweeps its KV sequence in steps of BlockKV; an SM-step costs the
    largest of (a) the SM-wide softmax / MMA throughput over its scores, (b) the CTA's dependent chain
    divided by the CTAs resident on the SM, (c) its K/V bytes at the SM's share of HBM bandwidth (decode:
    each CTA streams its own K/V; prefill re-reads K/V from L2).  Waves of CTAs are quantized."""
    b, h, rows, kv_len = _program_rows(problem)
    qo, kv, d = cfg.tile
    el = cfg.dtype.bits_a / 8
    cores = device.cores
    causal = bool(problem.get("causal")) and rows > 1
    q_tiles = ceil_div(rows, qo)
    splits = max(1, cfg.splits)
    extra = 0.0
    if cfg.splits:
        # each chunk is a CTA of kv_len / splits keys; then replicate Q and combine the partial O / LSE
        el_b = cfg.dtype.bits_a / 8
        partial = b * h * splits * rows * d * (2 * el_b + 4 / d)
        extra = 2 * FA_SPLIT_LAUNCH_S + partial / (device.bandwidth_gbs() * 1e9 * 0.5)
        kv_len //= splits
    ctas = b * h * q_tiles * splits
    resident = cfg.resident_blocks()
    # average KV steps per CTA (causal: the diagonal half plus the masked diagonal tile)
    steps = ceil_div(kv_len, kv) if not causal else ceil_div(kv_len, kv) / 2 + qo / (2 * kv)
    scores = qo * kv
    peak_sm = device.peak(cfg.dtype.a) * 1e12 / cores
    mma_s = 4.0 * d / (peak_sm * FA_MMA_EFFICIENCY)
    factor = FA_SCHEDULE_FACTOR[cfg.schedule]
    if cfg.schedule == "pingpong" and not causal:
        factor = FA_PINGPONG_NOMASK_FACTOR
    softmax_s = (FA_SOFTMAX_PS + FA_RESCALE_PS * d / kv) * 1e-12 * factor
    regs = cfg.acc_registers()
    spill = 1.0 + max(0.0, (regs - 128) / 64) * 0.45  # d128 coop 256x64 (192 acc registers) ran 1.45x slower
    throughput = scores * max(mma_s, softmax_s) * spill
    streamed = rows <= 64 and not causal  # decode: K/V from HBM, once per CTA
    tma = cfg.schedule == "tma"
    chain = (scores / cfg.mma_warpgroups) * FA_CHAIN_PS["tma" if tma else "ws"] * 1e-12 * spill
    if tma:
        chain += FA_TMA_LOAD_LATENCY_S["hbm" if streamed else "l2"]
    bw_sm = device.bandwidth_gbs() * 1e9 * 0.92 / cores
    memory = 2 * kv * d * el / bw_sm if streamed else 0.0
    # waves: the CTAs resident on an SM share its throughput and bandwidth, a CTA never runs faster than
    # its own chain; a partial last wave runs with fewer CTAs per SM
    total, left = 4e-6, ctas
    while left > 0:
        wave = min(left, cores * resident)
        per_sm = ceil_div(wave, cores)
        step = max(throughput * per_sm, chain, memory * per_sm)
        total += steps * step + 1e-6
        left -= wave
    return total + extra
