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
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.hw_models.base import (
    bool_value,
    check_problem_dtype,
    choice,
    int_tuple,
    int_value,
    reject_unknown_fields,
)
from kernelpilot.hw_models.dtypes import DTypePair, parse_dtype
from kernelpilot.hw_models.problems import attention_dims
from kernelpilot.hw_models.sm90.gemm import round_up, swizzle_alignment
from kernelpilot.hw_models.types import CheckResult, Collector, TileConfig

FA_SCHEDULES = ("tma", "cooperative", "pingpong")
FA_FIELDS = (
    "kernel",
    "dtype",
    "tile",
    "schedule",
    "stages",
    "warpgroups",
    "blocks_per_sm",
    "splits",
    "longest_first",
    "lpt",
    "wg_locked",
    "exp2_emulation",
)
FA_DTYPES = ("bf16", "f16", "e4m3", "e5m2")
DEFAULT_KV_STAGES = 5
#: KernelTma (not warp-specialized) defaults to 4 K/V stages: collective/fmha_collective_tma.hpp:63
#: ``find_option_t<Tag::kStagesKV, Int<4>, Options...>``; the warp-specialized collective's default is 5
DEFAULT_KV_STAGES_TMA = 4
#: README.md:9-10: the forward kernel supports head dims 32/64/128/256 for 16-bit inputs and only 128/256
#: for fp8 (88_hopper_fmha.cu:1132-1139 compiles run_fwd_32/64 only ``#ifndef FP8``)
FP8_HEAD_DIMS = (128, 256)
NUM_MMA_WG = 2
#: kernel/fmha_kernel_tma_warpspecialized.hpp:284-366 dispatches Consumer0..Consumer3, and
#: ``Option<Tag::kNumMmaWarpGroups, Int<N>>`` (fmha_collective_tma_warpspecialized.hpp:76) sets N; one MMA
#: warpgroup is refused below: its register share (488) exceeds setmaxnreg's 256
FA_WARPGROUPS = (2, 3, 4)
SMEM_CAPACITY = 232448
#: shared memory of one SM (228 KB) and the 1 KB the driver reserves per resident block: several
#: KernelTma blocks share one SM only when blocks x (SharedStorage + 1 KB) fits
SM_SMEM_BYTES = 233472
SMEM_PER_BLOCK_RESERVED = 1024
#: largest accumulator footprint instantiated in 88_hopper_fmha.cu: fp8 coop 128x256x128 and 128x128x256
#: keep S + O = 192 fp32 registers per MMA thread (of the 240 they get); the other 48 hold addresses,
#: softmax state and the bf16 copy of P, so every register budget below keeps that much headroom
MAX_FA_ACC_REGISTERS = 192
FA_REGISTER_HEADROOM = 48
#: KernelTma: ``Option<Tag::kBlocksPerSM, Int<N>>`` (kernel/fmha_kernel_tma.hpp:51, default 2) is the
#: kernel's ``__launch_bounds__`` minimum blocks per SM, so it caps registers at 64K / (128 x N)
FA_TMA_BLOCKS_PER_SM = (1, 2, 3, 4)
DEFAULT_TMA_BLOCKS_PER_SM = 2
TMA_REGISTER_OVERHEAD = 58
#: split-KV (flash-decoding) chunk counts of the project's FMHA program (cpp_templates/cuda/fmha_sm90.cu.j2):
#: the K/V of each (batch, head) cut into this many chunks, each a "head" of the collective's grid, then a
#: combine kernel; decode only, no causal mask, and every chunk a multiple of 8 keys
FA_SPLITS = (2, 4, 8, 16)
#: exp2 emulation periods of the project's FMHA softmax (cpp_templates/cuda/fmha_sm90_kernel.j2, prelude): every
#: k-th score of a thread's row fragment (BlockKV / 4 scores: the WGMMA accumulator holds 2 of every 8
#: columns per thread) takes its exponential on the FMA pipe instead of MUFU.EX2
FA_EXP2_EMULATION = (2, 3, 4, 6, 8)
#: the head dims whose two GEMMs take no longer per score on the tensor cores (4 x HeadDim FLOP at 4096
#: dense 16-bit FLOP per SM cycle) than its exponential on MUFU (16 per SM cycle): 64 and below.  The space
#: enumerates exp2 emulation only there; the cost model keeps a factor table for them and one for wider heads
EXP2_EMULATION_MAX_HEAD_DIM = 64
#: grid y of the split program is batch x heads (CUDA's limit for gridDim.y)
MAX_GRID_Y = 65535
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
    #: MMA warpgroups of the warp-specialized kernels (0 = the collective's default, 2)
    warpgroups: int = 0
    #: KernelTma only: the launch bound's blocks per SM (0 = the kernel's default, 2)
    blocks_per_sm: int = 0
    #: split-KV chunks (0 = none): decode programs that leave SMs idle
    splits: int = 0
    #: causal, warp-specialized only: each head's Q tiles start from the last (longest) one, so the
    #: grid ends on short tiles instead of leaving SMs idle behind one long tile (the project's
    #: reversed tile scheduler in cpp_templates/cuda/fmha_sm90_kernel.j2)
    longest_first: bool = False
    #: causal, warp-specialized only: longest processing time first across every (batch, head): the grid
    #: runs each head's last Q tile, then each head's second-to-last, and so on, so the hardware's block
    #: dispatch is LPT list scheduling (``longest_first`` orders the tiles within each head only)
    lpt: bool = False
    #: warp-specialized only: the MMA warpgroups take turns on the softmax
    #: (``Option<Tag::kIsMainloopLocked, true_type>``, fmha_collective_tma_warpspecialized.hpp:463/519),
    #: so one warpgroup's GEMMs overlap another's exp/max work (FlashAttention-3's ping-pong)
    wg_locked: bool = False
    #: every k-th exponential of the softmax on the FMA pipe (0 = all on MUFU): at head dim 64 MUFU.EX2
    #: (16 per SM per cycle) takes as long per score as the two GEMMs, the balance FlashAttention-4 shifts
    #: on Blackwell by emulating part of them with a polynomial
    exp2_emulation: int = 0

    @property
    def mma_warpgroups(self) -> int:
        if self.schedule == "tma":
            return 1
        return self.warpgroups or NUM_MMA_WG

    @property
    def tma_blocks_per_sm(self) -> int:
        return self.blocks_per_sm or DEFAULT_TMA_BLOCKS_PER_SM

    def mma_register_limit(self) -> int:
        """Registers per MMA thread the kernel grants.

        Warp-specialized (kernel/fmha_kernel_tma_warpspecialized.hpp:134-136): MaxThreadsPerBlock =
        (N + 1) x 128, TotalRegisterSupply = (64K / threads / 8) x 8 x threads / 128, the load warpgroup
        keeps 24 and each of the N MMA warpgroups gets ((supply - 24) / N / 8) x 8 (setmaxnreg; 240 for
        N = 2, 160 for 3, 112 for 4).  KernelTma: 128 threads under ``__launch_bounds__(128, blocks)``,
        so 64K / (128 x blocks) rounded down to 8, at most 255."""
        if self.schedule == "tma":
            return min(255, (65536 // (128 * self.tma_blocks_per_sm)) // 8 * 8)
        n = self.mma_warpgroups
        threads = (n + 1) * 128
        supply = (65536 // threads // 8) * 8 * threads // 128
        return ((supply - 24) // n // 8) * 8

    def tma_registers(self) -> int:
        """Registers per thread of a KernelTma build: the S + O accumulators plus 58, capped by the launch
        bound (ptxas -v, nvcc 13.0: 154 for 64x128x64 at the default bound, and at blocks_per_sm=3)."""
        return min(self.mma_register_limit(), self.acc_registers() + TMA_REGISTER_OVERHEAD)

    def resident_blocks(self) -> int:
        """Blocks of this kernel one SM holds: by shared memory and, for KernelTma (128 threads), by the
        registers it uses (allocated in units of 8 per thread).  The launch bound is a minimum, not a cap:
        64x128x64 at the default bound of 2 already fits 3 blocks (154 registers, 74 KB)."""
        by_smem = max(1, SM_SMEM_BYTES // (self.smem_bytes() + SMEM_PER_BLOCK_RESERVED))
        if self.schedule == "tma":
            by_regs = 65536 // (round_up(self.tma_registers(), 8) * 128)
            return max(1, min(by_smem, by_regs))
        return 1

    @property
    def kv_stages(self) -> int:
        if self.stages:
            return self.stages
        return DEFAULT_KV_STAGES_TMA if self.schedule == "tma" else DEFAULT_KV_STAGES

    @property
    def rows_per_wg(self) -> int:
        return self.tile[0] // self.mma_warpgroups

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
            n = self.mma_warpgroups
            epi = n * epi_one
            tensors = round_up(mainloop, align) + epi if self.schedule == "pingpong" else max(mainloop, epi)
            # Q pipeline (N stages), reducer PipelineAsync<2>, OrderedSequenceBarrier<2,N>, load-warp barrier
            pipelines += 16 * n + 32 + 16 * n + 16
        return round_up(round_up(tensors, align) + pipelines, align)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "tile": list(self.tile),
            "schedule": self.schedule,
            "stages": self.stages,
        }
        # written only when set, so the configs (and cache keys) of the example's defaults stay as they were
        if self.warpgroups:
            out["warpgroups"] = self.warpgroups
        if self.blocks_per_sm:
            out["blocks_per_sm"] = self.blocks_per_sm
        if self.splits:
            out["splits"] = self.splits
        if self.longest_first:
            out["longest_first"] = True
        if self.lpt:
            out["lpt"] = True
        if self.wg_locked:
            out["wg_locked"] = True
        if self.exp2_emulation:
            out["exp2_emulation"] = self.exp2_emulation
        return out

    def label(self) -> str:
        sched = {"tma": "tma", "cooperative": "coop", "pingpong": "pp"}[self.schedule]
        st = f"_s{self.stages}" if self.stages else ""
        wg = f"_wg{self.warpgroups}" if self.warpgroups else ""
        bps = f"_b{self.blocks_per_sm}" if self.blocks_per_sm else ""
        sk = f"_sk{self.splits}" if self.splits else ""
        lf = ("_lf" if self.longest_first else "") + ("_lpt" if self.lpt else "")
        lk = "_lk" if self.wg_locked else ""
        ex = f"_ex{self.exp2_emulation}" if self.exp2_emulation else ""
        return f"{self.tile[0]}x{self.tile[1]}x{self.tile[2]}_{sched}{st}{wg}{bps}{sk}{lf}{lk}{ex}"


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
        warpgroups=int_value(raw.get("warpgroups", 0), where, "warpgroups", minimum=0),
        blocks_per_sm=int_value(raw.get("blocks_per_sm", 0), where, "blocks_per_sm", minimum=0),
        splits=int_value(raw.get("splits", 0), where, "splits", minimum=0),
        longest_first=bool_value(raw.get("longest_first", False), where, "longest_first"),
        lpt=bool_value(raw.get("lpt", False), where, "lpt"),
        wg_locked=bool_value(raw.get("wg_locked", False), where, "wg_locked"),
        exp2_emulation=int_value(raw.get("exp2_emulation", 0), where, "exp2_emulation", minimum=0),
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
        # the MMA warpgroup count is a warp-specialized option; KernelTma has one warpgroup
        out.require(
            cfg.warpgroups == 0,
            "sm90.fa.warpgroups",
            f"warpgroups={cfg.warpgroups}: KernelTma has one MMA warpgroup (leave warpgroups at 0)",
        )
        out.require(
            cfg.blocks_per_sm == 0 or cfg.blocks_per_sm in FA_TMA_BLOCKS_PER_SM,
            "sm90.fa.blocks_per_sm",
            f"blocks_per_sm={cfg.blocks_per_sm}: allowed {FA_TMA_BLOCKS_PER_SM} (0 = the default, 2)",
        )
    else:
        n = cfg.mma_warpgroups
        out.require(
            cfg.warpgroups == 0 or cfg.warpgroups in FA_WARPGROUPS,
            "sm90.fa.warpgroups",
            f"warpgroups={cfg.warpgroups}: the warp-specialized kernel dispatches {FA_WARPGROUPS} MMA "
            "warpgroups (0 = the default, 2)",
        )
        # kBlocksPerSM is read by KernelTma only (kernel/fmha_kernel_tma.hpp:51)
        out.require(
            cfg.blocks_per_sm == 0,
            "sm90.fa.blocks_per_sm",
            f"blocks_per_sm={cfg.blocks_per_sm}: only the KernelTma schedule takes it (one block per SM here)",
        )
        # TileShapeQK M = BlockQO / NumMmaWarpGroups must be a WGMMA M multiple (mma_sm90.hpp:370)
        out.require(
            qo % (64 * n) == 0,
            "sm90.fa.tile_q",
            f"BlockQO={qo} is not a multiple of 64*{n} (each of the {n} MMA warpgroups owns BlockQO/{n} rows)",
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
    limit = cfg.mma_register_limit()
    budget = min(MAX_FA_ACC_REGISTERS, limit - FA_REGISTER_HEADROOM)
    out.require(
        regs <= budget,
        "sm90.fa.acc_registers",
        f"S+O accumulators need {regs} fp32 registers per MMA thread (limit {budget} of the {limit} "
        f"this schedule grants): spills",
    )
    smem = cfg.smem_bytes()
    out.require(
        smem <= SMEM_CAPACITY,
        "sm90.fa.smem_capacity",
        f"Q + {cfg.kv_stages} K/V stages{' + epilogue' if cfg.schedule == 'pingpong' else ''} need ~{smem} B "
        f"> {SMEM_CAPACITY} B",
    )
    if cfg.schedule == "tma" and cfg.blocks_per_sm and smem <= SMEM_CAPACITY:
        # a launch bound above what shared memory lets reside only takes registers away
        fit = SM_SMEM_BYTES // (smem + SMEM_PER_BLOCK_RESERVED)
        out.require(
            cfg.blocks_per_sm <= fit,
            "sm90.fa.blocks_per_sm_smem",
            f"blocks_per_sm={cfg.blocks_per_sm} but only {fit} blocks of {smem} B shared memory fit one SM "
            f"({SM_SMEM_BYTES} B, {SMEM_PER_BLOCK_RESERVED} B reserved per block)",
        )
    if cfg.splits:
        out.require(
            cfg.splits in FA_SPLITS,
            "sm90.fa.splits",
            f"splits={cfg.splits}: split-KV takes {FA_SPLITS} chunks (0 = no split)",
        )
        out.require(
            cfg.kernel == "fa_decode",
            "sm90.fa.splits_kind",
            "split-KV is a decode program (fa_decode); prefill grids already fill the GPU",
        )
    if cfg.schedule == "tma":
        # KernelTma hard-codes IndividualTileScheduler (kernel/fmha_kernel_tma.hpp:56) and has one MMA
        # warpgroup, so neither the reversed tile order nor the warpgroup lock applies
        out.require(
            not cfg.longest_first,
            "sm90.fa.longest_first",
            "longest_first: the KernelTma schedule has a fixed tile scheduler; use cooperative or pingpong",
        )
        out.require(
            not cfg.lpt,
            "sm90.fa.lpt",
            "lpt: the KernelTma schedule has a fixed tile scheduler; use cooperative or pingpong",
        )
        out.require(
            not cfg.wg_locked,
            "sm90.fa.wg_locked",
            "wg_locked: the KernelTma schedule has one MMA warpgroup, nothing to take turns with",
        )
    if cfg.exp2_emulation:
        out.require(
            cfg.exp2_emulation in FA_EXP2_EMULATION,
            "sm90.fa.exp2_emulation",
            f"exp2_emulation={cfg.exp2_emulation}: every k-th exponential on the FMA pipe takes k in "
            f"{FA_EXP2_EMULATION} (0 = all on MUFU)",
        )
        # a thread's row fragment holds BlockKV / 4 scores; a longer period emulates none of them
        out.require(
            cfg.exp2_emulation <= kv // 4,
            "sm90.fa.exp2_emulation_period",
            f"exp2_emulation={cfg.exp2_emulation} but a thread holds {kv // 4} scores of a row (BlockKV={kv} / 4): "
            "no exponential would move to the FMA pipe",
        )
    out.require(
        not (cfg.lpt and cfg.longest_first),
        "sm90.fa.lpt_longest_first",
        "lpt and longest_first are two orders of the same Q tiles (across heads / within each head): set one",
    )
    if problem is not None and cfg.lpt:
        out.require(
            bool(problem.get("causal")),
            "sm90.fa.lpt_causal",
            "lpt needs a causal problem (without the mask every Q tile does the same work)",
        )
    if problem is not None and cfg.longest_first:
        # without the mask every Q tile sweeps the same K/V: the order changes nothing but the binary
        out.require(
            bool(problem.get("causal")),
            "sm90.fa.longest_first_causal",
            "longest_first needs a causal problem (without the mask every Q tile does the same work)",
        )
    if problem is not None and cfg.splits:
        b, h, _, kv_len = _program_rows(problem)
        if problem.get("causal"):
            out.fail("sm90.fa.splits_causal", "split-KV needs a problem without the causal mask")
        out.require(
            kv_len % (8 * cfg.splits) == 0,
            "sm90.fa.splits_divide",
            f"seq_kv={kv_len} is not a multiple of 8 x splits={cfg.splits} (every chunk holds the same "
            "number of keys, a multiple of 8: 16-byte TMA rows)",
        )
        out.require(
            b * h <= MAX_GRID_Y,
            "sm90.fa.splits_grid",
            f"batch x heads = {b * h} > {MAX_GRID_Y}: the split program's grid y",
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


def _program_rows(problem: dict[str, Any]) -> tuple[int, int, int, int]:
    """(batch, heads, query rows, kv length) the program runs: without a mask the G query heads of one
    kv head are packed into query rows (dsl_plugins/cuda/fmha.py ``program_dims``)."""
    dims = attention_dims(problem)
    g = max(1, dims["num_heads_q"] // max(1, dims.get("num_heads_kv") or dims["num_heads_q"]))
    if problem.get("causal") or g == 1:
        return dims["batch"], dims["num_heads_q"], dims["seq_qo"], dims["seq_kv"]
    return dims["batch"], dims["num_heads_q"] // g, g * dims["seq_qo"], dims["seq_kv"]
