"""Xe flash-attention rules of the legacy API (applications/flash_attention_v2 ``legacy`` kernels)."""

from __future__ import annotations

from kernelpilot.hw_models.base import (
    TargetModel,
)
from kernelpilot.hw_models.types import Collector
from kernelpilot.hw_models.xe.configs import (
    FA_DTYPES,
    MAX_SG,
    XeFaConfig,
)


class XeLegacyFaRules(TargetModel):
    """The legacy flash-attention checks of an Xe target model."""

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
