"""Xe GEMM-family rules (gemm, grouped_gemm, moe_gemm): tile, subgroup layout, DPAS atom, schedule,
register pressure, and the problem-level alignment of every GEMM or group.

A mixin of :class:`~kernelpilot.hw_models.xe.model.XeModel` so the rules keep their ``self`` (target
name, device) without the model module growing past one job.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.base import (
    TargetModel,
    check_problem_dtype,
)
from kernelpilot.hw_models.dtypes import DTYPE_BITS, FLOAT16
from kernelpilot.hw_models.problems import batch, gemm_problems, problem_layout
from kernelpilot.hw_models.types import Collector
from kernelpilot.hw_models.xe.configs import (
    GRF_BYTES,
    MAX_SG,
    XeGemmConfig,
)
from kernelpilot.hw_models.xe.dpas import (
    DECLARED_AB,
    LEGACY_AB,
    DpasAtom,
    accumulator_for,
)
from kernelpilot.hw_models.xe.launch import (
    MIN_BLOCK2D_PITCH_BYTES,
    THREADS_PER_CORE_LARGE_GRF,
    core_occupancy,
    one_work_group_per_core,
)


class XeGemmRules(TargetModel):
    """The GEMM-family checks of an Xe target model."""

    def _check_gemm(self, cfg: XeGemmConfig, out: Collector) -> None:
        wm, wn, wk = cfg.wg
        derived = cfg.sg is None
        sg = cfg.effective_sg()
        how = (
            f"CollectiveBuilder-derived SG layout {sg[0]}x{sg[1]}x{sg[2]} (xe_mma_builder.inl:95-98)"
            if derived
            else f"SG layout {sg[0]}x{sg[1]}x{sg[2]}"
        )
        atom = cfg.atom()
        a, b = cfg.dtype.a, cfg.dtype.b

        # -- dtypes
        if cfg.kernel == "moe_gemm":
            # examples/12_xe20_moe_gemm_cute_interface/moe_gemms.hpp:66-72 enable_if is_16_bit_fp_v<A, B>
            out.require(
                a in FLOAT16 and b in FLOAT16,
                "xe.moe.dtype",
                f"moe_gemm takes 16-bit float A and B only (is_16_bit_fp_v), got {cfg.dtype.label()}",
            )
        if a == "f32" or b == "f32":
            # xe_dpas_tt_op_selector: XE_DPAS_TT<M, float, float, float> is not declared -> the f16 atom
            out.warn(
                "xe.dtype.f32_via_f16",
                "f32 inputs have no DPAS: the CollectiveBuilder's selector converts them to f16 (use tf32 for XMX f32)",
            )
        if cfg.mma_atom:
            self._check_explicit_atom(cfg, atom, out)

        # -- subgroups per work-group
        out.require(
            cfg.num_sg() <= MAX_SG,
            "xe.sg_count",
            f"{how} has {cfg.num_sg()} subgroups ({16 * cfg.num_sg()} work-items); at most {MAX_SG} per work-group "
            "in 256-GRF mode (xe_mma_builder.inl:95 MaxSG)",
        )
        # -- GEMM mainloops never reduce across SG_K (xe_mma.hpp mainloop; TiledMMAHelper in
        # include/cute/atom/mma_atom.hpp:676-700 only lays SG_K out; only FA's PV GEMM splits K)
        out.require(
            sg[2] == 1,
            "xe.gemm.sg_k",
            f"SG_K={sg[2]}: the GEMM collectives (MainloopXeL1Staged, xe_mma.hpp) have no cross-subgroup K reduction",
        )
        # -- DPAS repeat count
        out.require(
            1 <= atom.m <= 8,
            "xe.atom_m_range",
            f"DPAS repeat count M={atom.m} is outside 1..8 (media/docs/cpp/xe_rearchitecture.md:51)",
        )
        if atom.m < 8 and cfg.kernel != "moe_gemm":
            out.warn(
                "xe.atom_m_small",
                f"DPAS repeat count M={atom.m}: each DPAS does {atom.m}/8 of the work of M=8 (every repo GEMM uses M=8)",
            )
        # -- TiledMMA permutation must match the block (xe_mma.hpp:89-91)
        need_m = atom.m * sg[0]
        need_n = 16 * sg[1]
        need_k = atom.k * sg[2]
        out.require(
            wm % need_m == 0,
            "xe.gemm.wg_m_divisible",
            f"WG_M={wm} is not a multiple of DPAS_M*SG_M={atom.m}*{sg[0]}={need_m} with {how} "
            "(xe_mma.hpp:89 'TiledMma permutation size must match block size')",
        )
        out.require(
            wn % need_n == 0,
            "xe.gemm.wg_n_divisible",
            f"WG_N={wn} is not a multiple of 16*SG_N=16*{sg[1]}={need_n} with {how} (xe_mma.hpp:90)",
        )
        out.require(
            wk % need_k == 0,
            "xe.gemm.wg_k_divisible",
            f"WG_K={wk} is not a multiple of DPAS_K*SG_K={atom.k}*{sg[2]}={need_k} for {atom.type_a} x {atom.type_b} "
            "DPAS (K = 256/bits, mma_xe.hpp:50; xe_mma.hpp:91)",
        )
        # -- occupancy: the grouped and MoE schedulers launch one work-group per Xe-core
        # (tile_scheduler_params.h:1196, moe_tile_scheduler.hpp:108)
        if one_work_group_per_core(cfg.kernel):
            nsg = cfg.num_sg()
            occ = core_occupancy(nsg, one_per_core=True)
            if occ < 1.0:
                out.warn(
                    "xe.occupancy",
                    f"{cfg.kernel} launches one work-group per Xe-core: {nsg} subgroups keep {nsg} of "
                    f"{THREADS_PER_CORE_LARGE_GRF} hardware threads busy ({occ:.0%} occupancy)",
                )
        # -- element types no library build has run on the current API
        if cfg.kernel in ("gemm", "grouped_gemm") and (not cfg.dtype.same or cfg.dtype.max_bits < 8):
            out.warn(
                "xe.experimental_dtype",
                f"experimental: {cfg.dtype.label()} dense GEMM renders and passes the host compile, but no "
                "sycl-tla example builds it on the current API (its mixed-type examples use the legacy "
                "mainloop) and no icpx build of it has run yet",
            )
        # -- scheduler compatibility
        if cfg.kernel == "grouped_gemm":
            # xe_gemm_array_cooperative.hpp:97 static_assert(is_same_v<TileScheduler_, GroupScheduler>)
            out.require(
                cfg.schedule == "default",
                "xe.schedule",
                f"grouped_gemm runs only with the GroupScheduler (xe_gemm_array_cooperative.hpp:97); schedule={cfg.schedule}",
            )
        elif cfg.kernel == "moe_gemm":
            out.require(
                cfg.schedule == "default",
                "xe.schedule",
                f"moe_gemm has its own PersistentTileSchedulerXeMoE (moe_tile_scheduler.hpp); schedule={cfg.schedule}",
            )
        elif cfg.schedule in ("streamk", "splitk") and accumulator_for(cfg.dtype) == "s32":
            # generator.py GenerateXe_TensorOp_16b_DPAS_gemm: stream-K only for accumulators with SYCL atomics
            # it instantiates (f16, f32, f64); s32 accumulation is never generated with stream-K
            out.warn(
                "xe.schedule.streamk_untested",
                "stream-K/split-K with an s32 accumulator is not generated by sycl-tla (generator.py emits it for f16/f32/f64 only)",
            )
        if cfg.kernel == "moe_gemm" and cfg.stages != 3:
            out.fail(
                "xe.moe.stages",
                f"moe_gemm hard-codes a prefetch distance of 3 (moe_gemms.hpp:127); stages={cfg.stages} cannot be honoured",
            )
        if cfg.stages > 4:
            out.warn(
                "xe.stages_untested", f"stages={cfg.stages}: the repo uses prefetch distances 2-3; untested"
            )
        self._grf_warning(cfg, out)

    def _check_explicit_atom(self, cfg: XeGemmConfig, atom: DpasAtom, out: Collector) -> None:
        pair = (atom.type_a, atom.type_b)
        mixed_legacy = atom.legacy and cfg.dtype.a != cfg.dtype.b
        if atom.legacy:
            out.require(
                pair in LEGACY_AB,
                "xe.atom_types",
                f"legacy atom {cfg.mma_atom} does not exist (mma_xe_legacy.hpp)",
            )
        else:
            out.require(
                pair in DECLARED_AB,
                "xe.atom_types",
                f"XE_DPAS_TT is not declared for {atom.type_a} x {atom.type_b} (mma_xe.hpp:135-169: tf32, bf16, f16, "
                "and integer combinations only)",
            )
        out.require(
            atom.k == 256 // max(DTYPE_BITS.get(atom.type_a, 32), DTYPE_BITS.get(atom.type_b, 32)),
            "xe.atom_k",
            f"atom K={atom.k} does not match {atom.type_a} x {atom.type_b} inputs (K = 256/bits, mma_xe.hpp:50)",
        )
        if mixed_legacy:
            # MainloopIntelXeXMX16MixedPrecision converts both operands to the atom's type
            # (xe_mma_mixed_input.hpp:136-260).  Its scale/zero copies exist for a per-SG quantized width of
            # 16 or >= 32 (xe_mma_mixed_input.hpp:48-90, :238 SG_QNT_WIDTH).
            narrow_a = cfg.dtype.bits_a < cfg.dtype.bits_b
            pm, pn, _ = cfg.per_sg()
            width = pm if narrow_a else pn
            out.require(
                width == 16 or width >= 32,
                "xe.legacy.mixed_quant_width",
                f"mixed-precision mainloop: per-subgroup quantized width {width} (per-SG {'M' if narrow_a else 'N'}) "
                "must be 16 or >= 32 for the scale/zero copies (xe_mma_mixed_input.hpp:48-90)",
            )
        else:
            # the atom must consume the operand types after at most an upconversion in registers:
            # 8- and 4-bit inputs (fp8, int8/int4 weights, fp4) are upconverted to f16/bf16 by reorder
            for side, have in (("A", cfg.dtype.a), ("B", cfg.dtype.b)):
                want = atom.type_a if side == "A" else atom.type_b
                ok = have == want or (want in FLOAT16 and DTYPE_BITS[have] <= 8)
                out.require(
                    ok,
                    "xe.atom_operand",
                    f"operand {side} is {have} but the atom multiplies {want}; only 8/4-bit inputs are upconverted by reorder",
                )
        sgm = cfg.per_sg()[0]
        out.require(
            sgm % max(1, atom.m) == 0,
            "xe.gemm.wg_m_divisible",
            f"per-subgroup M={sgm} is not a multiple of the atom's M={atom.m}",
        )

    def _grf_warning(self, cfg: XeGemmConfig, out: Collector) -> None:
        """Soft GRF model: accumulator + A + B fragments per subgroup vs 16 KB (256 GRF x 64 B).

        Soft because sycl-tla benchmarks 512x256x32 (64x64 per subgroup, 16 KB of accumulators alone;
        benchmarks/gemm/benchmarks_sycl.hpp:53-60): exceeding the estimate is a warning, not a rejection."""
        pm, pn, _ = cfg.per_sg()
        wk = cfg.wg[2]
        acc = pm * pn * 4
        frag_a = pm * wk * max(cfg.dtype.bits_a, 16) // 8
        frag_b = wk * pn * max(cfg.dtype.bits_b, 16) // 8
        total = acc + frag_a + frag_b
        if total > GRF_BYTES:
            out.warn(
                "xe.grf_pressure",
                f"per-subgroup tile {pm}x{pn} with WG_K={wk} needs ~{total} B of registers (acc {acc}, A {frag_a}, "
                f"B {frag_b}) > {GRF_BYTES} B (256 GRF): expect spills (512x256x32 sg 8x4 still compiles in the repo)",
            )

    def _check_gemm_problem(self, cfg: XeGemmConfig, problem: dict[str, Any], out: Collector) -> None:
        check_problem_dtype(cfg.dtype, problem, out, "xe")
        layout = problem_layout(problem)
        out_name = str(problem.get("out_dtype", "f32" if accumulator_for(cfg.dtype) == "f32" else "s32"))
        out_bits = DTYPE_BITS.get(out_name, 32)
        # xe_epilogue.hpp:116 static_assert "ElementOutput must be at least 8 bits"
        out.require(out_bits >= 8, "xe.epilogue.out_bits", f"output dtype {out_name} is narrower than 8 bits")
        nb = batch(problem)
        for idx, (m, n, k) in enumerate(gemm_problems(problem, cfg.kernel)):
            tag = f"group {idx}: " if cfg.kernel in ("grouped_gemm", "moe_gemm") else ""
            # xe_mma.hpp:145-160 can_implement: contiguous extent (and strides) multiple of 128/bits elements,
            # batch stride multiple of 512/bits elements when L > 1 (xe_array_mma.hpp:104-130 per group)
            for side, bits, contig in (
                ("A", cfg.dtype.bits_a, ("K", k) if layout[0] == "r" else ("M", m)),
                ("B", cfg.dtype.bits_b, ("N", n) if layout[1] == "r" else ("K", k)),
                ("D", out_bits, ("N", n)),
            ):
                elems = 128 // bits
                out.require(
                    contig[1] % elems == 0,
                    "xe.alignment",
                    f"{tag}{side}: contiguous extent {contig[0]}={contig[1]} is not a multiple of {elems} elements "
                    f"(16 bytes for block-2D copies, xe_mma.hpp can_implement)",
                )
            for side, bits, contig in (
                ("A", cfg.dtype.bits_a, ("K", k) if layout[0] == "r" else ("M", m)),
                ("B", cfg.dtype.bits_b, ("N", n) if layout[1] == "r" else ("K", k)),
                ("D", out_bits, ("N", n)),
            ):
                pitch = contig[1] * bits // 8
                if pitch < MIN_BLOCK2D_PITCH_BYTES:
                    out.warn(
                        "xe.pitch_64",
                        f"{tag}{side}: row pitch {pitch} B ({contig[0]}={contig[1]}) is below "
                        f"{MIN_BLOCK2D_PITCH_BYTES} B: legal to sycl-tla's can_implement (16 B), but Intel's "
                        "Triton backend uses block-2D loads only from 64 B; untested on hardware (every "
                        "program verifies the timed problem; grouped GEMM programs also verify a "
                        "narrow_pitch check problem with 16-32 B pitches on A, B and D)",
                    )
            if nb > 1:
                for side, bits, stride in (("A", cfg.dtype.bits_a, m * k), ("B", cfg.dtype.bits_b, k * n)):
                    elems = 512 // bits
                    out.require(
                        stride % elems == 0,
                        "xe.alignment_batch",
                        f"{tag}{side}: batch stride {stride} elements is not a multiple of {elems} (64 bytes)",
                    )
