"""Hopper FMHA (CUTLASS ``examples/88_hopper_fmha``, forward) tunables and rules for the sm90 target.

Config: ``tile: [BlockQO, BlockKV, HeadDim]``, ``schedule`` (``tma`` = KernelTma, not warp-specialized;
``cooperative``; ``pingpong`` = cooperative + persistent + Q loaded separately,
fmha_kernel_builder.hpp:134-156), ``stages`` (K/V pipeline stages, 0 = the default: 5, or 4 for ``tma``).  The same
binary serves prefill and decode (decode is a shape regime), so both kinds share this model.

Sources (NVIDIA/cutlass 7107b05535f8977f5ecb9d01ee203205b1fd9bc4, ``examples/88_hopper_fmha/``):

* collective/fmha_collective_tma_warpspecialized.hpp:73-82: NumMmaWarpGroups 2, StageCount (KV) 5,
  StageCountQ = NumMmaWarpGroups, ``static_assert(StagesQ >= NumMmaWarpGroups)``,
  ``static_assert(Stages >= 2)``; :88-110 TileShapeQK = (BlockQO / NumMmaWarpGroups, BlockKV, Head),
  TileShapePV = (BlockQO / NumMmaWarpGroups, Head, BlockKV), both built with the sm90 GEMM
  CollectiveBuilder (so the WGMMA tile rules apply to both GEMMs); :131-137 SharedStorage = Q stages +
  union(K, V) stages.
* kernel/fmha_kernel_tma_warpspecialized.hpp:73-80: persistent kernels (pingpong) keep the epilogue
  storage next to the mainloop's, non-persistent ones in a union; :128-133 the MMA warpgroups get
  240 registers per thread.
* 88_hopper_fmha.cu:911-1035: instantiated forward configs (the evidence for the register limit).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from kernelpilot.errors import InputError, NoLibraryDefaultError
from kernelpilot.hw_models.base import (
    ceil_div,
    check_problem_dtype,
    choice,
    int_tuple,
    int_value,
    reject_unknown_fields,
)
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.dtypes import DTypePair, parse_dtype
from kernelpilot.hw_models.problems import attention_dims
from kernelpilot.hw_models.sm90.gemm import round_up, swizzle_alignment
from kernelpilot.hw_models.types import CheckResult, Collector, TileConfig

FA_SCHEDULES = ("tma", "cooperative", "pingpong")
FA_FIELDS = ("kernel", "dtype", "tile", "schedule", "stages")
FA_DTYPES = ("bf16", "f16", "e4m3", "e5m2")
DEFAULT_KV_STAGES = 5
#: KernelTma (not warp-specialized) defaults to 4 K/V stages: collective/fmha_collective_tma.hpp:63
#: ``find_option_t<Tag::kStagesKV, Int<4>, Options...>``; the warp-specialized collective's default is 5
DEFAULT_KV_STAGES_TMA = 4
#: README.md:9-10: the forward kernel supports head dims 32/64/128/256 for 16-bit inputs and only 128/256
#: for fp8 (88_hopper_fmha.cu:1132-1139 compiles run_fwd_32/64 only ``#ifndef FP8``)
FP8_HEAD_DIMS = (128, 256)
NUM_MMA_WG = 2
SMEM_CAPACITY = 232448
#: largest accumulator footprint instantiated in 88_hopper_fmha.cu: fp8 coop 128x256x128 and 128x128x256
#: keep S + O = 192 fp32 registers per MMA thread (of the 240 they get)
MAX_FA_ACC_REGISTERS = 192
INSTANTIATED_HEAD_DIMS = (32, 64, 128, 256)
#: seconds per attention score per CTA for the softmax (fit to the H200 d64/d128 measurements)
FA_SOFTMAX_S_PER_SCORE = {"tma": 1.2e-10, "cooperative": 1.0e-10, "pingpong": 0.9e-10}


class Sm90FmhaConfig(TileConfig):
    """One compile-time Hopper FMHA forward configuration."""

    kernel: str = "fa_prefill"
    dtype: DTypePair
    tile: tuple[int, int, int]
    schedule: str = "cooperative"
    stages: int = 0

    @property
    def kv_stages(self) -> int:
        if self.stages:
            return self.stages
        return DEFAULT_KV_STAGES_TMA if self.schedule == "tma" else DEFAULT_KV_STAGES

    @property
    def rows_per_wg(self) -> int:
        return self.tile[0] // NUM_MMA_WG if self.schedule != "tma" else self.tile[0]

    def acc_registers(self) -> int:
        """fp32 S (rows x BlockKV) + O (rows x Head) accumulators per MMA thread (128 per warpgroup)."""
        rows = self.rows_per_wg
        return rows * self.tile[1] // 128 + rows * self.tile[2] // 128

    def epilogue_storage(self) -> tuple[int, int, int]:
        """(sizeof, alignment, StagesC) of one FmhaFwdEpilogue TensorStorage: the sm90 TMA epilogue
        (TmaWarpSpecialized, EpilogueTileAuto) built over one warpgroup's O tile (rows, HeadDim)
        (collective/fmha_epilogue.hpp:45-75).  Same layout rules as the GEMM epilogue (sm90/gemm.py)."""
        d = self.tile[2]
        bits = self.dtype.bits_a
        n_perf = 64 if bits == 8 and d % 64 == 0 else 32  # sm90_builder.inl:124
        epi_m, epi_n = min(64, self.rows_per_wg), math.gcd(min(n_perf, d), d)
        epi_tiles = (self.rows_per_wg // epi_m) * (d // epi_n)
        align = swizzle_alignment(epi_n * bits // 8)
        size = round_up(min(epi_tiles, 2) * epi_m * epi_n * bits // 8 + 1, align)  # + empty fusion storage
        return size, align, min(epi_tiles, 4)

    def smem_bytes(self) -> int:
        """sizeof(Kernel::SharedStorage), matched to the H200 runs (benchmarks/results/cuda_kinds_h200.json).

        Mainloop SharedStorage (fmha_collective_tma*.hpp:115-137): Q (StagesQ x BlockQO/StagesQ rows =
        BlockQO x HeadDim) + K/V stages in a union.  Warp-specialized kernel
        (kernel/fmha_kernel_tma_warpspecialized.hpp:73-100): tensors = {mainloop; epilogue[2]} for the
        persistent pingpong, a union otherwise, then the K/V, Q (2 stages) and reducer (2) pipelines, the
        math warp-group order barrier <2,2>, the load-warp barrier and the epilogue load pipeline (StagesC).
        KernelTma (kernel/fmha_kernel_tma.hpp:70-83): union {mainloop; epilogue}, K/V + Q (1 stage)
        pipelines and the epilogue load pipeline.  The epilogue's 512-byte swizzle alignment rounds it all."""
        qo, kv, d = self.tile
        bits = self.dtype.bits_a
        mainloop = (qo * d + self.kv_stages * kv * d) * bits // 8
        epi_one, align, stages_c = self.epilogue_storage()
        pipelines = 16 * self.kv_stages + round_up(16 * stages_c, 16)
        if self.schedule == "tma":
            tensors = max(mainloop, epi_one)
            pipelines += 16  # Q pipeline, 1 stage
        else:
            epi = NUM_MMA_WG * epi_one
            tensors = round_up(mainloop, align) + epi if self.schedule == "pingpong" else max(mainloop, epi)
            # Q pipeline (2 stages), reducer PipelineAsync<2>, OrderedSequenceBarrier<2,2>, load-warp barrier
            pipelines += 32 + 32 + 32 + 16
        return round_up(round_up(tensors, align) + pipelines, align)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "tile": list(self.tile),
            "schedule": self.schedule,
            "stages": self.stages,
        }

    def label(self) -> str:
        sched = {"tma": "tma", "cooperative": "coop", "pingpong": "pp"}[self.schedule]
        st = f"_s{self.stages}" if self.stages else ""
        return f"{self.tile[0]}x{self.tile[1]}x{self.tile[2]}_{sched}{st}"


def parse_fmha(raw: dict[str, Any], kernel: str, where: str) -> Sm90FmhaConfig:
    reject_unknown_fields(raw, FA_FIELDS, where)
    if "tile" not in raw:
        raise InputError(f"{where}: missing field 'tile' ([BlockQO, BlockKV, HeadDim])", field="tile")
    return Sm90FmhaConfig(
        kernel=kernel,
        dtype=parse_dtype(raw.get("dtype", "bf16"), where),
        tile=int_tuple(raw["tile"], where, "tile", 3),  # type: ignore[arg-type]
        schedule=choice(raw.get("schedule", "cooperative"), FA_SCHEDULES, where, "schedule"),
        stages=int_value(raw.get("stages", 0), where, "stages", minimum=0),
    )


def check_fmha(cfg: Sm90FmhaConfig, problem: dict[str, Any] | None) -> CheckResult:
    out = Collector()
    qo, kv, d = cfg.tile
    a, b = cfg.dtype.a, cfg.dtype.b
    out.require(
        a == b and a in FA_DTYPES,
        "sm90.fa.dtype",
        f"Hopper FMHA takes one element type out of {', '.join(FA_DTYPES)}, got {cfg.dtype.label()}",
    )
    kstep = 256 // cfg.dtype.max_bits  # WGMMA K: 16 (16-bit), 32 (8-bit)
    if cfg.schedule == "tma":
        # KernelTma: one warpgroup owns the whole Q tile, and the P@V step feeds the QK accumulator
        # back as the A operand, which needs exactly one WGMMA atom (M = 64) along M:
        # static_assert(size<1>(layout_qk_input) == 1) in examples/88_hopper_fmha/collective/
        # fmha_collective_tma.hpp:410 (CUTLASS v4.2.0). BlockQO=128 fails that assert (seen on an H200
        # build of 128x64x64_tma, benchmarks/results/confirm_h200_run_kinds.json).
        out.require(qo == 64, "sm90.fa.tile_q", f"BlockQO={qo}: the KernelTma schedule takes BlockQO=64 only")
    else:
        # TileShapeQK M = BlockQO / NumMmaWarpGroups must be a WGMMA M multiple (mma_sm90.hpp:370)
        out.require(
            qo % (64 * NUM_MMA_WG) == 0,
            "sm90.fa.tile_q",
            f"BlockQO={qo} is not a multiple of 64*{NUM_MMA_WG} (each of the {NUM_MMA_WG} MMA warpgroups owns BlockQO/2 rows)",
        )
    # QK GEMM: N = BlockKV (multiple of 8, <= 256); PV GEMM: K = BlockKV (multiple of the WGMMA K)
    out.require(
        kv % kstep == 0 and 16 <= kv <= 256,
        "sm90.fa.tile_kv",
        f"BlockKV={kv} must be a multiple of {kstep} in 16..256 (QK N and PV K, mma_sm90.hpp:378/525)",
    )
    # QK GEMM: K = head dim; PV GEMM: N = head dim (multiple of 8, <= 256)
    out.require(
        d % kstep == 0 and d <= 256,
        "sm90.fa.head_dim",
        f"HeadDim={d} must be a multiple of {kstep} and <= 256 (QK K and PV N)",
    )
    if cfg.dtype.max_bits == 8 and d % kstep == 0:
        out.require(
            d in FP8_HEAD_DIMS,
            "sm90.fa.head_dim",
            f"fp8 HeadDim={d}: the Hopper FMHA forward supports fp8 only with head dims "
            f"{FP8_HEAD_DIMS} (88_hopper_fmha README.md:9-10)",
        )
    if d not in INSTANTIATED_HEAD_DIMS:
        out.warn(
            "sm90.fa.head_dim_untested",
            f"head dim {d}: 88_hopper_fmha.cu instantiates {INSTANTIATED_HEAD_DIMS}",
        )
    # fmha_collective_tma_warpspecialized.hpp:82 static_assert(Stages >= 2)
    out.require(cfg.kv_stages >= 2, "sm90.fa.stages", f"K/V stages={cfg.kv_stages}: at least 2 are required")
    regs = cfg.acc_registers()
    out.require(
        regs <= MAX_FA_ACC_REGISTERS,
        "sm90.fa.acc_registers",
        f"S+O accumulators need {regs} fp32 registers per MMA thread (limit {MAX_FA_ACC_REGISTERS} of 240): spills",
    )
    smem = cfg.smem_bytes()
    out.require(
        smem <= SMEM_CAPACITY,
        "sm90.fa.smem_capacity",
        f"Q + {cfg.kv_stages} K/V stages{' + epilogue' if cfg.schedule == 'pingpong' else ''} need ~{smem} B "
        f"> {SMEM_CAPACITY} B",
    )
    if problem is not None:
        check_problem_dtype(cfg.dtype, problem, out, "sm90")
        dims = attention_dims(problem)
        if dims["head_dim_qk"] != dims["head_dim_vo"]:
            out.fail("sm90.fa.head_dim_split", "the Hopper FMHA example needs head_dim_qk == head_dim_vo")
        if dims["head_dim_qk"] != d:
            out.fail(
                "sm90.fa.head_dim_mismatch", f"tile head dim {d} != problem head_dim {dims['head_dim_qk']}"
            )
        el = 128 // cfg.dtype.bits_a
        out.require(
            dims["head_dim_qk"] % el == 0,
            "sm90.alignment",
            f"head_dim={dims['head_dim_qk']} is not a multiple of {el} elements (16-byte TMA rows)",
        )
    return out.result()


def enumerate_fmha(kernel: str, pair: DTypePair, problem: dict[str, Any] | None) -> Iterator[Sm90FmhaConfig]:
    heads = (attention_dims(problem)["head_dim_qk"],) if problem else INSTANTIATED_HEAD_DIMS
    for d in heads:
        for schedule in FA_SCHEDULES:
            qos = (64,) if schedule == "tma" else (128, 256)
            for qo in qos:
                for kv in (64, 128, 256):
                    cfg = Sm90FmhaConfig(kernel=kernel, dtype=pair, tile=(qo, kv, d), schedule=schedule)
                    if check_fmha(cfg, problem).valid:
                        yield cfg


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
    cands = [
        {"tile": (qo, kv * 2, d)},
        {"tile": (qo, kv // 2, d)},
        {"tile": (qo * 2, kv, d)},
        {"tile": (qo // 2, kv, d)},
        {"stages": max(2, cfg.kv_stages - 1)},
        {"stages": cfg.kv_stages + 1},
    ] + [{"schedule": s} for s in FA_SCHEDULES if s != cfg.schedule]
    seen = {cfg}
    for change in cands:
        new = cfg.model_copy(update=change)
        if new in seen or min(new.tile) < 1:
            continue
        seen.add(new)
        if check_fmha(new, None).valid:
            out.append(new)
    return out


def fmha_time_s(cfg: Sm90FmhaConfig, problem: dict[str, Any], device: Device) -> float:
    """CTA-level roofline: grid = batch x heads x ceil(seq_q / BlockQO); each CTA sweeps the KV sequence."""
    dims = attention_dims(problem)
    qo, kv, d = cfg.tile
    el = cfg.dtype.bits_a / 8
    cores = device.cores
    eff = {"tma": 0.55, "cooperative": 0.72, "pingpong": 0.68}[cfg.schedule]
    ctas_per_sm = (
        2 if cfg.schedule == "tma" else 1
    )  # kBlocksPerSM default 2 for KernelTma (fmha_kernel_tma.hpp)
    per_cta_flops = device.peak(cfg.dtype.a) * 1e12 / cores / ctas_per_sm * eff
    q_tiles = ceil_div(dims["seq_qo"], qo)
    ctas = dims["batch"] * dims["num_heads_q"] * q_tiles
    kv_len = dims["seq_kv"]
    if problem.get("causal") and dims["seq_qo"] > 1:
        kv_len = max(kv, (kv_len + qo) // 2)
    steps = ceil_div(kv_len, kv)
    # each KV step costs the larger of the two GEMMs and the softmax over the qo x kv scores (exp, max,
    # rescale on the CUDA cores); at small head dims the softmax dominates (measured d64: 341-476 TFLOP/s
    # against 683 at d128, docs/reference/sm90_h200_measurements.md#hopper-fmha-example-88)
    softmax = qo * kv * FA_SOFTMAX_S_PER_SCORE[cfg.schedule]
    step = max(2.0 * qo * kv * 2 * d / per_cta_flops, softmax)
    waves = ceil_div(ctas, cores * ctas_per_sm)
    compute = waves * (steps * step + 2e-6)
    kv_bytes = dims["batch"] * dims["num_heads_kv"] * dims["seq_kv"] * 2 * d * el
    q_bytes = 2 * dims["batch"] * dims["num_heads_q"] * dims["seq_qo"] * d * el
    memory = (kv_bytes + q_bytes) / (device.bandwidth_gbs() * 1e9)
    # few CTAs (decode): each streams its KV at a bounded per-SM rate
    per_sm_bw = device.bandwidth_gbs() * 1e9 / cores * 3.0
    memory = max(memory, steps * kv * 2 * d * el / per_sm_bw)
    return 5e-6 + max(compute, memory)
