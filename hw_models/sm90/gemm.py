"""NVIDIA Hopper (sm90a) constraint model for CUTLASS 3.x/4.x warp-specialized GEMMs.

Scope: kernels built with ``CollectiveBuilder<arch::Sm90, OpClassTensorOp, ...>`` on the TMA
warp-specialized ("SS") path: dense GEMM (``gemm``) and ptr-array grouped GEMM (``grouped_gemm``).
Every rule cites NVIDIA/cutlass at commit 7107b05535f8977f5ecb9d01ee203205b1fd9bc4 (``file:line``
or the static_assert text, which is stable across 3.5-4.x) or the H200 measurements in
``docs/reference/sm90_h200_measurements.md`` (section names below).  The compiler is a slow and
incomplete checker (12-62 s per rejection, and two illegal classes are not rejected at all: a
ping-pong mainloop with a cooperative TMA epilogue gives wrong results, and >128 fp32 accumulator
registers per thread spill and run ~15x slower), so everything is checked here before a build.

Compile-time config (one build each): tile, cluster, schedule, epilogue, stages, tile_scheduler.
Run-time knobs (raster order, swizzle, split/stream-K splits and mode) are not part of the config;
the tuner varies them without rebuilding.
"""

from __future__ import annotations

import math
from typing import Any

from kernelpilot.hw_models.base import (
    ceil_div,
)
from kernelpilot.hw_models.dtypes import DTypePair
from kernelpilot.hw_models.sm90.token_widths import swap_token_tile_ns
from kernelpilot.hw_models.types import TileConfig

#: include/cutlass/gemm/collective/builders/sm90_common.inl:57 ``sm90_smem_capacity_bytes = 232448``
SMEM_CAPACITY = 232448
#: sizeof(PipelineTmaAsync<1>::SharedStorage): full + empty barrier, 8 B each (sm90_gmma_builder.inl:72)
PIPELINE_BYTES_PER_STAGE = 16
#: ptr-array kernels: 2 TMA descriptors (128 B each) + PipelineAsyncSharedStorage<8> (sm90_gmma_builder.inl:268-272)
GROUPED_CARVEOUT = 2 * 128 + 8 * 16
#: ptr-array kernels keep 8 scheduler responses (sm90_gemm_array_tma_warpspecialized_cooperative.hpp:160,198) of
#: PersistentTileSchedulerSm90Group::WorkTileInfo (4 x int32, sm90_tile_scheduler_group.hpp:65-69)
PTR_ARRAY_SCHEDULER_STAGES = 8
PTR_ARRAY_RESPONSE_BYTES = 16
#: cute::TmaDescriptor; ptr-array epilogues keep one for C and NumEpilogueWarpGroups = 2 for D
#: (sm90_epilogue_array_tma_warpspecialized.hpp:243-246, epilogue/dispatch_policy.hpp:59-60)
TMA_DESCRIPTOR_BYTES = 128
PTR_ARRAY_EPILOGUE_TENSORMAPS = (1 + 2) * TMA_DESCRIPTOR_BYTES
#: fp32 accumulator registers per MMA thread above which ptxas spills (ptxas -v of the GEMM and ptr-array
#: programs: 192 compile without spills, 224 and 256 spill; docs/reference/sm90_h200_measurements.md#accumulator-register-spills)
MAX_ACC_REGISTERS = 192

SCHEDULES = ("cooperative", "pingpong", "ws")
EPILOGUES = ("tma", "nosmem", "tma_coop", "tma_ws")
TILE_SCHEDULERS = ("persistent", "streamk")
GEMM_KERNELS = ("gemm", "grouped_gemm", "moe_gemm")
PTR_ARRAY_KERNELS = ("grouped_gemm", "moe_gemm")  # moe_gemm runs the ptr-array grouped GEMM over experts
FA_KERNELS = ("fa_prefill", "fa_decode")
KERNELS = GEMM_KERNELS + FA_KERNELS
SUPPORTED_DTYPES = ("bf16", "f16", "tf32", "f32", "e4m3", "e5m2", "s8", "u8")
FIELDS = (
    "kernel",
    "dtype",
    "tile",
    "cluster",
    "schedule",
    "epilogue",
    "stages",
    "tile_scheduler",
    "swap_ab",
    "launch",
    "extra_tile_n",
    "streams",
)
#: how a grouped / MoE config runs its groups: ``grouped`` = one ptr-array grouped GEMM over all groups
#: (examples/57_hopper_grouped_gemm); ``per_group`` = the dense sm90 GEMM kernel of the config launched
#: once per group on one stream (what a ``torch.mm`` loop does with cuBLAS), which brings the dense
#: kernel's stream-K scheduler and its efficiency on large GEMMs to few large groups; ``fused`` = the dense
#: kernel's collectives over every group in one persistent launch, each group's TMA descriptors built on the
#: host and passed in the kernel parameters (cpp_templates/cuda/fused_groups_gemm_sm90.hpp): no per-group
#: launch ramp and none of the ptr-array kernel's descriptor rewrites
LAUNCHES = ("grouped", "per_group", "fused")
#: the most non-empty groups a ``fused`` launch takes: its kernel parameters hold every group's mainloop and
#: epilogue parameters (640 + 768 bytes for the bf16 TMA kernels, nvcc 13.0 / CUTLASS 4.2), and kernel
#: parameters are limited to 32764 bytes; the program static_asserts the sum
FUSED_MAX_GROUPS = 16
#: streams a per-group launch spreads its groups over, round robin: with 2, a group's last partial wave
#: shares the SMs with the next group's first tiles (the groups are independent), which one stream (a
#: ``torch.mm`` loop) leaves idle
GROUP_STREAMS = (1, 2)
#: per-group launches: the dense kernel's tiles and schedules the per-group family enumerates (the dense
#: GEMM's level-1 tiles at 128+ rows, where its recorded H200 runs reached cuBLAS on large shapes, and the
#: 192-wide tiles: 256x192 cooperative and 128x192 ping-pong hold the most accumulators ptxas keeps in
#: registers, so they read the fewest operand bytes per FLOP of any legal tile)
ENUM_PER_GROUP_TILE_M = (128, 256)
#: whether the space enumerates the fused launch (the per-group family's cooperative tiles in one launch)
ENUM_FUSED = False
ENUM_PER_GROUP_TILE_N = (128, 192, 256)

# Candidate axes for enumeration.  Tiles are the products of the generator's WGMMA shapes
# (64, {64,128,256}, k) with its SM90_MMA_MULTIPLIERS ({1,2,4}, {1,2}, {4,8})
# (python/cutlass_library/sm90_shapes.py, sm90_utils.py generate_tile_descriptions_sm90), i.e.
# TM in {64,128,256}, TN in {64,128,256}, TK = 4 or 8 WGMMA K steps.  Clusters: the generator's
# SM90_CLUSTER_SIZES levels 0-3 with at most 4 CTAs ((1,2),(2,1),(1,1),(2,2)); 1x4/4x1 and larger
# are legal (check() accepts them) but lose SMs on H200 (docs/reference/sm90_h200_measurements.md#clusters-and-occupancy) and are left to neighbours().
# The non-persistent ``ws`` schedule is a baseline: it is enumerated with the generator's default
# K multiplier (4 WGMMA K steps) and without 2x2 clusters, which keeps the bf16 space near 100 builds.
ENUM_TILE_M = (64, 128, 256)
ENUM_TILE_N = (64, 128, 256)
ENUM_K_STEPS = (4, 8)
# Skinny (decode) GEMMs: with M <= 64 the grid has only ceil(N / TN) tiles along N, so 64x64 tiles leave
# half of the H200's 132 SMs idle on (16, 4096, 14336) (64 CTAs; measured 0.66x cuBLAS).  Narrower N tiles
# (WGMMA N = 16 / 32 are native shapes, mma_sm90.hpp) give 128-256 CTAs that all stream the weights.
ENUM_TILE_N_SKINNY = (16, 32)
SKINNY_M_MAX = 64
# Swap-AB (the kernel computes D^T = B^T A^T, CUTLASS's and cuBLAS's answer to tiny M): the small M
# becomes the tile's N side, so a 16-row problem fills a 16-wide WGMMA instead of a quarter of a 64-row
# one, and the weight matrix is streamed along the wide M' = N side.  Enumerated for M <= 32, where the
# 64-row WGMMA wastes at least half of every tile (measured: 16x4096x14336 stayed at 0.64x cuBLAS with
# every non-swapped tile, benchmarks/results/gemm_h200_final.json).
SWAP_AB_M_MAX = 32
ENUM_SWAP_TILE_M = (64, 128)
ENUM_SWAP_TILE_N = (16, 32, 64)
ENUM_CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
# Ptr-array (grouped / MoE) kernels also enumerate 192-wide tiles: 64x192x16 is a native WGMMA shape
# (the bf16/f16 ss_op_selector picks it for Tile_N % 192 == 0, include/cute/arch/mma_sm90.hpp:1352 at
# NVIDIA/cutlass v4.2.0; the generator lists it, python/cutlass_library/sm90_shapes.py:112, level 3).  A
# grouped problem's N is fixed by the model (Mixtral/Llama 14336, gpt-oss 5760, DeepSeek-V2-Lite 2816,
# Phi-3-medium qkv 7680) and 192 covers several of them with fewer ragged columns or waves than 128/256.
# The same legality rules apply: cooperative needs TM % 128 (sm90_gemm_array_tma_warpspecialized_
# cooperative.hpp:427), and the accumulator limit (192 fp32 registers per thread) admits 128x192 and
# 256x192 cooperative and 64x192 and 128x192 ping-pong.  Dense GEMMs keep the generator's level-1 tiles,
# over which their recorded H200 runs and replays were made.
ENUM_TILE_N_PTR_ARRAY = (192,)
# The WGMMA N shapes CUTLASS's ss_op_selector picks from by default (include/cute/arch/mma_sm90.hpp,
# 16-bit inputs: the largest of these dividing the tile's N); the other multiples of 8 up to 248 exist
# only with CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED (mma_sm90_gmma_ext.hpp).  Without it a 208-wide tile
# compiles to thirteen 64x16 WGMMAs per K step (seen in ptxas's kernel name): the program defines it
# for the swap-AB grouped family, whose widths are all extended shapes.
BASE_WGMMA_N = (256, 192, 128, 96, 64, 32, 16, 8)


def wgmma_k(dtype: DTypePair) -> int:
    """WGMMA K per instruction: 32 bytes of K (mma_sm90.hpp:378 16-bit, :533 8-bit; tf32 8)."""
    return 256 // dtype.max_bits


def problem_m(problem: dict[str, Any] | None) -> int:
    """The problem's M, 0 when unknown (no problem given)."""
    return int((problem or {}).get("M", 0) or 0)


def enum_tile_n(kernel: str, problem: dict[str, Any] | None) -> tuple[int, ...]:
    """Tile N candidates: the generator's (64, 128, 256), plus 16 / 32 for a plain GEMM whose M fits one
    64-row tile (the only way such a problem gets enough CTAs without splitting K), plus 192 for the
    ptr-array kernels (``ENUM_TILE_N_PTR_ARRAY``)."""
    if kernel == "gemm" and 0 < problem_m(problem) <= SKINNY_M_MAX:
        return ENUM_TILE_N_SKINNY + ENUM_TILE_N
    if kernel in PTR_ARRAY_KERNELS:
        return ENUM_TILE_N + ENUM_TILE_N_PTR_ARRAY
    return ENUM_TILE_N


#: a family's schedules with the tile scheduler each runs with: ``(schedule, tile_scheduler)`` pairs
Family = tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[str, str], ...], bool, str]


def enum_families(kernel: str, pair: DTypePair, problem: dict[str, Any] | None) -> list[Family]:
    """``(tile Ms, tile Ns, (schedule, tile scheduler) pairs, swap_ab, launch)`` of each family the space
    enumerates: the generator's tiles; for a tiny-M 16-bit GEMM the swap-AB family, whose tile M (64/128)
    runs along the problem's N and whose tile N is one of the two smallest WGMMA N in (16, 32, 64) that
    hold M; for grouped / MoE problems the per-group launch family (the dense kernel's large tiles,
    cooperative persistent or stream-K, and ping-pong) and the swap-AB grouped family, whose token-side
    tile N is fitted to the groups' token counts (:func:`swap_token_tile_ns`), launched as one ptr-array
    kernel or as the dense kernel once per group."""
    schedules = ("cooperative", "pingpong") if kernel in PTR_ARRAY_KERNELS else SCHEDULES
    persistent = tuple((s, "persistent") for s in schedules)
    families: list[Family] = [(ENUM_TILE_M, enum_tile_n(kernel, problem), persistent, False, "grouped")]
    m = problem_m(problem)
    if kernel == "gemm" and 0 < m <= SWAP_AB_M_MAX and pair.max_bits == 16:
        swap_ns = tuple(t for t in ENUM_SWAP_TILE_N if t >= m)[:2]
        swap = (("cooperative", "persistent"), ("pingpong", "persistent"))
        families.append((ENUM_SWAP_TILE_M, swap_ns, swap, True, "grouped"))
    if kernel in PTR_ARRAY_KERNELS:
        per_group = (("cooperative", "persistent"), ("cooperative", "streamk"), ("pingpong", "persistent"))
        families.append((ENUM_PER_GROUP_TILE_M, ENUM_PER_GROUP_TILE_N, per_group, False, "per_group"))
        if ENUM_FUSED:  # the per-group family's tiles, cooperative, in one launch over every group
            families.append((ENUM_PER_GROUP_TILE_M, ENUM_PER_GROUP_TILE_N, per_group[:1], False, "fused"))
        token_ns = swap_token_tile_ns(problem, kernel)
        if token_ns:
            families.append((ENUM_TILE_M, token_ns, persistent, True, "grouped"))
            # the same token-side widths on the dense kernel, once per group: the ptr-array kernel lost
            # 12-15 % per 128x256 tile on a few large groups (benchmarks/results/grouped_vs_dense_h100.json);
            # with the swap tiles the two launches ran within 1-2 % per tile, the per-group one the confirmed
            # winner on Mixtral-8x7B down (benchmarks/results/kinds_t7_h100_pgswap_call.json, H100)
            families.append((ENUM_PER_GROUP_TILE_M, token_ns, per_group, True, "per_group"))
    return families


class Sm90GemmConfig(TileConfig):
    """One compile-time CUTLASS sm90 GEMM configuration."""

    kernel: str = "gemm"
    dtype: DTypePair
    tile: tuple[int, int, int]
    cluster: tuple[int, int] = (1, 1)
    schedule: str = "cooperative"
    epilogue: str = "tma"
    stages: int = 0
    tile_scheduler: str = "persistent"
    #: compute D^T = B^T A^T: the tile's M runs along the problem's N and its N along the problem's M
    swap_ab: bool = False
    #: grouped / MoE only: ``grouped`` (one ptr-array kernel) or ``per_group`` (one dense launch per group)
    launch: str = "grouped"
    #: per-group launch only: streams its groups run on, round robin (:data:`GROUP_STREAMS`)
    streams: int = 1
    #: swap-AB grouped / MoE only: further token-side widths; each group runs with whichever of ``tile[1]``
    #: and these pads its tokens least (:func:`width_for_tokens`): one ptr-array launch per width, or with
    #: ``launch: per_group`` each group's dense launch with its width's kernel
    extra_tile_n: tuple[int, ...] = ()

    @property
    def token_widths(self) -> tuple[int, ...]:
        """Every token-side width of the config: the tile's N, then ``extra_tile_n``."""
        return (self.tile[1], *self.extra_tile_n)

    @property
    def ptr_array(self) -> bool:
        """The CUTLASS ptr-array grouped kernel: a grouped / MoE config launched as one grouped GEMM."""
        return self.kernel in PTR_ARRAY_KERNELS and self.launch == "grouped"

    def as_dict(self) -> dict[str, Any]:
        d = {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "tile": list(self.tile),
            "cluster": list(self.cluster),
            "schedule": self.schedule,
            "epilogue": self.epilogue,
            "stages": self.stages,
            "tile_scheduler": self.tile_scheduler,
        }
        if self.swap_ab:  # only when set: keys (store, build cache) of unswapped configs stay as recorded
            d["swap_ab"] = True
        if self.launch != "grouped":  # likewise: grouped configs keep their recorded keys
            d["launch"] = self.launch
        if self.extra_tile_n:  # likewise
            d["extra_tile_n"] = list(self.extra_tile_n)
        if self.streams != 1:  # likewise
            d["streams"] = self.streams
        return d

    def label(self) -> str:
        sched = {"cooperative": "coop", "pingpong": "pp", "ws": "ws"}[self.schedule]
        parts = [
            f"{self.tile[0]}x{self.tile[1]}x{self.tile[2]}",
            f"c{self.cluster[0]}x{self.cluster[1]}",
            sched,
        ]
        if self.epilogue != "tma":
            parts.append(self.epilogue)
        if self.stages:
            parts.append(f"s{self.stages}")
        if self.tile_scheduler != "persistent":
            parts.append(self.tile_scheduler)
        if self.swap_ab:
            parts.append("swap")
        if self.extra_tile_n:
            parts.append("n" + "+".join(str(w) for w in self.extra_tile_n))
        if self.launch in ("per_group", "fused"):
            parts.append(self.launch.replace("_", ""))
        if self.streams != 1:
            parts.append(f"{self.streams}streams")
        return "_".join(parts)

    # -- derived quantities ------------------------------------------------------------------------
    @property
    def extended_wgmma_shapes(self) -> bool:
        """Whether the program is built with CUTLASS's extended WGMMA N shapes: the grouped program of a
        swap-AB config, whichever its launch (the ptr-array kernel or the dense kernel once per group)."""
        return self.swap_ab and self.kernel in PTR_ARRAY_KERNELS

    @property
    def mma_threads(self) -> int:
        """Threads that hold the accumulator of one tile: 256 for coop (2 WGs split TM), else 128."""
        return 256 if self.schedule == "cooperative" else 128

    @property
    def acc_registers(self) -> int:
        """fp32 accumulator registers per MMA thread (TM*TN / threads of the MMA warpgroups)."""
        return self.tile[0] * self.tile[1] // self.mma_threads

    def effective_epilogue(self) -> str:
        """The epilogue schedule actually instantiated: ``tma`` pairs with the mainloop (the only TMA pairings CUTLASS's generator emits: sm90_utils.py get_valid_schedules)."""
        if self.epilogue == "tma":
            return "tma_coop" if self.schedule == "cooperative" else "tma_ws"
        return self.epilogue


# --------------------------------------------------------------------------------------------------
# shared-memory model


def epilogue_tile(cfg: Sm90GemmConfig) -> tuple[int, int]:
    """EpilogueTileAuto (include/cutlass/epilogue/collective/builders/sm90_builder.inl sm90_compute_tile_shape_or_override):
    coop (min(128,TM), gcd(min(32,TN),TN)); ws/pingpong (min(64,TM), gcd(min(32,TN),TN)) for 16-bit D."""
    tm, tn, _ = cfg.tile
    epi_m = min(128, tm) if cfg.effective_epilogue() == "tma_coop" else min(64, tm)
    epi_n = math.gcd(min(32, tn), tn)
    return epi_m, epi_n


#: sizeof(cutlass::arch::ClusterBarrier) (include/cutlass/arch/barrier.h: one uint64_t mbarrier)
BARRIER_BYTES = 8
#: smem swizzle atom chosen for a K-major (row-major D) epilogue row of this many bytes
#: (sm90_common.inl ss_smem_selector: SW128 / SW64 / SW32 / INTER atoms) and the alignment CUTLASS puts on
#: the buffer: alignment_for_swizzle(Swizzle<B,M,S>) = 1 << (B + M + S) (include/cutlass/detail/layout.hpp:420)
SWIZZLE_ALIGNMENT = ((128, 1024), (64, 512), (32, 256), (16, 128))


def round_up(value: int, alignment: int) -> int:
    return ceil_div(value, alignment) * alignment


def swizzle_alignment(row_bytes: int) -> int:
    """Byte alignment of an epilogue smem buffer whose contiguous row is ``row_bytes`` long."""
    for width, alignment in SWIZZLE_ALIGNMENT:
        if row_bytes % width == 0:
            return alignment
    return 16


def epilogue_stages(cfg: Sm90GemmConfig, out_bits: int = 16, c_bits: int = 0) -> tuple[int, int]:
    """(StagesC, StagesD) of sm90_builder.inl sm90_get_tma_dispatch_policy: StagesD = min(EpiTiles, 2),
    StagesC = min(EpiTiles, 4) (or max(that, StagesD + 1) when C reuses D's buffer)."""
    epi_m, epi_n = epilogue_tile(cfg)
    tm, tn, _ = cfg.tile
    epi_tiles = (tm // epi_m) * (tn // epi_n) if epi_m and epi_n else 1
    stages_d = min(epi_tiles, 2)
    reuse_c = c_bits == out_bits and out_bits > 8
    stages_c = max(min(epi_tiles, 4), stages_d + 1) if reuse_c else min(epi_tiles, 4)
    return stages_c, stages_d


def epilogue_layout(cfg: Sm90GemmConfig, out_bits: int = 16, c_bits: int = 0) -> tuple[int, int, int]:
    """(sizeof(TensorStorage), alignof(TensorStorage), sizeof(PipelineStorage)) of the collective epilogue.

    TMA epilogue (sm90_epilogue_tma_warpspecialized.hpp:186-226): TensorStorage holds the D (and C)
    buffers, each ``alignas(alignment_for_swizzle(SmemLayout))`` - 512 B for the 32-element bf16 rows of
    EpilogueTileAuto (SW64) - followed by ``FusionCallbacks::SharedStorage``, an empty struct (1 byte) for
    the linear combination, so the struct pads up to the next multiple of the alignment.  PipelineStorage is
    PipelineTransactionAsync<StagesC>::SharedStorage (full + empty barrier per C stage, even for void C).
    NoSmem epilogue (collective/detail.hpp:273-283): an empty TensorStorage and PipelineTransactionAsync<0>."""
    if cfg.effective_epilogue() == "nosmem":
        return 1, 1, 1  # empty structs (PipelineTransactionAsync<0>::SharedStorage holds zero-length arrays)
    epi_m, epi_n = epilogue_tile(cfg)
    stages_c, stages_d = epilogue_stages(cfg, out_bits, c_bits)
    elems = epi_m * epi_n
    align_d = swizzle_alignment(epi_n * out_bits // 8)
    if c_bits == 0:
        # CollectiveStorageWithoutC: union { array<C, 0>; alignas(SmemAlignmentD) smem_D[StagesD] }
        align = align_d
        data = round_up(stages_d * elems * out_bits // 8, align)
    elif c_bits == out_bits and out_bits > 8:
        # CollectiveStorageReuseC: C and D share one buffer of StagesC tiles
        align = max(align_d, swizzle_alignment(epi_n * c_bits // 8))
        data = round_up(stages_c * elems * out_bits // 8, align)
    else:
        # CollectiveStorageWithC: smem_C then smem_D, each aligned for its swizzle
        align_c = swizzle_alignment(epi_n * c_bits // 8)
        align = max(align_c, align_d)
        data = round_up(
            round_up(stages_c * elems * c_bits // 8, align_d) + stages_d * elems * out_bits // 8, align
        )
    tensors = round_up(data + 1, align)  # + the empty FusionCallbacks::SharedStorage
    return tensors, align, 2 * BARRIER_BYTES * stages_c


def epilogue_smem_bytes(cfg: Sm90GemmConfig, out_bits: int = 16, c_bits: int = 0) -> int:
    """sizeof(CollectiveEpilogue::SharedStorage) = {TensorStorage tensors; PipelineStorage pipeline}: what the
    template passes to StageCountAutoCarveout.  ``c_bits=0`` is ``ElementC = void`` (beta = 0, what
    kernelpilot's GEMM template instantiates)."""
    tensors, align, pipeline = epilogue_layout(cfg, out_bits, c_bits)
    if cfg.effective_epilogue() == "nosmem":
        return tensors + pipeline
    if cfg.ptr_array:
        # ptr-array TMA epilogue: {tensors; tensormaps (aligned_struct<128>); pipeline}
        # (sm90_epilogue_array_tma_warpspecialized.hpp:233-250)
        tensors = round_up(tensors, TMA_DESCRIPTOR_BYTES) + PTR_ARRAY_EPILOGUE_TENSORMAPS
    return round_up(tensors + pipeline, max(align, BARRIER_BYTES))


def stage_bytes(cfg: Sm90GemmConfig) -> int:
    """Bytes of one mainloop stage (sm90_gmma_builder.inl:69-86 compute_stage_count_or_override)."""
    tm, tn, tk = cfg.tile
    raw = (cfg.dtype.bits_a * tm * tk + cfg.dtype.bits_b * tn * tk) // 8
    return ceil_div(raw, 128) * 128 + PIPELINE_BYTES_PER_STAGE


def kernel_carveout(cfg: Sm90GemmConfig) -> int:
    return GROUPED_CARVEOUT if cfg.ptr_array else 0


def auto_stages(cfg: Sm90GemmConfig) -> int:
    """StageCountAutoCarveout<sizeof(Epilogue::SharedStorage)> as the examples and our templates use it."""
    capacity = SMEM_CAPACITY - kernel_carveout(cfg)
    carve = ceil_div(epilogue_smem_bytes(cfg), 128) * 128
    return (capacity // 128 * 128 - carve) // stage_bytes(cfg)


def mainloop_tensor_bytes(cfg: Sm90GemmConfig, stages: int) -> int:
    """sizeof(CollectiveMainloop::TensorStorage): ``aligned_struct<128>`` of smem_A[stages] and smem_B[stages]
    (sm90_mma_tma_gmma_ss_warpspecialized.hpp:153-158; array_aligned keeps 16-byte alignment)."""
    tm, tn, tk = cfg.tile
    a_bytes = stages * cfg.dtype.bits_a * tm * tk // 8
    b_bytes = stages * cfg.dtype.bits_b * tn * tk // 8
    return round_up(round_up(a_bytes, 16) + b_bytes, 128)


def smem_bytes(cfg: Sm90GemmConfig) -> int:
    """sizeof(GemmKernel::SharedStorage): the dynamic shared memory the kernel launches with.

    Persistent kernels (sm90_gemm_tma_warpspecialized_{cooperative,pingpong}.hpp:149-168 / 163-184) lay out
    ``pipelines`` (mainloop PipelineTmaAsync<Stages>, epilogue load pipeline, load-order barrier, and for
    ping-pong the math warp-group order barrier, each alignas(16)), the empty tile-scheduler storage
    (1 byte, alignas(16)), then ``tensors`` {epilogue; mainloop}, which inherit the epilogue buffer's
    swizzle alignment (512 B for bf16 D).  The barriers therefore cost a whole alignment block in front
    of the tensors, and the epilogue's 1-byte fusion storage another: that is the 784-928 B the old
    estimate (stages x (stage + barriers) + epilogue) missed against the H200 measurements
    (benchmarks/results/gemm_h200_verified_configs.json measured_smem_bytes).
    ``ws`` (sm90_gemm_tma_warpspecialized.hpp:120-137): tensors are a union (mainloop and epilogue never
    live at once), then the pipelines.  Ptr-array kernels (sm90_gemm_array_tma_warpspecialized_cooperative.hpp
    :178-207, pingpong :184-214): tensors {mainloop; epilogue} first, then the pipelines (plus the group
    scheduler's PipelineAsync<8>), 8 scheduler responses, and the TMA descriptors (A, B; C and 2 x D)
    aligned to 128 B (checked against the H200 grouped / MoE runs in benchmarks/results/cuda_kinds_h200.json)."""
    stages = cfg.stages or auto_stages(cfg)
    epi_tensors, epi_align, epi_pipeline = epilogue_layout(cfg)
    align = max(128, epi_align)
    mainloop = mainloop_tensor_bytes(cfg, stages)
    pipelines = stages * PIPELINE_BYTES_PER_STAGE + round_up(epi_pipeline, 16)
    if cfg.schedule == "ws":
        return round_up(round_up(max(mainloop, epi_tensors), align) + pipelines, align)
    pipelines += 2 * BARRIER_BYTES  # LoadWarpOrderBarrier = OrderedSequenceBarrier<1,2>
    if cfg.schedule == "pingpong":
        pipelines += 4 * BARRIER_BYTES  # MathWarpGroupOrderBarrier = OrderedSequenceBarrier<2,2>
    if cfg.ptr_array:
        tensors = round_up(round_up(mainloop, epi_align) + epi_tensors, align)
        pipelines += 2 * BARRIER_BYTES * PTR_ARRAY_SCHEDULER_STAGES  # PipelineAsyncSharedStorage<8>
        responses = PTR_ARRAY_SCHEDULER_STAGES * PTR_ARRAY_RESPONSE_BYTES
        # NoSmem: the adapter's TensorMapStorage is the empty DefaultEpilogueArray storage (1 byte)
        epi_maps = 1 if cfg.effective_epilogue() == "nosmem" else PTR_ARRAY_EPILOGUE_TENSORMAPS
        tensormaps = round_up(2 * TMA_DESCRIPTOR_BYTES + epi_maps, TMA_DESCRIPTOR_BYTES)
        return round_up(round_up(tensors + pipelines + responses, TMA_DESCRIPTOR_BYTES) + tensormaps, align)
    head = pipelines + 1  # + the empty TileScheduler::SharedStorage
    tensors = round_up(round_up(epi_tensors, 128) + mainloop, align)
    return round_up(head, align) + tensors
