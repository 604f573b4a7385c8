"""The sm90 target model: parsing, checks, enumeration, library defaults, neighbours and cost for CUTLASS
sm90a GEMMs (config types and shared-memory accounting in :mod:`.gemm`) and the Hopper FMHA (:mod:`.fmha`).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.hw_models.axes import SearchAxis
from kernelpilot.hw_models.base import (
    TargetModel,
    bool_value,
    check_problem_dtype,
    choice,
    int_tuple,
    int_value,
    is_pow2,
    reject_unknown_fields,
)
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.dtypes import DTYPE_BITS, FLOAT8, parse_dtype
from kernelpilot.hw_models.problems import gemm_problems, problem_layout
from kernelpilot.hw_models.sm90.cost import sm90_time_s
from kernelpilot.hw_models.sm90.fmha import Sm90FmhaConfig, check_fmha, parse_fmha
from kernelpilot.hw_models.sm90.fmha_cost import fmha_time_s
from kernelpilot.hw_models.sm90.fmha_space import default_fmha, enumerate_fmha, neighbours_fmha
from kernelpilot.hw_models.sm90.gemm import (
    BASE_WGMMA_N,
    ENUM_CLUSTERS,
    ENUM_K_STEPS,
    EPILOGUES,
    FA_KERNELS,
    FIELDS,
    FUSED_MAX_GROUPS,
    GROUP_STREAMS,
    KERNELS,
    LAUNCHES,
    MAX_ACC_REGISTERS,
    PTR_ARRAY_KERNELS,
    SCHEDULES,
    SMEM_CAPACITY,
    SUPPORTED_DTYPES,
    TILE_SCHEDULERS,
    Sm90GemmConfig,
    auto_stages,
    enum_families,
    epilogue_smem_bytes,
    smem_bytes,
    stage_bytes,
    wgmma_k,
)
from kernelpilot.hw_models.sm90.gemm_neighbours import neighbours_gemm
from kernelpilot.hw_models.sm90.token_widths import (
    ENUM_PER_GROUP_MIXED_TWINS,
    MAX_TOKEN_WIDTHS,
    check_extra_tile_n,
    mixed_twins,
)
from kernelpilot.hw_models.sm90.vendor import NVIDIA
from kernelpilot.hw_models.types import CheckResult, Collector, TileConfig


class Sm90Model(TargetModel):
    """Constraint model, legal-space enumeration and cost model for CUTLASS sm90a GEMMs."""

    name = "sm90"
    family = "sm90"
    default_device = "h200"
    kernels = KERNELS
    vendor = NVIDIA

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
        streams = int_value(raw.get("streams", 1), where, "streams", minimum=1)
        if streams not in GROUP_STREAMS:
            raise InputError(
                f"{where}: streams {streams} is not one of: {', '.join(map(str, GROUP_STREAMS))}",
                field="streams",
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
            launch=choice(raw.get("launch", "grouped"), LAUNCHES, where, "launch"),
            streams=streams,
            extra_tile_n=int_tuple(
                raw.get("extra_tile_n", []), where, "extra_tile_n", tuple(range(MAX_TOKEN_WIDTHS))
            ),
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
        check_extra_tile_n(cfg, self.check, out)
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
        if tn % 8 == 0 and tn not in BASE_WGMMA_N and not cfg.extended_wgmma_shapes:
            atom = next(n for n in BASE_WGMMA_N if tn % n == 0)
            out.fail(
                "sm90.wgmma_n_shape",
                f"tile N={tn} is not one of CUTLASS's default WGMMA N shapes {BASE_WGMMA_N}: it would compile to "
                f"{tn // atom} WGMMAs of N={atom} per K step (the extended shapes are built for swap-AB grouped "
                "configs only)",
            )
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
        if cfg.ptr_array and cfg.schedule == "ws":
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
        if cfg.launch == "per_group":
            # one dense launch per group: the grouped / MoE kinds only (a plain GEMM has one group)
            out.require(
                cfg.kernel in PTR_ARRAY_KERNELS,
                "sm90.launch",
                f"launch=per_group runs the groups of a grouped_gemm / moe_gemm problem; {cfg.kernel} has none",
            )
        if cfg.launch == "fused":
            # the cooperative kernel's body over every group (cpp_templates/cuda/fused_groups_gemm_sm90.hpp):
            # its own data-parallel persistent schedule, the tokens on the tile's M side, one tile N
            out.require(
                cfg.kernel in PTR_ARRAY_KERNELS,
                "sm90.launch",
                f"launch=fused runs the groups of a grouped_gemm / moe_gemm problem; {cfg.kernel} has none",
            )
            out.require(
                cfg.schedule == "cooperative" and cfg.tile_scheduler == "persistent",
                "sm90.launch",
                "launch=fused is the cooperative kernel's body with a persistent data-parallel schedule; "
                f"got schedule={cfg.schedule}, tile_scheduler={cfg.tile_scheduler}",
            )
            out.require(
                not cfg.swap_ab and not cfg.extra_tile_n,
                "sm90.launch",
                "launch=fused keeps the tokens on the tile's M side (no swap_ab, no extra_tile_n)",
            )
        if cfg.streams not in GROUP_STREAMS:
            out.fail("sm90.streams", f"streams={cfg.streams}; allowed: {list(GROUP_STREAMS)}")
        elif cfg.streams != 1:
            # the grouped launch is one kernel, a dense GEMM one problem: only per-group launches have
            # several launches to spread over streams
            out.require(
                cfg.launch == "per_group" and cfg.kernel in PTR_ARRAY_KERNELS,
                "sm90.streams",
                f"streams={cfg.streams} spreads a per-group launch's groups over streams; "
                f"{cfg.kernel} with launch={cfg.launch} has one launch",
            )
        if cfg.tile_scheduler == "streamk":
            if cfg.ptr_array:
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
        if cfg.kernel in PTR_ARRAY_KERNELS:
            # the grouped program's swap, launched as one ptr-array kernel or as the dense kernel once per
            # group, keeps both operands K-major (A = the weight W[N, K], B = the tokens X[M, K]) and
            # writes D^T column-major: no MN-major operand, so no dtype restriction beyond the grouped
            # program's own.  Compiled (benchmarks/results/swap_grouped_compile_check.json) and measured in
            # the library-default space (benchmarks/results/kinds_swap_h100_*)
            return
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
        if cfg.launch == "fused" and cfg.kernel in PTR_ARRAY_KERNELS:
            groups = sum(1 for m, _, _ in gemm_problems(problem, cfg.kernel) if m > 0)
            out.require(
                groups <= FUSED_MAX_GROUPS,
                "sm90.fused_groups",
                f"launch=fused passes every group's parameters to the kernel (at most {FUSED_MAX_GROUPS} "
                f"non-empty groups in the 32764-byte kernel parameter space); the problem has {groups}",
            )
        if cfg.dtype.max_bits != 16 and layout != "rc":
            # MN-major operands are only valid for 16-bit MMAs (sm90_common.inl gmma_ss_tag_to_major_A/B:
            # "MN major mode is only valid for non-TF32, non-int and non-fp8 MMAs"); other layouts need a
            # transposing mainloop this model does not cover.
            out.fail(
                "sm90.layout_kmajor",
                f"{cfg.dtype.label()} needs both operands K-major (layout 'rc': A row-major, B column-major); got {layout!r}",
            )

    # -- search axes ---------------------------------------------------------------------------------
    def search_axes(self, kernel: str) -> tuple[SearchAxis, ...]:
        """The tile splits into ``tile_m``/``tile_n``/``tile_k`` (GEMM: M, N, K; FMHA: BlockQO, BlockKV,
        HeadDim), each a categorical, like every other field.

        Categorical, not ordinal: the sm90 spaces are small (34-252 legal GEMM configs) and the proposer
        comparison recorded by replay (``benchmarks/results/gemm_h200_convergence.json``) was made with
        categorical extents; declaring them ordinal would change which configs TPE proposes there.
        """
        return (SearchAxis("tile", "categorical", ("m", "n", "k")),)

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
        several_groups = problem is not None and len(gemm_problems(problem, kernel)) > 1
        for tile_ms, tile_ns, schedules, swap_ab, launch in enum_families(kernel, pair, problem):
            for tm, tn, steps, (schedule, tile_scheduler), cluster in product(
                tile_ms, tile_ns, ENUM_K_STEPS, schedules, ENUM_CLUSTERS
            ):
                # ws is a baseline: the generator's default K multiplier only, and no 2x2 clusters
                if schedule == "ws" and (steps != ENUM_K_STEPS[0] or cluster == (2, 2)):
                    continue
                # the swap-AB grouped families: 4 WGMMA K steps only (token_widths.py, ENUM_SWAP_PTR_ARRAY_TILE_N)
                if swap_ab and kernel in PTR_ARRAY_KERNELS and steps != ENUM_K_STEPS[0]:
                    continue
                cfg = Sm90GemmConfig(
                    kernel=kernel,
                    dtype=pair,
                    tile=(tm, tn, kk * steps),
                    cluster=cluster,
                    schedule=schedule,
                    tile_scheduler=tile_scheduler,
                    swap_ab=swap_ab,
                    launch=launch,
                )
                if self.check(cfg, problem).valid:
                    yield cfg
                    # its twin on two streams, where there are groups to overlap
                    if launch == "per_group" and several_groups:
                        twin = cfg.model_copy(update={"streams": 2})
                        if self.check(twin, problem).valid:
                            yield twin
                # the swap-AB grouped families' mixed-width twins, once per (tile M, schedule, cluster):
                # per width one ptr-array launch, or (per group, when enumerated) the dense kernel with
                # each group's width, as cuBLAS fits a tile to each GEMM of a torch.mm loop; per group
                # also on two streams
                twins_here = launch == "grouped" or ENUM_PER_GROUP_MIXED_TWINS
                if swap_ab and kernel in PTR_ARRAY_KERNELS and tn == tile_ns[0] and twins_here:
                    for mixed in mixed_twins(cfg, problem, self.check, self.estimate_time_s):
                        yield mixed
                        if launch == "per_group" and several_groups:
                            twin = mixed.model_copy(update={"streams": 2})
                            if self.check(twin, problem).valid:
                                yield twin

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
        return self.valid_neighbours(cfg, neighbours_gemm(cfg))

    # -- cost model ----------------------------------------------------------------------------------
    def estimate_time_s(
        self, config: TileConfig, problem: dict[str, Any], device: Device | str | None = None
    ) -> float:
        cfg = self.as_config(config)
        if isinstance(cfg, Sm90FmhaConfig):
            return fmha_time_s(cfg, problem, self.device(device))
        return sm90_time_s(cfg, problem, self.device(device))
