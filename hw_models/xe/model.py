"""The Xe target model: parsing, check dispatch, enumeration, library defaults, neighbours, cost.

The rules themselves live in :mod:`.gemm`, :mod:`.fa` and :mod:`.fa_legacy`; this module ties them to one
target (``bmg``, ``pvc``, ``xe2_igpu``) and its device.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kernelpilot.errors import InputError, NoLibraryDefaultError
from kernelpilot.hw_models.axes import SearchAxis
from kernelpilot.hw_models.base import (
    bool_value,
    choice,
    int_tuple,
    int_value,
    reject_unknown_fields,
)
from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.dtypes import DTypePair, parse_dtype
from kernelpilot.hw_models.problems import attention_dims
from kernelpilot.hw_models.types import CheckResult, Collector, TileConfig
from kernelpilot.hw_models.xe.configs import (
    FA_APIS,
    FA_AXES,
    FA_FIELDS,
    FA_KERNELS,
    FA_TESTED_HEAD_DIMS,
    GEMM_AXES,
    GEMM_FIELDS,
    KERNELS,
    MAX_SG,
    SCHEDULE_ALIASES,
    SCHEDULES,
    XeFaConfig,
    XeGemmConfig,
    default_stages,
)
from kernelpilot.hw_models.xe.cost import xe_fa_time_s, xe_gemm_time_s
from kernelpilot.hw_models.xe.dpas import (
    builder_atom,
    parse_atom,
)
from kernelpilot.hw_models.xe.fa import XeFaRules
from kernelpilot.hw_models.xe.gemm import XeGemmRules
from kernelpilot.hw_models.xe.vendor import LEVEL_ZERO


class XeModel(XeGemmRules, XeFaRules):
    """sycl-tla constraint model for one Xe target (``bmg``, ``pvc``, ``xe2_igpu``)."""

    family = "xe"
    kernels = KERNELS
    vendor = LEVEL_ZERO

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
        raw_schedule = raw.get("schedule", "default")
        raw_schedule = (
            SCHEDULE_ALIASES.get(raw_schedule, raw_schedule)
            if isinstance(raw_schedule, str)
            else raw_schedule
        )
        schedule = choice(raw_schedule, SCHEDULES, where, "schedule")
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

    # -- search axes ---------------------------------------------------------------------------------
    def search_axes(self, kernel: str) -> tuple[SearchAxis, ...]:
        """Tiles and subgroup layouts split into ordinal extents (:data:`.configs.GEMM_AXES`, ``FA_AXES``)."""
        return FA_AXES if kernel in FA_KERNELS else GEMM_AXES

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
                raise NoLibraryDefaultError(
                    f"no library default fa_prefill config for head_dim={hd}; the library has {sorted(table)}",
                    field="head_dim",
                )
            qk, pv, o, sg = table[hd]
            return XeFaConfig(
                kernel=kernel, dtype=pair, qk=qk, pv=pv, out=o, sg_qk=sg, head_dim=hd, stages=2, causal=causal
            )
        if hd not in FA_TESTED_HEAD_DIMS:
            raise NoLibraryDefaultError(
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
