"""Cost model of the Hopper FMHA (:mod:`.fmha`): a per-SM estimate for ranking legal configs, calibrated
to the recorded H200 runs.  Useful for ranking, not exact."""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.base import ceil_div
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.sm90.fmha import EXP2_EMULATION_MAX_HEAD_DIM, Sm90FmhaConfig, _program_rows
from kernelpilot.hw_models.sm90.fmha_dispatch import dispatch_overrun

#: the combine launch of a split-KV program (a small kernel after the FMHA; its launch overlaps the FMHA's
#: tail, but the combine itself runs after it)
FA_SPLIT_LAUNCH_S = 2.5e-6

#: Calibration of :func:`fmha_time_s` to the H200 runs of the recorded FMHA configs
#: (tests/data/records/cuda_kinds_h200.json and attention_h200_run_kinds.json; d64 and d128, prefill
#: and decode, 22 configs): SM-wide softmax cost per attention score (ps): FA_SOFTMAX_PS +
#: FA_RESCALE_PS x HeadDim / BlockKV (the O rescale per KV step); causal d64 ran about 95 ps/score with
#: 64-key steps and 80 with 128-key steps
FA_SOFTMAX_PS = 70.0
FA_RESCALE_PS = 30.0
#: fraction of the dense bf16 peak the two GEMMs reach (d128 coop 128x128: 119 ps/score at 512 FLOP)
FA_MMA_EFFICIENCY = 0.75
#: one warpgroup's dependent chain per KV step (QK GEMM, softmax, PV GEMM): a fixed part plus a cost per
#: score of its rows, and for KernelTma (loads issued from the MMA warpgroup itself) the load latency it
#: exposes.  Fit to the runs: d64 decode coop 128x64 and 128x128 (0.84 and 1.29 us per step, one block
#: per SM, four waves); d64 decode tma 64x128 (3 blocks/SM: a full wave bandwidth-bound, then 116 CTAs
#: alone on their SMs at chain speed); d128 decode tma 64x128 (bandwidth-bound at 1.92 us per step);
#: d64 prefill tma 64x128 with 6 stages (2 blocks/SM, chain-bound at 1.64 us per step)
FA_CHAIN_PS = {"tma": 176.0, "ws": 110.0}
FA_CHAIN_FIXED_S = {"tma": 0.0, "ws": 0.39e-6}
FA_TMA_LOAD_LATENCY_S = {"hbm": 0.4e-6, "l2": 0.2e-6}
#: an SM streams at most this multiple of its even share of HBM bandwidth when few SMs are busy
#: (d128 decode, 32 CTAs: 1.49 us per 64 KB step, chain-bound)
FA_SM_BANDWIDTH_BURST = 3.0
#: schedule factors on the softmax-bound time: the persistent pingpong ran 5-8 % slower than cooperative
#: on causal prefill (d64 and d128, tests/data/records/cuda_kinds_h200.json) but 8 % faster without a
#: mask (d64 b4 h32 8192, docs/reference/sm90_h200_measurements.md); with three MMA warpgroups the
#: pingpong ran 1.64x the cooperative's time (causal d64 192x128x64: 2305 against 1404 us)
FA_SCHEDULE_FACTOR = {"tma": 1.0, "cooperative": 1.0, "pingpong": 1.06}
FA_PINGPONG_NOMASK_FACTOR = 0.92
FA_PINGPONG_WIDE_FACTOR = 1.64
#: causal grids in the natural order end on each head's longest Q tile: the last of them runs while
#: other SMs idle; launching the longest tiles first (``longest_first``) leaves short ones for the end.
#: Share of one longest tile's sweep lost, fit to the library-default H200 run, where longest_first was
#: 0.6 / 0.5 / 1.0 % faster than the plain tile on the Qwen3-32B / gpt-oss-20b / Gemma-3 prefills in the
#: same confirmation rounds (benchmarks/results/kinds_default_h200_attention_run_kinds.json; the first
#: prior, 0.5, predicted 1.5 / 1.5 / 10.6 %)
FA_CAUSAL_TAIL_FRACTION = 0.15
#: the warpgroup lock (``wg_locked``) on the softmax-bound part: FlashAttention-3 (Shah et al. 2024,
#: section 3.1) reports gains from warpgroup ping-pong, but with example 88's collective the lock measured
#: no gain on the H200 (0.7-0.9 % slower with it, same run): no predicted effect
FA_WG_LOCK_SOFTMAX_FACTOR = 1.0
#: exp2 emulation (``exp2_emulation`` = k: every k-th exponential on the FMA pipe) on the softmax-bound
#: part, per period, at head dims up to EXP2_EMULATION_MAX_HEAD_DIM (where MUFU shares the bound with the
#: tensor cores) and above; a period without a measurement has no predicted effect.  Measured on an H100
#: (benchmarks/results/fmha_exp2_ab_h100.json, medians of 5 alternating rounds): slower at every period, the
#: inverse of the whole-program speedup (hd64: the mean of the two tiles where both ran)
FA_EXP2_EMULATION_SOFTMAX_FACTOR: dict[int, float] = {8: 1.017, 4: 1.065, 3: 1.075, 2: 1.177}
FA_EXP2_EMULATION_WIDE_HEAD_FACTOR: dict[int, float] = {4: 1.008}


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
        # each chunk is a CTA of kv_len / splits keys reading Q in place; then combine the partial O / LSE
        el_b = cfg.dtype.bits_a / 8
        partial = b * h * splits * rows * d * (2 * el_b + 4 / d)
        extra = FA_SPLIT_LAUNCH_S + partial / (device.bandwidth_gbs() * 1e9 * 0.5)
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
    if cfg.schedule == "pingpong" and cfg.mma_warpgroups > 2:
        factor = FA_PINGPONG_WIDE_FACTOR
    softmax_s = (FA_SOFTMAX_PS + FA_RESCALE_PS * d / kv) * 1e-12 * factor
    if cfg.wg_locked:
        softmax_s *= FA_WG_LOCK_SOFTMAX_FACTOR
    if cfg.exp2_emulation:
        wide = d > EXP2_EMULATION_MAX_HEAD_DIM
        table = FA_EXP2_EMULATION_WIDE_HEAD_FACTOR if wide else FA_EXP2_EMULATION_SOFTMAX_FACTOR
        softmax_s *= table.get(cfg.exp2_emulation, 1.0)
    regs = cfg.acc_registers()
    spill = 1.0 + max(0.0, (regs - 128) / 64) * 0.45  # d128 coop 256x64 (192 acc registers) ran 1.45x slower
    throughput = scores * max(mma_s, softmax_s) * spill
    streamed = rows <= 64 and not causal  # decode: K/V from HBM, once per CTA
    tma = cfg.schedule == "tma"
    kind = "tma" if tma else "ws"
    chain = FA_CHAIN_FIXED_S[kind] + (scores / cfg.mma_warpgroups) * FA_CHAIN_PS[kind] * 1e-12 * spill
    if tma:
        chain += FA_TMA_LOAD_LATENCY_S["hbm" if streamed else "l2"]
    bandwidth = device.bandwidth_gbs() * 1e9 * 0.92
    step_bytes = 2 * kv * d * el if streamed else 0.0
    # waves: the CTAs resident on an SM share its throughput and bandwidth, a CTA never runs faster than
    # its own chain; a partial last wave runs with fewer CTAs per SM
    total, left = 4e-6, ctas
    while left > 0:
        wave = min(left, cores * resident)
        per_sm = ceil_div(wave, cores)
        busy = min(cores, wave)
        bw_sm = min(bandwidth / busy, FA_SM_BANDWIDTH_BURST * bandwidth / cores)
        step = max(throughput * per_sm, chain, step_bytes * per_sm / bw_sm)
        total += steps * step + 1e-6
        left -= wave
    if causal and not (cfg.longest_first or cfg.lpt):
        # the last, longest tile sweeps all of K/V at one CTA's speed on its SM
        total += FA_CAUSAL_TAIL_FRACTION * ceil_div(kv_len, kv) * max(throughput, chain)
    if causal and cfg.lpt:
        # longest first across all heads: the simulated dispatch's idle end against longest_first's, on
        # which the estimate above is fit (hw_models/sm90/fmha_dispatch.py)
        slots = cores * resident
        total *= dispatch_overrun("lpt", b * h, qo, kv, rows, slots) / dispatch_overrun(
            "longest_first", b * h, qo, kv, rows, slots
        )
    return total + extra
