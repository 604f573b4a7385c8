"""Xe flash-attention rules (new API, xe_fmha_fwd) and the problem-level attention checks.

Configs with ``api: legacy`` are handed to :class:`~kernelpilot.hw_models.xe.fa_legacy.XeLegacyFaRules`.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.hw_models.base import (
    check_problem_dtype,
)
from kernelpilot.hw_models.dtypes import DTYPE_BITS
from kernelpilot.hw_models.problems import attention_dims
from kernelpilot.hw_models.types import Collector
from kernelpilot.hw_models.xe.configs import (
    FA_DTYPES,
    FA_TESTED_HEAD_DIMS,
    GRF_BYTES,
    MAX_SG,
    XeFaConfig,
    default_stages,
)
from kernelpilot.hw_models.xe.fa_legacy import XeLegacyFaRules
from kernelpilot.hw_models.xe.launch import (
    MAX_FA_PARTITIONS,
    THREADS_PER_CORE_LARGE_GRF,
    core_occupancy,
    fa_partitions,
)


class XeFaRules(XeLegacyFaRules):
    """The flash-attention checks of an Xe target model."""

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
            # one work-group per Xe-core (xe_tile_scheduler.hpp:125) shares out every (batch, head)'s KV
            # blocks; a (batch, head) spread over more than 8 work-groups writes past its 8 partial-result
            # slots (xe_fmha_fwd_kernel.hpp:371,632): wrong results, not an error
            parts = fa_partitions(dims["batch"] * dims["num_heads_q"], dims["seq_kv"], cfg.qk[1], cores)
            out.require(
                parts <= MAX_FA_PARTITIONS,
                "xe.fa.persistent_partitions",
                f"persistent decode splits a (batch, head) over {parts} work-groups on {cores} Xe-cores "
                f"(seq_kv={dims['seq_kv']}, KV tile {cfg.qk[1]}), more than the kernel's {MAX_FA_PARTITIONS} "
                "partial-result slots (xe_fmha_fwd_kernel.hpp:371): use a larger KV tile or the non-persistent kernel",
            )
            nsg = cfg.sg_qk[0] * cfg.sg_qk[1] * cfg.sg_qk[2]
            occ = core_occupancy(nsg, one_per_core=True)
            if occ < 1.0:
                out.warn(
                    "xe.occupancy",
                    f"the persistent scheduler launches one work-group per Xe-core: {nsg} subgroups keep "
                    f"{nsg} of {THREADS_PER_CORE_LARGE_GRF} hardware threads busy ({occ:.0%} occupancy)",
                )
        if cfg.causal and dims["seq_qo"] > dims["seq_kv"]:
            # sycl-tla skips every subgroup whose first query row sees no key (xe_fmha_fwd_kernel.hpp:224-226):
            # the rows above seq_qo - seq_kv are never written, and a subgroup straddling that line leaves
            # its visible rows unwritten too
            discard = dims["seq_qo"] - dims["seq_kv"]
            q_sg = cfg.qk[0] // max(1, cfg.sg_qk[0])
            if out.require(
                discard % q_sg == 0,
                "xe.fa.causal_discard",
                f"causal with seq_qo - seq_kv = {discard} rows that see no key, not a multiple of the "
                f"{q_sg} query rows per subgroup: the subgroup straddling row {discard} is skipped and rows "
                "that do see keys are never written (xe_fmha_fwd_kernel.hpp:224-226)",
            ):
                out.warn(
                    "xe.fa.causal_unwritten_rows",
                    f"causal with seq_qo > seq_kv: the first {discard} query rows see no key and the kernel "
                    "leaves them unwritten (their content is undefined; the program does not compare them)",
                )
        if problem.get("causal") is not None and bool(problem["causal"]) != cfg.causal:
            out.fail(
                "xe.fa.causal_mismatch",
                f"config causal={cfg.causal} but the problem asks causal={bool(problem['causal'])}",
            )
