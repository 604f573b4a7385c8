"""How sycl-tla's Xe schedulers launch work-groups, and what that costs or breaks.

Why a module of its own: the model's rules (legality, warnings) and the cost model must agree on the
same launch facts, all read from sycl-tla v0.9.1:

* persistent schedulers -- grouped GEMM's GroupScheduler, the MoE scheduler and the persistent
  (dynamic-split) flash-attention decode kernel -- launch ``hw_info.sm_count`` work-groups, one per
  Xe-core (include/cutlass/gemm/kernel/tile_scheduler_params.h:1196 via the group params,
  examples/12_xe20_moe_gemm_cute_interface/moe_tile_scheduler.hpp:108,
  applications/flash_attention_v2/kernel/xe_tile_scheduler.hpp:125).  An Xe-core holds 32 hardware
  threads in 256-GRF mode (8 vector engines x 4), one per subgroup, so a work-group of few subgroups
  leaves most of the core idle;
* the persistent decode kernel splits every (batch, head)'s KV blocks over the work-groups and keeps
  at most 8 partial results per (batch, head) (``max_num_partitions = 8``,
  applications/flash_attention_v2/kernel/xe_fmha_fwd_kernel.hpp:371; slot offset at :632); a
  (batch, head) spread over more work-groups writes past its slots;
* block-2D loads address rows by pitch; Intel's Triton backend uses them only for pitches of at least
  64 bytes, sycl-tla's ``can_implement`` checks 16-byte alignment only (include/cutlass/gemm/collective/
  xe_mma.hpp:140-169), so narrower rows are legal to sycl-tla but untested on hardware.
"""

from __future__ import annotations

#: hardware threads (one per subgroup) of an Xe-core in 256-GRF mode: 8 vector engines x 4 threads
#: (8 threads per engine, halved in large-GRF mode: include/cute/util/compat/util.hpp:876-912)
THREADS_PER_CORE_LARGE_GRF = 32
#: xe_fmha_fwd_kernel.hpp:371
MAX_FA_PARTITIONS = 8
#: the narrowest row pitch block-2D loads are used for by Intel's Triton backend
MIN_BLOCK2D_PITCH_BYTES = 64


def one_work_group_per_core(kernel: str, persistent: bool = False) -> bool:
    """True for the kernels whose scheduler launches exactly one work-group per Xe-core."""
    return kernel in ("grouped_gemm", "moe_gemm") or (kernel == "fa_decode" and persistent)


def core_occupancy(num_subgroups: int, one_per_core: bool) -> float:
    """Fraction of an Xe-core's hardware threads a kernel keeps busy (1.0: all 32 in 256-GRF mode)."""
    if not one_per_core:  # several work-groups share a core: the core fills up
        return 1.0
    return min(1.0, num_subgroups / THREADS_PER_CORE_LARGE_GRF)


def fa_partitions(batch_heads: int, seq_kv: int, kv_tile: int, work_groups: int) -> int:
    """Most work-groups any (batch, head) of the persistent decode kernel is split over.

    Mirrors XeFMHAFwdDynamicSplitKernel: ``local_k_blocks = ceil(seq_kv / kv_tile)``,
    ``num_blocks_per_wg = ceil(local_k_blocks * batch_heads / grid)`` and get_num_partitions
    (xe_fmha_fwd_kernel.hpp:479-488, 539-544)."""
    local = -(-seq_kv // kv_tile)
    per_wg = -(-(local * batch_heads) // max(1, work_groups))
    most = 0
    for bh in range(batch_heads):
        start = bh * local // per_wg
        end = (bh + 1) * local // per_wg
        n = end - start + 1
        if ((bh + 1) * local) % per_wg == 0:
            n -= 1
        most = max(most, n)
    return most
