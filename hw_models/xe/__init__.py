"""Intel Xe target models for sycl-tla (CUTLASS SYCL): GEMM, grouped GEMM, MoE GEMM, flash attention.

Rules follow intel/sycl-tla at commit 6601377d25d3bb7cb2be0df6faf48f732a20a3e8 (the 0.9.1 wheel has
byte-identical copies of the headers cited here); ``path:line`` refers to that commit and is repeated
in ``docs/hw_models.md`` with the rule ids.  There is no PVC- or BMG-specific code in sycl-tla's
``include/`` (Xe12/Xe20 builders forward to the IntelXe one, xe_mma_builder.inl:150-166), so ``bmg``,
``pvc`` and ``xe2_igpu`` share the rules and differ only in their devices (cost model, AOT name).

Kernel kinds and their config fields:

* ``gemm`` / ``grouped_gemm`` / ``moe_gemm``: ``wg: [M, N, K]``, ``sg: [SG_M, SG_N, SG_K]`` (omit to
  derive it exactly as the CollectiveBuilder does, which can produce illegal layouts),
  ``stages`` (L1 prefetch distance; default = what the builder/example uses), ``schedule``
  (default | streamk | splitk; ``persistent`` is read as ``default``), ``mma_atom`` (optional explicit atom, new
  ``XE_DPAS_TT<...>`` or legacy ``XE_8x16x16_F32BF16BF16F32_TT`` vocabulary).
* ``fa_prefill`` / ``fa_decode``: ``qk: [Q, K, D]``, ``pv: [Q, V, K]``, ``out: [Q, V]``,
  ``sg_qk: [SG_Q, SG_K, 1]``, ``sg_pv`` (optional, default ``(SG_Q, 1, SG_K)``), ``head_dim``,
  ``stages``, ``causal``, ``persistent``.

Modules: :mod:`.configs` (config types, constants), :mod:`.gemm` (GEMM-family rules),
:mod:`.fa` and :mod:`.fa_legacy` (flash-attention rules, new and legacy API), :mod:`.dpas` (DPAS atoms),
:mod:`.cost` (cost model), :mod:`.model` (``XeModel`` and the registered Xe targets).
"""
