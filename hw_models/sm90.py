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
from collections.abc import Iterator
from itertools import product
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.hw_models.base import (
    TargetModel,
    bool_value,
    ceil_div,
    check_problem_dtype,
    choice,
    int_tuple,
    int_value,
    is_pow2,
    reject_unknown_fields,
)
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.dtypes import DTYPE_BITS, FLOAT8, DTypePair, parse_dtype
from kernelpilot.hw_models.problems import gemm_problems, problem_layout
from kernelpilot.hw_models.sm90_fmha import (
    Sm90FmhaConfig,
    check_fmha,
    default_fmha,
    enumerate_fmha,
    fmha_time_s,
    neighbours_fmha,
    parse_fmha,
)
from kernelpilot.hw_models.types import CheckResult, Collector, TileConfig

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
#: fp32 accumulator registers per MMA thread above which ptxas spills (measured: docs/reference/sm90_h200_measurements.md#accumulator-register-spills)
MAX_ACC_REGISTERS = 128

SCHEDULES = ("cooperative", "pingpong", "ws")
EPILOGUES = ("tma", "nosmem", "tma_coop", "tma_ws")
TILE_SCHEDULERS = ("persistent", "streamk")
GEMM_KERNELS = ("gemm", "grouped_gemm", "moe_gemm")
PTR_ARRAY_KERNELS = ("grouped_gemm", "moe_gemm")  # moe_gemm runs the ptr-array grouped GEMM over experts
FA_KERNELS = ("fa_prefill", "fa_decode")
KERNELS = GEMM_KERNELS + FA_KERNELS
SUPPORTED_DTYPES = ("bf16", "f16", "tf32", "f32", "e4m3", "e5m2", "s8", "u8")
FIELDS = ("kernel", "dtype", "tile", "cluster", "schedule", "epilogue", "stages", "tile_scheduler", "swap_ab")

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


def wgmma_k(dtype: DTypePair) -> int:
    """WGMMA K per instruction: 32 bytes of K (mma_sm90.hpp:378 16-bit, :533 8-bit; tf32 8)."""
    return 256 // dtype.max_bits


def problem_m(problem: dict[str, Any] | None) -> int:
    """The problem's M, 0 when unknown (no problem given)."""
    return int((problem or {}).get("M", 0) or 0)


def enum_tile_n(kernel: str, problem: dict[str, Any] | None) -> tuple[int, ...]:
    """Tile N candidates: the generator's (64, 128, 256), plus 16 / 32 for a plain GEMM whose M fits one
    64-row tile (the only way such a problem gets enough CTAs without splitting K)."""
    if kernel == "gemm" and 0 < problem_m(problem) <= SKINNY_M_MAX:
        return ENUM_TILE_N_SKINNY + ENUM_TILE_N
    return ENUM_TILE_N


def enum_families(
    kernel: str, pair: DTypePair, problem: dict[str, Any] | None
) -> list[tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...], bool]]:
    """``(tile Ms, tile Ns, schedules, swap_ab)`` of each family the space enumerates: the generator's
    tiles, and for a tiny-M 16-bit GEMM the swap-AB family, whose tile M (64/128) runs along the
    problem's N and whose tile N is one of the two smallest WGMMA N in (16, 32, 64) that hold M."""
    schedules = ("cooperative", "pingpong") if kernel in PTR_ARRAY_KERNELS else SCHEDULES
    families = [(ENUM_TILE_M, enum_tile_n(kernel, problem), schedules, False)]
    m = problem_m(problem)
    if kernel == "gemm" and 0 < m <= SWAP_AB_M_MAX and pair.max_bits == 16:
        swap_ns = tuple(t for t in ENUM_SWAP_TILE_N if t >= m)[:2]
        families.append((ENUM_SWAP_TILE_M, swap_ns, ("cooperative", "pingpong"), True))
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
        return "_".join(parts)

    # -- derived quantities ------------------------------------------------------------------------
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
    if cfg.kernel in PTR_ARRAY_KERNELS:
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
    return GROUPED_CARVEOUT if cfg.kernel in PTR_ARRAY_KERNELS else 0


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
    if cfg.kernel in PTR_ARRAY_KERNELS:
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


# --------------------------------------------------------------------------------------------------


class Sm90Model(TargetModel):
    """Constraint model, legal-space enumeration and cost model for CUTLASS sm90a GEMMs."""

    name = "sm90"
    family = "sm90"
    default_device = "h200"
    kernels = KERNELS

    # -- parsing -------------------------------------------------------------------------------------
    def parse_config(self, raw: dict[str, Any], where: str = "config") -> Sm90GemmConfig | Sm90FmhaConfig:
        if isinstance(raw, (Sm90GemmConfig, Sm90FmhaConfig)):
            return raw
        if not isinstance(raw, dict):
            raise InputError(f"{where}: a config must be a mapping, got {type(raw).__name__}")
        kernel = self.check_kernel(raw.get("kernel", "gemm"), where)
        if kernel in FA_KERNELS:
            return parse_fmha(raw, kernel, where)
        reject_unknown_fields(raw, FIELDS, where)
        dtype = parse_dtype(raw.get("dtype", "bf16"), where)
        if "tile" not in raw:
            raise InputError(f"{where}: missing field 'tile' ([M, N, K])", field="tile")
        tile = int_tuple(raw["tile"], where, "tile", 3)
        cluster = int_tuple(raw.get("cluster", [1, 1]), where, "cluster", (2, 3))
        if len(cluster) == 3:
            if cluster[2] != 1:
                raise InputError(
                    f"{where}: cluster[2] must be 1 on sm90 GEMMs, got {cluster[2]}", field="cluster"
                )
            cluster = cluster[:2]
        schedule = choice(raw.get("schedule", "cooperative"), SCHEDULES, where, "schedule")
        epilogue = choice(raw.get("epilogue", "tma"), EPILOGUES, where, "epilogue")
        stages = int_value(raw.get("stages", 0), where, "stages", minimum=0)
        tile_scheduler = choice(
            raw.get("tile_scheduler", "persistent"), TILE_SCHEDULERS, where, "tile_scheduler"
        )
        return Sm90GemmConfig(
            kernel=kernel,
            dtype=dtype,
            tile=tile,  # type: ignore[arg-type]
            cluster=cluster,  # type: ignore[arg-type]
            schedule=schedule,
            epilogue=epilogue,
            stages=stages,
            tile_scheduler=tile_scheduler,
            swap_ab=bool_value(raw.get("swap_ab", False), where, "swap_ab"),
        )

    # -- rules ---------------------------------------------------------------------------------------
    def check(self, config: TileConfig, problem: dict[str, Any] | None = None) -> CheckResult:
        cfg = self.as_config(config)
        if isinstance(cfg, Sm90FmhaConfig):
            return check_fmha(cfg, problem)
        if not isinstance(cfg, Sm90GemmConfig):
            raise InputError(f"sm90 cannot check a {type(cfg).__name__}")
        out = Collector()
        self._check_dtype(cfg, out)
        self._check_tile(cfg, out)
        self._check_schedule(cfg, out)
        self._check_cluster(cfg, out)
        self._check_smem(cfg, out)
        self._check_swap_ab(cfg, out)
        if problem is not None:
            self._check_problem(cfg, problem, out)
        return out.result()

    def _check_dtype(self, cfg: Sm90GemmConfig, out: Collector) -> None:
        a, b = cfg.dtype.a, cfg.dtype.b
        for side, name in (("A", a), ("B", b)):
            out.require(
                name in SUPPORTED_DTYPES,
                "sm90.dtype_unsupported",
                f"{side} dtype {name} has no sm90 WGMMA path in this model (supported: {', '.join(SUPPORTED_DTYPES)})",
            )
        if a in SUPPORTED_DTYPES and b in SUPPORTED_DTYPES and a != b:
            # fp8 e4m3 x e5m2 is a native WGMMA combination (mma_sm90.hpp fp8 branches); other mixes go
            # through the RS mixed-input builder (sm90_gmma_builder.inl:366-372), which is not modelled.
            out.require(
                a in FLOAT8 and b in FLOAT8,
                "sm90.dtype_mixed_unsupported",
                f"mixed A/B dtypes {a}x{b} need the mixed-input (RS) collective, which this model does not cover",
            )

    def _check_tile(self, cfg: Sm90GemmConfig, out: Collector) -> None:
        tm, tn, tk = cfg.tile
        # include/cute/arch/mma_sm90.hpp:370 static_assert "Tile_M must be a multiple of 64."
        out.require(tm % 64 == 0, "sm90.tile_m_multiple", f"tile M={tm} is not a multiple of 64 (WGMMA M)")
        # mma_sm90.hpp:525 "Tile_N must be a multiple of 8." and sm90_common.inl:182 "BLK_MN0 must be a multiple of 8."
        out.require(tn % 8 == 0, "sm90.tile_n_multiple", f"tile N={tn} is not a multiple of 8 (WGMMA N step)")
        kk = wgmma_k(cfg.dtype)
        # mma_sm90.hpp:378 "Tile_K must be a multiple of 16." (16-bit), :533 "... of 32." (8-bit); tf32: 8
        out.require(
            tk % kk == 0,
            "sm90.tile_k_multiple",
            f"tile K={tk} is not a multiple of {kk} (WGMMA K for {cfg.dtype.max_bits}-bit inputs)",
        )
        # python/cutlass_library/sm90_utils.py is_tile_desc_valid: 64<=TM<=256, 16<=TN<=256, 16<=TK<=256
        # (TMA boxes are at most 256 elements per dimension, copy_traits_sm90_tma.hpp).
        out.require(
            64 <= tm <= 256 and 16 <= tn <= 256 and 16 <= tk <= 256,
            "sm90.tile_bounds",
            f"tile {tm}x{tn}x{tk} is outside 64<=M<=256, 16<=N<=256, 16<=K<=256 (generator is_tile_desc_valid, TMA box <= 256)",
        )
        # K-major swizzle needs BLK_K % 8 (sm90_common.inl:183 "BLK_K0 must be a multiple of 8.") - implied by tk % kk.

    def _check_schedule(self, cfg: Sm90GemmConfig, out: Collector) -> None:
        tm, tn, _ = cfg.tile
        if cfg.schedule == "cooperative":
            # sm90_gemm_tma_warpspecialized_cooperative.hpp:374 static_assert "Cooperative kernel requires Tile Size
            # to be greater than or equal to 128 along the M-dimension."; the TiledMMA is 2x1 WGMMA atoms, so the
            # generator requires TM % 128 (sm90_utils.py is_tile_desc_compatible_with_cooperative).
            out.require(
                tm % 128 == 0,
                "sm90.coop_tile_m",
                f"cooperative schedule needs tile M % 128 == 0 (two consumer warpgroups of 64 rows), got M={tm}",
            )
        if cfg.kernel in PTR_ARRAY_KERNELS and cfg.schedule == "ws":
            # only KernelPtrArrayTmaWarpSpecialized{Cooperative,Pingpong} exist for ptr-array GEMMs
            # (sm90_gmma_builder.inl:225-230 builder specialization list)
            out.fail(
                "sm90.grouped_schedule",
                "grouped_gemm supports the cooperative and pingpong schedules only (no ws)",
            )
        # accumulator registers: coop 2 WGs share the tile, pingpong/ws one WG holds it
        # (cooperative.hpp / pingpong.hpp register reconfiguration to 232/240; measured spills:
        # docs/reference/sm90_h200_measurements.md#accumulator-register-spills)
        out.require(
            cfg.acc_registers <= MAX_ACC_REGISTERS,
            "sm90.acc_registers",
            f"tile {tm}x{tn} with {cfg.schedule} keeps {cfg.acc_registers} fp32 accumulator registers per thread "
            f"(limit {MAX_ACC_REGISTERS}): ptxas spills and the kernel runs ~15x slower",
        )
        eff = cfg.effective_epilogue()
        if cfg.schedule == "cooperative" and eff == "tma_ws":
            # sm90_epilogue_tma_warpspecialized.hpp:671 CUTE_STATIC_ASSERT "MMA_TILE_M must divide EPI_TILE_M"
            out.fail(
                "sm90.epilogue_pairing",
                "cooperative mainloop with the TmaWarpSpecialized (non-cooperative) epilogue does not compile: "
                "MMA_TILE_M must divide EPI_TILE_M",
            )
        if cfg.schedule in ("pingpong", "ws") and eff == "tma_coop":
            # pingpong: measured on the H200, compiles, runs, wrong results (docs/reference/
            # sm90_h200_measurements.md#mismatched-mainloop-and-epilogue-schedules); ws: never emitted
            # by the generator (sm90_utils.py get_valid_schedules pairs ws with TmaWarpSpecialized/NoSmem only)
            detail = (
                "compiles but gives wrong results (measured: 318325 of 370240 outputs wrong)"
                if cfg.schedule == "pingpong"
                else "is a pairing CUTLASS never instantiates (one MMA warpgroup, cooperative epilogue expects two)"
            )
            out.fail(
                "sm90.epilogue_pairing",
                f"{cfg.schedule} mainloop with the TmaWarpSpecializedCooperative epilogue {detail}",
            )
        if cfg.tile_scheduler == "streamk":
            if cfg.kernel in PTR_ARRAY_KERNELS:
                # sm90_gemm_array_tma_warpspecialized_cooperative.hpp:130 static_assert: GroupScheduler only
                out.fail(
                    "sm90.streamk_schedule", f"{cfg.kernel} supports only the group scheduler (no stream-K)"
                )
            elif cfg.schedule != "cooperative":
                # pingpong.hpp:105 "Ping-pong kernel does not currently support stream-K scheduler."
                # sm90_gemm_tma_warpspecialized.hpp:111 (ws: void or PersistentScheduler only)
                out.fail(
                    "sm90.streamk_schedule",
                    f"stream-K needs the cooperative schedule; {cfg.schedule} static_asserts against it",
                )

    def _check_cluster(self, cfg: Sm90GemmConfig, out: Collector) -> None:
        cm, cn = cfg.cluster
        tm, tn, _ = cfg.tile
        # tile_scheduler_params.h:168 FastDivmodU64Pow2(cluster_shape.n()) (and .m()): shift/mask division
        out.require(
            is_pow2(cm) and is_pow2(cn),
            "sm90.cluster_pow2",
            f"cluster {cm}x{cn}: both dimensions must be powers of two (the tile scheduler divides with shifts)",
        )
        # cluster_launch.hpp non-portable limit 16; generator SM90_CLUSTER_SIZES / is_tile_desc_valid <= 16
        out.require(
            cm * cn <= 16,
            "sm90.cluster_size",
            f"cluster {cm}x{cn} has {cm * cn} CTAs; sm90 allows at most 16 (8 portable)",
        )
        # A is multicast along CN (each CTA loads TM/CN rows), B along CM (TN/CM rows):
        # copy_traits_sm90_tma.hpp multicast slicing needs the box to be divisible (CuTe divisibility condition)
        out.require(
            tm % cn == 0 and tn % cm == 0,
            "sm90.cluster_multicast",
            f"multicast slices must divide the tile: M={tm} % CN={cn}, N={tn} % CM={cm}",
        )

    def _check_smem(self, cfg: Sm90GemmConfig, out: Collector) -> None:
        if cfg.stages == 0:
            stages = auto_stages(cfg)
            # sm90_mma_tma_gmma_ss_warpspecialized.hpp:137 "Specialization requires Stages set to value 2 or more."
            out.require(
                stages >= 2,
                "sm90.smem_stages",
                f"only {stages} mainloop stage(s) of {stage_bytes(cfg)} B fit in {SMEM_CAPACITY} B next to "
                f"{epilogue_smem_bytes(cfg)} B of epilogue storage; at least 2 are required",
            )
        else:
            out.require(
                cfg.stages >= 2,
                "sm90.smem_stages",
                f"stages={cfg.stages}: at least 2 are required (sm90_mma_tma_gmma_ss_warpspecialized.hpp:137)",
            )
            total = smem_bytes(cfg)
            # gemm_universal_adapter.h: cudaFuncSetAttribute(MaxDynamicSharedMemorySize) fails at run time
            out.require(
                total <= SMEM_CAPACITY,
                "sm90.smem_capacity",
                f"{cfg.stages} stages x {stage_bytes(cfg)} B + epilogue {epilogue_smem_bytes(cfg)} B = {total} B "
                f"exceeds the {SMEM_CAPACITY} B sm90 limit (initialize() fails at run time)",
            )

    def _check_swap_ab(self, cfg: Sm90GemmConfig, out: Collector) -> None:
        if not cfg.swap_ab:
            return
        out.require(
            cfg.kernel == "gemm",
            "sm90.swap_ab_kernel",
            f"swap_ab is implemented for the dense gemm program only, not {cfg.kernel}",
        )
        # the swapped A operand is B^T, MN-major for row-major B: MN-major smem operands exist for 16-bit
        # MMAs only (sm90_common.inl gmma_ss_tag_to_major_A/B)
        out.require(
            cfg.dtype.max_bits == 16,
            "sm90.swap_ab_dtype",
            f"swap_ab needs a 16-bit dtype (its A operand is MN-major), got {cfg.dtype.label()}",
        )

    def _check_problem(self, cfg: Sm90GemmConfig, problem: dict[str, Any], out: Collector) -> None:
        check_problem_dtype(cfg.dtype, problem, out, "sm90")
        layout = problem_layout(problem)
        for idx, (m, n, k) in enumerate(gemm_problems(problem, cfg.kernel)):
            tag = f"group {idx}: " if cfg.kernel in PTR_ARRAY_KERNELS else ""
            # TMA: 16-byte aligned contiguous extents (sm90_common.inl:55 tma_alignment_bytes = 16,
            # sm90_mma_tma_gmma_ss_warpspecialized.hpp can_implement)
            ea = 128 // cfg.dtype.bits_a
            eb = 128 // cfg.dtype.bits_b
            a_contig = ("K", k) if layout[0] == "r" else ("M", m)
            b_contig = ("N", n) if layout[1] == "r" else ("K", k)
            out.require(
                a_contig[1] % ea == 0,
                "sm90.alignment",
                f"{tag}A ({'row' if layout[0] == 'r' else 'column'}-major) contiguous extent {a_contig[0]}={a_contig[1]} "
                f"is not a multiple of {ea} elements (16 bytes, TMA)",
            )
            out.require(
                b_contig[1] % eb == 0,
                "sm90.alignment",
                f"{tag}B ({'row' if layout[1] == 'r' else 'column'}-major) contiguous extent {b_contig[0]}={b_contig[1]} "
                f"is not a multiple of {eb} elements (16 bytes, TMA)",
            )
            out_bits = DTYPE_BITS.get(str(problem.get("out_dtype", "bf16")), 16)
            out.require(
                n % (128 // out_bits) == 0,
                "sm90.alignment",
                f"{tag}D (row-major) contiguous extent N={n} is not a multiple of {128 // out_bits} elements (16 bytes)",
            )
        if cfg.dtype.max_bits != 16 and layout != "rc":
            # MN-major operands are only valid for 16-bit MMAs (sm90_common.inl gmma_ss_tag_to_major_A/B:
            # "MN major mode is only valid for non-TF32, non-int and non-fp8 MMAs"); other layouts need a
            # transposing mainloop this model does not cover.
            out.fail(
                "sm90.layout_kmajor",
                f"{cfg.dtype.label()} needs both operands K-major (layout 'rc': A row-major, B column-major); got {layout!r}",
            )

    # -- enumeration ---------------------------------------------------------------------------------
    def enumerate(
        self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None
    ) -> Iterator[Sm90GemmConfig | Sm90FmhaConfig]:
        kernel = self.check_kernel(kernel, "enumerate")
        pair = parse_dtype(dtype, "enumerate")
        if kernel in FA_KERNELS:
            yield from enumerate_fmha(kernel, pair, problem)
            return
        kk = wgmma_k(pair)
        for tile_ms, tile_ns, schedules, swap_ab in enum_families(kernel, pair, problem):
            for tm, tn, steps, schedule, cluster in product(
                tile_ms, tile_ns, ENUM_K_STEPS, schedules, ENUM_CLUSTERS
            ):
                # ws is a baseline: the generator's default K multiplier only, and no 2x2 clusters
                if schedule == "ws" and (steps != ENUM_K_STEPS[0] or cluster == (2, 2)):
                    continue
                cfg = Sm90GemmConfig(
                    kernel=kernel,
                    dtype=pair,
                    tile=(tm, tn, kk * steps),
                    cluster=cluster,
                    schedule=schedule,
                    swap_ab=swap_ab,
                )
                if self.check(cfg, problem).valid:
                    yield cfg

    def _default_config(
        self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None
    ) -> Sm90GemmConfig | Sm90FmhaConfig:
        """CUTLASS's own default: examples/49_hopper_gemm_with_collective_builder/49_collective_builder.cu:309
        instantiates ``Shape<_128,_128,_64>, Shape<_1,_1,_1>`` with KernelScheduleAuto + EpilogueScheduleAuto,
        which the builder resolves to KernelTmaWarpSpecializedCooperative (TM != 64, sm90_gmma_builder.inl
        KernelScheduleAuto branch) and NoSmemWarpSpecialized (sm90_builder.inl EpilogueScheduleAuto).
        Grouped: examples/57_hopper_grouped_gemm uses the cooperative ptr-array schedule; we keep the tile."""
        kernel = self.check_kernel(kernel, "default_config")
        pair = parse_dtype(dtype, "default_config")
        if kernel in FA_KERNELS:
            return default_fmha(kernel, pair, problem)
        tk = 1024 // pair.max_bits  # 128 bytes of K: the 128-byte swizzle (64 for 16-bit types)
        return Sm90GemmConfig(
            kernel=kernel,
            dtype=pair,
            tile=(128, 128, tk),
            cluster=(1, 1),
            schedule="cooperative",
            epilogue="nosmem",
        )

    def neighbours(self, config: TileConfig) -> list[Any]:
        cfg = self.as_config(config)
        if isinstance(cfg, Sm90FmhaConfig):
            return neighbours_fmha(cfg)
        assert isinstance(cfg, Sm90GemmConfig)
        tm, tn, tk = cfg.tile
        cands: list[dict[str, Any]] = []
        for dm in (tm // 2, tm * 2):
            cands.append({"tile": (dm, tn, tk)})
        for dn in (tn // 2, tn * 2, tn - 64, tn + 64):
            cands.append({"tile": (tm, dn, tk)})
        for dk in (tk // 2, tk * 2):
            cands.append({"tile": (tm, tn, dk)})
        cm, cn = cfg.cluster
        for cl in ((cm * 2, cn), (max(1, cm // 2), cn), (cm, cn * 2), (cm, max(1, cn // 2)), (cn, cm)):
            cands.append({"cluster": cl})
        for sched in SCHEDULES:
            if sched != cfg.schedule:
                cands.append({"schedule": sched, "tile_scheduler": "persistent"})
        for epi in ("tma", "nosmem"):
            if epi != cfg.epilogue:
                cands.append({"epilogue": epi})
        cands.append({"tile_scheduler": "streamk" if cfg.tile_scheduler == "persistent" else "persistent"})
        copies: list[Sm90GemmConfig] = []
        for change in cands:
            if any(isinstance(v, tuple) and min(v) < 1 for v in change.values()):
                continue
            try:
                copies.append(cfg.model_copy(update=change))
            except Exception:  # noqa: BLE001
                continue
        return self.valid_neighbours(cfg, copies)

    # -- cost model ----------------------------------------------------------------------------------
    def estimate_time_s(
        self, config: TileConfig, problem: dict[str, Any], device: Device | str | None = None
    ) -> float:
        from kernelpilot.hw_models.cost import sm90_time_s

        cfg = self.as_config(config)
        if isinstance(cfg, Sm90FmhaConfig):
            return fmha_time_s(cfg, problem, self.device(device))
        return sm90_time_s(cfg, problem, self.device(device))
