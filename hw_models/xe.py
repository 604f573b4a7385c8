"""Intel Xe constraint model for sycl-tla (CUTLASS SYCL): GEMM, grouped GEMM, MoE GEMM, flash attention.

Rules follow intel/sycl-tla at commit 6601377d25d3bb7cb2be0df6faf48f732a20a3e8 (the 0.9.1 wheel has
byte-identical copies of the headers cited here); ``path:line`` refers to that commit and is repeated
in ``docs/hw_models.md`` with the rule ids.  There is no PVC- or BMG-specific code in sycl-tla's
``include/`` (Xe12/Xe20 builders forward to the IntelXe one, xe_mma_builder.inl:150-166), so ``bmg``,
``pvc`` and ``xe2_igpu`` share the rules and differ only in their devices (cost model, AOT name).

Kernel kinds and their config fields:

* ``gemm`` / ``grouped_gemm`` / ``moe_gemm``: ``wg: [M, N, K]``, ``sg: [SG_M, SG_N, SG_K]`` (omit to
  derive it exactly as the CollectiveBuilder does, which can produce illegal layouts),
  ``stages`` (L1 prefetch distance; default = what the builder/example uses), ``schedule``
  (default | streamk | splitk | persistent), ``mma_atom`` (optional explicit atom, new
  ``XE_DPAS_TT<...>`` or legacy ``XE_8x16x16_F32BF16BF16F32_TT`` vocabulary).
* ``fa_prefill`` / ``fa_decode``: ``qk: [Q, K, D]``, ``pv: [Q, V, K]``, ``out: [Q, V]``,
  ``sg_qk: [SG_Q, SG_K, 1]``, ``sg_pv`` (optional, default ``(SG_Q, 1, SG_K)``), ``head_dim``,
  ``stages``, ``causal``, ``persistent``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.hw_models.base import (
    TargetModel,
    bool_value,
    check_problem_dtype,
    choice,
    int_tuple,
    int_value,
    reject_unknown_fields,
)
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.dtypes import DTYPE_BITS, FLOAT16, DTypePair, parse_dtype
from kernelpilot.hw_models.problems import attention_dims, batch, gemm_problems, problem_layout
from kernelpilot.hw_models.types import CheckResult, Collector, TileConfig
from kernelpilot.hw_models.xe_dpas import (
    DECLARED_AB,
    LEGACY_AB,
    DpasAtom,
    accumulator_for,
    builder_atom,
    default_atom_m,
    parse_atom,
)

GEMM_KERNELS = ("gemm", "grouped_gemm", "moe_gemm")
FA_KERNELS = ("fa_prefill", "fa_decode")
KERNELS = GEMM_KERNELS + FA_KERNELS
SCHEDULES = ("default", "streamk", "splitk", "persistent")
GEMM_FIELDS = ("kernel", "dtype", "wg", "sg", "stages", "schedule", "mma_atom", "atom_m")
FA_FIELDS = (
    "kernel",
    "dtype",
    "qk",
    "pv",
    "out",
    "sg_qk",
    "sg_pv",
    "head_dim",
    "stages",
    "causal",
    "persistent",
    "api",
)
FA_APIS = ("new", "legacy")

#: include/cutlass/gemm/collective/builders/xe_mma_builder.inl:95 ``MaxSG = 32``; docs
#: media/docs/cpp/cute/12_intel_performance_guide.md:26 "up to 32 subgroups per work-group"
MAX_SG = 32
#: large-GRF mode: 256 registers x 64 B per hardware thread (= one subgroup),
#: media/docs/cpp/cute/11_intel_gemm_companion.md:43,290-291
GRF_BYTES = 256 * 64
#: FA head dims compiled and tested in the repo (examples/06_bmg_flash_attention/CMakeLists.txt:36-60)
FA_TESTED_HEAD_DIMS = (64, 96, 128, 192)
FA_DTYPES = ("bf16", "f16", "e4m3", "e5m2")


# ==================================================================================================
# configs


class XeGemmConfig(TileConfig):
    """A sycl-tla GEMM-family configuration (gemm, grouped_gemm, moe_gemm)."""

    kernel: str = "gemm"
    dtype: DTypePair
    wg: tuple[int, int, int]
    sg: tuple[int, int, int] | None = None
    stages: int
    schedule: str = "default"
    mma_atom: str | None = None
    atom_m: int | None = None

    def builder_sg(self) -> tuple[int, int, int]:
        """The SG layout sycl-tla's CollectiveBuilder derives (xe_mma_builder.inl:89-98)."""
        wm, wn, wk = self.wg
        atom = builder_atom(self.dtype, math.gcd(8, wm))
        grid_m = max(1, wm // atom.m)
        grid_n = max(1, wn // 16)
        sg_m0 = min(grid_m, 8)
        sg_n = min(grid_n, MAX_SG // sg_m0)
        sg_m = min(grid_m, MAX_SG // sg_n)
        return (sg_m, sg_n, 1)

    def effective_sg(self) -> tuple[int, int, int]:
        return self.sg if self.sg is not None else self.builder_sg()

    def atom(self) -> DpasAtom:
        """The DPAS atom: explicit ``mma_atom``; else the builder's types with M = ``atom_m``, or
        gcd(8, WG_M) when the builder derives the layout (xe_mma_builder.inl:89), or gcd(8, per-SG M)."""
        if self.mma_atom:
            return parse_atom(self.mma_atom, "config")
        if self.atom_m is not None:
            return builder_atom(self.dtype, self.atom_m)
        sgm = self.effective_sg()[0]
        if self.sg is None:
            return builder_atom(self.dtype, math.gcd(8, self.wg[0]))
        return builder_atom(self.dtype, default_atom_m(max(1, self.wg[0] // max(1, sgm))))

    def per_sg(self) -> tuple[int, int, int]:
        sg = self.effective_sg()
        return (self.wg[0] // sg[0], self.wg[1] // sg[1], self.wg[2] // sg[2])

    def num_sg(self) -> int:
        sg = self.effective_sg()
        return sg[0] * sg[1] * sg[2]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "wg": list(self.wg),
            "sg": list(self.effective_sg()),
            "stages": self.stages,
            "schedule": self.schedule,
            "atom_m": self.atom().m,
        }
        if self.mma_atom:
            out["mma_atom"] = self.mma_atom
        return out

    def label(self) -> str:
        sg = self.effective_sg()
        parts = [f"{self.wg[0]}x{self.wg[1]}x{self.wg[2]}", f"sg{sg[0]}x{sg[1]}x{sg[2]}", f"s{self.stages}"]
        if self.schedule != "default":
            parts.append(self.schedule)
        return "_".join(parts)


class XeFaConfig(TileConfig):
    """A sycl-tla flash-attention-v2 forward configuration (new API, applications/flash_attention_v2)."""

    kernel: str = "fa_prefill"
    dtype: DTypePair
    qk: tuple[int, int, int]
    pv: tuple[int, int, int]
    out: tuple[int, ...]  # (Q, V) for the new API; the legacy API's ShapeOutput is (Q, V, K)
    sg_qk: tuple[int, int, int]
    sg_pv: tuple[int, int, int] | None = None
    head_dim: int | None = None
    stages: int
    causal: bool = False
    persistent: bool = False
    api: str = "new"

    def effective_sg_pv(self) -> tuple[int, int, int]:
        """Default PV layout: get_sg_layout_pv(QK) = (SG_Q, 1, SG_K) (xe_fmha_fwd_mainloop.hpp:511-520)."""
        return self.sg_pv if self.sg_pv is not None else (self.sg_qk[0], 1, self.sg_qk[1])

    def atom(self) -> DpasAtom:
        """XE_DPAS_TT<gcd(SGTileQ, 8), float, ElementQ> (half_t for fp8), xe_fmha_fwd_runner.hpp:883-889."""
        sg_tile_q = max(1, self.qk[0] // self.sg_qk[0])
        a = self.dtype.a if self.dtype.a in FLOAT16 else "f16"
        return DpasAtom(m=math.gcd(sg_tile_q, 8), k=16, type_a=a, type_b=a)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "dtype": self.dtype.as_json(),
            "qk": list(self.qk),
            "pv": list(self.pv),
            "out": list(self.out),
            "sg_qk": list(self.sg_qk),
            "sg_pv": list(self.effective_sg_pv()),
            "stages": self.stages,
            "causal": self.causal,
            "persistent": self.persistent,
        }
        if self.head_dim is not None:
            out["head_dim"] = self.head_dim
        if self.api != "new":
            out["api"] = self.api
            out.pop("sg_pv")
        return out

    def label(self) -> str:
        parts = [
            "qk" + "x".join(map(str, self.qk)),
            "pv" + "x".join(map(str, self.pv)),
            "o" + "x".join(map(str, self.out)),
            "sg" + "x".join(map(str, self.sg_qk)),
            f"s{self.stages}",
        ]
        if self.causal:
            parts.append("causal")
        if self.persistent:
            parts.append("persistent")
        if self.api != "new":
            parts.append(self.api)
        return "_".join(parts)


def default_stages(kernel: str) -> int:
    """Library defaults: builder 3 (GEMM) / 2 (grouped) (xe_mma_builder.inl:107-110); MoE hard-codes a
    prefetch distance of 3 (examples/12_xe20_moe_gemm_cute_interface/moe_gemms.hpp:127); FA prefill 2,
    decode 1 (examples/06_bmg_flash_attention/06_xe_fmha_fwd.cpp:154-158)."""
    return {"gemm": 3, "grouped_gemm": 2, "moe_gemm": 3, "fa_prefill": 2, "fa_decode": 1}[kernel]


# ==================================================================================================


class XeModel(TargetModel):
    """sycl-tla constraint model for one Xe target (``bmg``, ``pvc``, ``xe2_igpu``)."""

    family = "xe"
    kernels = KERNELS

    def __init__(self, name: str, default_device: str, aot_names: tuple[str, ...]) -> None:
        self.name = name
        self.default_device = default_device
        self.aot_names = aot_names

    # -- parsing -------------------------------------------------------------------------------------
    def parse_config(self, raw: dict[str, Any], where: str = "config") -> XeGemmConfig | XeFaConfig:
        if isinstance(raw, (XeGemmConfig, XeFaConfig)):
            return raw
        if not isinstance(raw, dict):
            raise InputError(f"{where}: a config must be a mapping, got {type(raw).__name__}")
        kernel = self.check_kernel(raw.get("kernel", "gemm"), where)
        if kernel in FA_KERNELS:
            return self._parse_fa(raw, kernel, where)
        reject_unknown_fields(raw, GEMM_FIELDS, where)
        dtype = parse_dtype(raw.get("dtype", "bf16"), where)
        if "wg" not in raw:
            raise InputError(f"{where}: missing field 'wg' ([M, N, K])", field="wg")
        wg = int_tuple(raw["wg"], where, "wg", 3)
        sg = None
        if raw.get("sg") is not None:
            sg_raw = int_tuple(raw["sg"], where, "sg", (2, 3))
            sg = sg_raw if len(sg_raw) == 3 else (sg_raw[0], sg_raw[1], 1)
        stages = int_value(raw.get("stages", default_stages(kernel)), where, "stages", minimum=1)
        schedule = choice(raw.get("schedule", "default"), SCHEDULES, where, "schedule")
        atom = raw.get("mma_atom")
        if atom is not None:
            if not isinstance(atom, str):
                raise InputError(f"{where}: mma_atom must be a string", field="mma_atom")
            parse_atom(atom, where)  # syntax errors are input errors
        atom_m = raw.get("atom_m")
        if atom_m is not None:
            atom_m = int_value(atom_m, where, "atom_m", minimum=1)
            if atom is not None and parse_atom(atom, where).m != atom_m:
                raise InputError(f"{where}: atom_m={atom_m} contradicts mma_atom {atom!r}", field="atom_m")
        return XeGemmConfig(
            kernel=kernel,
            dtype=dtype,
            wg=wg,  # type: ignore[arg-type]
            sg=sg,  # type: ignore[arg-type]
            stages=stages,
            schedule=schedule,
            mma_atom=atom,
            atom_m=atom_m,
        )

    def _parse_fa(self, raw: dict[str, Any], kernel: str, where: str) -> XeFaConfig:
        reject_unknown_fields(raw, FA_FIELDS, where)
        for field in ("qk", "pv", "out", "sg_qk"):
            if field not in raw:
                raise InputError(f"{where}: missing field {field!r} for {kernel}", field=field)
        sg_pv = raw.get("sg_pv")
        head_dim = raw.get("head_dim")
        return XeFaConfig(
            kernel=kernel,
            dtype=parse_dtype(raw.get("dtype", "bf16"), where),
            qk=int_tuple(raw["qk"], where, "qk", 3),  # type: ignore[arg-type]
            pv=int_tuple(raw["pv"], where, "pv", 3),  # type: ignore[arg-type]
            out=int_tuple(raw["out"], where, "out", (2, 3)),  # type: ignore[arg-type]
            sg_qk=int_tuple(raw["sg_qk"], where, "sg_qk", 3),  # type: ignore[arg-type]
            sg_pv=None if sg_pv is None else int_tuple(sg_pv, where, "sg_pv", 3),  # type: ignore[arg-type]
            head_dim=None if head_dim is None else int_value(head_dim, where, "head_dim", minimum=1),
            stages=int_value(raw.get("stages", default_stages(kernel)), where, "stages", minimum=1),
            causal=bool_value(raw.get("causal", False), where, "causal"),
            persistent=bool_value(raw.get("persistent", False), where, "persistent"),
            api=choice(raw.get("api", "new"), FA_APIS, where, "api"),
        )

    # -- checking ------------------------------------------------------------------------------------
    def check(self, config: TileConfig, problem: dict[str, Any] | None = None) -> CheckResult:
        cfg = self.as_config(config)
        out = Collector()
        if isinstance(cfg, XeGemmConfig):
            self._check_gemm(cfg, out)
            if problem is not None:
                self._check_gemm_problem(cfg, problem, out)
        elif isinstance(cfg, XeFaConfig):
            self._check_fa(cfg, out)
            if problem is not None:
                self._check_fa_problem(cfg, problem, out)
        else:
            raise InputError(f"{self.name} cannot check a {type(cfg).__name__}")
        return out.result()

    # ---- GEMM family
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
            if nb > 1:
                for side, bits, stride in (("A", cfg.dtype.bits_a, m * k), ("B", cfg.dtype.bits_b, k * n)):
                    elems = 512 // bits
                    out.require(
                        stride % elems == 0,
                        "xe.alignment_batch",
                        f"{tag}{side}: batch stride {stride} elements is not a multiple of {elems} (64 bytes)",
                    )

    # ---- flash attention
    def _check_fa(self, cfg: XeFaConfig, out: Collector) -> None:
        if cfg.api == "legacy":
            self._check_fa_legacy(cfg, out)
            return
        q, kv, d = cfg.qk
        pq, pv, pk = cfg.pv
        out.require(
            len(cfg.out) == 2,
            "xe.fa.out_rank",
            f"out={list(cfg.out)}: the new API's ShapeOut is (Q, V) (xe_fmha_fwd_runner.hpp:911-913)",
        )
        oq, ov = cfg.out[0], cfg.out[1]
        sgq, sgk, sgd = cfg.sg_qk
        sg_pv = cfg.effective_sg_pv()
        for side, name in (("Q/K/V", cfg.dtype.a), ("V", cfg.dtype.b)):
            out.require(
                name in FA_DTYPES,
                "xe.fa.dtype",
                f"{side} dtype {name}: flash attention takes {', '.join(FA_DTYPES)} (06_bmg_flash_attention/CMakeLists.txt)",
            )
        # xe_fmha_fwd_runner.hpp:911 / fmha_configuration.hpp:86
        out.require(
            oq == pq,
            "xe.fa.out_q",
            f"out[0]={oq} != pv[0]={pq}: 'Output tile and P*V tile have different sizes in Q dimension'",
        )
        # same Q tile and same KV tile in both GEMMs (fmha_configuration.hpp:265-269 builds them so)
        out.require(q == pq, "xe.fa.q_tile", f"qk[0]={q} != pv[0]={pq}: both GEMMs must use the same Q tile")
        out.require(
            kv == pk, "xe.fa.kv_tile", f"qk[1]={kv} != pv[2]={pk}: the PV K extent is the KV tile of QK"
        )
        # VTiles = out[1] / pv[1] (xe_fmha_fwd_runner.hpp:913)
        out.require(
            ov >= pv and ov % pv == 0,
            "xe.fa.v_tiles",
            f"out[1]={ov} is not a positive multiple of pv[1]={pv} (VTiles = out/pv must be an integer >= 1)",
        )
        # QK layout never splits the head dim; PV layout has the same SG count
        out.require(
            sgd == 1,
            "xe.fa.sg_layout_qk",
            f"sg_qk={list(cfg.sg_qk)}: the third (head-dim) entry must be 1 (the head dim is looped, not split)",
        )
        out.require(
            sg_pv[0] * sg_pv[1] * sg_pv[2] == sgq * sgk * sgd,
            "xe.fa.sg_layout_pv",
            f"sg_pv={list(sg_pv)} has {sg_pv[0] * sg_pv[1] * sg_pv[2]} subgroups, sg_qk has {sgq * sgk * sgd}: "
            "'Q*K cannot be parallelized in the head size dimension' (xe_fmha_fwd_mainloop.hpp:537)",
        )
        if cfg.sg_pv is not None and tuple(cfg.sg_pv) != (sgq, 1, sgk):
            out.warn(
                "xe.fa.sg_layout_pv_custom",
                f"sg_pv={list(cfg.sg_pv)} differs from the library's get_sg_layout_pv = {[sgq, 1, sgk]}; untested",
            )
        # fmha_configuration.hpp:271-272 "WgTileQ must be divisible by SgTileQ" / "WgTileK ... SgTileK"
        out.require(q % sgq == 0, "xe.fa.sg_tile_q", f"qk[0]={q} is not divisible by SG_Q={sgq}")
        out.require(kv % sgk == 0, "xe.fa.sg_tile_k", f"qk[1]={kv} is not divisible by SG_K={sgk}")
        # TiledMMA divisibility of both GEMMs
        atom = cfg.atom()
        out.require(
            q % (atom.m * sgq) == 0,
            "xe.fa.divisible_qk",
            f"QK: q={q} is not a multiple of DPAS_M*SG_Q={atom.m}*{sgq}",
        )
        out.require(
            kv % (16 * sgk) == 0,
            "xe.fa.divisible_qk",
            f"QK: k={kv} is not a multiple of 16*SG_K=16*{sgk}={16 * sgk}",
        )
        out.require(d % atom.k == 0, "xe.fa.divisible_qk", f"QK: d={d} is not a multiple of DPAS_K={atom.k}")
        out.require(
            pq % (atom.m * sg_pv[0]) == 0,
            "xe.fa.divisible_pv",
            f"PV: q={pq} is not a multiple of DPAS_M*SG_Q={atom.m}*{sg_pv[0]}",
        )
        out.require(
            pv % (16 * sg_pv[1]) == 0,
            "xe.fa.divisible_pv",
            f"PV: v={pv} is not a multiple of 16*{sg_pv[1]}",
        )
        out.require(
            pk % (atom.k * sg_pv[2]) == 0,
            "xe.fa.divisible_pv",
            f"PV: k={pk} is not a multiple of DPAS_K*SG_K={atom.k}*{sg_pv[2]}={atom.k * sg_pv[2]}",
        )
        # subgroups per work-group, as for GEMM
        out.require(
            sgq * sgk * sgd <= MAX_SG,
            "xe.sg_count",
            f"sg_qk={list(cfg.sg_qk)} has {sgq * sgk * sgd} subgroups; at most {MAX_SG}",
        )
        # xe_fmha_fwd_runner.hpp:948 / fmha_configuration.hpp:69
        out.require(
            not (cfg.persistent and cfg.causal),
            "xe.fa.persistent_causal",
            "persistent + causal: static_assert 'persistent SDPA kernel not support Causal yet'",
        )
        # the persistent (dynamic split) kernel serves decode only (xe_fmha_fwd_kernel.hpp:426-437 can_implement)
        out.require(
            not (cfg.persistent and cfg.kernel == "fa_prefill"),
            "xe.fa.persistent_decode",
            "the persistent (XeFMHAFwdDynamicSplitKernel) kernel only implements decode (seq_qo == 1)",
        )
        if cfg.head_dim is not None:
            hd = cfg.head_dim
            out.require(
                hd % 16 == 0,
                "xe.fa.head_dim",
                f"head_dim={hd} is not a multiple of 16 (DPAS N / K granularity)",
            )
            if hd not in FA_TESTED_HEAD_DIMS:
                out.warn(
                    "xe.fa.head_dim_untested",
                    f"head_dim={hd}: sycl-tla builds and tests {FA_TESTED_HEAD_DIMS} only (06_bmg_flash_attention/CMakeLists.txt)",
                )
            if cfg.persistent and hd == 192:
                out.warn(
                    "xe.fa.persistent_head_dim",
                    "the examples do not build persistent decode for head_dim 192",
                )
            if ov < hd:
                out.warn(
                    "xe.fa.out_v_split",
                    f"out[1]={ov} < head_dim={hd}: ceil({hd}/{ov}) work-groups recompute Q*K^T for each V slice",
                )
            elif ov > hd and ov - hd >= pv:
                out.warn("xe.fa.out_v_waste", f"out[1]={ov} exceeds head_dim={hd} by at least one V tile")
        expected = default_stages(cfg.kernel)
        if cfg.stages != expected:
            out.warn(
                "xe.fa.stages_untested",
                f"stages={cfg.stages}: the repo uses {expected} for {cfg.kernel} (06_xe_fmha_fwd.cpp:154-158)",
            )
        # soft GRF model: S accumulator, O accumulator (all V tiles), Q fragment
        q_sg = q // max(1, sgq)
        s_acc = q_sg * (kv // max(1, sgk)) * 4
        o_acc = q_sg * ov * 4
        q_frag = q_sg * d * 2
        total = s_acc + o_acc + q_frag
        if total > GRF_BYTES:
            out.warn(
                "xe.grf_pressure",
                f"per-subgroup S {s_acc} B + O {o_acc} B + Q {q_frag} B = {total} B > {GRF_BYTES} B (256 GRF): expect spills",
            )

    def _check_fa_legacy(self, cfg: XeFaConfig, out: Collector) -> None:
        """Legacy FA (applications/flash_attention_v2/{collective,kernel}/legacy, examples/06 legacy)."""
        q, kv, d = cfg.qk
        pq, pv, pk = cfg.pv
        sg, sg_n, sg_k = cfg.sg_qk
        for side, name in (("Q/K/V", cfg.dtype.a), ("V", cfg.dtype.b)):
            out.require(
                name in FA_DTYPES,
                "xe.fa.dtype",
                f"{side} dtype {name}: legacy FA takes {', '.join(FA_DTYPES)}",
            )
        # xe_flash_attn_prefill_epilogue.hpp:79 / xe_flash_attn_decode_epilogue.hpp:90: rank-3 TileShapeOutput
        out.require(
            len(cfg.out) == 3,
            "xe.fa.out_rank",
            f"out={list(cfg.out)}: the legacy TileShapeOutput is rank 3 [Q, V, K] (xe_flash_attn_prefill_epilogue.hpp:79)",
        )
        oq, ov = cfg.out[0], cfg.out[1]
        out.require(oq == pq, "xe.fa.out_q", f"out[0]={oq} != pv[0]={pq}")
        out.require(q == pq, "xe.fa.q_tile", f"qk[0]={q} != pv[0]={pq}: both GEMMs must use the same Q tile")
        out.require(
            kv == pk, "xe.fa.kv_tile", f"qk[1]={kv} != pv[2]={pk}: the PV K extent is the KV tile of QK"
        )
        # VSlicer = ShapeOut[1] / (ShapePV[1] * PV_ATOM_N) (kernel/legacy/xe_flash_attn_prefill.hpp:132)
        out.require(
            ov >= pv and ov % pv == 0,
            "xe.fa.v_tiles",
            f"out[1]={ov} is not a positive multiple of pv[1]={pv} (legacy VSlicer)",
        )
        # the declared SubgroupLayout is (SG, 1, 1) (examples/06_bmg_flash_attention/legacy/06_bmg_prefill_attention.cpp:93)
        out.require(
            sg_n == 1 and sg_k == 1,
            "xe.fa.legacy.sg_layout",
            f"sg_qk={list(cfg.sg_qk)}: the legacy SubgroupLayout is (SG, 1, 1)",
        )
        out.require(sg <= MAX_SG, "xe.sg_count", f"{sg} subgroups; at most {MAX_SG}")
        if cfg.kernel == "fa_prefill":
            # collective/legacy/xe_flash_attn_prefill_softmax_epilogue.hpp:154 static_assert(Vec * FragsM % 8 == 0)
            rows = q // max(1, sg)
            out.require(
                q % max(1, sg) == 0 and rows % 8 == 0,
                "xe.fa.legacy.rows_per_sg",
                f"q={q} over {sg} subgroups gives {q / max(1, sg):g} rows each; the legacy softmax needs a multiple of 8 "
                "('No. of attention rows per subgroup should be >= 1 MMA Atom worth of rows')",
            )
            out.require(
                kv % 16 == 0 and d % 16 == 0,
                "xe.fa.divisible_qk",
                f"QK: k={kv} and d={d} must be multiples of 16",
            )
            out.require(
                pv % 16 == 0 and pk % 16 == 0,
                "xe.fa.divisible_pv",
                f"PV: v={pv} and k={pk} must be multiples of 16",
            )
        else:
            # kernel/legacy/xe_flash_attn_decode.hpp:137 static_assert(FragsM == 1) and
            # collective/legacy/xe_flash_attn_decode_softmax_epilogue.hpp:161 static_assert(Vec * FragsM == 1)
            out.require(q == 1, "xe.fa.legacy.decode_rows", f"legacy decode needs a 1-row Q tile, got q={q}")
            # the declared (NumSG,1,1) is re-mapped to QK (1,NumSG,1) and PV (1,1,NumSG)
            # (collective/legacy/xe_flash_attn_decode_mma.hpp:100-110)
            out.require(
                kv % (16 * sg) == 0,
                "xe.fa.divisible_qk",
                f"QK: k={kv} is not a multiple of 16*NumSG={16 * sg}",
            )
            out.require(
                pk % (16 * sg) == 0 and pv % 16 == 0,
                "xe.fa.divisible_pv",
                f"PV: k={pk} must be a multiple of 16*NumSG={16 * sg} and v={pv} of 16",
            )
            # kernel/legacy/xe_flash_attn_decode.hpp:81 only FlashDecodeIndividualScheduler
            out.require(
                not cfg.persistent,
                "xe.fa.persistent_decode",
                "the legacy decode kernel has no persistent scheduler (xe_flash_attn_decode.hpp:81)",
            )

    def _check_fa_problem(self, cfg: XeFaConfig, problem: dict[str, Any], out: Collector) -> None:
        check_problem_dtype(cfg.dtype, problem, out, "xe")
        dims = attention_dims(problem)
        bits = DTYPE_BITS[cfg.dtype.a]
        elems = 128 // bits
        for name in ("head_dim_qk", "head_dim_vo"):
            out.require(
                dims[name] % elems == 0,
                "xe.alignment",
                f"{name}={dims[name]} is not a multiple of {elems} elements (16-byte rows for block-2D copies)",
            )
        if cfg.head_dim is not None and cfg.head_dim != dims["head_dim_qk"]:
            out.fail(
                "xe.fa.head_dim_mismatch",
                f"config built for head_dim={cfg.head_dim}, problem has head_dim_qk={dims['head_dim_qk']}",
            )
        if cfg.persistent:
            cores = self.device().cores
            # xe_fmha_fwd_kernel.hpp:426-437 can_implement of the dynamic-split kernel
            out.require(
                dims["seq_qo"] == 1,
                "xe.fa.persistent_decode",
                f"persistent kernel needs seq_qo == 1, got {dims['seq_qo']}",
            )
            out.require(
                dims["batch"] * dims["num_heads_q"] <= cores,
                "xe.fa.persistent_heads",
                f"persistent kernel needs batch*num_heads_q <= Xe-cores ({cores} on {self.default_device}), "
                f"got {dims['batch'] * dims['num_heads_q']}",
            )
        if problem.get("causal") is not None and bool(problem["causal"]) != cfg.causal:
            out.fail(
                "xe.fa.causal_mismatch",
                f"config causal={cfg.causal} but the problem asks causal={bool(problem['causal'])}",
            )

    # -- enumeration ---------------------------------------------------------------------------------
    def enumerate(
        self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None
    ) -> Iterator[TileConfig]:
        kernel = self.check_kernel(kernel, "enumerate")
        pair = parse_dtype(dtype, "enumerate")
        if kernel in FA_KERNELS:
            yield from self._enumerate_fa(kernel, pair, problem)
            return
        atom_k = builder_atom(pair, 8).k
        stages = default_stages(kernel)
        # Observed ranges of sycl-tla's GEMM configs (examples/, benchmarks/gemm/): per-SG tiles 8x16 .. 64x64,
        # WG_K 1-4 DPAS K steps (16/32/64 for 16-bit types), power-of-two SG counts up to 32.
        per_sg_m = (8, 16, 32, 64)
        per_sg_n = (16, 32, 64)
        k_steps = (1, 2, 4)
        sg_dims = (1, 2, 4, 8, 16, 32)
        for sgm in sg_dims:
            for sgn in sg_dims:
                if sgm * sgn > MAX_SG:
                    continue
                for pm in per_sg_m:
                    wm = pm * sgm
                    if wm > 512:
                        continue
                    for pn in per_sg_n:
                        wn = pn * sgn
                        if wn > 512:
                            continue
                        for ks in k_steps:
                            cfg = XeGemmConfig(
                                kernel=kernel,
                                dtype=pair,
                                wg=(wm, wn, atom_k * ks),
                                sg=(sgm, sgn, 1),
                                stages=stages,
                            )
                            if self.check(cfg, problem).valid:
                                yield cfg

    def _enumerate_fa(
        self, kernel: str, pair: DTypePair, problem: dict[str, Any] | None
    ) -> Iterator[XeFaConfig]:
        head_dims: tuple[int, ...]
        causal = False
        if problem:
            dims = attention_dims(problem)
            head_dims = (dims["head_dim_vo"],)
            causal = bool(problem.get("causal", False))
        else:
            head_dims = FA_TESTED_HEAD_DIMS
        stages = default_stages(kernel)
        if kernel == "fa_prefill":
            q_tiles, kv_tiles, sg_ks = (64, 128, 256), (32, 64, 128), (1,)
            sg_qs = (4, 8, 16, 32)
        else:
            q_tiles, kv_tiles, sg_ks = (1, 8, 16), (128, 256, 512), (2, 4, 8, 16)
            sg_qs = (1,)
        for hd in head_dims:
            for q in q_tiles:
                for kv in kv_tiles:
                    for sgq in sg_qs:
                        for sgk in sg_ks:
                            for d in (32, 64):
                                for pv_v in (32, 64):
                                    ov = -(-hd // pv_v) * pv_v
                                    for persistent in (
                                        (False, True) if kernel == "fa_decode" and not causal else (False,)
                                    ):
                                        cfg = XeFaConfig(
                                            kernel=kernel,
                                            dtype=pair,
                                            qk=(q, kv, d),
                                            pv=(q, pv_v, kv),
                                            out=(q, ov),
                                            sg_qk=(sgq, sgk, 1),
                                            head_dim=hd,
                                            stages=stages,
                                            causal=causal,
                                            persistent=persistent,
                                        )
                                        res = self.check(cfg, problem)
                                        if res.valid and not any(
                                            w.rule == "xe.grf_pressure" for w in res.warnings
                                        ):
                                            yield cfg

    def _default_config(self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None) -> TileConfig:
        """The library's untuned defaults, from the examples:

        * gemm: examples/00_bmg_gemm/00_bmg_gemm.cpp:358-380 (256x256x32, SG 8x4, XE_DPAS_TT<8,...>,
          MainloopXeL1Staged<2>); for 32-bit (tf32) inputs the same tile with WG_K=32 (4 DPAS K steps);
          for 8-bit inputs WG_K=32 (one s8 DPAS K step) as the generator's int8 list (generator.py:11086-11092
          uses 64);
        * grouped_gemm: examples/04_bmg_grouped_gemm/04_bmg_grouped_gemm.cpp:586-625 (256x256x32, SG 8x4, 2 stages);
        * moe_gemm: examples/12_xe20_moe_gemm_cute_interface/12_xe20_moe_gemm_cute_interface.cpp:248-264
          (256x128x32, SG 8x2, prefetch 3);
        * fa_prefill / fa_decode: examples/06_bmg_flash_attention/06_xe_fmha_fwd.cpp:84-148 per head dim.
        """
        kernel = self.check_kernel(kernel, "default_config")
        pair = parse_dtype(dtype, "default_config")
        # sub-byte inputs: one DPAS K step is 64 elements, so WG_K=32 would not hold a single step
        wk = 32 if pair.max_bits >= 8 else 64
        if kernel == "gemm":
            return XeGemmConfig(kernel=kernel, dtype=pair, wg=(256, 256, wk), sg=(8, 4, 1), stages=2)
        if kernel == "grouped_gemm":
            return XeGemmConfig(kernel=kernel, dtype=pair, wg=(256, 256, wk), sg=(8, 4, 1), stages=2)
        if kernel == "moe_gemm":
            return XeGemmConfig(kernel=kernel, dtype=pair, wg=(256, 128, 32), sg=(8, 2, 1), stages=3)
        hd = attention_dims(problem)["head_dim_vo"] if problem else 128
        causal = bool((problem or {}).get("causal", False))
        if kernel == "fa_prefill":
            table = {
                64: ((128, 64, 32), (128, 32, 64), (128, 64), (8, 1, 1)),
                96: ((128, 64, 32), (128, 32, 64), (128, 96), (8, 1, 1)),
                128: ((256, 32, 32), (256, 32, 32), (256, 128), (16, 1, 1)),
                192: ((256, 64, 32), (256, 32, 64), (256, 192), (32, 1, 1)),
            }
            if hd not in table:
                raise InputError(
                    f"no library default fa_prefill config for head_dim={hd}; the library has {sorted(table)}",
                    field="head_dim",
                )
            qk, pv, o, sg = table[hd]
            return XeFaConfig(
                kernel=kernel, dtype=pair, qk=qk, pv=pv, out=o, sg_qk=sg, head_dim=hd, stages=2, causal=causal
            )
        if hd not in FA_TESTED_HEAD_DIMS:
            raise InputError(
                f"no library default fa_decode config for head_dim={hd}; the library has {list(FA_TESTED_HEAD_DIMS)}",
                field="head_dim",
            )
        return XeFaConfig(
            kernel=kernel,
            dtype=pair,
            qk=(1, 512, 64),
            pv=(1, 32, 512),
            out=(1, hd),
            sg_qk=(1, 8, 1),
            head_dim=hd,
            stages=1,
            causal=causal,
        )

    def neighbours(self, config: TileConfig) -> list[TileConfig]:
        cfg = self.as_config(config)
        cands: list[TileConfig] = []
        if isinstance(cfg, XeGemmConfig):
            wm, wn, wk = cfg.wg
            sgm, sgn, sgk = cfg.effective_sg()
            options = [
                {"wg": (wm * 2, wn, wk)},
                {"wg": (wm // 2, wn, wk)},
                {"wg": (wm, wn * 2, wk)},
                {"wg": (wm, wn // 2, wk)},
                {"wg": (wm, wn, wk * 2)},
                {"wg": (wm, wn, wk // 2)},
                {"sg": (sgm * 2, sgn, sgk)},
                {"sg": (max(1, sgm // 2), sgn, sgk)},
                {"sg": (sgm, sgn * 2, sgk)},
                {"sg": (sgm, max(1, sgn // 2), sgk)},
                {"wg": (wm * 2, wn, wk), "sg": (sgm * 2, sgn, sgk)},
                {"wg": (wm, wn * 2, wk), "sg": (sgm, sgn * 2, sgk)},
                {"wg": (max(1, wm // 2), wn, wk), "sg": (max(1, sgm // 2), sgn, sgk)},
                {"wg": (wm, max(1, wn // 2), wk), "sg": (sgm, max(1, sgn // 2), sgk)},
                {"stages": cfg.stages + 1},
                {"stages": max(1, cfg.stages - 1)},
            ]
            if cfg.kernel == "gemm":
                options += [{"schedule": s} for s in SCHEDULES if s != cfg.schedule]
            base = cfg.model_copy(update={"sg": cfg.effective_sg()})
            for change in options:
                if any(isinstance(v, tuple) and min(v) < 1 for v in change.values()):
                    continue
                cands.append(base.model_copy(update=change))
        elif isinstance(cfg, XeFaConfig):
            q, kv, d = cfg.qk
            sgq, sgk, _ = cfg.sg_qk
            for nq, nsgq in (
                (q * 2, sgq * 2),
                (q // 2, max(1, sgq // 2)),
                (q, sgq * 2),
                (q, max(1, sgq // 2)),
            ):
                if nq >= 1:
                    cands.append(
                        cfg.model_copy(
                            update={
                                "qk": (nq, kv, d),
                                "pv": (nq, cfg.pv[1], kv),
                                "out": (nq, cfg.out[1]),
                                "sg_qk": (nsgq, sgk, 1),
                                "sg_pv": None,
                            }
                        )
                    )
            for nkv in (kv * 2, kv // 2):
                if nkv >= 16:
                    cands.append(cfg.model_copy(update={"qk": (q, nkv, d), "pv": (q, cfg.pv[1], nkv)}))
            for nd in (d * 2, d // 2):
                if nd >= 16:
                    cands.append(cfg.model_copy(update={"qk": (q, kv, nd)}))
            for nv in (cfg.pv[1] * 2, cfg.pv[1] // 2):
                if nv >= 16:
                    cands.append(cfg.model_copy(update={"pv": (cfg.pv[0], nv, cfg.pv[2])}))
        return self.valid_neighbours(cfg, cands)

    # -- cost ----------------------------------------------------------------------------------------
    def estimate_time_s(
        self, config: TileConfig, problem: dict[str, Any], device: Device | str | None = None
    ) -> float:
        from kernelpilot.hw_models.cost import xe_fa_time_s, xe_gemm_time_s

        cfg = self.as_config(config)
        dev = self.device(device)
        if isinstance(cfg, XeGemmConfig):
            return xe_gemm_time_s(cfg, problem, dev)
        return xe_fa_time_s(cfg, problem, dev)


def xe_models() -> list[XeModel]:
    """The Xe targets: Arc B-series (BMG, Xe2), Data Center GPU Max (PVC, Xe-HPC), Lunar Lake iGPU (Xe2)."""
    return [
        XeModel("bmg", "arc_b580", ("bmg-g21", "bmg-g31")),
        XeModel("pvc", "max_1550", ("pvc",)),
        XeModel("xe2_igpu", "lnl_xe2_igpu", ("lnl-m",)),
    ]
